"""A machine whose CPU load the test drives, for the contention guard's tests: its /proc/stat,
the hunt's own CPU time and a clock that moves only when a probe or a wait runs."""
from __future__ import annotations

from regressbisect.machine.contention import BusyRule, ContentionGuard, HuntCpu

RULE = BusyRule(cpus=0.5, share=0.10, gpu=0.10)


class FakeMachine:
    """`ncpus` CPUs whose other load is `other` (CPUs); time passes only when a probe or a wait runs."""

    def __init__(self, other: float, ncpus: int = 2):
        self.other, self.ncpus, self.now, self.busy, self.hunt = other, ncpus, 0.0, 0.0, 0.0

    def advance(self, seconds: float, hunt_cpus: float = 0.0) -> None:
        self.now += seconds
        self.busy += (self.other + hunt_cpus) * seconds
        self.hunt += hunt_cpus * seconds

    def guard(self, **kw) -> ContentionGuard:
        hunt = HuntCpu(scan=lambda: [])
        hunt.total = lambda: self.hunt  # type: ignore[method-assign]
        return ContentionGuard(RULE, proc_stat=lambda: (self.busy, self.ncpus), hunt_cpu=hunt,
                               gpu_reader=lambda: None, clock=lambda: self.now,
                               sleep=lambda s: self.advance(s), **kw)
