"""Seeded hunts per scenario, in a pool of processes: the worker side of the `--arm` simulations
(sim_noisy_commit.py, sim_rising_noise.py). It touches no sys.path: a worker imports the tool of
its own arm."""
from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Callable, Sequence

import numpy as np


def run_scenarios(one_hunt: Callable[[tuple[str, int]], dict], scenarios: Sequence[str], trials: int, jobs: int,
                  seed: int, only: str | None) -> list[dict]:
    """Per scenario, `trials` hunts (seeds seed, seed + 1, ...): exact, false and undecided
    counted, executions averaged. `one_hunt((scenario, seed))` returns those four of one hunt."""
    rows = []
    with ProcessPoolExecutor(jobs) as pool:
        for scenario in scenarios:
            if only is not None and scenario != only:
                continue
            hunts = list(pool.map(one_hunt, [(scenario, seed + t) for t in range(trials)]))
            rows.append({"scenario": scenario,
                         **{k: sum(h[k] for h in hunts) for k in ("exact", "false", "undecided")},
                         "executions": round(float(np.mean([h["executions"] for h in hunts])), 1)})
    return rows


def scenario_main(script: str, doc: str, one_hunt: Callable[[tuple[str, int]], dict], scenarios: Sequence[str],
                  heading: Callable[[argparse.Namespace], str], argv: Sequence[str] | None, *,
                  trials: int, jobs: int, seed: int) -> int:
    """The command line of such a simulation: `--worker` runs the hunts of one arm and prints
    their rows as JSON; otherwise each `--arm NAME@PATH` runs as a worker (scripts/_common.py,
    `run_arms`) and the rows print as one table under `heading(args)`."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=trials)
    ap.add_argument("--jobs", type=int, default=jobs)
    ap.add_argument("--seed", type=int, default=seed)
    ap.add_argument("--only", choices=list(scenarios), help="this scenario alone")
    ap.add_argument("--arm", action="append", default=[], help="NAME@PATH: the tool at PATH (default: now, this copy)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    words = list(sys.argv[1:] if argv is None else argv)
    args = ap.parse_args(words)
    if args.worker:
        print(json.dumps(run_scenarios(one_hunt, scenarios, args.trials, args.jobs, args.seed, args.only)))
        return 0
    from _common import print_table, provenance_line, run_arms   # here: it puts this copy first on sys.path, which the workers must not see

    table = run_arms(script, args.arm, words)
    table.sort(key=lambda r: list(scenarios).index(r["scenario"]))
    print(provenance_line([f"scripts/{Path(script).name}", *words]))
    print(heading(args))
    print_table(["scenario", "arm", "exact", "false", "undecided", "executions"],
                [[r["scenario"], r["arm"], r["exact"], r["false"], r["undecided"], r["executions"]] for r in table])
    return 0
