"""The busy-machine guard (docs/contention.md) in a deps hunt, as in `run`: every sample's load
stored with it, a sample taken while other load changed stored apart and re-taken (never used), a
load that keeps changing past --max-wait exit 8, and --no-busy-check no guard at all.

The environments are real (built with uv from the local wheels of tests/test_deps_hunt.py); the
probe is its fake, and the machine the guard reads is made up: other load only in the probe
windows a test names, the hunt's own CPU none, readings exact (so the rule is what decides,
not the test machine's other jobs or the clock's ticks)."""
from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from regressbisect.cli import main
from regressbisect.config import build_config
from regressbisect.deps.builds import IndexOptions
from regressbisect.deps.envs import read_requirements
from regressbisect.errors import ExitCode
from regressbisect.git.history import History
from regressbisect.hunts.deps import DepsHunt
from regressbisect.machine import contention as ct
from regressbisect.samples import ProbeOutcome, Sample
from tests.test_deps_hunt import BAD, GOOD, VersionProbe, project  # noqa: F401 (project: a fixture)

pytestmark = pytest.mark.contention

WRECKED = 1.0
"""tok/s of a sample taken while the other load ran: far off either end, so one used would show."""


class Machine:
    """/proc/stat of a 2-CPU machine whose only other load is `rates[w]` CPUs during probe window
    w (0 elsewhere). Called once when the guard starts, then at each window's start and end."""

    def __init__(self, rates: dict[int, float] | None = None, every: tuple[float, ...] = ()):
        self.rates, self.every = rates or {}, every
        self.calls, self.burnt, self.at, self.rate = 0, 0.0, time.monotonic(), 0.0

    def window_rate(self, window: int) -> float:
        return self.every[window % len(self.every)] if self.every else self.rates.get(window, 0.0)

    def __call__(self) -> tuple[float, int]:
        now = time.monotonic()
        self.burnt += self.rate * (now - self.at)
        self.at = now
        self.calls += 1
        starts = self.calls >= 2 and self.calls % 2 == 0
        self.rate = self.window_rate(self.calls // 2 - 1) if starts else 0.0
        return self.burnt, 2


class BusyProbe(VersionProbe):
    """The fake probe, whose sample is WRECKED while the machine's other load runs."""

    def __init__(self, machine: Machine, **kw):
        super().__init__(**kw)
        self.machine = machine

    def __call__(self, spec, cwd: Path, extra_env=None) -> ProbeOutcome:
        outcome = super().__call__(spec, cwd, extra_env)
        if outcome.sample is not None and self.machine.rate > 0:
            return ProbeOutcome(sample=Sample(tok_s=WRECKED), skip_reason=None, exit_code=0, wall_seconds=0.01)
        return outcome


@pytest.fixture
def machine(monkeypatch):
    def install(**kw) -> Machine:
        fake = Machine(**kw)
        monkeypatch.setattr(ct, "read_proc_stat", fake)
        monkeypatch.setattr(ct.HuntCpu, "total", lambda self: 0.0)   # the hunt's own CPU: none
        monkeypatch.setattr(ct, "RESOLUTION_TICKS", 0)                # readings exact
        return fake
    return install


def deps_hunt(repo: Path, probe, store: Path, **config):
    cfg = build_config({}, {"cmd": "python bench.py", "instrument": "off", **config})
    index = IndexOptions(find_links=(str(repo.parent / "wheels"),), no_index=True)
    return DepsHunt(History.open(repo), cfg, read_requirements(GOOD, "good.txt"),
                    read_requirements(BAD, "bad.txt"), index=index, probe_runner=probe, store_path=store)


def rows(store: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(store) as conn:
        return conn.execute(sql).fetchall()


def test_samples_taken_while_other_load_changed_are_re_taken_not_used_and_every_load_is_stored(
        project, machine, tmp_path):  # noqa: F811
    fake = machine(rates={2: 1.5, 5: 1.5})
    store = tmp_path / "store.sqlite"
    outcome = deps_hunt(project, BusyProbe(fake, seed=1), store).run()
    report = outcome.report
    assert report["verdict"] == "culprits" and int(outcome.exit_code) == 0
    (culprit,) = report["culprits"]
    assert (culprit["package"], culprit["version"]) == ("slowpkg", "1.2")
    flagged = rows(store, "SELECT s.tok_s, l.contended FROM samples s JOIN sample_loads l ON l.sample_id = s.id"
                          " WHERE s.arm = 'flagged'")
    assert [v for v, _ in flagged] == [WRECKED, WRECKED]
    assert all(reason.startswith("other load changed") for _, reason in flagged), flagged
    used = rows(store, "SELECT s.tok_s, l.contended FROM samples s LEFT JOIN sample_loads l ON l.sample_id = s.id"
                       " WHERE s.arm = 'main'")
    assert used and all(v != WRECKED for v, _ in used)              # re-taken, never used
    assert all(contended is None for _, contended in used)
    assert rows(store, "SELECT COUNT(*) FROM sample_loads")[0][0] == len(used) + 2   # every sample's load
    contention = report["measurement"]["contention"]
    assert contention["retaken"] == 2 and contention["steady_other_cpus"] == 0.0
    assert report["probes"] == len(used) + 2                        # the re-taken ones ran too


def deps_cli(repo: Path, probe, monkeypatch, *more: str) -> int:
    """`regressbisect deps` on the command line, its probes answered by `probe`."""
    from regressbisect.probe import executors

    monkeypatch.setattr(executors, "LOCAL_RUNNER", probe)
    with pytest.raises(SystemExit) as exit_info:
        main(["deps", str(repo.parent / "good.txt"), str(repo.parent / "bad.txt"), "-C", str(repo),
              "--cmd", "python bench.py", "--find-links", str(repo.parent / "wheels"), "--no-index",
              "--instrument", "off", "--store", str(repo.parent / "store.sqlite"), *more])
    return int(exit_info.value.code)


def test_a_load_that_keeps_changing_past_max_wait_exits_8(project, machine, monkeypatch, capsys):  # noqa: F811
    # the first probe quiet (whether or not the hunt's start was long enough to read a level
    # before it), then other load that changes at every probe
    fake = machine(every=(0.0, 1.2))
    assert deps_cli(project, BusyProbe(fake, seed=1), monkeypatch, "--max-wait", "0") == ExitCode.MACHINE_BUSY
    err = capsys.readouterr().err
    assert "sample taken under contention (other load changed" in err
    assert err.strip().splitlines()[-1].startswith("regressbisect: error: machine busy: other load kept changing")
    assert rows(project.parent / "store.sqlite", "SELECT arm FROM samples") == [("main",), ("flagged",)]


def test_no_busy_check_leaves_the_guard_off(project, machine, monkeypatch, tmp_path):  # noqa: F811
    fake = machine(rates={2: 1.5})
    assert deps_cli(project, BusyProbe(fake, seed=1), monkeypatch, "--no-busy-check",
                    "--json", str(tmp_path / "r.json")) == 0
    assert json.loads((tmp_path / "r.json").read_text())["measurement"]["contention"] is None
    assert fake.calls == 0                                           # nothing read the machine
    store = project.parent / "store.sqlite"
    assert rows(store, "SELECT COUNT(*) FROM sample_loads")[0][0] == 0
    assert rows(store, "SELECT COUNT(*) FROM samples WHERE arm = 'flagged'")[0][0] == 0
