"""What the commit, hunk and nightly hunts share: the cache key of a sample, the slots'
environments, the measurement parts (setup step, slot virtualenvs, busy-machine guard), a hunt's
run (stopped by SIGINT/SIGTERM: probe/interrupts.py), and the exit code of each verdict."""
from __future__ import annotations

import contextlib
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from regressbisect.config import Executor, HuntConfig
from regressbisect.errors import ExitCode, UserError, warn
from regressbisect.git.history import History
from regressbisect.hunts.sampling import MeasurementParts
from regressbisect.probe.interrupts import INTERRUPTS
from regressbisect.render.progress import HuntProgress
from regressbisect.samples import Candidate, SampleKey
from regressbisect.search.bisect import SearchSettings
from regressbisect.search.verdicts import Verdict
from regressbisect.store import Store

if TYPE_CHECKING:
    from regressbisect.machine.contention import ContentionGuard

VERDICT_EXIT = {
    Verdict.CULPRITS: ExitCode.OK,
    Verdict.NOT_REPRODUCED: ExitCode.NOT_REPRODUCED,
    Verdict.ALL_SKIPPED: ExitCode.ALL_SKIPPED,
    Verdict.NOT_LOCALISED: ExitCode.NOT_LOCALISED,
    Verdict.UNDECIDED: ExitCode.UNDECIDED,
    Verdict.AMBIGUOUS: ExitCode.AMBIGUOUS,
}
"""The exit code of each verdict of a commit or hunk hunt (the JSON's `verdict` and `exit_code`)."""


@contextlib.contextmanager
def hunting(executor):
    """A hunt's run: stopped by SIGINT/SIGTERM (`Interrupts.hunt`: every running probe killed,
    none started, KeyboardInterrupt; the CLI prints the resume line and exits 130), and its
    executor closed at the end however it ends (the local one stops its preload servers)."""
    with INTERRUPTS.hunt():
        try:
            yield
        finally:
            executor.close()


@dataclass(frozen=True)
class HuntOutcome:
    """What a finished hunt hands to the CLI."""

    report: dict[str, Any]
    """The JSON report (docs/report-schema.md)."""
    exit_code: ExitCode
    hunt_id: int


def slot_environments(config: HuntConfig, gpu_count: int) -> list[dict[str, str]]:
    """Pin each slot to its own devices: explicit --slot-devices, else split the GPUs evenly.

    With Slurm no slot names devices: each job gets its GPUs from the scheduler's allocation."""
    if config.executor == Executor.SLURM:
        return [{} for _ in range(config.slots)]
    if config.slot_devices:
        return [{"CUDA_VISIBLE_DEVICES": d} for d in config.slot_devices]
    if config.slots == 1 or gpu_count < config.slots:
        if config.slots > 1 and gpu_count:
            warn(f"{config.slots} slots share {gpu_count} GPU(s): measurements will disturb each other",
                 "--slots or --slot-devices")
        return [{} for _ in range(config.slots)]
    per_slot = gpu_count // config.slots
    return [{"CUDA_VISIBLE_DEVICES": ",".join(str(s * per_slot + g) for g in range(per_slot))}
            for s in range(config.slots)]


def warn_unusable_slots(config: HuntConfig, candidates: int, gpu_count: int, cores: int | None = None) -> None:
    """Say so when --slots asks for more than the range or the machine can use: slots beyond the
    candidates stay idle, and CPU probes beyond the cores slow each other (with the busy check
    their samples are kept apart and stop the hunt, docs/contention.md "The hunt's own probes";
    without it every such sample is used)."""
    if config.slots > candidates:
        warn(f"--slots {config.slots} exceeds the {candidates} candidates of the range: at most "
             f"{candidates} probes run at once", "--slots")
    cores = cores or os.cpu_count() or 1
    if config.executor == Executor.LOCAL and gpu_count == 0 and config.slots > cores:
        fate = ("the first sample taken so is stored apart, never used, and stops the hunt" if config.busy_check
                else "with --no-busy-check nothing sees it and every such sample is used: each probe runs on a "
                     "share of a core, slower and noisier, so the hunt needs more probes")
        warn(f"--slots {config.slots} runs up to {config.slots} CPU probes at once on {cores} cores: they "
             f"take CPU time from each other; {fate}", "--slots")


def warn_short_cap(settings: SearchSettings) -> None:
    """Say so when --max-samples leaves a step too few fresh pairs to be named where a stall could
    hide (`SearchSettings.pairs_to_name_a_step`): such a hunt ends 'could not decide'."""
    need = settings.pairs_to_name_a_step()
    if settings.max_samples < need:
        warn(f"--max-samples {settings.max_samples} is below the {need} samples a commit needs before a step "
             f"is named where a stall in {settings.stall_share:.0%} of runs could hide: the hunt may end "
             f"'could not decide'", f"--max-samples {need} or --stall-share 0")


