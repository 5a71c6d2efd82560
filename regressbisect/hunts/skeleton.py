"""What the commit, hunk and nightly hunts do alike before their first sample: where the store
is, the progress, the executor and the fingerprint of its machines (`Hunt`), and, while a hunt
runs, its store, worktree pool, cost meter, measurement parts and sample sources (`Rig`)."""
from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from regressbisect.config import Executor, HuntConfig, default_store_path, file_digests
from regressbisect.git.history import History
from regressbisect.git.worktrees import WorktreePool, check_writable
from regressbisect.hunts import cost as costs
from regressbisect.hunts.common import lane_environments, measurement_parts, slot_environments
from regressbisect.hunts.sampling import MeasurementParts, SampleSource
from regressbisect.machine.fingerprint import count_gpus
from regressbisect.probe.executors import ProbeExecutor, make_executor, work_root
from regressbisect.probe.isolation import Isolation, isolation_for_hunt
from regressbisect.probe.runner import probe_spec, run_probe
from regressbisect.render.progress import HuntProgress
from regressbisect.samples import Candidate, ProbeOutcome, SampleKey
from regressbisect.store import Store


@dataclass(frozen=True)
class Rig:
    """What a running hunt measures with: open from its start to its report."""

    store: Store
    pool: WorktreePool
    cost: costs.HuntCost
    """The start-up environment, the meter that wraps the executor, the report's `cost`."""
    hunt_id: int | None
    """The store's id of the hunt (None: a night's measuring, which is no hunt)."""
    parts: MeasurementParts
    lane_envs: list[dict[str, str]]
    """One environment per lane (slots x overlap): the sample sources' slots."""
    history: History
    env_fingerprint: str

    def source(self, hunt: "Hunt", key_for: Callable[[Candidate], SampleKey], *,
               patch_for: Callable[[Candidate], str | None] = lambda c: None,
               isolation: Isolation | None = None) -> SampleSource:
        """A sample source at `hunt`'s config (its token budget may change after pilots, the
        files its probes import join its key: `Hunt.learn_imports`); a new import check unless
        `isolation` carries one over (a drill reports its commit hunt's)."""
        config = hunt.config
        spec = probe_spec(config)
        if isolation is None:
            isolation = isolation_for_hunt(self.history, config.probe.isolation_check, spec.env,
                                           records_root=work_root(config, self.history),
                                           record_writes=len(self.lane_envs) > 1 and config.executor == Executor.LOCAL)
        return SampleSource(store=self.store, pool=self.pool, spec=spec,
                            env_fingerprint=self.env_fingerprint, hunt_id=self.hunt_id,
                            key_for=key_for, patch_for=patch_for, slot_env=self.lane_envs,
                            executor=self.cost.meter, parts=self.parts, isolation=isolation,
                            on_imports=lambda files: hunt.learn_imports(self.store, self.hunt_id, files))


class Hunt:
    """A hunt's (or a night's) frame: its history and config, the store's path, the progress,
    the executor and the fingerprint of the machines it runs probes on."""

    def __init__(self, history: History, config: HuntConfig, *, store_path: Path | None,
                 progress: HuntProgress | None, probe_runner: Callable[..., ProbeOutcome] = run_probe,
                 executor: ProbeExecutor | None = None):
        check_writable(history)   # before the store, whose default place is in the repository too
        self.history = history
        self.config = config
        self.store_path = store_path or default_store_path(history.common_dir)
        self._recall_imports()
        self.progress = progress or HuntProgress(quiet=True)
        self.probe_runner = probe_runner
        self.executor = executor or make_executor(config, history, progress=self.progress,
                                                  probe_runner=probe_runner)
        self.env_fingerprint, self.env_facts = self.executor.fingerprint()
        self.meter: costs.CostMeter | None = None
        """What every fresh probe of the hunt cost (set when the hunt starts: it wraps the executor)."""
        self._imports_learned = False
        """Whether a round of this hunt's probes reported files imported from outside their worktrees."""

    @property
    def config_hash(self) -> str:
        """The probe config's hash its samples are keyed by, read at each use: the token budget
        (--tokens auto) and the files its probes import (`learn_imports`) may change it."""
        return self.config.probe.config_hash()

    # -- what the probes import from outside the worktree: part of the sample key ----------------

    def _recall_imports(self) -> None:
        """Put the files outside the worktree that earlier probes of this config imported (the
        store's `outside_imports`), as they are now, into the probe config, so that its samples are
        keyed by them from the first: a resumed hunt finds its samples, and one whose helper
        module changed takes new ones."""
        if not self.store_path.is_file():
            return
        with Store(self.store_path, read_only=True) as store:
            recorded = store.outside_imports(self.config.probe.imports_key())
        self._import(recorded)

    def learn_imports(self, store: Store, hunt_id: int | None, files: Iterable[str]) -> None:
        """The first round of this hunt's probes that imported files from outside their
        worktrees (`SampleSource` tells, before it stores the round): those not known yet are
        recorded for this config, join its key with their digests as they are now, and the hunt's
        row takes the new hash (the same command resumes it). Later rounds keep the key, so that
        every sample stored under it stays found."""
        if self._imports_learned:
            return
        self._imports_learned = True
        probe = self.config.probe
        new = set(files) - {path for path, _ in probe.imported + probe.inputs}   # a named file is keyed already
        if not new:
            return
        store.add_outside_imports(probe.imports_key(), new)
        self._import(new)
        if hunt_id is not None:
            store.rekey_hunt(hunt_id, self.config_hash)

    def _import(self, files: Iterable[str]) -> None:
        """`files` join the probe config's imported files, read now; those it holds keep their digest."""
        probe = self.config.probe
        imported = dict(file_digests(files))
        imported.update(probe.imported)
        if len(imported) > len(probe.imported):
            self.config = dataclasses.replace(
                self.config, probe=dataclasses.replace(probe, imported=tuple(sorted(imported.items()))))

    @contextlib.contextmanager
    def rig(self, *, start: Callable[[Store], int] | None = None, one_lane: bool = False) -> Iterator[Rig]:
        """The store and worktree pool open, the meter set, the hunt started in the store
        (`start` returns its id; None: no hunt is recorded) and its measurement parts built.
        `one_lane`: one probe at a time, in the first slot's environment (a night's series)."""
        cfg = self.config
        gpus = count_gpus()
        slot_envs = slot_environments(cfg, gpus)
        if one_lane:
            slot_envs = slot_envs[:1]
        # The meter wraps the executor: what every fresh probe cost, and the start-up env.
        cost = costs.HuntCost(cfg, self.executor, store_path=self.store_path, slot_envs=slot_envs, gpus=gpus)
        self.meter = cost.meter
        lanes = 1 if one_lane else cfg.lanes
        with Store(self.store_path) as store, WorktreePool(self.history, lanes,
                                                           root=work_root(cfg, self.history)) as pool:
            hunt_id = start(store) if start is not None else None
            parts = measurement_parts(cfg, self.history, store, hunt_id, self.progress)
            lane_envs = slot_envs if one_lane else lane_environments(cfg, slot_envs)
            # Sized here once for every source of the hunt (--tokens auto measures through two):
            # with a setup step, candidates are kept built in worktrees of their own (docs/setup.md).
            if parts.setup is not None:
                pool.widen(parts.setup.trees.fit(len(lane_envs)))
            yield Rig(store=store, pool=pool, cost=cost, hunt_id=hunt_id, parts=parts, lane_envs=lane_envs,
                      history=self.history, env_fingerprint=self.env_fingerprint)

