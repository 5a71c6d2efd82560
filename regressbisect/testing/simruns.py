"""Test helper: several simulated hunts (search/simulate.py) at once, one process per core.

Each simulated hunt is seeded and pure, so the runs come back the same, and in the same order, as
a loop of `simulate` calls would give; a test that simulates a dozen hunts then takes about its
share of the machine's cores (CI has two) instead of all of them one after the other. Fresh
interpreters (spawn), not forks: the test process may hold threads or torch's thread pools.
"""
from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Sequence

from regressbisect.search.bisect import SearchSettings
from regressbisect.search.simulate import FakeHistory, SimRun, simulate

Case = tuple[FakeHistory, SearchSettings, int]   # (history, settings, seed)


def _run(case: Case) -> SimRun:
    history, settings, seed = case
    return simulate(history, settings, seed=seed)


def simulate_many(cases: Sequence[Case]) -> list[SimRun]:
    """`[simulate(history, settings, seed=seed) for history, settings, seed in cases]`, spread
    over the cores this process may use."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    workers = min(len(cases), cores)
    if workers <= 1:
        return [_run(case) for case in cases]
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(_run, cases))
