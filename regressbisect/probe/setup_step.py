"""The per-candidate setup step (`--setup`): build or install the candidate before it is measured.

The rule (docs/setup.md): a candidate is built once per hunt process. A build lives in its
worktree's files (and, with `--venv`, in that worktree's virtualenv), so the worktree that holds
it is kept for that candidate (`BuiltTrees`): up to one worktree per lane plus SPARE_TREES more,
the least recently used free one given to a candidate no worktree holds built. A worktree is
marked built only after its setup succeeded and forgotten before it is checked out again (a
checkout's `git clean -ffdx` removes in-place build outputs); the marks live in this process
only, so a new process (a resumed hunt, also after kill -9) builds again. Before each later probe
in a kept worktree its tracked files are put back as the setup left them (a probe may edit one:
it would change what every later probe there measures). Every run is stored
(result, output tail, seconds, full log under <common_dir>/regressbisect/setup-logs/). A failed
setup skips the candidate with its reason (git bisect's 125, never "slow"), and within one hunt
(also a resumed one) the stored failure is reused instead of building again; a new hunt
retries. Setup time is counted apart from probe time and never enters tok/s.
"""
from __future__ import annotations

import hashlib
import json
import re
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Hashable, Mapping

from regressbisect.git.worktrees import TrackedState, restore_tracked, tracked_state
from regressbisect.samples import SampleKey
from regressbisect.probe.runner import (_kill_group, _last_nonempty_line, _signal_group, reusable_failure, start_reaped,
                                        timeout_reason)
from regressbisect.errors import warn
from regressbisect.store import Store

TAIL_LINES = 30
"""Trailing lines of the setup's output kept in the store and shown in a failure's report."""
RESTORED_NAMED = 5
"""Files a warning about restored tracked files names (the report lists them all)."""
SPARE_TREES = 7
"""Worktrees a hunt with a setup step keeps beyond one per lane, each holding a candidate built:
with one slot, 8 worktrees, enough for GOOD, BAD, each culprit and its parent and the latest
bisection points. The disk they take is at most this many checkouts with their build outputs;
they are removed when the hunt ends."""


