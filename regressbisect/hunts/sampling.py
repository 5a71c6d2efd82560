"""Where samples come from: the store first, then new probe runs.

The search asks for "one more sample of candidate X"; this module answers with a stored sample the
hunt has not used yet (so a killed or repeated hunt re-measures nothing), or runs a probe in a
pooled worktree and stores its outcome the moment it exists (hyperfine: "we would lose them if a
later one fails"). Up to `slots` probes run at once, one per worktree slot.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import statistics
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from regressbisect.errors import UserError, warn
from regressbisect.git.worktrees import PatchDoesNotApply, SubmoduleUnavailable, WorktreePool
from regressbisect.machine.contention import HuntOversubscribed, WaitCancelled
from regressbisect.probe.executors.base import ExecutedProbe, ProbeExecutor
from regressbisect.probe.executors.local import LocalExecutor
from regressbisect.probe.interrupts import INTERRUPTS
from regressbisect.probe.isolation import Isolation, ProbeImports
from regressbisect.probe.runner import ProbeSpec, probe_environment, reusable_failure, run_probe
from regressbisect.samples import Arm, Candidate, ProbeOutcome, Sample, SampleKey
from regressbisect.store import Store

if TYPE_CHECKING:
    from regressbisect.machine.contention import ContentionGuard
    from regressbisect.probe.setup_step import SetupStep
    from regressbisect.probe.venvs import SlotVenvs


LEFTOVERS_KEPT = 5
"""How many of the processes probes left the report names (`measurement.leftovers.first`)."""


@dataclass(frozen=True)
class Draw:
    """One sample handed to the search."""

    candidate: Candidate
    sample: Sample | None
    """None when the run was skipped."""
    skip_reason: str | None
    cached: bool
    """True when the sample was stored before this hunt started (not re-measured)."""

    @property
    def value(self) -> float | None:
        return None if self.sample is None else self.sample.tok_s


@dataclass(frozen=True)
class Request:
    """One sample wanted: a candidate, in which arm, for which consumer."""

    candidate: Candidate
    instrumented: bool = False
    """Take the sample with the counters shim loaded."""
    namespace: str = "search"
    """Consumers with separate cursors over the same stored samples (e.g. 'overhead', 'search'),
    so the overhead arm's unshimmed GOOD runs are reused by the search instead of re-run."""
    flagged: bool = False
    """Taken while the machine failed its sanity check: stored apart, never used as evidence."""
    work: bool = False
    """The counting arm (with `instrumented`): the work per step counted too; stored in arm
    'work', never a source of tok/s (probe/work.py)."""

    @property
    def arm(self) -> Arm:
        if self.flagged:
            return Arm.FLAGGED
        if self.work:
            return Arm.WORK
        return Arm.INSTRUMENTED if self.instrumented else Arm.MAIN


@dataclass(frozen=True)
class MeasurementParts:
    """The optional parts of how a hunt measures, each None where the config asks for none (built
    once from the HuntConfig: hunts/common.py `measurement_parts`)."""

    setup: "SetupStep | None" = None
    """The setup step run in each candidate's worktree before its probes (docs/setup.md)."""
    venvs: "SlotVenvs | None" = None
    """A virtualenv per worktree, activated for its setup step and probes (--venv)."""
    guard: "ContentionGuard | None" = None
    """The busy-machine guard: samples taken under contention are kept apart (docs/contention.md)."""
    build_check: Callable[[Path], None] | None = None
    """Raises when a checked-out candidate declares compiled modules no setup step builds."""


