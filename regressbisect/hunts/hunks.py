"""Orchestration of a hunk hunt: which uncommitted hunks (or hunks of one commit) made tok/s drop.

    hunks of `git diff BASE` + untracked files, and which hunks need which (read from the diff:
    `hunk_needs`) -> a prefix search over the ordered hunk groups, control arm first, then each
    step's group alone against BASE, delta debugging only where the hunks interact
    (search/hunkdecide.py, which holds every decision) -> counters before/after -> JSON report

A candidate is BASE plus a set of hunk ids (model.Candidate), checked out in a pooled worktree
with the subset's patch applied: the user's work tree, index and untracked files are only read.
With `commit` (`hunks --commit REV`, `run --drill`) the hunks are REV's diff against its first
parent, BASE is that parent and BASE + every hunk is REV itself (its samples are the commit
hunt's, from the store); the work tree is not read at all.

With `paths` (`hunks -- PATHS`, git pathspecs) only the hunks in files under PATHS are searched;
the others are not measured and stay applied in every candidate, BASE's side of the control arm
included: BASE + every hunk is still the user's tree (or REV), and what is searched is the change
PATHS make to it (docs/search.md, "Hunks").
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any, Callable, Sequence

from regressbisect.config import HuntConfig
from regressbisect.errors import UserError
from regressbisect.git.history import History, run_git
from regressbisect.git.hunks import Hunk, build_patch, collect_hunks, files_under, group_hunks, untracked_files
from regressbisect.hunts.common import (VERDICT_EXIT, HuntOutcome, continue_command, hunting,
                                        key_for)
from regressbisect.hunts.sampling import Request, SampleSource, median_counters
from regressbisect.hunts.skeleton import Hunt, Rig
from regressbisect.probe.executors import ProbeExecutor
from regressbisect.probe.isolation import Isolation
from regressbisect.probe.runner import run_probe
from regressbisect.render.progress import HuntProgress
from regressbisect.render.report_hunks import DrillReport, HuntedHunks, drill_report, hunk_report
from regressbisect.samples import Candidate, ProbeOutcome, SampleKey
from regressbisect.search.bisect import Measure, SearchSettings
from regressbisect.search.driver import drive
from regressbisect.search.hunkdecide import HunkDecider, HunkDecision
from regressbisect.search.hunks.prefix import prefixes
from regressbisect.search.hunks.runnable import Purpose
from regressbisect.search.levels import LevelRule
from regressbisect.search.stats import NoisePool
from regressbisect.search.verdicts import Verdict
from regressbisect.store import Store


_TOP_DEFINITION = re.compile(r"^(?:async\s+def|def|class)\s+(\w+)|^(\w+)\s*(?::[^=]*)?=(?!=)")
_IMPORT = re.compile(r"^\s*import\s+([\w., ]+)")
_FROM_IMPORT = re.compile(r"^\s*from\s+(\.*)([\w.]*)\s+import\s+\(?([\w, ]+)")
_NAME = re.compile(r"[A-Za-z_]\w*")


def hunk_needs(hunks: Sequence[Hunk], base_text: Callable[[str], str]) -> dict[str, frozenset[str]]:
    """Which hunks each Python hunk cannot run without, read from the diff (no probe):

    * a hunk whose added lines import a module that is a new file of the diff (`import a.b`,
      `from a.b import x`, `from . import b`; matched on the file's path ending in a/b.py or
      a/b/__init__.py) needs that file's hunk;
    * a hunk whose added lines use a name (or import it from a file of the diff) that another
      hunk adds at the top level of that file (def, class, assignment or import at column 0),
      when the file at BASE does not hold the name at all and no second hunk adds it too.

    Conservative: a name BASE already has may be met without the hunk, so it is no dependency. A
    dependency missed here costs probes (the subset crashes), not a wrong answer; a wrong one
    could only make a neutral hunk look needed, which the rule above keeps out."""
    python = [h for h in hunks if h.file.endswith(".py") and h.kind in ("modify", "add-file")]
    added = {h.id: [ln[1:] for ln in h.text.split("\n") if ln.startswith("+") and not ln.startswith("+++")]
             for h in python}
    base_names: dict[str, set[str]] = {}

    def at_base(path: str) -> set[str]:
        if path not in base_names:
            base_names[path] = set(_NAME.findall(base_text(path)))
        return base_names[path]

    defined: dict[tuple[str, str], list[str]] = {}     # (file, name) -> hunks adding it at top level
    for h in python:
        for line in added[h.id]:
            for name in _bound_at_top_level(line):
                defined.setdefault((h.file, name), []).append(h.id)
    new_files = {h.file: h.id for h in hunks if h.kind == "add-file" and h.file.endswith(".py")}

    def files_of(module: str) -> list[str]:
        stem = module.replace(".", "/")
        return [f for f in {*new_files, *(file for file, _ in defined)}
                if f in (f"{stem}.py", f"{stem}/__init__.py") or f.endswith((f"/{stem}.py", f"/{stem}/__init__.py"))]

    def adder(path: str, name: str) -> str | None:
        ids = defined.get((path, name), [])
        return ids[0] if len(ids) == 1 and name not in at_base(path) else None

    out: dict[str, frozenset[str]] = {}
    for h in python:
        need: set[str] = set()
        for line in added[h.id]:
            modules: list[tuple[str, list[str]]] = []
            if m := _IMPORT.match(line):
                modules = [(part.split(" as ")[0].strip(), []) for part in m.group(1).split(",")]
            elif m := _FROM_IMPORT.match(line):
                dots, module, names = m.groups()
                if dots:
                    package = Path(h.file).parent
                    for _ in range(len(dots) - 1):
                        package = package.parent
                    module = ".".join([*package.parts, *([module] if module else [])])
                imported = [n.split(" as ")[0].strip() for n in names.split(",") if n.strip()]
                modules = [(module, imported)] + [(f"{module}.{n}" if module else n, []) for n in imported]
            for module, imported in modules:
                for path in files_of(module) if module else []:
                    if path in new_files:
                        need.add(new_files[path])
                    need.update(i for n in imported if (i := adder(path, n)))
            for name in set(_NAME.findall(line)):
                if (i := adder(h.file, name)) is not None:
                    need.add(i)
        need.discard(h.id)
        if need:
            out[h.id] = frozenset(need)
    return out


def _bound_at_top_level(line: str) -> list[str]:
    """Names a module-level line binds: def, class, assignment, import (column 0 only)."""
    if line[:1].isspace():
        return []
    if m := _TOP_DEFINITION.match(line):
        return [m.group(1) or m.group(2)]
    if m := _IMPORT.match(line):
        return [(part.split(" as ")[1] if " as " in part else part.split(".")[0]).strip()
                for part in m.group(1).split(",") if part.strip()]
    if m := _FROM_IMPORT.match(line):
        return [(n.split(" as ")[1] if " as " in n else n).strip() for n in m.group(3).split(",") if n.strip()]
    return []


def stored_settings(config: HuntConfig) -> dict[str, Any]:
    """A hunk hunt's settings as the store keeps them: a hunt resumes only under the same. Every
    search setting (`HuntConfig.search_key`), and how many probes run at once."""
    return {**config.search_key("hunks"), "slots": config.slots, "overlap": config.overlap}


def under_paths(hunks: Sequence[Hunk], files: set[str], paths: Sequence[str], whose: str) -> tuple[list[Hunk], list[Hunk]]:
    """The hunks of a hunt limited to `paths`: (those in `files`, the files git matched to PATHS;
    the others), each in the diff's order. UserError when none is under PATHS: nothing to hunt."""
    inside = [h for h in hunks if h.file in files]
    if not inside:
        raise UserError(f"no {whose} hunk touches PATHS ({' '.join(paths)}): check the paths (git pathspecs, "
                        f"from the top of the repository); {len(hunks)} hunk(s) in {len({h.file for h in hunks})} "
                        "other file(s)")
    return inside, [h for h in hunks if h.file not in files]