def lane_environments(config: HuntConfig, slot_envs: list[dict[str, str]]) -> list[dict[str, str]]:
    """One environment per lane: each slot's `overlap` times (a slot's lanes share its devices;
    probe/windows.py keeps their measured windows apart), slot by slot in turn, so that a round
    smaller than the lanes spreads over the slots."""
    return [dict(env) for _ in range(config.overlap) for env in slot_envs]


def measurement_parts(config: HuntConfig, history: History, store: Store, hunt_id: int | None,
                      progress: HuntProgress) -> MeasurementParts:
    """SampleSource's setup step, slot virtualenvs, build check and busy-machine guard, from the
    config (shared by commit, hunk and nightly hunts; docs/setup.md, docs/contention.md)."""
    from regressbisect.probe.executors import work_root
    from regressbisect.probe.setup_step import SetupStep
    from regressbisect.probe.venvs import SlotVenvs

    # Beside the worktree pool: with Slurm's shared_dir the nodes see the slots' venvs too.
    root = work_root(config, history)
    venvs = SlotVenvs(root / "venvs") if config.probe.venv else None
    setup = None
    if config.probe.setup is not None:
        setup = SetupStep(command=config.probe.setup, store=store, hunt_id=hunt_id,
                          log_dir=root / "setup-logs",
                          timeout_s=config.probe.setup_timeout_s,
                          venv_key=venvs.key if venvs is not None else None)
    guard = busy_guard(config, progress)
    # Without a setup step a compiled module is never built in a slot: the probe would measure
    # a fallback. Checked on each checkout, before the candidate's first probe.
    build_check = check_built if setup is None and config.build_check else None
    return MeasurementParts(setup=setup, venvs=venvs, guard=guard, build_check=build_check)


def busy_guard(config: HuntConfig, progress: HuntProgress) -> "ContentionGuard | None":
    """The busy-machine guard of the config (docs/contention.md), started now (its wait budget is
    a share of the wall time from here), or None: --no-busy-check, or probes that run on a node
    the scheduler gave (the guard reads this machine's load). Every hunt's, deps's too."""
    from regressbisect.machine.contention import BusyRule, ContentionGuard

    if not (config.busy_check and config.executor == Executor.LOCAL):
        return None
    return ContentionGuard(BusyRule(cpus=config.busy_cpus, share=config.busy_share, gpu=config.busy_gpu),
                           max_wait_s=config.max_wait_s, wait_share=config.max_wait_share,
                           on_wait=progress.message, probe_groups=INTERRUPTS.running_groups)


def check_built(worktree: Path) -> None:
    """UserError when the candidate checked out in `worktree` declares compiled extension
    modules (no setup step builds them: measurement_parts calls this only then)."""
    from regressbisect.probe.extensions import declared_extensions

    declaration = declared_extensions(worktree)
    if declaration is not None:
        raise UserError(f"{declaration.where} declares compiled extension modules, and without a setup "
                        f"step no candidate's worktree has them built, so every probe would measure a "
                        f"fallback: add {declaration.fix()} (docs/setup.md), or --no-build-check to "
                        f"measure the sources as they are")


def continue_command(command_line: Sequence[str] | None, max_samples: int, revisions: Sequence[str],
                     paths: Sequence[str] = ()) -> str | None:
    """The command that lets an undecided hunt go further: the user's own command line with
    --max-samples doubled (any --max-samples of it replaced) and the hunt's `revisions` (run's GOOD
    BAD, hunks' --commit or --base) as the commits they resolved to: the CLI gives the command line
    without the user's (cli/options.without_revisions), which name other commits once one lands.
    The sample key holds no cap (`key_for`), so it reuses every stored sample, and the search, fed
    them in the order it asks, goes on where this one stopped; `paths` (run's `-- PATHS`) end it
    after `--`. None without the command line."""
    if not command_line:
        return None
    return shlex.join([*without_option(command_line, "--max-samples"), "--max-samples", str(2 * max_samples),
                       *revisions, *(["--", *paths] if paths else [])])


def without_option(words: Sequence[str], option: str) -> list[str]:
    """A command line less every `option VALUE` and `option=VALUE` of it."""
    out, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word == option:
            skip = True
        elif not word.startswith(option + "="):
            out.append(word)
    return out


def key_for(history: History, candidate: Candidate, *, config_hash: str, env_fingerprint: str,
            trees: Mapping[str, str] | None = None) -> SampleKey:
    """The store key of a candidate's samples, for every hunt: the tree of its commit (not the
    commit: a reword shares samples), the hash of its hunk ids (stable while the change is the
    same, so a re-run reuses its samples), the probe config's hash and the machine's fingerprint.
    `trees` holds trees already known (commit -> tree) to spare a lookup."""
    tree = (trees or {}).get(candidate.commit) or history.tree_of(candidate.commit)
    return SampleKey(tree=tree, patch_hash=candidate.patch_hash,
                     config_hash=config_hash, env_fingerprint=env_fingerprint)
