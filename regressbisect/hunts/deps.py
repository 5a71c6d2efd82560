"""Orchestration of a deps hunt: which package of an environment upgrade, and which release of
it, made the measured command slower. The project is measured as it is in its directory; only
the environment changes.

    GOOD_ENV and BAD_ENV's pins -> the packages changed, added, removed (deps/envs.py), and which
    change needs which (deps/needs.py, from the two ends' metadata)
    -> the hunk search over the changes (search/hunkdecide.py: its control arm is GOOD vs BAD,
       the commit hunt's rule; a candidate is GOOD + a subset of the changes, built with uv:
       deps/builds.py; one that does not resolve, install or run is a crash with its reason)
    -> for each culprit package, its releases between the two versions (deps/releases.py)
       bisected by the commit search (search/bisect.py), each point the culprit's environment
       with the package at that release; a release that does not install is skipped and named
    -> for each culprit package whose repository is given (--package-repo), the commits between the
       tags of its last good and first bad releases (deps/sources.py) bisected the same way, each
       point the culprit's environment with the package built from that commit's files
    -> for each culprit commit, its hunks against its parent (git/hunks.py, as `run --drill`
       collects them) hunted by the hunk search, each candidate the parent's files with a subset
       of the hunks applied (deps/sources.py `PatchedSource`), built the same way
    -> the report (render/report_deps.py)

One probe at a time, in the project's directory, with the candidate's virtualenv first on PATH
(so `python` is its interpreter). Every sample (and every candidate that did not build or run) is
stored the moment it exists, keyed by the environment's hash and the probe config (deps/keys.py):
the searches are deterministic and are fed the stored samples in the order they ask, so a killed
deps hunt re-run with the same arguments re-measures nothing stored (its environments stay built).
"""
from __future__ import annotations

import dataclasses
import functools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from regressbisect.config import Executor, HuntConfig
from regressbisect.deps.builds import EnvBuilder, IndexOptions, Source
from regressbisect.deps.envs import Environment, apply, diff
from regressbisect.deps.keys import ProjectState
from regressbisect.deps.sources import CommitSource, PatchedSource, SourceUnavailable, commits_between
from regressbisect.deps.needs import change_needs, installed_requirements
from regressbisect.deps.releases import ReleaseRule, ReleasesUnavailable, dated_releases
from regressbisect.errors import ExitCode, UserError
from regressbisect.git.history import CommitInfo, History, run_git
from regressbisect.git.hunks import collect_hunks, group_hunks
from regressbisect.git.worktrees import pool_root
from regressbisect.hunts.common import VERDICT_EXIT, busy_guard, hunting
from regressbisect.hunts.hunks import hunk_needs
from regressbisect.hunts.judging import SampleJudge
from regressbisect.hunts.sampling import Request, StoredDraws
from regressbisect.hunts.skeleton import Hunt
from regressbisect.probe.runner import probe_spec, run_probe
from regressbisect.probe.venvs import base_interpreter
from regressbisect.render.progress import HuntProgress
from regressbisect.render.report_deps import CommitLevel, HunkLevel, ReleaseHunt, deps_report
from regressbisect.samples import Candidate, ProbeOutcome, SampleKey
from regressbisect.search.bisect import CommitSearch, SearchResult, SearchSettings
from regressbisect.search.budget import drill_probe_cap
from regressbisect.search.driver import drive
from regressbisect.search.hunkdecide import HunkDecider, HunkDecision
from regressbisect.search.hunks.runnable import Purpose
from regressbisect.search.hunks.subsets import Joined, TestedSubset
from regressbisect.search.verdicts import CandidateCall
from regressbisect.store import Store


class _DrillStopped(Exception):
    """The drill into a culprit commit cannot go on (an end of its control arm did not build or
    run): why, in one line."""


@dataclass(frozen=True)
class DepsOutcome:
    report: dict[str, Any]
    exit_code: ExitCode


def blamed(culprit: TestedSubset) -> list[str]:
    """The packages of a culprit whose releases are bisected and which the report names: every
    one but those in it only because another cannot run without them (unless that is all)."""
    joined = culprit.how_joined()
    named = [name for name in sorted(culprit.hunks) if joined[name] != Joined.NEEDED_TO_RUN]
    return named or sorted(culprit.hunks)