class HunkHunt(Hunt):
    """One `regressbisect hunks`: BASE vs BASE + the work tree's changes (with `commit`: the
    commit's first parent vs the commit, its diff's hunks)."""

    def __init__(self, history: History, config: HuntConfig, *, base: str = "HEAD", commit: str | None = None,
                 include_untracked: bool = True, store_path: Path | None = None,
                 progress: HuntProgress | None = None,
                 probe_runner: Callable[..., ProbeOutcome] = run_probe,
                 rule: LevelRule = LevelRule(), executor: ProbeExecutor | None = None,
                 noise_prior: NoisePool | None = None, instrumented: bool = False,
                 command_line: Sequence[str] | None = None, max_probes: int | None = None,
                 paths: Sequence[str] = ()):
        """noise_prior: the noise a commit hunt pooled, carried over by `run --drill`;
        instrumented: take tok/s from shimmed runs (the commit hunt's, when its plan does);
        command_line: the user's command without --commit and --base (cli/options.without_revisions),
        for the report's continue command of an undecided hunt, which adds `revisions`;
        max_probes: the hunt's probe cap (`SearchSettings.max_probes`, over every phase; a drill's
        is `search.budget.drill_probe_cap`), None: the default;
        paths: `hunks -- PATHS`: only the hunks in files under them (git pathspecs, from the top of
        the repository) are searched; the others (`not_measured`) are in every candidate."""
        self.max_probes = max_probes
        self.paths = tuple(paths)
        self.command_line = command_line
        self._prefixes: list[frozenset] = []
        """The prefix search's candidates (BASE + the first k hunk groups), once `decide` ran."""
        self.history = history   # read by _base_text below, before the frame is set
        self.commit = history.resolve(commit) if commit is not None else None
        if self.commit is not None:
            parent = history.first_parent(self.commit)
            if parent is None:
                raise UserError(f"commit {self.commit[:10]} has no parent: there is no BASE to compare its "
                                "hunks with (hunt a later commit)")
            self.base, include_untracked = parent, False
        else:
            self.base = history.resolve(base)
        self.include_untracked = include_untracked
        self.noise_prior = noise_prior
        self.instrumented = instrumented
        every = collect_hunks(history.root, self.base, include_untracked=include_untracked, target=self.commit)
        self.hunks: list[Hunk] = every
        """The hunks searched: every hunk of the diff, or with `paths` those under them."""
        self.not_measured: list[Hunk] = []
        """With `paths`, the hunks touching none of them: applied in every candidate, never searched."""
        if self.paths:
            files = files_under(history.root, self.base, self.paths, include_untracked=include_untracked,
                                target=self.commit)
            self.hunks, self.not_measured = under_paths(every, files, self.paths, self.hunted.whose)
        self._applied = frozenset(h.id for h in self.not_measured)
        # a need met by a hunk outside PATHS is met in every candidate
        self.needs = {i: need - self._applied for i, need in hunk_needs(every, self._base_text).items()
                      if i not in self._applied and need - self._applied}
        self.by_id = {h.id: h for h in self.hunks}
        self._every_by_id = {h.id: h for h in every}
        self.rule = rule
        super().__init__(history, config, store_path=store_path, progress=progress, probe_runner=probe_runner,
                         executor=executor)
        self._trees = {sha: history.tree_of(sha) for sha in (self.base, self.commit) if sha is not None}
        self.progress.set_labels(["base", "base+all"])

    @property
    def revisions(self) -> list[str]:
        """What this hunt hunts, as the options of `hunks` that name it, at the commits the user's
        revisions resolved to: the same hunt once another commit lands."""
        return ["--commit", self.commit] if self.commit is not None else ["--base", self.base]

    def continue_line(self) -> str | None:
        """The command that goes on where an undecided hunt stopped (hunts/common.continue_command):
        `revisions` as full shas, then `-- PATHS` where the hunt had them."""
        return continue_command(self.command_line, self.config.max_samples, self.revisions, paths=self.paths)

    @property
    def hunted(self) -> HuntedHunks:
        """The hunks and what they are compared against, as the reports name them."""
        return HuntedHunks(self.hunks, self.base, self.commit, paths=self.paths, not_measured=self.not_measured)

    def _base_text(self, path: str) -> str:
        """The file at BASE ('' when it is not there)."""
        proc = run_git(self.history.root, "show", f"{self.base}:{path}", check=False)
        return proc.stdout.decode("utf-8", errors="replace") if proc.returncode == 0 else ""

    def candidate(self, ids) -> Candidate:
        """BASE + these hunks (+ the hunks outside PATHS, in every candidate); with `commit`, BASE +
        every hunk is the commit itself (no patch: the same tree, and the store's samples of it are a
        commit hunt's too)."""
        ids = set(ids) | self._applied
        if self.commit is not None and ids == set(self._every_by_id):
            return Candidate(self.commit)
        return Candidate(self.base, tuple(sorted(ids)))

    def key_for(self, candidate: Candidate) -> SampleKey:
        return key_for(self.history, candidate, config_hash=self.config_hash,
                       env_fingerprint=self.env_fingerprint, trees=self._trees)

    def patch_for(self, candidate: Candidate) -> str | None:
        if not candidate.patch:
            return None
        return build_patch([self._every_by_id[i] for i in candidate.patch])

    def run(self) -> HuntOutcome:
        with hunting(self.executor):
            return self._run()

    def _run(self) -> HuntOutcome:
        cfg = self.config
        everything = self.candidate(self.by_id)

        def start(store: Store) -> int:
            return store.start_hunt(kind="hunks", good=self.base, bad=self.commit or everything.patch_hash or "",
                                    config_hash=self.config_hash, env_fingerprint=self.env_fingerprint,
                                    settings={**stored_settings(cfg),
                                              **({"paths": list(self.paths)} if self.paths else {})})

        with self.rig(start=start) as rig:
            store, hunt_id = rig.store, rig.hunt_id
            source = self.sample_source(rig)
            decision = self.decide(source)
            named = [c.hunks for c in decision.culprits]
            counters = self._counters(source, named) if cfg.instrument != "off" and named else {}
            report = hunk_report(
                self.hunted, decision, prefixes=self._prefixes, counters=counters, unit=cfg.unit,
                instrument=cfg.instrument, exit_code=int(VERDICT_EXIT[decision.verdict]),
                probes=source.probes_run, cached=source.cached_used, isolation=source.isolation,
                hunt_id=hunt_id, env_facts=self.env_facts, measurement=source.measurement_json(),
                cost=rig.cost.report(store, hunt_id, tokens=cfg.probe.tokens),
                continue_command=(self.continue_line()
                                  if decision.verdict == Verdict.UNDECIDED or decision.control.more_samples_would_tell else None)).to_json()
            store.finish_hunt(hunt_id, report)
        return HuntOutcome(report=report, exit_code=VERDICT_EXIT[decision.verdict], hunt_id=hunt_id)

    def sample_source(self, rig: Rig, isolation: Isolation | None = None) -> SampleSource:
        """Where this hunt's samples come from: the store, else a probe in one of the rig's worktrees
        (a commit hunt's, for `run --drill`: its store, pool, setup, meter and import check carry over)."""
        return rig.source(self, self.key_for, patch_for=self.patch_for, isolation=isolation)

    def decide(self, source: SampleSource) -> HunkDecision:
        """The hunt's decisions (search/hunkdecide.py), each round's subsets side by side, one per
        lane (its own worktree and patch), as a commit hunt runs its candidates."""
        cfg = self.config
        settings = SearchSettings.of(cfg, "hunks")
        if self.max_probes is not None:
            settings = dataclasses.replace(settings, max_probes=self.max_probes)
        decider = HunkDecider([h.id for h in self.hunks], group_hunks(self.hunks), settings, self.rule,
                              on_phase=self.progress.phase, needs=self.needs, noise_prior=self.noise_prior)
        self._prefixes = prefixes(decider.ctx.order)
        return drive(decider, lambda batch: self._measure(source, decider, batch), slots=cfg.lanes,
                     value=lambda draw: draw.value)

    # -- phases ----------------------------------------------------------------------------------

    def _measure(self, source: SampleSource, decider: HunkDecider, batch: Sequence[Measure]) -> list:
        """One sample of BASE + each measure's subset, side by side. All tok/s requests share one
        namespace, so each is a new run beside the previous one (and a resumed hunt replays them in
        the same order)."""
        subsets = [decider.subset(m.index) for m in batch]
        draws = self._draw_many(source, [self.candidate(s) for s in subsets], namespace="hunks",
                                notes=[m.reason for m in batch], instrumented=self.instrumented)
        for subset, m, draw in zip(subsets, batch, draws):
            if draw.sample is None and m.reason == Purpose.CONTROL:
                which = "BASE" if not subset else "BASE + all hunks"
                if not subset and self.not_measured:
                    which = (f"BASE + the {len(self.not_measured)} hunk(s) outside PATHS (in every candidate; "
                             "one may need a hunk under PATHS: add its file to PATHS)")
                raise UserError(f"the probe cannot be measured at {which}: {draw.skip_reason}"
                                f"{self._missing_module_hint(draw.skip_reason or '') if subset else ''} "
                                "(check --cmd, or run it by hand)")
        return draws

    def _missing_module_hint(self, reason: str) -> str:
        """For a probe that fails at BASE + all hunks on an import: which file and which flag."""
        match = re.search(r"(?:ModuleNotFoundError|ImportError): .*?['\"]([\w.]+)['\"]", reason)
        if not match:
            return ""
        module = match.group(1)
        path = module.replace(".", "/")
        untracked = [f for f in untracked_files(self.history.root)
                     if f in (f"{path}.py", f"{path}/__init__.py") or f.endswith(f"/{path}.py")]
        if untracked and not self.include_untracked:
            return (f"; {untracked[0]} is untracked and --tracked-only leaves it out: run without "
                    "--tracked-only (or `git add` it)")
        if untracked:
            return f"; {untracked[0]} is untracked: check it is importable from the worktree"
        return f"; no file for module '{module}' in the diff or the repository at BASE"

    def _draw(self, source: SampleSource, candidate: Candidate, *, namespace: str,
              instrumented: bool = False, work: bool = False, note: str = ""):
        (draw,) = self._draw_many(source, [candidate], namespace=namespace, instrumented=instrumented, work=work,
                                  notes=[note])
        return draw

    def _draw_many(self, source: SampleSource, candidates: Sequence[Candidate], *, namespace: str,
                   notes: Sequence[str], instrumented: bool = False, work: bool = False) -> list:
        draws = source.draw_many([Request(c, instrumented=instrumented, work=work, namespace=namespace)
                                  for c in candidates])
        meter = self.meter
        for candidate, draw, note in zip(candidates, draws, notes):
            searched = len(set(candidate.patch) - self._applied)
            label = "base" if not searched else f"base+{searched}h"
            self.progress.cost(meter.totals.line())
            self.progress.sample(label, draw.value, draw.skip_reason, draw.cached, probes=source.probes_run,
                                 cached_total=source.cached_used, note=note)
        return draws

    def _counters(self, source: SampleSource, culprits: Sequence[frozenset[str]]) -> dict[str, dict[str, float]]:
        """One run of the counting arm at BASE and at BASE + each culprit (counts survive
        instrumentation; the work per step too: render/work.py)."""
        self.progress.phase("counting arm: the work per step at BASE and BASE + each culprit")
        out: dict[str, dict[str, float]] = {}
        for ids in [frozenset()] + list(culprits):
            draw = self._draw(source, self.candidate(ids), namespace="counters", instrumented=True,
                              work=True, note="counting arm")
            out[",".join(sorted(ids))] = median_counters([draw.sample]) if draw.sample is not None else {}
        return out

    # -- report ----------------------------------------------------------------------------------

    def drill_report(self, decision: HunkDecision | None, source: SampleSource | None) -> DrillReport:
        """A commit culprit's `hunks` in a `run --drill` report (render/report_hunks.py); None: its
        diff is one hunk, which the commit names already (no hunt)."""
        if decision is None or source is None:
            return drill_report(self.hunted, None)
        return drill_report(self.hunted, decision, probes=source.probes_run, cached=source.cached_used,
                            max_probes=self.max_probes)
