"""Shared fixtures.

The busy-machine guard (docs/contention.md) is live in every hunt, but the machines these tests
run on are shared: other jobs' load would make unrelated tests wait for quiet. Tests that are
not about the guard therefore keep measuring load but never call a sample contended; tests
marked `contention` see the real rule.
"""
from __future__ import annotations

import os

import pytest

from tests.diskfs import read_only  # noqa: F401 (a fixture: every test module may ask for it)

# The files that take longest, longest first (measured under `-n 2`: docs/results/test-suite.md).
# With --dist loadfile each file is one unit of work, handed out in collection order
# (--no-loadscope-reorder in pyproject.toml; xdist's default order is by number of tests, which
# put the demo hunt, one test of minutes, last, its worker alone for its whole run): the long ones
# start at once and the short files fill in behind them, so the two workers end together.
LONGEST_FIRST = (
    "test_demo_hunt.py",
    "test_isolation_integration.py",
    "test_slurm.py",
    "test_deps_hunt.py",
    "test_work_compiled.py",
    "test_hunt_integration.py",
    "test_hunkdecide.py",
    "test_search_bisect.py",
    "test_drill.py",
    "test_setup_step.py",
    "test_run_shapes.py",
)


def pytest_collection_modifyitems(items):
    order = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: order.get(item.path.name, len(order)))   # stable: the rest as collected


@pytest.fixture(autouse=True)
def _no_contention_verdicts_unless_asked(request, monkeypatch):
    if request.node.get_closest_marker("contention") is None:
        from regressbisect.machine.contention import BusyRule

        monkeypatch.setattr(BusyRule, "reason", lambda self, load: None)


@pytest.fixture(autouse=True)
def _environment_restored():
    """Each test finds the environment as the test process started: torch's inductor, run in the
    test process, sets TORCHINDUCTOR_CACHE_DIR in os.environ (cache_dir_utils.cache_dir), and a
    hunt run after it read that as the user's cache and left it alone (test_hunkhunt.py failed so
    when a worker of `pytest -n 2` ran it after such a test)."""
    saved = dict(os.environ)
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture
def fake_probes(monkeypatch):
    """The CLI's hunts answer `python bench.py` in-process (regressbisect/testing/benchrepo.py
    BenchProbe: the script's values, failures and output, no process): for end-to-end tests whose
    subject is the verdict, the report or the exit code. Tests of what needs a process (isolation,
    setup steps, preload, the window gate, timeouts and kills, signals) run real probes."""
    from regressbisect.probe import executors
    from regressbisect.testing.benchrepo import BenchProbe

    probe = BenchProbe()
    monkeypatch.setattr(executors, "LOCAL_RUNNER", probe)
    return probe
