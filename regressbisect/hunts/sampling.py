"""Where samples come from: the store first, then new probe runs.

The search asks for "one more sample of candidate X"; this module answers with a stored sample the
hunt has not used yet (so a killed or repeated hunt re-measures nothing), or runs a probe in a
pooled worktree and stores its outcome the moment it exists (hyperfine: "we would lose them if a
later one fails"). Up to `slots` probes run at once, one per worktree slot.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from regressbisect.errors import UserError
from regressbisect.git.worktrees import WorktreePool
from regressbisect.hunts.judging import ProbeTally, SampleJudge
from regressbisect.hunts.sample_probe import SampleProbe
from regressbisect.hunts.slots import Slots
from regressbisect.machine.contention import WaitCancelled
from regressbisect.probe.executors.base import ExecutedProbe, ProbeExecutor
from regressbisect.probe.executors.local import LocalExecutor
from regressbisect.probe.interrupts import INTERRUPTS
from regressbisect.probe.isolation import Isolation, ProbeImports
from regressbisect.probe.runner import ProbeSpec, reusable_failure, run_probe
from regressbisect.samples import Arm, Candidate, ProbeOutcome, Sample, SampleKey
from regressbisect.store import Store

if TYPE_CHECKING:
    from regressbisect.machine.contention import ContentionGuard
    from regressbisect.probe.setup_step import SetupStep
    from regressbisect.probe.venvs import SlotVenvs


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
    """Serves samples for candidates: stored ones in order, then fresh probe runs. What a fresh
    sample runs (`SampleProbe`), where (`Slots`) and how it is judged (`SampleJudge`) are its
    parts; it walks the store, runs a round of slots at once and stores what comes back."""

    def __init__(self, *, store: Store, pool: WorktreePool, spec: ProbeSpec, env_fingerprint: str,
                 hunt_id: int | None, key_for: Callable[[Candidate], SampleKey],
                 patch_for: Callable[[Candidate], str | None] = lambda c: None,
                 slot_env: Sequence[Mapping[str, str]] = ({},),
                 probe_runner: Callable[..., ProbeOutcome] = run_probe,
                 parts: MeasurementParts = MeasurementParts(),
                 isolation: Isolation | None = None, executor: ProbeExecutor | None = None,
                 on_imports: Callable[[frozenset[str]], None] | None = None):
        self._store = store
        self._key_for = key_for
        self._hunt_id = hunt_id
        self._env_fingerprint = env_fingerprint
        self._stored = StoredDraws(store, key_for, hunt_id, spec.timeout_s)
        self._probe = SampleProbe(spec, isolation, on_imports)
        # A fake runner in unit tests (hyperfine's mock) runs through the local executor.
        self._slots = Slots(pool=pool, executor=executor or LocalExecutor(probe_runner), envs=slot_env,
                            spec=spec, key_for=key_for, patch_for=patch_for, setup=parts.setup, venvs=parts.venvs,
                            build_check=parts.build_check)
        self._judge = SampleJudge(parts.guard, store=store, key_for=key_for, hunt_id=hunt_id)

    @property
    def store(self) -> "Store":
        return self._store

    @property
    def isolation(self) -> Isolation | None:
        """Import roots first on every probe's PYTHONPATH, and the check of what it imported."""
        return self._probe.isolation

    @property
    def tally(self) -> ProbeTally:
        """What this source's fresh probes came to."""
        return self._judge.tally

    @property
    def probes_run(self) -> int:
        return self.tally.probes_run

    @property
    def probe_seconds(self) -> float:
        return self.tally.probe_seconds

    @property
    def cached_used(self) -> int:
        """Stored samples (and skips) of before this source that it served (`StoredDraws.cached_used`)."""
        return self._stored.cached_used

    @property
    def slots(self) -> int:
        return self._slots.count

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
                self.tally.used(outcome)
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

    def measurement_json(self) -> dict[str, Any]:
        """Report fields: preloaded start-up, overlapped probes, setup step, slot venvs, samples re-taken
        under contention, processes probes left."""
        executor, setup = self._slots.executor, self._slots.setup
        return {"probe_seconds": round(self.probe_seconds, 3),
                "preload": executor.preload_stats(),
                "overlap": executor.overlap_stats(),
                "setup": setup.to_json() if setup is not None else None,
                "venvs": self._slots.venvs_json(), "contention": self._judge.contention_json(),
                "leftovers": dict(self.tally.leftovers)}

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
            return self._probe_in(slot, request)

        failure: BaseException | None = None
        if len(fresh) == 1:
            try:
                done = [run(0, fresh[0][1])]
            except (KeyboardInterrupt, SystemExit):
                INTERRUPTS.stop()
                raise
            except BaseException:
                self._slots.executor.cancel_all()
                raise
        else:
            self._judge.resume()
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
        self._probe.check_round([imports for executed, _, imports in done
                                 if executed is not None and imports is not None])
        return [(executed, load) for executed, load, _ in done], failure

    def _probe_in(self, slot: int, request: Request) -> tuple[ExecutedProbe, dict | None, ProbeImports | None]:
        """One probe of `request` by slot `slot`, judged, or the skip that came before it."""
        candidate = request.candidate
        with self._slots.worktree(slot, candidate) as (worktree, env):
            if isinstance(worktree, ProbeOutcome):
                return ExecutedProbe(worktree), None, None
            spec = self._probe.spec_for(instrumented=request.instrumented, work=request.work)
            imports = self._probe.imports_in(worktree)
            probe_env = {**env, **(imports.env if imports is not None else {})}
            try:
                return (*self._judge.take(candidate, functools.partial(
                    self._slots.executor.run, spec, worktree, probe_env, label=candidate.short)), imports)
            except BaseException:  # interrupted: no record to read, none left behind
                if imports is not None:
                    imports.discard()
                raise

    def _cancel_slots(self) -> None:
        """Stop the other slots' probes and their waits for a quiet machine."""
        self._slots.executor.cancel_all()
        self._judge.cancel()


def median_counters(samples: Sequence[Sample]) -> dict[str, float]:
    """Per-iteration counters of several instrumented samples: the median of each counter."""
    import statistics

    names = sorted({name for s in samples for name in s.counters})
    return {name: statistics.median([s.counters[name] for s in samples if name in s.counters])
            for name in names}


