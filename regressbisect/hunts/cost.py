"""What a hunt pays for, and the levers that cut it (docs/cost.md).

* `CostMeter`: probes, probe wall time, the part in measured windows, GPU-seconds; probes that
  crashed (no sample) apart.
* `startup_env`: one cache directory per store for the probe stack's on-disk caches
  (inductor, triton, torch extensions), so start-up work is paid once per hunt, not per slot;
  and inductor compiling in the probe's own process, not in a pool of worker processes.

The `--tokens auto` rule is `search/budget.py`, the counters shim's overhead arm
`search/overhead.py`: decisions, apart from what the hunt pays.

Nothing here imports torch or runs a probe: the hunt feeds it outcomes.
"""
from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from regressbisect.config import Executor
from regressbisect.probe.executors.base import ProbeExecutor
from regressbisect.search.budget import BudgetChoice

if TYPE_CHECKING:
    from regressbisect.config import HuntConfig
    from regressbisect.store import Store
    from regressbisect.probe.executors.base import ExecutedProbe

# -- shared caches ------------------------------------------------------------------------------

SHARED_CACHES: dict[str, str] = {
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
    "TRITON_CACHE_DIR": "triton",
    "TORCH_EXTENSIONS_DIR": "torch_extensions",
}
"""Cache variables the tool points at its per-store directory when the user has not set them:
inductor's FX graph and AOTAutograd caches and generated code, triton's compiled kernels,
torch.utils.cpp_extension builds. Why these and not others: docs/cost.md."""


SERIAL_COMPILE: dict[str, str] = {"TORCHINDUCTOR_COMPILE_THREADS": "1"}
"""Set when the user has not: inductor compiles in the probe's own process. By default every
torch.compile'd probe starts a pool of compile workers, one per core, each importing torch,
though a warm cache leaves them little to do; on the h200 demo probe (16 cores) the pool cost
6.3 s of a 15.7 s start-up, and tok/s did not move (docs/cost.md, section 6)."""


@dataclass(frozen=True)
class StartupPlan:
    """The environment that makes the probe's start-up cheaper, and what it did."""

    caches: dict[str, str]
    """Cache variables set to the shared directory (empty with --no-shared-caches)."""
    user_set: tuple[str, ...]
    """Cache variables left alone because the user (environment or --env) set them."""
    directory: str | None
    serial_compile: dict[str, str] = field(default_factory=dict)
    """SERIAL_COMPILE's variables this plan sets (empty with --compile-workers or where the user
    set them)."""
    compile_user_set: tuple[str, ...] = ()
    """SERIAL_COMPILE's variables left alone because the user set them."""

    @property
    def env(self) -> dict[str, str]:
        """Variables to add to every probe of the hunt (GOOD, BAD and every candidate alike)."""
        return {**self.caches, **self.serial_compile}

    def to_json(self) -> dict[str, Any]:
        """The report's `cost.caches` (docs/report-schema.md)."""
        return {"directory": self.directory, "shared": list(self.caches), "user_set": list(self.user_set)}

    def compile_json(self) -> dict[str, Any]:
        """The report's `cost.compile` (docs/report-schema.md)."""
        return {"set": dict(self.serial_compile), "user_set": list(self.compile_user_set)}


def cache_dir_for_store(store_path: Path) -> Path:
    """The shared cache directory: beside the store (by default <git common dir>/regressbisect/)."""
    return Path(store_path).resolve().parent / "cache"


def startup_env(directory: Path | None, probe_env: Mapping[str, str],
                parent_env: Mapping[str, str] | None = None, *, compile_workers: bool = False) -> StartupPlan:
    """Point each cache variable the user has not set at `directory`/<name> (None: leave the
    caches alone, --no-shared-caches), and set SERIAL_COMPILE's variables the user has not set
    (unless `compile_workers`)."""
    parent_env = os.environ if parent_env is None else parent_env

    def user_set(names) -> tuple[str, ...]:
        return tuple(v for v in names if v in probe_env or v in parent_env)

    caches_user_set, compile_user_set = user_set(SHARED_CACHES), user_set(SERIAL_COMPILE)
    caches = ({} if directory is None else
              {var: str(Path(directory) / sub) for var, sub in SHARED_CACHES.items() if var not in caches_user_set})
    serial = {} if compile_workers else {k: v for k, v in SERIAL_COMPILE.items() if k not in compile_user_set}
    return StartupPlan(caches=caches, user_set=caches_user_set,
                       directory=None if directory is None else str(directory),
                       serial_compile=serial, compile_user_set=compile_user_set)