class DepsHunt(Hunt):
    """One `regressbisect deps GOOD_ENV BAD_ENV`."""

    def __init__(self, history: History, config: HuntConfig, good: Environment, bad: Environment, *,
                 index: IndexOptions | None = None, release_rule: ReleaseRule | None = None,
                 python: str | None = None, progress: HuntProgress | None = None,
                 probe_runner: Callable[..., ProbeOutcome] = run_probe, envs_root: Path | None = None,
                 store_path: Path | None = None, package_repos: Mapping[str, Path] | None = None):
        """envs_root: where the candidate environments are built (default: beside the slots'
        venvs, `<common_dir>/regressbisect/venvs`, which `clean` removes); package_repos: a
        changed package's normalised name -> its git repository, whose commits between the culprit
        releases are searched."""
        if config.executor != Executor.LOCAL:
            raise UserError("deps runs its probes on this machine only: its environments are built here "
                            "(drop --executor)")
        self.changes = diff(good, bad)
        if not self.changes:
            raise UserError(f"{good.source} and {bad.source} pin the same versions: no package changed")
        self.good, self.bad = good, bad
        self.package_repos = dict(package_repos or {})
        unknown = sorted(set(self.package_repos) - {c.name for c in self.changes})
        if unknown:
            raise UserError(f"--package-repo {unknown[0]}: not a package that changed between {good.source} and "
                            f"{bad.source}")
        self.index, self.release_rule = index or IndexOptions(), release_rule or ReleaseRule()
        # a preload server holds the tool's packages, not the candidate's
        super().__init__(history, dataclasses.replace(config, preload="off"), store_path=store_path,
                         progress=progress, probe_runner=probe_runner)
        self.builder = EnvBuilder(envs_root or pool_root(history) / "venvs", python or base_interpreter(), self.index)
        self.spec = dataclasses.replace(probe_spec(self.config), instrument=False, work=False)
        self.project = ProjectState.of(history)
        self._stored: StoredDraws | None = None
        """The store's samples, served in the order the searches ask (set while the hunt runs)."""
        self._store: Store | None = None
        self._hunt_id: int | None = None
        self._judge: SampleJudge | None = None
        """Judges each fresh probe as `run`'s are, under the busy-machine guard (docs/contention.md):
        its load stored with it, one taken under contention stored apart and re-taken, the waits
        for quiet bounded (set while the hunt runs)."""
        self.by_name = {c.name: c for c in self.changes}
        self.needs: dict[str, frozenset[str]] = {}
        self.probes = 0
        self.crashes: dict[frozenset[str], str] = {}
        """Subsets of the changes whose environment did not build or whose probe did not run: why."""

    def settings(self) -> dict[str, Any]:
        """What the store's hunt row is resumed by: both searches' settings, and what decides
        which environments are built and which releases listed."""
        return {"hunks": self.config.search_key("hunks"), "releases": self.config.search_key("run"),
                "index": self.index.key(), "pre": self.release_rule.pre, "yanked": self.release_rule.yanked,
                "python": self.builder.python, "project": [self.project.tree, self.project.work]}

    def key_for(self, candidate: Candidate) -> SampleKey:
        return SampleKey(tree=self.project.tree, patch_hash=candidate.patch_hash, config_hash=self.config_hash,
                         env_fingerprint=self.env_fingerprint)

    def run(self) -> DepsOutcome:
        with hunting(self.executor), Store(self.store_path) as store:
            started = time.perf_counter()
            hunt_id = store.start_hunt(kind="deps", good=self.builder.key(apply(self.good, ())),
                                       bad=self.builder.key(apply(self.good, self.changes)),
                                       config_hash=self.config_hash, env_fingerprint=self.env_fingerprint,
                                       settings=self.settings())
            self._stored = StoredDraws(store, self.key_for, hunt_id, self.spec.timeout_s)
            self._store, self._hunt_id = store, hunt_id
            # One probe at a time in the project's directory: no worktree pool, no setup step.
            self._judge = SampleJudge(busy_guard(self.config, self.progress), store=store, key_for=self.key_for,
                                      hunt_id=hunt_id)
            try:
                self._read_needs()
                decision = self._which_packages()
            except UserError as error:   # the next run starts a new hunt, which retries
                store.finish_hunt(hunt_id, {"verdict": "error", "error": error.message})
                raise
            releases = [self._which_commit(self._which_release(culprit.hunks, name), culprit.hunks)
                        for culprit in decision.culprits for name in blamed(culprit)]
            report = deps_report(
                good=self.good, bad=self.bad, changes=self.changes, needs=self.needs, decision=decision,
                releases=releases, exit_code=int(VERDICT_EXIT[decision.verdict]), unit=self.config.unit,
                crashes=self.crashes, probes=self.probes, cached=self._stored.cached_used, hunt_id=hunt_id,
                builds=self.builder.builds, build_seconds=self.builder.build_seconds,
                wall_seconds=time.perf_counter() - started, settings=self.config.search_key("hunks"))
            # the busy-machine guard's facts, as run's report has them (null with --no-busy-check)
            report["measurement"] = {"contention": self._judge.contention_json()}
            store.finish_hunt(hunt_id, report)
        return DepsOutcome(report, VERDICT_EXIT[decision.verdict])

    # -- the two ends and the needs between changes ------------------------------------------------

    def _read_needs(self) -> None:
        """Build both ends (either failing is the user's to fix: one line), and read which change
        needs which from what they installed."""
        self.progress.phase(f"building GOOD and BAD's environments ({len(self.changes)} package(s) changed)")
        ends = []
        for which, env, changes in (("GOOD", self.good, ()), ("BAD", self.bad, self.changes)):
            built = self.builder.build(apply(self.good, changes))
            if not built.ok:
                raise UserError(f"{which} {env.source} {built.reason} (check its pins and --index-url/--find-links)")
            ends.append(built)
        self.needs = change_needs(self.changes, installed_requirements(ends[0].path),
                                  installed_requirements(ends[1].path))

    # -- which package ---------------------------------------------------------------------------

    def _which_packages(self) -> HunkDecision:
        settings = SearchSettings.of(self.config, "hunks")
        decider = HunkDecider([c.name for c in self.changes], None, settings, on_phase=self.progress.phase,
                              needs=self.needs, end_names=("GOOD", "BAD"))

        def measure(batch) -> list[float | None]:
            out = []
            for m in batch:
                subset = decider.subset(m.index)
                changes = [self.by_name[n] for n in sorted(subset)]
                label = "GOOD" if not subset else "BAD" if len(subset) == len(self.changes) else \
                    "GOOD+" + ",".join(c.display or c.name for c in changes)
                value, reason = self._sample(apply(self.good, changes), label, str(m.reason), "packages")
                if value is None:
                    self.crashes[frozenset(subset)] = reason or "skipped"
                if value is None and m.reason == Purpose.CONTROL:
                    raise UserError(f"the probe cannot be measured at {label}: {reason} (check --cmd, or run it "
                                    f"by hand with the environment's python)")
                out.append(value)
            return out

        return drive(decider, measure, slots=1)

    # -- which release -----------------------------------------------------------------------------

    def _which_release(self, group: frozenset[str], name: str) -> ReleaseHunt:
        """The releases of `name` between its two versions bisected, the rest of its culprit
        `group` made as in BAD."""
        change = self.by_name[name]
        hunt = ReleaseHunt(package=name, display=change.display or name, good=change.good, bad=change.bad,
                           group=tuple(sorted(group - {name})))
        if change.kind != "changed":
            return dataclasses.replace(hunt, reason=f"{change.kind}: there are no releases between")
        try:
            listed = dated_releases(name, change.good, change.bad, self.index, self.release_rule)
        except ReleasesUnavailable as exc:
            return dataclasses.replace(hunt, reason=f"its releases could not be listed: {exc}")
        versions = listed.versions
        hunt = dataclasses.replace(hunt, versions=tuple(versions), axis=listed.axis,
                                   uploaded=tuple(sorted(listed.uploaded.items())))
        if len(versions) == 2:
            return dataclasses.replace(hunt, version=change.bad,
                                       reason="no release between the two: the first with the change is BAD's")
        culprits = [self.by_name[n] for n in sorted(group)]
        self.progress.phase(f"which release of {hunt.display}: {len(versions) - 2} between "
                            f"{change.good} and {change.bad}, bisected"
                            + (" in order of upload" if listed.axis == "date" else ""))
        result, skips = self._bisect(len(versions), lambda i, why: self._sample(
            apply(self.good, culprits, at={name: versions[i]}), f"{hunt.display}=={versions[i]}", why,
            f"releases:{name}"))
        skipped = tuple((versions[i], why) for i, why in skips)
        first = min(result.culprits, key=lambda c: c.first_bad, default=None)
        return dataclasses.replace(hunt, result=result, skipped=skipped,
                                   version=versions[first.first_bad] if first is not None else None,
                                   after=versions[first.last_good] if first is not None else None,
                                   reason=result.reason)

    # -- which commit --------------------------------------------------------------------------

    def _which_commit(self, hunt: ReleaseHunt, group: frozenset[str]) -> ReleaseHunt:
        """With the package's repository: the commits between the tags of its last good and first
        bad releases bisected, each built from source in place of the release, the rest of its
        culprit `group` made as in BAD."""
        repo = self.package_repos.get(hunt.package)
        if repo is None:
            return hunt
        level = CommitLevel(repo=str(repo))
        if hunt.version is None or hunt.after is None:
            return dataclasses.replace(hunt, commits=dataclasses.replace(
                level, reason="no single release step: there are no two tags to search between"))
        try:
            commits = commits_between(History.open(repo), hunt.after, hunt.version)
        except (SourceUnavailable, UserError) as exc:
            return dataclasses.replace(hunt, commits=dataclasses.replace(level, reason=str(exc)))
        level = dataclasses.replace(level, commits=tuple(commits))
        if len(commits) == 2:
            return dataclasses.replace(hunt, commits=dataclasses.replace(
                level, reason=f"no commit between the tags of {hunt.after} and {hunt.version}"))
        sources = [CommitSource(History.open(repo), c) for c in commits]
        pins = {n: v for n, v in apply(self.good, [self.by_name[n] for n in sorted(group)]).items() if n != hunt.package}
        self.progress.phase(f"which commit of {hunt.display}: {len(commits) - 2} between {hunt.after} and "
                            f"{hunt.version}, each built from source, bisected")
        result, skips = self._bisect(len(commits), lambda i, why: self._sample(
            pins, f"{hunt.display}@{commits[i].sha[:10]}", why, f"commits:{hunt.package}", source=sources[i]))
        skipped = tuple((commits[i].sha, why) for i, why in skips)
        drills = tuple(self._which_hunk(hunt, History.open(repo), commits[c.first_bad], pins, result.probes)
                       for c in result.culprits)
        return dataclasses.replace(hunt, commits=dataclasses.replace(level, result=result, skipped=skipped,
                                                                     reason=result.reason, drills=drills))

    # -- which hunk ----------------------------------------------------------------------------

    def _which_hunk(self, hunt: ReleaseHunt, history: History, culprit: CommitInfo, pins: Mapping[str, str],
                    search_probes: int) -> HunkLevel:
        """The culprit commit's hunks against its first parent, hunted as `run --drill` hunts a
        commit's (its probe cap too), each candidate the parent's files with that subset of the
        hunks applied, built from source in place of the release beside `pins`."""
        level = HunkLevel(sha=culprit.sha)
        try:
            parent = history.first_parent(culprit.sha)
            if parent is None:
                return dataclasses.replace(level, reason=f"{culprit.sha[:10]} has no parent to compare its hunks with")
            hunks = collect_hunks(history.root, parent, target=culprit.sha)
        except UserError as exc:       # a shallow clone's edge, an empty commit, a submodule added
            return dataclasses.replace(level, reason=exc.message)
        level = dataclasses.replace(level, hunks=tuple(hunks))
        if len(hunks) < 2:
            return dataclasses.replace(level, reason="one hunk: the commit names it")
        by_id = {h.id: h for h in hunks}
        ends = (CommitSource(history, history.commit_info(parent)), CommitSource(history, culprit))

        def source(subset: frozenset[str]) -> Source:
            # the two ends are commits: their environments are the commit search's
            if len(subset) in (0, len(hunks)):
                return ends[bool(subset)]
            return PatchedSource(ends[0], tuple(by_id[i] for i in sorted(subset)))

        def base_text(path: str) -> str:
            shown = run_git(history.root, "show", f"{parent}:{path}", check=False)
            return shown.stdout.decode("utf-8", errors="replace") if shown.returncode == 0 else ""

        settings = dataclasses.replace(SearchSettings.of(self.config, "hunks"),
                                       max_probes=drill_probe_cap(search_probes, self.config.max_samples))
        decider = HunkDecider([h.id for h in hunks], group_hunks(hunks), settings, on_phase=self.progress.phase,
                              needs=hunk_needs(hunks, base_text), end_names=("the parent", "the culprit commit"))
        self.progress.phase(f"which hunk of {hunt.display}@{culprit.sha[:10]}: {len(hunks)} against its parent, "
                            "each subset built from source")

        def measure(batch) -> list[float | None]:
            out = []
            for m in batch:
                subset = decider.subset(m.index)
                label = f"{hunt.display}@{parent[:10]}+{len(subset)}h"
                value, reason = self._sample(pins, label, str(m.reason), f"hunks:{hunt.package}",
                                             source=source(subset))
                if value is None and m.reason == Purpose.CONTROL:
                    which = "the culprit commit" if subset else "its parent"
                    raise _DrillStopped(f"{which} cannot be measured: {reason}")
                out.append(value)
            return out

        try:
            decision = drive(decider, measure, slots=1)
        except _DrillStopped as stop:
            return dataclasses.replace(level, reason=str(stop))
        return dataclasses.replace(level, decision=decision, probes=decider.asked, reason=decision.reason)

    def _bisect(self, n: int, sample: Callable[[int, str], tuple[float | None, str | None]]
                ) -> tuple[SearchResult, list[tuple[int, str]]]:
        """The commit search over n ordered points (releases, commits), `sample(i, why)` measuring
        point i for the search's reason `why`; returns its result and the points it skipped, each
        with its reason."""
        skips: dict[int, str] = {}

        def measure(batch) -> list[float | None]:
            out = []
            for m in batch:
                value, reason = sample(m.index, m.reason)
                if value is None:
                    skips[m.index] = reason or "skipped"
                out.append(value)
            return out

        result = drive(CommitSearch(n, SearchSettings.of(self.config, "run")), measure, slots=1)
        return result, [(c.index, skips.get(c.index, "")) for c in result.candidates if c.verdict == CandidateCall.SKIP]

    # -- one sample ---------------------------------------------------------------------------------

    def _sample(self, pins: Mapping[str, str], label: str, note: str, namespace: str,
                source: Source | None = None) -> tuple[float | None, str | None]:
        """One sample of the project in the environment of exactly `pins`: the next one stored for
        this search (`namespace`), else a run of the probe in it (built on first use) under the
        busy-machine guard as `run`'s probes are (hunts/judging.py `SampleJudge.take`), stored
        at once with its load; a build that fails is a skip with its reason, stored too, never a
        slow run."""
        assert self._stored is not None and self._store is not None and self._judge is not None
        request = Request(self.project.candidate(self.builder.key(pins, source)), namespace=namespace)
        draw = self._stored.next(request)
        if draw is None:
            built = self.builder.build(pins, source)
            load = None
            if built.ok:
                retaken = len(self._judge.tally.retakes)
                executed, load = self._judge.take(request.candidate, functools.partial(
                    self.executor.run, self.spec, self.history.root, built.env(), label=request.candidate.short))
                outcome = executed.outcome
                self.probes += 1 + len(self._judge.tally.retakes) - retaken   # the re-taken ones ran too
            else:
                outcome = ProbeOutcome(sample=None, skip_reason=built.reason, exit_code=None, wall_seconds=0.0)
            self._store.add_outcome(self.key_for(request.candidate), request.candidate, outcome,
                                    hunt_id=self._hunt_id, arm=request.arm, load=load)
            self._stored.advance(request)
            value, reason, cached = outcome.sample.tok_s if outcome.sample else None, outcome.skip_reason, False
        else:
            value, reason, cached = draw.value, draw.skip_reason, draw.cached
        self.progress.sample(label, value, reason, cached, probes=self.probes,
                             cached_total=self._stored.cached_used, note=note)
        return value, reason
