"""How a fresh sample is judged, and what a source's fresh probes came to.

`SampleJudge` runs a probe under the busy-machine guard (docs/contention.md): its load is judged
against the level of the samples before it, so a steady load is measured through; a contended
sample is stored apart (arm 'flagged') and re-taken. `ProbeTally` counts what the report's
`measurement` says of them. The commit, hunk and nightly hunts judge through their sample
source; the deps hunt, which runs its probes in the project's directory, through its own judge.
"""
from __future__ import annotations

import os
import statistics
import threading
from typing import TYPE_CHECKING, Any, Callable, Sequence

from regressbisect.errors import warn
from regressbisect.machine.contention import HuntOversubscribed
from regressbisect.probe.executors.base import ExecutedProbe
from regressbisect.samples import Arm, Candidate, ProbeOutcome, SampleKey
from regressbisect.store import Store

if TYPE_CHECKING:
    from regressbisect.machine.contention import ContentionGuard

LEFTOVERS_KEPT = 5
"""How many of the processes probes left the report names (`measurement.leftovers.first`)."""


class ProbeTally:
    """What a sample source's fresh probes came to, for the report's `measurement`. The slots'
    threads count into it at once: under one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.probes_run = 0
        """Fresh samples used (taken on this hunt's machine type)."""
        self.probe_seconds = 0.0
        """Wall time of those and of the samples re-taken."""
        self.retakes: list[dict[str, Any]] = []
        """Samples taken under contention (stored in the 'flagged' arm) and re-taken."""
        self.under_load = 0
        """Samples used although the cores were oversubscribed: a steady load the wait for quiet
        did not see end (docs/contention.md)."""
        self.other_loads: list[float] = []
        """Other load (CPUs) of each fresh sample used, for the report's steady level."""
        self.leftovers = {"probes": 0, "killed": 0, "first": []}
        """Probes that left processes running when they ended, how many were killed, the first few."""

    def used(self, outcome: ProbeOutcome) -> None:
        """A fresh sample (or skip) was handed to the search."""
        with self._lock:
            self.probes_run += 1
            self.probe_seconds += outcome.wall_seconds

    def retaken(self, candidate: Candidate, reason: str, outcome: ProbeOutcome) -> None:
        with self._lock:
            self.retakes.append({"candidate": candidate.short, "reason": reason,
                                 "tok_s": outcome.sample.tok_s})
            self.probe_seconds += outcome.wall_seconds

    def used_under_load(self) -> None:
        with self._lock:
            self.under_load += 1

    def other_load(self, other_cpus: float) -> None:
        with self._lock:
            self.other_loads.append(other_cpus)

    def left_running(self, candidate: Candidate, leftovers: Sequence[str]) -> None:
        """Processes a probe left were killed when it ended (probe/reaper.py), so no later sample
        runs beside them; its own sample stands: they ran during it as its workers would. Said
        once per hunt, and counted in the report."""
        with self._lock:
            first = self.leftovers["probes"] == 0
            self.leftovers["probes"] += 1
            self.leftovers["killed"] += len(leftovers)
            self.leftovers["first"] = (self.leftovers["first"] + list(leftovers))[:LEFTOVERS_KEPT]
        if first:
            shown = "; ".join(leftovers[:3]) + ("; ..." if len(leftovers) > 3 else "")
            warn(f"the probe of {candidate.short} left {len(leftovers)} process(es) running when it ended "
                 f"({shown}); they were killed, as is whatever a probe leaves")


class SampleJudge:
    """Takes a fresh sample and judges it by the machine's load while it ran (without a guard,
    `--no-busy-check` or probes on a scheduler's node: every sample is used as it comes)."""

    def __init__(self, guard: "ContentionGuard | None", *, store: Store, key_for: Callable[[Candidate], SampleKey],
                 hunt_id: int | None):
        self._guard = guard
        self._store = store
        """Where a contended sample is kept apart: under the candidate's key, arm 'flagged'."""
        self._key_for = key_for
        self._hunt_id = hunt_id
        self.tally = ProbeTally()

    def take(self, candidate: Candidate, run: Callable[[], ExecutedProbe]) -> tuple[ExecutedProbe, dict | None]:
        """`run()` (one probe of `candidate`), its load judged against the level of the samples
        before it (a steady load is measured through); a contended sample is stored flagged and
        re-taken: at once after a change of the load, after a wait for quiet within the wait
        budget on oversubscribed cores, past which such a sample is used as it is
        (docs/contention.md). Returns it and its load figures."""
        guard = self._guard
        since = None
        while True:
            window = guard.start() if guard is not None else None
            executed = run()
            outcome = executed.outcome
            if outcome.leftovers:
                self.tally.left_running(candidate, outcome.leftovers)
            if window is None:
                return executed, None
            load = guard.judge(guard.finish(window))
            reason = guard.rule.reason(load) if outcome.sample is not None else None
            if reason is not None and guard.measured_through(load):
                self.tally.used_under_load()   # oversubscribed by a steady load the wait did not see end
                reason = None
            if reason is None:
                if outcome.sample is not None:
                    self.tally.other_load(load.other_cpus)
                return executed, load.to_json()
            self._store.add_outcome(self._key_for(candidate), candidate, outcome, hunt_id=self._hunt_id,
                                    arm=Arm.FLAGGED, load=load.to_json(), contended=reason)
            if guard.rule.by_the_hunt(load):
                raise HuntOversubscribed(load)   # its company is the hunt's own: no wait ends it
            self.tally.retaken(candidate, reason, outcome)
            if guard.on_wait is not None:
                guard.on_wait(f"{candidate.short}: sample taken under contention ({reason}); "
                              f"stored apart, re-taken")
            since = guard.before_retake(load, what=f"before re-taking {candidate.short}", since=since)

    def resume(self) -> None:
        """A new round of slots: their waits for quiet may wait again (after `cancel`)."""
        if self._guard is not None:
            self._guard.resume()

    def cancel(self) -> None:
        """End the slots' waits for a quiet machine."""
        if self._guard is not None:
            self._guard.cancel()

    def contention_json(self) -> dict[str, Any] | None:
        """The report's `measurement.contention`: samples re-taken, waits, the steady level and
        the rule; None without a guard."""
        guard = self._guard
        if guard is None:
            return None
        rule, tally = guard.rule, self.tally
        loads = sorted(tally.other_loads)
        ncpus = guard.ncpus or os.cpu_count() or 1
        return {"retaken": len(tally.retakes), "retakes": list(tally.retakes),
                "waited_s": round(guard.waited_s, 1),
                "wall_s": round(guard.wall_s(), 1),
                "steady_other_cpus": round(statistics.median(loads), 2) if loads else None,
                "other_cpus_range": [round(loads[0], 2), round(loads[-1], 2)] if loads else None,
                "level_changes": guard.level_changes, "under_load": tally.under_load,
                "rule": {"busy_cpus": rule.cpus, "busy_share": rule.share,
                         "busy_gpu": rule.gpu, "max_wait_s": guard.max_wait_s,
                         "max_wait_share": guard.wait_share,
                         "change_cpus": round(rule.floor(ncpus) / 2, 3)}}