# -- cost accounting ----------------------------------------------------------------------------

def gpus_per_probe(extra_env: Mapping[str, str] | None, visible_gpus: int) -> int:
    """A slot's CUDA_VISIBLE_DEVICES count, else every visible GPU (0 on a CPU machine)."""
    devices = (extra_env or {}).get("CUDA_VISIBLE_DEVICES")
    if devices is not None:
        return len([d for d in devices.split(",") if d.strip()])
    return visible_gpus


def held_seconds(spans: Sequence[tuple[float | None, float]]) -> float:
    """Seconds during which at least one probe ran: the union of the spans [start, start + wall]
    (overlapped probes count once); a span without a start (a Slurm job, a probe stored before
    the store kept start times) adds its whole wall."""
    total = sum(wall for start, wall in spans if start is None)
    end = -math.inf
    for start, wall in sorted((s, w) for s, w in spans if s is not None):
        stop = start + wall
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def hunt_gpu_seconds(spans: Sequence[tuple[float | None, float]], held_gpus: int, *, jobs: bool = False) -> float:
    """GPU-seconds of a hunt (docs/cost.md): the GPUs its slots hold times the time any probe ran;
    for probes run one after another, probe wall x GPUs per probe. With `jobs` (Slurm: each job
    holds its `held_gpus` only while it runs) the sum of the probes' walls x `held_gpus`."""
    if jobs:
        return sum(wall for _, wall in spans) * held_gpus
    return held_seconds(spans) * held_gpus


def held_gpus(slot_envs: Sequence[Mapping[str, str]], visible_gpus: int) -> int:
    """GPUs a local hunt holds while its probes run: every slot's (gpus_per_probe)."""
    return sum(gpus_per_probe(env, visible_gpus) for env in slot_envs)


@dataclass
class CostTotals:
    probes: int = 0
    wall_s: float = 0.0
    """Wall time of the probe processes (start-up, warm-up, measured window, exit)."""
    measured_s: float = 0.0
    """Sum of the protocol `seconds` of the samples: the time spent in measured windows."""
    gpu_s: float = 0.0
    """GPUs held x the time any probe ran (hunt_gpu_seconds): probe wall x GPUs per probe when
    probes run one after another."""
    builds: int | None = None
    """Setup step runs paid (failed ones too); None: none run and no probe on a built tree (no
    setup step, or every sample came from the store)."""
    build_reuses: int = 0
    """Probes run on a worktree that already held their candidate built (docs/setup.md)."""
    crashed: int = 0
    """Of `probes`, those that gave no sample (failed, timed out, printed no metric)."""
    crashed_wall_s: float = 0.0
    """Their part of `wall_s`."""

    @property
    def measured_share(self) -> float | None:
        """None (unknown, not 0%) also when no probe reported its measured seconds."""
        return self.measured_s / self.wall_s if self.wall_s > 0 and self.measured_s > 0 else None

    def to_json(self) -> dict[str, Any]:
        share = self.measured_share
        return {"probes": self.probes, "probe_wall_s": round(self.wall_s, 3),
                "measured_s": round(self.measured_s, 3),
                "measured_share": None if share is None else round(share, 4),
                "gpu_s": round(self.gpu_s, 3),
                "crashed_probes": self.crashed, "crashed_wall_s": round(self.crashed_wall_s, 3)}

    def line(self) -> str:
        share = self.measured_share
        share_text = f" ({share:.0%} measured)" if share is not None else ""
        builds = (f", {self.builds} builds ({self.build_reuses} probes on a built tree)"
                  if self.builds is not None else "")
        return (f"{probes_text(self.probes, self.crashed, self.crashed_wall_s)}, {self.wall_s:,.0f}s probe "
                f"wall{share_text}, {self.gpu_s:,.0f} GPU-s{builds}")


def probes_text(probes: int, crashed: int, crashed_wall_s: float) -> str:
    """'40 probes', or '40 probes (3 crashed, 12 s)' when some gave no sample."""
    return f"{probes} probes" + (f" ({crashed} crashed, {crashed_wall_s:,.0f} s)" if crashed else "")


