"""The commit search's phases, each a function over one `SearchContext` (context.py).

search/bisect.py runs them in order (its docstring tells the method) through
`phases.PhaseRunner`; each phase that measures is a coroutine (`phases.Phase`) returning what it
found, and every rule it applies is search/'s own module (control.py, confirm.py, sides.py,
culprits.py, naming.py), called from here, not copied.

    context.py    SearchContext: settings, sample book, rules, round and probe count, caps and
                  budgets, what the search found; Bracket, one range searched for a step
    control.py    the control arm, GOOD and BAD in pairs until it says 'go' or ends the hunt
    localise.py   one bracket: the posterior's picks, the paired test and the naming gate
    sides.py      the sides of a culprit: their checks, and their ends in the gate's rounds
    remainder.py  a remainder of the gap, or a shape seen late, that sends the search back
    verdict.py    the SearchResult: the verdict, the named culprits and each candidate's reading
"""