class StoredDraws:
    """A hunt's walk over what its store holds: each candidate's stored samples served in order,
    per arm and per consumer (`Request.namespace`: each walks the same samples), then none, which
    is a fresh probe's turn. A resumed hunt, whose search asks in the same order, so re-measures
    nothing stored; a candidate of the same hunt that only ever failed is served its stored skip."""

    def __init__(self, store: Store, key_for: Callable[[Candidate], SampleKey], hunt_id: int | None,
                 timeout_s: float):
        self._store = store
        self._key_for = key_for
        self._hunt_id = hunt_id
        self._timeout_s = timeout_s
        self._cursor: dict[tuple[SampleKey, str, str], int] = {}
        self._initial_count: dict[tuple[SampleKey, str], int] = {}
        self._served: set[tuple] = set()
        self.cached_used = 0
        """Stored samples (and skips) of before this walk that it served, each counted once: every
        namespace walks the same stored samples (a resumed hunt's overhead arm and search both
        read GOOD's)."""

    def _cursor_key(self, request: Request) -> tuple[SampleKey, str, str]:
        return (self._key_for(request.candidate), request.arm, request.namespace)

    def advance(self, request: Request) -> None:
        """`request` was answered by a fresh sample, stored: its consumer has read past it."""
        ck = self._cursor_key(request)
        self._cursor[ck] = self._cursor.get(ck, 0) + 1

    def next(self, request: Request) -> Draw | None:
        """The next stored sample (or skip) for `request`, or None: a probe must run."""
        key = self._key_for(request.candidate)
        stored = self._store.samples(key, instrumented=request.instrumented, arm=request.arm)
        self._initial_count.setdefault((key, request.arm), len(stored))
        position = self._cursor.get(self._cursor_key(request), 0)
        if position < len(stored):
            self.advance(request)
            cached = position < self._initial_count[(key, request.arm)]
            if cached:
                self._count_served((key, request.arm, position))
            return Draw(request.candidate, stored[position], None, cached=cached)
        if not stored and self._hunt_id is not None:
            # A candidate that only ever failed keeps failing (crashes are deterministic far more
            # often than not): a resumed hunt reuses its stored skip instead of paying for the
            # crash again. A new hunt retries: the user may have fixed the environment since; so
            # does a resumed one given a longer --timeout than the run that timed out.
            skips = self._store.skips(key, hunt_id=self._hunt_id)
            if skips and reusable_failure(skips[-1], self._timeout_s):
                self._count_served((key, "skip"))
                return Draw(request.candidate, None, skips[-1], cached=True)
        return None

    def _count_served(self, stored: tuple) -> None:
        if stored not in self._served:
            self._served.add(stored)
            self.cached_used += 1