class CostMeter(ProbeExecutor):
    """Wraps a probe executor (probe/executors; same interface) and adds up what each fresh probe
    cost; thread-safe (slots run probes from worker threads). Also adds the shared-cache
    environment."""

    def __init__(self, executor: ProbeExecutor, *, held_gpus: int, jobs: bool = False,
                 extra_env: Mapping[str, str] | None = None):
        self._executor = executor
        self.name = executor.name
        self._held_gpus = held_gpus
        self._jobs = jobs
        self._extra_env = dict(extra_env or {})
        self._lock = threading.Lock()
        self._spans: list[tuple[float | None, float]] = []
        self.totals = CostTotals()

    def fingerprint(self) -> tuple[str, dict]:
        return self._executor.fingerprint()

    def cancel_all(self) -> None:
        self._executor.cancel_all()

    def close(self) -> None:
        self._executor.close()

    def preload_stats(self) -> dict | None:
        return self._executor.preload_stats()

    def overlap_stats(self) -> dict | None:
        return self._executor.overlap_stats()

    def run(self, spec, worktree: Path, extra_env: Mapping[str, str] | None = None, *,
            label: str = "") -> "ExecutedProbe":
        env = {**self._extra_env, **(extra_env or {})}
        executed = self._executor.run(spec, worktree, env, label=label)
        outcome = executed.outcome
        with self._lock:
            t = self.totals
            t.probes += 1
            t.wall_s += outcome.wall_seconds
            if outcome.sample is None:
                t.crashed += 1
                t.crashed_wall_s += outcome.wall_seconds
            elif outcome.sample.seconds is not None:
                t.measured_s += outcome.sample.seconds
            self._spans.append((outcome.started_at, outcome.wall_seconds))
            t.gpu_s = hunt_gpu_seconds(self._spans, self._held_gpus, jobs=self._jobs)
        return executed

    def count_build(self, *, reused: bool) -> None:
        """A setup step run, or a probe on a tree already built (hunts/sampling.py)."""
        with self._lock:
            self.totals.builds = (self.totals.builds or 0) + (not reused)
            self.totals.build_reuses += reused


GIVEN_BUDGET = "given by the user (never changed)"
"""The report's budget reason when no budget was chosen by --tokens auto."""


def _gpu_holding(config: "HuntConfig", slot_envs: Sequence[Mapping[str, str]], gpus: int) -> dict[str, Any]:
    """How a hunt holds GPUs, for its GPU-seconds (hunt_gpu_seconds): a Slurm job its own while
    it runs, a local hunt every slot's."""
    if config.executor == Executor.SLURM:
        return {"held_gpus": config.slurm.gpus_per_probe, "jobs": True}
    return {"held_gpus": held_gpus(slot_envs, gpus), "jobs": False}


class HuntCost:
    """One hunt's cost levers and accounts: the start-up environment every probe gets, the meter
    that wraps the executor, and the report's `cost` (docs/report-schema.md). The commit and the
    hunk hunts alike."""

    def __init__(self, config: "HuntConfig", executor: ProbeExecutor, *, store_path: Path,
                 slot_envs: Sequence[Mapping[str, str]], gpus: int):
        self.gpus = gpus
        directory = cache_dir_for_store(store_path) if config.shared_caches else None
        self.plan = startup_env(directory, config.probe.env, compile_workers=config.compile_workers)
        self._holding = _gpu_holding(config, slot_envs, gpus)
        self.meter = CostMeter(executor, extra_env=self.plan.env, **self._holding)

    def report(self, store: "Store", hunt_id: int, *, tokens: int,
               budget: BudgetChoice | None = None) -> dict[str, Any]:
        """This process's probes, and under `hunt` every run of this hunt id (a resumed hunt pays
        its first runs too)."""
        probes, wall, measured = store.hunt_probe_totals(hunt_id)
        crashed, crashed_wall = store.hunt_skip_totals(hunt_id)
        gpu_s = hunt_gpu_seconds(store.hunt_probe_spans(hunt_id), **self._holding)
        totals = self.meter.totals
        return {**totals.to_json(), "builds": totals.builds, "build_reuses": totals.build_reuses,
                "gpus_visible": self.gpus,
                "budget": budget.to_json() if budget is not None else {"tokens": tokens, "reason": GIVEN_BUDGET},
                "caches": self.plan.to_json(), "compile": self.plan.compile_json(),
                "hunt": CostTotals(probes=probes, wall_s=wall, measured_s=measured, gpu_s=gpu_s, crashed=crashed,
                                   crashed_wall_s=crashed_wall).to_json()}
