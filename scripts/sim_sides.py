"""Two culprits on a machine whose speed changes during the hunt: how often is one missed, and how?

The README's demo on a shared 2-core VM: a culprit's commit read at the next level for a few
samples (the machine slower then, or by chance), and the side of it that held the second culprit
was cleared on those samples. This simulates that: the demo's history (21 commits, -20% at #4,
-15% at #12 by default), lognormal noise, and a machine layer over the fake executor:

* steady     no machine effect (the noise alone)
* switching  the machine's speed flips between 1 and --factor with probability --switch per round
             (another job starting and stopping: a level held for ~1/switch rounds)
* tail       each sample reads 25% low with probability --tail (a stolen time slice)

Per arm and machine: hunts with both culprits exact, hunts that missed a culprit with a side that
held it *cleared* (a wrong statement in the report), hunts that missed one and left its range
unresolved (said so), false culprits, mean executions and mean rounds (of --slots samples). Arms are copies of the tool:
--arm NAME@PATH runs the search from PATH (e.g. `git archive <rev> | tar -x -C PATH`).

    python scripts/sim_sides.py --trials 200
    python scripts/sim_sides.py --arm before@/tmp/rb-before --arm now --trials 200 --jobs 2
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
from concurrent.futures import ProcessPoolExecutor

MACHINES = ("steady", "switching", "tail")


def parse_steps(text: str) -> dict[int, float]:
    return {int(i): float(s) for i, s in (part.split(":") for part in text.split(","))}


def one_hunt(job: tuple) -> dict:
    """One simulated hunt (in the arm's interpreter): what it named and how it treated the sides."""
    from regressbisect.search.bisect import CommitSearch, SearchSettings
    from regressbisect.search.simulate import FakeExecutor, FakeHistory, step_levels

    seed, machine, n, steps, cv, switch, factor, tail, slots = job
    executor = FakeExecutor(FakeHistory(step_levels(n, steps), cv), seed)
    state = random.Random(seed + 1_000_003)       # the machine's own draws, apart from the noise's
    search, slow, rounds = CommitSearch(n, SearchSettings()), False, 0
    while batch := search.next_batch(slots):
        rounds += 1
        if machine == "switching" and state.random() < switch:
            slow = not slow
        for m in batch:
            value = executor.measure(m.index, rounds)
            if value is not None:
                value *= factor if slow else 1.0
                if machine == "tail" and state.random() < tail:
                    value *= 0.75
            search.record(m.index, value)
    result = search.result()
    named = sorted(c.first_bad for c in result.culprits)
    missed = [s for s in steps if s not in named]
    # a missed step inside a side the hunt cleared: the report said no further step there
    wrong_clear = any(side.outcome == "cleared" and side.lo < s <= side.hi for s in missed for side in result.sides)
    return {"named": named, "missed": len(missed), "wrong_clear": wrong_clear,
            "false": sum(1 for i in named if i not in steps), "executions": executor.executions,
            "rounds": rounds}


def run_arm(args: argparse.Namespace) -> list[dict]:
    """Every machine's trials in this interpreter (the arm's copy of the tool)."""
    steps = parse_steps(args.steps)
    rows = []
    with ProcessPoolExecutor(args.jobs) as pool:
        for machine in args.machine:
            jobs = [(seed, machine, args.commits, steps, args.cv, args.switch, args.factor, args.tail, args.slots)
                    for seed in range(args.trials)]
            hunts = list(pool.map(one_hunt, jobs, chunksize=4))
            rows.append({
                "machine": machine, "trials": len(hunts),
                "exact": sum(h["named"] == sorted(steps) for h in hunts),
                "missed, side cleared": sum(h["missed"] > 0 and h["wrong_clear"] for h in hunts),
                "missed, left unresolved": sum(h["missed"] > 0 and not h["wrong_clear"] for h in hunts),
                "false culprits": sum(h["false"] for h in hunts),
                "executions": round(sum(h["executions"] for h in hunts) / len(hunts), 1),
                "rounds": round(sum(h["rounds"] for h in hunts) / len(hunts), 1),
            })
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arm", action="append", default=[],
                    help="NAME[@PATH]: the tool to simulate (PATH first on PYTHONPATH; default: this checkout)")
    ap.add_argument("--machine", action="append", choices=MACHINES, default=[], help="default: all three")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--commits", type=int, default=21)
    ap.add_argument("--steps", default="4:-0.20,12:-0.15", help="first-bad index:relative step, ...")
    ap.add_argument("--cv", type=float, default=0.08, help="lognormal noise of one sample")
    ap.add_argument("--switch", type=float, default=0.05, help="switching: probability of a flip per round")
    ap.add_argument("--factor", type=float, default=0.85, help="switching: the slow state's speed")
    ap.add_argument("--tail", type=float, default=0.05, help="tail: probability that a sample reads 25%% low")
    ap.add_argument("--slots", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.machine = args.machine or list(MACHINES)
    if args.worker:
        print(json.dumps(run_arm(args)))
        return 0
    from tabulate import tabulate

    from _common import run_arms   # here, in the parent: it puts this checkout first on sys.path

    table = run_arms(__file__, args.arm, sys.argv[1:])
    print(f"{args.commits} commits, steps {args.steps}, CV {args.cv:.0%}, switching {args.switch}/round to "
          f"x{args.factor}, tail {args.tail:.0%} at -25%, slots {args.slots}")
    print(tabulate(table, headers="keys", tablefmt="github"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