class SampleSource:
    """Serves samples for candidates: stored ones in order, then fresh probe runs."""

    def __init__(self, *, store: Store, pool: WorktreePool, spec: ProbeSpec, env_fingerprint: str,
                 hunt_id: int | None, key_for: Callable[[Candidate], SampleKey],
                 patch_for: Callable[[Candidate], str | None] = lambda c: None,
                 slot_env: Sequence[Mapping[str, str]] = ({},),
                 probe_runner: Callable[..., ProbeOutcome] = run_probe,
                 parts: MeasurementParts = MeasurementParts(),
                 isolation: Isolation | None = None, executor: ProbeExecutor | None = None,
                 on_imports: Callable[[frozenset[str]], None] | None = None):
        self._store = store
        self._pool = pool
        self._spec = spec
        self._env_fingerprint = env_fingerprint
        self._hunt_id = hunt_id
        self._key_for = key_for
        self._patch_for = patch_for
        self._slot_env = list(slot_env) or [{}]
        # A fake runner in unit tests (hyperfine's mock) runs through the local executor.
        self._executor = executor or LocalExecutor(probe_runner)
        self.isolation = isolation
        """Import roots first on every probe's PYTHONPATH, and the check of what it imported."""
        self._on_imports = on_imports
        """Told, after each round and before it is stored, the files outside the worktrees its
        probes imported (the hunt puts them in the sample key: `key_for` reads it)."""
        self._stored = StoredDraws(store, key_for, hunt_id, spec.timeout_s)
        self.probes_run = 0
        self.probe_seconds = 0.0
        self.parts = parts
        self._setup, self._venvs, self._guard = parts.setup, parts.venvs, parts.guard
        self._build_check = parts.build_check
        self._counts_lock = threading.Lock()
        self.retakes: list[dict[str, Any]] = []
        """Samples taken under contention (stored in the 'flagged' arm) and re-taken."""
        self.under_load = 0
        """Samples used although the cores were oversubscribed: a steady load the wait for quiet
        did not see end (docs/contention.md)."""
        self._other_loads: list[float] = []
        """Other load (CPUs) of each fresh sample used, for the report's steady level."""
        self.leftovers = {"probes": 0, "killed": 0, "first": []}
        """Probes that left processes running when they ended, how many were killed, the first few."""

    @property
    def store(self) -> "Store":
        return self._store

    @property
    def cached_used(self) -> int:
        """Stored samples (and skips) of before this source that it served (`StoredDraws.cached_used`)."""
        return self._stored.cached_used

    @property
    def slots(self) -> int:
        return len(self._slot_env)

    def key(self, candidate: Candidate) -> SampleKey:
        return self._key_for(candidate)

    def stored(self, candidate: Candidate, instrumented: bool) -> list[Sample]:
        return self._store.samples(self._key_for(candidate), instrumented=instrumented,
                                   arm=Arm.INSTRUMENTED if instrumented else Arm.MAIN)

    def draw_many(self, requests: Sequence[Request],
                  on_start: Callable[[int, Request], None] | None = None) -> list[Draw]:
        """One draw per request, in order; fresh runs go to slots 0..k-1 concurrently."""
        if len(requests) > self.slots:
            raise ValueError(f"{len(requests)} requests for {self.slots} slots")
        draws: list[Draw | None] = [None] * len(requests)
        fresh: list[tuple[int, Request]] = []
        for i, request in enumerate(requests):
            cached = self._stored.next(request)
            if cached is not None:
                draws[i] = cached
            else:
                fresh.append((i, request))
        if fresh:
            # A stop of the hunt (Ctrl-C, SIGTERM: probe/interrupts.py) kills every running probe
            # and, while the slots run, ends their jobs (Slurm's) and their waits for a quiet machine.
            with INTERRUPTS.on_stop(self._cancel_slots):
                results, failure = self._run_fresh(fresh, on_start)
            foreign: list[ExecutedProbe] = []
            for (i, request), (executed, load) in zip(fresh, results):
                if executed is None:
                    continue  # cancelled or failed: nothing came back
                outcome = executed.outcome
                key = self._key_for(request.candidate)
                other_machine = executed.fingerprint not in (None, self._env_fingerprint)
                if other_machine:
                    # Kept, under the node's own fingerprint: never compared with this hunt's.
                    foreign.append(executed)
                    key = dataclasses.replace(key, env_fingerprint=executed.fingerprint)
                # Stored at once, in the caller's thread: SQLite connections are not shared.
                self._store.add_outcome(key, request.candidate, outcome,
                                        hunt_id=self._hunt_id, arm=request.arm, load=load)
                if other_machine:
                    continue
                self._stored.advance(request)
                self.probes_run += 1
                self.probe_seconds += outcome.wall_seconds
                draws[i] = Draw(request.candidate, outcome.sample, outcome.skip_reason, cached=False)
            if failure is not None:
                raise failure
            if foreign:
                node = foreign[0]
                raise UserError(
                    f"a probe ran on {node.facts.get('hostname', '?')}, a machine of another type "
                    f"(fingerprint {node.fingerprint}) than the hunt's ({self._env_fingerprint}): samples "
                    f"of different node types are not compared; pin one node type with --slurm-constraint "
                    f"(constraint in [tool.regressbisect.slurm]); its sample is stored under its own type")
        return [d for d in draws if d is not None]

    # -- internals ---------------------------------------------------------------------------

    def _run_fresh(self, fresh: list[tuple[int, Request]],
                   on_start: Callable[[int, Request], None] | None
                   ) -> tuple[list[tuple[ExecutedProbe | None, dict | None]], BaseException | None]:
        """Run the fresh requests, one per slot; ([(result, load figures)], first failure).

        Whatever came back before an interrupt or a failure is returned with it, so the caller
        stores it before re-raising ("the store keeps every returned sample"). A result whose
        probe imported the project from elsewhere is never returned: IsolationError instead."""
        def run(slot: int, request: Request) -> tuple[ExecutedProbe, dict | None, ProbeImports | None]:
            if on_start is not None:
                on_start(slot, request)
            if self._setup is None:
                return self._probe_in(slot, slot, False, request)   # each slot its own worktree
            remembered = self._setup.remembered_failure(self._key_for(request.candidate),
                                                        request.candidate.short)
            if remembered is not None:
                return ExecutedProbe(_skipped(remembered.reason)), None, None
            # A worktree per candidate built, taken by one slot at a time (docs/setup.md).
            tree, built = self._setup.trees.take(self._build_of(request.candidate))
            try:
                return self._probe_in(slot, tree, built, request)
            finally:
                self._setup.trees.give_back(tree)

        failure: BaseException | None = None
        if len(fresh) == 1:
            try:
                done = [run(0, fresh[0][1])]
            except (KeyboardInterrupt, SystemExit):
                INTERRUPTS.stop()
                raise
            except BaseException:
                self._executor.cancel_all()
                raise
        else:
            if self._guard is not None:
                self._guard.resume()
            pool = ThreadPoolExecutor(max_workers=len(fresh))
            futures = [pool.submit(run, slot, request) for slot, (_, request) in enumerate(fresh)]
            try:
                concurrent.futures.wait(futures, return_when=concurrent.futures.FIRST_EXCEPTION)
                if any(f.done() and f.exception() is not None for f in futures):
                    self._cancel_slots()  # one slot failed: stop the others' jobs too
            except BaseException as interrupt:  # Ctrl-C / SIGTERM while the slots run
                INTERRUPTS.stop()
                failure = interrupt
            finally:
                pool.shutdown(wait=True)
            done = []
            errors = [f.exception() for f in futures]
            # a slot's failure, not the waits it cancelled in the others
            failure = failure or next((e for e in errors if e is not None and not isinstance(e, WaitCancelled)),
                                      next((e for e in errors if e is not None), None))
            for future, error in zip(futures, errors):
                done.append((None, None, None) if error is not None else future.result())
        # Checked before any outcome is stored: a sample of the wrong code is never evidence, and
        # what the round imported from outside the worktrees is in the key it is stored under.
        checked = [imports for executed, _, imports in done if executed is not None and imports is not None]
        if checked:
            read = self.isolation.verify_round(checked)
            if read and self._on_imports is not None:
                self._on_imports(read)
        return [(executed, load) for executed, load, _ in done], failure

    def _probe_in(self, slot: int, tree: int, built: bool, request: Request
                  ) -> tuple[ExecutedProbe, dict | None, ProbeImports | None]:
        """One probe of `request` by slot `slot` in worktree `tree` (`built`: it holds the
        candidate built by the setup step), or the skip that came before it."""
        extra_env = self._slot_extra_env(slot, tree)
        prepared = self._prepare(tree, built, request.candidate, extra_env)
        if isinstance(prepared, ProbeOutcome):
            return ExecutedProbe(prepared), None, None
        spec = dataclasses.replace(self._spec, instrument=request.instrumented, work=request.work)
        imports = self.isolation.prepare(prepared) if self.isolation is not None else None
        probe_env = {**extra_env, **(imports.env if imports is not None else {})}
        try:
            return (*self._measure(request, spec, prepared, probe_env), imports)
        except BaseException:  # interrupted: no record to read, none left behind
            if imports is not None:
                imports.discard()
            raise

    def _cancel_slots(self) -> None:
        """Stop the other slots' probes and their waits for a quiet machine."""
        self._executor.cancel_all()
        if self._guard is not None:
            self._guard.cancel()

    def _slot_extra_env(self, slot: int, tree: int) -> dict[str, str]:
        """The slot's devices, and with --venv the virtualenv of worktree `tree` activated (PATH,
        VIRTUAL_ENV): an install belongs to the worktree's build."""
        env = dict(self._slot_env[slot])
        if self._venvs is not None:
            from regressbisect.probe.venvs import activation_env

            base_path = env.get("PATH", self._spec.env.get("PATH", os.environ.get("PATH", "")))
            env.update(activation_env(self._venvs.ensure(tree), base_path))
        return env

    def _build_of(self, candidate: Candidate) -> tuple[str, str | None]:
        """What a build depends on besides the setup step's command: the candidate's tree and patch."""
        key = self._key_for(candidate)
        return key.tree, key.patch_hash

    def _prepare(self, tree: int, built: bool, candidate: Candidate,
                 extra_env: Mapping[str, str]) -> Path | ProbeOutcome:
        """Check the candidate out in worktree `tree` and run the setup step; a skip outcome if
        either fails. A worktree that holds the candidate `built` is used as it is (a checkout
        would `git clean` the build away); see docs/setup.md."""
        if built:
            worktree = self._pool.path(tree)
            self._setup.reuse(tree, worktree, candidate.short)
            self._executor.count_build(reused=True)   # in the hunt's cost (hunts/cost.py)
            return worktree
        try:
            worktree = self._pool.checkout(tree, candidate.commit, self._patch_for(candidate))
        except PatchDoesNotApply as exc:
            return _skipped(f"patch does not apply: {exc}")
        except SubmoduleUnavailable as exc:
            return _skipped(str(exc))
        if self._build_check is not None:
            self._build_check(worktree)
        if self._setup is not None:
            result = self._setup.run(self._key_for(candidate), worktree,
                                     probe_environment(self._spec, extra_env), candidate.short)
            self._executor.count_build(reused=False)
            if not result.ok:
                return _skipped(result.reason)
            self._setup.mark_built(tree, self._build_of(candidate), worktree)   # only once it succeeded
        return worktree

    def _measure(self, request: Request, spec: ProbeSpec, worktree: Path,
                 extra_env: Mapping[str, str]) -> tuple[ExecutedProbe, dict | None]:
        """One probe run by the executor; its load is judged against the level of the samples
        before it (a steady load is measured through); a contended sample is stored flagged and
        re-taken: at once after a change of the load, after a wait for quiet within the wait
        budget on oversubscribed cores, past which such a sample is used as it is
        (docs/contention.md). Returns it and its load figures."""
        since = None
        while True:
            window = self._guard.start() if self._guard is not None else None
            executed = self._executor.run(spec, worktree, extra_env, label=request.candidate.short)
            outcome = executed.outcome
            if outcome.leftovers:
                self._count_leftovers(request.candidate, outcome.leftovers)
            if window is None:
                return executed, None
            load = self._guard.judge(self._guard.finish(window))
            reason = self._guard.rule.reason(load) if outcome.sample is not None else None
            if reason is not None and self._guard.measured_through(load):
                with self._counts_lock:
                    self.under_load += 1   # oversubscribed by a steady load the wait did not see end
                reason = None
            if reason is None:
                if outcome.sample is not None:
                    with self._counts_lock:
                        self._other_loads.append(load.other_cpus)
                return executed, load.to_json()
            candidate = request.candidate
            self._store.add_outcome(self._key_for(candidate), candidate, outcome, hunt_id=self._hunt_id,
                                    arm=Arm.FLAGGED, load=load.to_json(), contended=reason)
            if self._guard.rule.by_the_hunt(load):
                raise HuntOversubscribed(load)   # its company is the hunt's own: no wait ends it
            with self._counts_lock:
                self.retakes.append({"candidate": candidate.short, "reason": reason,
                                     "tok_s": outcome.sample.tok_s})
                self.probe_seconds += outcome.wall_seconds
            if self._guard.on_wait is not None:
                self._guard.on_wait(f"{candidate.short}: sample taken under contention ({reason}); "
                                    f"stored apart, re-taken")
            since = self._guard.before_retake(load, what=f"before re-taking {candidate.short}", since=since)

    def _count_leftovers(self, candidate: Candidate, leftovers: Sequence[str]) -> None:
        """Processes a probe left were killed when it ended (probe/reaper.py), so no later sample
        runs beside them; its own sample stands: they ran during it as its workers would. Said
        once per hunt, and counted in the report."""
        with self._counts_lock:
            first = self.leftovers["probes"] == 0
            self.leftovers["probes"] += 1
            self.leftovers["killed"] += len(leftovers)
            self.leftovers["first"] = (self.leftovers["first"] + list(leftovers))[:LEFTOVERS_KEPT]
        if first:
            shown = "; ".join(leftovers[:3]) + ("; ..." if len(leftovers) > 3 else "")
            warn(f"the probe of {candidate.short} left {len(leftovers)} process(es) running when it ended "
                 f"({shown}); they were killed, as is whatever a probe leaves")

    def measurement_json(self) -> dict[str, Any]:
        """Report fields: preloaded start-up, overlapped probes, setup step, slot venvs, samples re-taken
        under contention."""
        out: dict[str, Any] = {"probe_seconds": round(self.probe_seconds, 3),
                               "preload": self._executor.preload_stats(),
                               "overlap": self._executor.overlap_stats(),
                               "setup": self._setup.to_json() if self._setup is not None else None,
                               "venvs": None, "contention": None, "leftovers": dict(self.leftovers)}
        if self._venvs is not None:
            trees = self._setup.trees.used if self._setup is not None else range(self.slots)
            out["venvs"] = {"base_python": self._venvs.python,
                            "paths": [str(self._venvs.path(t)) for t in trees]}
        if self._guard is not None:
            rule = self._guard.rule
            guard = self._guard
            loads = sorted(self._other_loads)
            ncpus = guard.ncpus or os.cpu_count() or 1
            out["contention"] = {"retaken": len(self.retakes), "retakes": list(self.retakes),
                                 "waited_s": round(guard.waited_s, 1),
                                 "wall_s": round(guard.wall_s(), 1),
                                 "steady_other_cpus": round(statistics.median(loads), 2) if loads else None,
                                 "other_cpus_range": [round(loads[0], 2), round(loads[-1], 2)] if loads else None,
                                 "level_changes": guard.level_changes, "under_load": self.under_load,
                                 "rule": {"busy_cpus": rule.cpus, "busy_share": rule.share,
                                          "busy_gpu": rule.gpu, "max_wait_s": guard.max_wait_s,
                                          "max_wait_share": guard.wait_share,
                                          "change_cpus": round(rule.floor(ncpus) / 2, 3)}}
        return out


def _skipped(reason: str | None) -> ProbeOutcome:
    """A candidate skipped before its probe; wall_seconds 0 keeps setup time out of every tok/s."""
    return ProbeOutcome(sample=None, skip_reason=reason, exit_code=None, wall_seconds=0.0)


def median_counters(samples: Sequence[Sample]) -> dict[str, float]:
    """Per-iteration counters of several instrumented samples: the median of each counter."""
    import statistics

    names = sorted({name for s in samples for name in s.counters})
    return {name: statistics.median([s.counters[name] for s in samples if name in s.counters])
            for name in names}


