"""Seeded hunts per scenario, in a pool of processes: the worker side of the `--arm` simulations
(sim_noisy_commit.py, sim_rising_noise.py). It touches no sys.path: a worker imports the tool of
its own arm."""
from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
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
