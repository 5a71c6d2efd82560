"""The hunk hunt's phases, each a small object or function over one `HuntContext` (context.py).

search/hunkdecide.py runs them in order (its docstring tells the method); each phase returns what
it found, and every rule it shares with the commit search is called from there, not copied: the
control arm's 'go' (control.shows_step), the alpha spending (naming.AlphaSpender), the skip rule
(book.unmeasurable_by_skips), the shares rule (culprits.shares_do_not_add_up).

    context.py   HuntContext: settings, rules, the Runnable, pooled noise, alpha spender, on_phase
    runnable.py  Runnable: which subsets run (needs, and the skip rule); Purpose, what a run is for
                 (the phases' Batch, their runner and OutOfProbes, the cap of measures: search/phases.py)
    subsets.py   TestedSubset, a subset against BASE (test_subset), sized at its test's stop; Names
    prefix.py    prefix_groups, PrefixSearch (the commit search over BASE + the first k groups)
    steps.py     naming the steps of a prefix search: alone, needs, needed members
    alone.py     a step's group alone against BASE, joined by what it needs to run or to be slow
    members.py   which hunks of a culprit it needs (leave-one-out)
    rest.py      the prefix search of the hunks not named (the peel)
    delta.py     delta debugging, where the hunks interact
    verdict.py   HunkDecision, and the verdict of the named culprits
"""
