"""A commit noisier than the rest of its hunt: is it, or its neighbour, named as a culprit?

The search pools the noise over every commit of a hunt (the spread is mostly the machine's). A
commit can have a spread of its own: a host-bound commit on a GPU, a flaky one. This simulates
32 commits with a -10% step at #8 and 0.5% noise, one or more commits at their own noise:

* quiet      no noisy commit (what the rest costs)
* lg-8, lg-15  the step's last good commit (#7) at 8% / 15%
* fb-8, fb-15  its first bad commit (#8) at 8% / 15%
* both-15      both at 15%
* bad-side-5   every commit from the step on at 5% (host-bound after it)
* far-8        a commit far from the step (#20) at 8%
* bad-side-5+  bad-side-5 with a second step, -5% at #20, inside the noisy commits

The last asks whether the quiet commits' spread, pooled, shrinks the noisy commits' tests: early in
a hunt the F test that finds a tested pair noisier has few degrees of freedom.

Per arm and scenario: hunts exactly right, hunts that named a false culprit, hunts left
undecided, mean executions. Arms are copies of the tool: --arm NAME@PATH runs the search from
PATH (e.g. `git worktree add --detach PATH <rev>`); the noise is drawn here, the same draws in
every arm.

    python scripts/sim_noisy_commit.py --arm before@/tmp/rb-before --arm now --trials 200 --jobs 2
"""
from __future__ import annotations

import math

import numpy as np

from _scenarios import scenario_main   # no sys.path change: a worker imports its own arm's tool

N, STEP_AT, STEP, CV = 32, 8, -0.10, 0.005
SCENARIOS: dict[str, dict[int, float]] = {
    "quiet": {},
    "lg-8": {7: 0.08},
    "lg-15": {7: 0.15},
    "fb-8": {8: 0.08},
    "fb-15": {8: 0.15},
    "both-15": {7: 0.15, 8: 0.15},
    "bad-side-5": {i: 0.05 for i in range(STEP_AT, N)},
    "far-8": {20: 0.08},
    "bad-side-5+": {i: 0.05 for i in range(STEP_AT, N)},
}
MORE_STEPS: dict[str, dict[int, float]] = {"bad-side-5+": {20: -0.05}}


def one_hunt(job: tuple[str, int]) -> dict:
    """One simulated hunt in this interpreter's copy of the tool."""
    from regressbisect.search.bisect import CommitSearch, SearchSettings
    from regressbisect.search.driver import drive
    from regressbisect.search.simulate import step_levels

    scenario, seed = job
    steps = {STEP_AT: STEP, **MORE_STEPS.get(scenario, {})}
    levels = step_levels(N, steps)
    own = SCENARIOS[scenario]
    sigma = [math.sqrt(math.log1p(own.get(i, CV) ** 2)) for i in range(N)]
    rng = np.random.default_rng(seed)
    executions = 0

    def measure(batch):
        nonlocal executions
        executions += len(batch)
        return [levels[m.index] * float(np.exp(rng.normal(0.0, sigma[m.index]))) for m in batch]

    result = drive(CommitSearch(N, SearchSettings()), measure)
    found = {c.first_bad for c in result.culprits}
    return {"exact": found == set(steps), "false": bool(found - set(steps)),
            "undecided": result.verdict == "undecided", "executions": executions}


def main(argv: list[str] | None = None) -> int:
    return scenario_main(__file__, __doc__, one_hunt, list(SCENARIOS), lambda a: (f"{a.trials} hunts per row: 32 commits, {STEP:+.0%} at #{STEP_AT}, {CV:.1%} noise "
                                   "but the noisy commits'"), argv,
                         trials=200, jobs=2, seed=1000)


if __name__ == "__main__":
    raise SystemExit(main())
