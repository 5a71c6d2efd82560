"""A machine that gets busy mid-hunt: does the search still answer, and name no false culprit?

The README's demo, run on a shared 2-core machine, started quiet and grew noisy once other jobs
took its cores: the hunt ended 'undecided' with the culprit's two commits 5 standard errors apart.
This simulates 24 commits with a -19% step at #12 and a run-to-run noise that rises after a number
of executions (the machine got busy), per scenario:

* quiet          2% throughout (what the hunt costs on a quiet machine)
* busy-15        15% throughout (what it costs on a busy one)
* rise@6         2% for the first 6 executions (three of the control arm's four pairs), then 15%
* rise@10        2% for the first 10 executions, then 15% (a quiet hunt takes about 18)
* rise@14        2% for the first 14 executions, then 15% (mid-confirmation)
* rise@10+interf rise@10, and from the rise on a fifth of the runs 30% slow (search/interference.py)

Per arm and scenario: hunts exactly right, hunts that named a false culprit, hunts left
undecided, mean executions. Arms are copies of the tool (--arm NAME@PATH, as in
scripts/sim_noisy_commit.py); the noise is drawn here, the same draws in every arm while the arms
ask for the same runs.

    python scripts/sim_rising_noise.py --arm before@/tmp/rb-before --arm now --trials 100 --jobs 1
"""
from __future__ import annotations

import math

import numpy as np

from _scenarios import scenario_main   # no sys.path change: a worker imports its own arm's tool

N, STEP_AT, STEP, QUIET, BUSY = 24, 12, -0.19, 0.02, 0.15
SCENARIOS: dict[str, tuple[int | None, float]] = {
    # name: (executions before the noise rises (None: never; 0: busy from the start), interfered fraction after)
    "quiet": (None, 0.0),
    "busy-15": (0, 0.0),
    "rise@6": (6, 0.0),
    "rise@10": (10, 0.0),
    "rise@14": (14, 0.0),
    "rise@10+interf": (10, 0.2),
}


def one_hunt(job: tuple[str, int]) -> dict:
    """One simulated hunt in this interpreter's copy of the tool."""
    from regressbisect.search.bisect import CommitSearch, SearchSettings
    from regressbisect.search.driver import drive
    from regressbisect.search.simulate import step_levels

    scenario, seed = job
    rise, interfered = SCENARIOS[scenario]
    levels = step_levels(N, {STEP_AT: STEP})
    rng = np.random.default_rng(seed)
    executions = 0

    def one(index: int) -> float:
        nonlocal executions
        busy = rise is not None and executions >= rise
        executions += 1
        sigma = math.sqrt(math.log1p((BUSY if busy else QUIET) ** 2))
        value = levels[index] * float(np.exp(rng.normal(0.0, sigma)))
        # drawn every run, so that the arms' random streams stay aligned whatever the scenario
        hit = rng.random() < interfered and busy
        return value * (0.7 if hit else 1.0)

    result = drive(CommitSearch(N, SearchSettings()), lambda batch: [one(m.index) for m in batch])
    found = {c.first_bad for c in result.culprits}
    return {"exact": found == {STEP_AT}, "false": bool(found - {STEP_AT}),
            "undecided": result.verdict == "undecided", "executions": executions}


def main(argv: list[str] | None = None) -> int:
    return scenario_main(__file__, __doc__, one_hunt, list(SCENARIOS), lambda a: (f"{a.trials} hunts per row (seeds {a.seed}..{a.seed + a.trials - 1}): {N} commits, "
                                   f"{STEP:+.0%} at #{STEP_AT}, {QUIET:.0%} noise rising to {BUSY:.0%}"), argv,
                         trials=100, jobs=1, seed=3000)


if __name__ == "__main__":
    raise SystemExit(main())
