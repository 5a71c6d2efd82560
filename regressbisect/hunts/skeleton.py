"""What the commit, hunk and nightly hunts do alike before their first sample: where the store
is, the progress, the executor and the fingerprint of its machines (`Hunt`), and, while a hunt
runs, its store, worktree pool, cost meter, measurement parts and sample sources (`Rig`)."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from regressbisect.config import HuntConfig, default_store_path
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

    def source(self, config: HuntConfig, key_for: Callable[[Candidate], SampleKey], *,
               patch_for: Callable[[Candidate], str | None] = lambda c: None,
               isolation: Isolation | None = None) -> SampleSource:
        """A sample source at `config`'s probe (its token budget may change after pilots); a new
        import check unless `isolation` carries one over (a drill reports its commit hunt's)."""
        spec = probe_spec(config)
        if isolation is None:
            isolation = isolation_for_hunt(self.history, config.probe.isolation_check, spec.env,
                                           records_root=work_root(config, self.history))
        return SampleSource(store=self.store, pool=self.pool, spec=spec,
                            env_fingerprint=self.env_fingerprint, hunt_id=self.hunt_id,
                            key_for=key_for, patch_for=patch_for, slot_env=self.lane_envs,
                            executor=self.cost.meter, parts=self.parts, isolation=isolation)


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
        self.progress = progress or HuntProgress(quiet=True)
        self.probe_runner = probe_runner
        self.executor = executor or make_executor(config, history, progress=self.progress,
                                                  probe_runner=probe_runner)
        self.env_fingerprint, self.env_facts = self.executor.fingerprint()
        self.meter: costs.CostMeter | None = None
        """What every fresh probe of the hunt cost (set when the hunt starts: it wraps the executor)."""

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
            yield Rig(store=store, pool=pool, cost=cost, hunt_id=hunt_id, parts=parts,
                      lane_envs=slot_envs if one_lane else lane_environments(cfg, slot_envs),
                      history=self.history, env_fingerprint=self.env_fingerprint)

