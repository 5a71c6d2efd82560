"""A fake machine for nightly replays: one 'how slow is the machine tonight' shared by its
probes and its hardware check, and a Nightly built on it (tests/test_nightly.py,
scripts/sim_nightly.py)."""
from __future__ import annotations

import math
import random
from pathlib import Path

from regressbisect.config import build_config
from regressbisect.git.history import History
from regressbisect.hunts.nightly import Nightly, NightlySettings
from regressbisect.machine.doctor import MachineCheck
from regressbisect.samples import ProbeOutcome, Sample
from regressbisect.search.changepoints import ChangePointSettings


class FakeMachine:
    """Fake executor + fake hardware check sharing one 'how slow is the machine tonight'."""

    def __init__(self, noise: float = 0.02, seed: int = 0):
        self.rng = random.Random(seed)
        self.noise = noise
        self.slowdown = 1.0
        self.runs = 0
        self.envs: list[dict] = []

    def probe(self, spec, worktree: Path, extra_env=None) -> ProbeOutcome:
        self.runs += 1
        self.envs.append(dict(extra_env or {}))
        speed = float((worktree / "speed.py").read_text().split("=")[1])
        value = speed * self.slowdown * math.exp(self.rng.gauss(0.0, self.noise))
        return ProbeOutcome(sample=Sample(tok_s=value, tokens=1000, seconds=1000 / value),
                            skip_reason=None, exit_code=0, wall_seconds=0.01)

    def check(self) -> MachineCheck:
        return MachineCheck(device="fake-cpu", matmul_tflops=2.0 * self.slowdown,
                            copy_gbps=20.0 * self.slowdown, other_processes=0)


def nightly_for(repo: Path, machine: FakeMachine, tmp_path: Path, *, reports: bool = True, **settings) -> Nightly:
    """A Nightly on `machine`; `reports=False` writes no report files (the HTML's plots are most
    of a replayed night's time)."""
    history = History.open(repo)
    config = build_config({}, {"cmd": "python bench.py", "tokens": 1000, "instrument": "off"})
    defaults = dict(samples_per_commit=5, max_new=1, changepoints=ChangePointSettings())
    defaults.update(settings)
    return Nightly(history, config, NightlySettings(**defaults), store_path=tmp_path / "store.sqlite",
                   report_dir=tmp_path / "reports" if reports else None, probe_runner=machine.probe,
                   machine_check=machine.check)