def setup_hash(command: str, venv_key: str | None) -> str:
    """What a setup result depends on besides the tree: the command and the slot venvs' base."""
    return hashlib.sha1(json.dumps({"setup": command, "venv": venv_key}).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class SetupResult:
    ok: bool
    reason: str | None
    """'setup failed: exit 1: <last line> (log: PATH)'; None when ok."""
    seconds: float
    ran: bool
    """False: a failure stored earlier in this hunt was reused (nothing was run)."""


class BuiltTrees:
    """Which worktree holds which candidate built, so that a candidate is built once per hunt
    rather than at every visit (docs/setup.md). Thread-safe: lanes take worktrees from worker
    threads; a worktree is used by one lane at a time."""

    def __init__(self) -> None:
        self.count = 0
        """Worktrees in use: indices 0..count-1 of the pool."""
        self._built: dict[int, Hashable] = {}
        self._after_setup: dict[int, TrackedState] = {}
        """Per built worktree: its tracked files as the setup left them (restored before each probe)."""
        self._last_used: dict[int, int] = {}
        self._busy: set[int] = set()
        self._clock = 0
        self._lock = threading.Lock()

    def fit(self, lanes: int) -> int:
        """Room for `lanes` probes at once and SPARE_TREES candidates kept built besides; returns
        the number of worktrees."""
        with self._lock:
            self.count = max(self.count, lanes + SPARE_TREES)
            return self.count

    def take(self, build: Hashable) -> tuple[int, bool]:
        """A free worktree for `build` and whether it holds it built: one that does, else one not
        used yet, else the least recently used; a worktree taken for another build is forgotten
        as built at once (it is checked out next)."""
        with self._lock:
            free = [t for t in range(self.count) if t not in self._busy]
            if not free:
                raise RuntimeError("more lanes than worktrees: BuiltTrees.fit was not called")
            holding = [t for t in free if self._built.get(t) == build]
            unused = [t for t in free if t not in self._last_used]
            tree = (holding or unused or [min(free, key=self._last_used.__getitem__)])[0]
            if not holding:
                self._built.pop(tree, None)
                self._after_setup.pop(tree, None)
            self._busy.add(tree)
            self._clock += 1
            self._last_used[tree] = self._clock
            return tree, bool(holding)

    def mark_built(self, tree: int, build: Hashable, after_setup: TrackedState) -> None:
        """Its setup succeeded: later probes of `build` may run in `tree`, its tracked files
        put back to `after_setup` first (what they held when the setup ended)."""
        with self._lock:
            self._built[tree] = build
            self._after_setup[tree] = after_setup

    def after_setup(self, tree: int) -> TrackedState:
        """The tracked files of built worktree `tree` as its setup left them."""
        with self._lock:
            return self._after_setup[tree]

    def give_back(self, tree: int) -> None:
        with self._lock:
            self._busy.discard(tree)

    @property
    def used(self) -> list[int]:
        """The worktrees taken at least once, in index order."""
        with self._lock:
            return sorted(self._last_used)


class SetupStep:
    """Runs (or remembers) the setup command for candidates; thread-safe through the store."""

    def __init__(self, *, command: str, store: Store, log_dir: Path, hunt_id: int | None,
                 timeout_s: float, venv_key: str | None = None):
        self.command = command
        self.hash = setup_hash(command, venv_key)
        self._store = store
        self._log_dir = Path(log_dir)
        self._hunt_id = hunt_id
        self._timeout_s = timeout_s
        self.runs = 0
        self.failures = 0
        self.remembered_failures = 0
        self.seconds = 0.0
        self.by_tree: dict[str, dict[str, float]] = {}
        """Per candidate label: runs, reuses, failures, seconds (report)."""
        self.failed: list[dict[str, str]] = []
        """Per failed run: candidate, reason and the output's tail (report)."""
        self.trees = BuiltTrees()
        self._restored_lock = threading.Lock()
        self.restored_probes = 0
        """Probes before which a built worktree's tracked files were put back (a probe had edited them)."""
        self.restored_files: set[str] = set()
        """The worktrees holding candidates built by this command (every sample source of the hunt)."""

    def remembered_failure(self, key: SampleKey, label: str) -> SetupResult | None:
        """A failure stored by this hunt for this tree: reused, not re-run (docs/setup.md)."""
        if self._hunt_id is None:
            return None
        failed = [r for r in self._store.setups(key, self.hash, hunt_id=self._hunt_id) if not r["ok"]]
        if not failed or not reusable_failure(failed[-1]["reason"], self._timeout_s):
            return None
        self.remembered_failures += 1
        self._count(label, "remembered", 0.0)
        return SetupResult(ok=False, reason=failed[-1]["reason"], seconds=0.0, ran=False)

    def run(self, key: SampleKey, worktree: Path, env: Mapping[str, str], label: str) -> SetupResult:
        """Run the setup command in `worktree` with the probe's environment; store the result."""
        self._log_dir.mkdir(parents=True, exist_ok=True)
        # One file per tree, patch, setup and slot: two slots building the same tree at once
        # must not write into one log.
        log_path = (self._log_dir / f"{key.tree[:12]}-{(key.patch_hash or 'nopatch')[:8]}-"
                                    f"{self.hash[:8]}-{worktree.name}.log")
        started = time.perf_counter()
        timed_out = False
        with open(log_path, "wb") as log:
            log.write(f"$ {self.command}\n# in {worktree}\n".encode())
            log.flush()
            # Under the reaper, as a probe: a build server it leaves (a daemon) is killed when it ends.
            process = start_reaped(self.command, worktree, env, log, subprocess.STDOUT)
            try:
                try:
                    process.wait(timeout=self._timeout_s)
                except subprocess.TimeoutExpired:
                    timed_out = True
                    _kill_group(process, 5.0)
            except BaseException:
                _kill_group(process, 2.0)
                raise
            _signal_group(process.pid, 9)  # a daemon the build left behind must not compete
        seconds = time.perf_counter() - started
        output = log_path.read_text(errors="replace")
        leftovers = getattr(process, "leftovers", ())
        if leftovers:   # in the log only: the failure line is the command's own last line
            with open(log_path, "a") as log:
                log.write(f"# killed when the setup ended, left running by it: {'; '.join(leftovers)}\n")
        tail = "\n".join(output.splitlines()[-TAIL_LINES:])
        code = process.returncode
        ok = code == 0 and not timed_out
        reason = None
        if not ok:
            what = (timeout_reason(self._timeout_s) if timed_out else
                    f"exit {code}: {_last_nonempty_line(_strip_log_header(output))}".rstrip(": "))
            reason = f"setup failed: {what} (log: {log_path})"
        self._store.add_setup(key, self.hash, hunt_id=self._hunt_id, command=self.command, ok=ok,
                              reason=reason, exit_code=code, seconds=seconds, output_tail=tail,
                              log_path=str(log_path))
        self.runs += 1
        self.failures += int(not ok)
        self.seconds += seconds
        self._count(label, "runs" if ok else "failures", seconds)
        if not ok:
            self.failed.append({"candidate": label, "reason": reason or "", "tail": tail})
        return SetupResult(ok=ok, reason=reason, seconds=seconds, ran=True)

    def mark_built(self, tree: int, build: Hashable, worktree: Path) -> None:
        """The setup of `build` succeeded in worktree `tree` (at `worktree`): later probes of it
        run there, its tracked files as the setup left them."""
        self.trees.mark_built(tree, build, tracked_state(worktree))

    def reuse(self, tree: int, worktree: Path, label: str) -> None:
        """A worktree still holds this candidate built: no setup (a cache hit). Its tracked files
        are put back first as the setup left them: a probe that edits one (a config it rewrites,
        a cache kept in a tracked file) would change what every later probe there measures."""
        restored = restore_tracked(worktree, self.trees.after_setup(tree))
        if restored:
            self._note_restored(label, restored)
        self._count(label, "reuses", 0.0)

    def _note_restored(self, label: str, files: list[str]) -> None:
        """Counted for the report, and said once per hunt."""
        with self._restored_lock:
            first = self.restored_probes == 0
            self.restored_probes += 1
            self.restored_files.update(files)
        if first:
            shown = ", ".join(files[:RESTORED_NAMED]) + (", ..." if len(files) > RESTORED_NAMED else "")
            warn(f"the probe of {label} modified tracked files in its worktree ({shown}); they are "
                 f"restored before every probe")

    def _count(self, label: str, what: str, seconds: float) -> None:
        entry = self.by_tree.setdefault(label, {"runs": 0, "failures": 0, "reuses": 0,
                                                "remembered": 0, "seconds": 0.0})
        entry[what] += 1
        entry["seconds"] = round(entry["seconds"] + seconds, 3)

    def to_json(self) -> dict:
        return {"command": self.command, "runs": self.runs, "failures": self.failures,
                "remembered_failures": self.remembered_failures, "seconds": round(self.seconds, 3),
                "log_dir": str(self._log_dir), "worktrees": self.trees.count,
                "per_candidate": self.by_tree, "failed": self.failed,
                "tracked_files_restored": ({"probes": self.restored_probes, "files": sorted(self.restored_files)}
                                           if self.restored_probes else None)}


def _strip_log_header(output: str) -> str:
    return re.sub(r"\A\$ .*\n# in .*\n", "", output)
