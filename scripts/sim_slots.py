"""The search's own cost at each --slots K, without a machine: the fake executor of the accuracy
benchmark (64 commits, culprits of 5% and 8% at random positions, 2% lognormal noise).

Separates the schedule from the machine: scripts/bench_slots.py runs real probe processes, whose
noise grows when K probes share a small machine's cores.

    python scripts/sim_slots.py --trials 100
"""
from __future__ import annotations

import argparse
import random
import statistics

from tabulate import tabulate

from regressbisect.search.bisect import SearchSettings
from regressbisect.search.simulate import FakeHistory, simulate, step_levels


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--commits", type=int, default=64)
    ap.add_argument("--cv", type=float, default=0.02)
    args = ap.parse_args()
    rows = []
    base_rounds = None
    for slots in (1, 2, 3, 4, 8):
        executions, rounds, exact, false = [], [], 0, 0
        for trial in range(args.trials):
            rng = random.Random(trial)
            a, b = sorted(rng.sample(range(1, args.commits), 2))
            history = FakeHistory(step_levels(args.commits, {a: -0.05, b: -0.08}), args.cv)
            run = simulate(history, SearchSettings(), slots=slots, seed=trial)
            executions.append(run.executions)
            rounds.append(run.rounds)
            named = sorted(c.first_bad for c in run.result.culprits)
            exact += named == [a, b]
            false += sum(1 for i in named if i not in (a, b))   # a commit named that is no step
        mean_rounds = statistics.mean(rounds)
        base_rounds = base_rounds or mean_rounds
        rows.append([slots, f"{exact / args.trials:.0%}", false, f"{statistics.mean(executions):.1f}",
                     f"{mean_rounds:.1f}", f"{mean_rounds / base_rounds:.2f}"])
    print(tabulate(rows, headers=["--slots", "both exact", "false culprits", "executions", "rounds",
                                  "rounds / slots 1"], tablefmt="github"))


if __name__ == "__main__":
    main()
