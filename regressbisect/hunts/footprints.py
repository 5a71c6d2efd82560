"""The probe's footprint over a commit hunt: which commits it measures (docs/design.md, "The
probe's footprint").

The first probe of each candidate records what the probe read of its worktree (probe/footprint.py;
`wanted` is the isolation check's `footprint_for`, `recorded` its `on_footprint`); once the probe
has measured, the footprint is kept in the store (`settle`), per tree, probe config and machine,
so a later hunt of the same commits knows it without a probe. A commit that touches none of the
union of the footprints known (GOOD's, BAD's and every measured candidate's) is set aside
(`candidates`): it shares its neighbours' verdict, as with `run GOOD BAD -- PATHS`. Where the
footprint cannot be read (a probe that is not Python, a setup step, the recorder off) every
commit is a candidate and the report says why (`report`).
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Iterable, Sequence

from regressbisect.config import HuntConfig
from regressbisect.git.history import Change, CommitInfo, History
from regressbisect.git.worktrees import checked_out
from regressbisect.probe.footprint import Footprint, program_not_python
from regressbisect.store import Store

SET_ASIDE_REASON = "not measured: touches none of the files the probe reads"
"""The reason of each commit set aside by the footprint (the report's `not_measured[].reason`)."""
MOST_PASSES = 8
"""Searches of one hunt at most: past them every commit set aside is a candidate again."""


PATHS_GIVEN = "PATHS given: the commits touching them are the candidates"
"""Why a hunt with PATHS does not use the footprint (no fallback: PATHS decide)."""


def why_not(config: HuntConfig, paths: Sequence[str], root: Path) -> str | None:
    """Why a hunt measures every commit rather than those touching the probe's footprint, or None."""
    probe = config.probe
    if not config.footprint:
        return "off (--no-footprint)"
    if paths:
        return PATHS_GIVEN
    if probe.setup is not None:
        return "a setup step builds each candidate, and every file may be its input (PATHS limit the candidates)"
    if not probe.isolation_check:
        return "the import recorder is off (--no-isolation-check): what the probe reads is not recorded"
    program = program_not_python(probe.cmd, root, probe.env.get("PATH"))
    if program is not None:
        return f"the probe command runs {program}, which is not Python: what it reads cannot be recorded"
    return None


class HuntFootprints:
    """The footprints of one commit hunt's candidates, and the candidates they leave."""

    def __init__(self, history: History, range_commits: Sequence[CommitInfo], config: HuntConfig,
                 env_fingerprint: str, paths: Sequence[str] = ()):
        self.history = history
        self.range = list(range_commits)
        self.trees = {c.sha: c.tree for c in self.range}
        self.config_key = config.probe.imports_key()
        self.env_fingerprint = env_fingerprint
        self.reason = why_not(config, paths, Path(history.root))
        """None while the footprint decides the candidates; else why every commit is one."""
        self.fallback = False
        """True where the footprint was asked for and could not be read (the report says so)."""
        self.recording = self.reason is None
        self.known: dict[str, Footprint] = {}
        """tree -> the probe's footprint there (this hunt's probes, or the store's)."""
        self._pending: dict[str, Footprint] = {}
        self._lock = threading.Lock()
        self._changes: dict[str, tuple[Change, ...]] | None = None
        self.passes = 0
        """Searches run over the candidates the footprint left (a new one each time it grew)."""
        self.added_back: list[str] = []
        """Commits set aside by a search and candidates of a later one (the footprint grew)."""
        self.set_aside: list[CommitInfo] = []
        if self.reason is not None and config.footprint and not paths and config.probe.setup is None:
            self.fallback = True

    @property
    def active(self) -> bool:
        return self.reason is None

    def give_up(self, reason: str) -> None:
        """Every commit is a candidate from now on, for `reason`."""
        if self.reason is None:
            self.reason, self.fallback = reason, True
        self.recording = False

    # -- recording: the isolation check's hooks --------------------------------------------------

    def wanted(self, worktree: Path) -> str | None:
        """The tree whose footprint a probe in `worktree` records: the candidate checked out there,
        while its footprint is not known (asked in the slots' threads)."""
        if not self.recording:
            return None
        tree = self.trees.get(checked_out(worktree) or "")
        with self._lock:
            return None if tree is None or tree in self.known else tree

    def recorded(self, tree: str, footprint: Footprint) -> None:
        """A probe's footprint, held until its probe is seen to have measured (`settle`)."""
        with self._lock:
            earlier = self._pending.get(tree)
            self._pending[tree] = footprint if earlier is None else Footprint.union([earlier, footprint])

    def settle(self, store: Store, draws: Iterable[Any]) -> None:
        """After a round: the footprints of its probes that measured are known and stored (a
        failed run's, read up to its failure, is not kept); an unreadable one ends the footprint."""
        self.settle_measured(store, [draw.candidate.commit for draw in draws],
                             {draw.candidate.commit for draw in draws if draw.sample is not None})

    def settle_measured(self, store: Store, commits: Iterable[str], measured: set[str]) -> None:
        """`settle` by commit: the footprints recorded at `commits` are dropped, those of the
        commits in `measured` (a sample of them stored) kept. A round a failure or a stop ended
        stored what came back before it: their footprints are kept with their samples, so that
        the hunt resumed knows them."""
        for commit in commits:
            tree = self.trees.get(commit)
            with self._lock:
                footprint = self._pending.pop(tree, None) if tree is not None else None
                if footprint is None or commit not in measured:
                    continue
                self.known[tree] = footprint
            store.add_footprint(tree, self.config_key, self.env_fingerprint, footprint.to_json())
            if footprint.unreadable is not None:
                self.give_up(footprint.unreadable)

    def recall(self, store: Store) -> None:
        """The footprints earlier hunts recorded of this range's trees (same probe config, machine).
        One that could not be read ends the footprint at once, as it did in the hunt that recorded
        it: that hunt recorded no other (`settle`), and no probe is run to learn them."""
        if not self.active:
            return
        stored = store.footprints(self.config_key, self.env_fingerprint, self.trees.values())
        with self._lock:
            for tree, data in stored.items():
                self.known.setdefault(tree, Footprint.from_json(data))
        union = self.union()
        if union.unreadable is not None:
            self.give_up(union.unreadable)

    def known_at(self, commit: CommitInfo) -> bool:
        with self._lock:
            return commit.tree in self.known

    def unknown(self, commits: Iterable[str]) -> set[str]:
        """The commits among `commits` whose footprint a probe of them would record now."""
        if not self.recording:
            return set()
        with self._lock:
            return {c for c in commits if c in self.trees and self.trees[c] not in self.known}

    # -- the candidates ------------------------------------------------------------------------

    def union(self) -> Footprint:
        with self._lock:
            return Footprint.union(self.known.values())

    def changes(self) -> dict[str, tuple[Change, ...]]:
        if self._changes is None:
            self._changes = self.history.changes(self.range)
        return self._changes

    def candidates(self) -> list[CommitInfo]:
        """GOOD, the commits touching the union of the footprints known, BAD, in range order (the
        whole range where the footprint does not decide); `set_aside` the others."""
        if self.active:
            union = self.union()
            if union.unreadable is not None:
                self.give_up(union.unreadable)
            elif self.passes >= MOST_PASSES:
                self.give_up(f"it grew in {MOST_PASSES} searches")
        if not self.active:
            self.set_aside = []
            return list(self.range)
        changes = self.changes()
        kept = [c for c in self.range[1:-1] if union.touched_by(changes.get(c.sha, ()))]
        if not kept and not union.touched_by(changes.get(self.range[-1].sha, ())):
            self.give_up("no commit after GOOD touches what the probe reads at GOOD and BAD")
            self.set_aside = []
            return list(self.range)
        keep = {c.sha for c in kept}
        self.set_aside = [c for c in self.range[1:-1] if c.sha not in keep]
        return [self.range[0], *kept, self.range[-1]]

    def grown(self) -> list[CommitInfo]:
        """The commits set aside that touch the footprint as it is now (it grew since the search
        began: a measured candidate read more): they are candidates of the next search."""
        if not self.active or not self.set_aside:
            return []
        union = self.union()
        if union.unreadable is not None:
            return list(self.set_aside)
        changes = self.changes()
        return [c for c in self.set_aside if union.touched_by(changes.get(c.sha, ()))]

    def start_pass(self, added_back: Sequence[CommitInfo] = ()) -> None:
        self.passes += 1
        self.added_back += [c.sha for c in added_back]

    def stop_recording(self) -> None:
        """No more footprints: the search is over (the counting arm and drills record none)."""
        self.recording = False

    # -- the report ----------------------------------------------------------------------------

    def report(self) -> dict[str, Any]:
        """The report's `footprint`: whether it decided the candidates, why not, what it held."""
        union = self.union() if self.known else Footprint()
        used = self.active
        if used:
            note = (f"{len(self.set_aside)} of {len(self.range) - 2} commits between GOOD and BAD set aside: they "
                    f"touch none of the {_count(len(union.files), 'file')} the probe reads or the "
                    f"{_count(len(union.dirs), 'directory', 'directories')} it lists (recorded at "
                    f"{_count(len(self.known), 'commit')})")
        else:
            note = f"not used: {self.reason}" + ("; every commit is a candidate" if self.reason != PATHS_GIVEN else "")
        return {"used": used, "fallback": self.fallback, "note": note, "recorded": len(self.known),
                "files": len(union.files) if used else None, "dirs": len(union.dirs) if used else None,
                "passes": self.passes, "added_back": list(self.added_back)}


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"
