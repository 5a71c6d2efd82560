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
    -> the report (render/report_deps.py)

One probe at a time, in the project's directory, with the candidate's virtualenv first on PATH
(so `python` is its interpreter). Samples are not stored: a killed deps hunt starts again (its
environments stay built).
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from regressbisect.config import HuntConfig
from regressbisect.deps.builds import EnvBuilder, IndexOptions
from regressbisect.deps.envs import Environment, apply, diff
from regressbisect.deps.needs import change_needs, installed_requirements
from regressbisect.deps.releases import ReleaseRule, ReleasesUnavailable, releases_between
from regressbisect.errors import ExitCode, UserError
from regressbisect.git.history import History
from regressbisect.git.worktrees import pool_root
from regressbisect.hunts.common import VERDICT_EXIT, hunting
from regressbisect.probe.executors import make_executor
from regressbisect.probe.runner import probe_spec, run_probe
from regressbisect.probe.venvs import base_interpreter
from regressbisect.render.progress import HuntProgress
from regressbisect.render.report_deps import ReleaseHunt, deps_report
from regressbisect.samples import ProbeOutcome
from regressbisect.search.bisect import CommitSearch, SearchSettings
from regressbisect.search.driver import drive
from regressbisect.search.hunkdecide import HunkDecider, HunkDecision
from regressbisect.search.hunks.runnable import Purpose
from regressbisect.search.hunks.subsets import Joined, TestedSubset


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


class DepsHunt:
    """One `regressbisect deps GOOD_ENV BAD_ENV`."""

    def __init__(self, history: History, config: HuntConfig, good: Environment, bad: Environment, *,
                 index: IndexOptions | None = None, release_rule: ReleaseRule | None = None,
                 python: str | None = None, progress: HuntProgress | None = None,
                 probe_runner: Callable[..., ProbeOutcome] = run_probe, envs_root: Path | None = None):
        """envs_root: where the candidate environments are built (default: beside the slots'
        venvs, `<common_dir>/regressbisect/venvs`, which `clean` removes)."""
        if config.executor != "local":
            raise UserError("deps runs its probes on this machine only: its environments are built here "
                            "(drop --executor)")
        self.changes = diff(good, bad)
        if not self.changes:
            raise UserError(f"{good.source} and {bad.source} pin the same versions: no package changed")
        self.history = history
        self.good, self.bad = good, bad
        self.config = dataclasses.replace(config, preload="off")   # a preload server holds the tool's packages
        self.index, self.release_rule = index or IndexOptions(), release_rule or ReleaseRule()
        self.progress = progress or HuntProgress(quiet=True)
        self.builder = EnvBuilder(envs_root or pool_root(history) / "venvs", python or base_interpreter(), self.index)
        self.executor = make_executor(self.config, history, progress=self.progress, probe_runner=probe_runner)
        self.spec = dataclasses.replace(probe_spec(self.config), instrument=False, work=False)
        self.by_name = {c.name: c for c in self.changes}
        self.needs: dict[str, frozenset[str]] = {}
        self.probes = 0
        self.crashes: dict[frozenset[str], str] = {}
        """Subsets of the changes whose environment did not build or whose probe did not run: why."""

    def run(self) -> DepsOutcome:
        with hunting(self.executor):
            started = time.perf_counter()
            self._read_needs()
            decision = self._which_packages()
            releases = [self._which_release(culprit.hunks, name) for culprit in decision.culprits
                        for name in blamed(culprit)]
            report = deps_report(
                good=self.good, bad=self.bad, changes=self.changes, needs=self.needs, decision=decision,
                releases=releases, exit_code=int(VERDICT_EXIT[decision.verdict]), unit=self.config.unit,
                crashes=self.crashes, probes=self.probes, builds=self.builder.builds,
                build_seconds=self.builder.build_seconds, wall_seconds=time.perf_counter() - started,
                settings=self.config.search_key("hunks"))
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
                              needs=self.needs)

        def measure(batch) -> list[float | None]:
            out = []
            for m in batch:
                subset = decider.subset(m.index)
                changes = [self.by_name[n] for n in sorted(subset)]
                label = "GOOD" if not subset else "BAD" if len(subset) == len(self.changes) else \
                    "GOOD+" + ",".join(c.display or c.name for c in changes)
                value, reason = self._sample(apply(self.good, changes), label, str(m.reason))
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
            versions = releases_between(name, change.good, change.bad, self.index, self.release_rule)
        except ReleasesUnavailable as exc:
            return dataclasses.replace(hunt, reason=f"its releases could not be listed: {exc}")
        hunt = dataclasses.replace(hunt, versions=tuple(versions))
        if len(versions) == 2:
            return dataclasses.replace(hunt, version=change.bad,
                                       reason="no release between the two: the first with the change is BAD's")
        culprits = [self.by_name[n] for n in sorted(group)]
        self.progress.phase(f"which release of {hunt.display}: {len(versions) - 2} between "
                            f"{change.good} and {change.bad}, bisected")
        skips: dict[int, str] = {}

        def measure(batch) -> list[float | None]:
            out = []
            for m in batch:
                pins = apply(self.good, culprits, at={name: versions[m.index]})
                value, reason = self._sample(pins, f"{hunt.display}=={versions[m.index]}", m.reason)
                if value is None:
                    skips[m.index] = reason or "skipped"
                out.append(value)
            return out

        search = CommitSearch(len(versions), SearchSettings.of(self.config, "run"))
        result = drive(search, measure, slots=1)
        skipped = tuple((versions[c.index], skips.get(c.index, "")) for c in result.candidates if c.verdict == "skip")
        first = min(result.culprits, key=lambda c: c.first_bad, default=None)
        return dataclasses.replace(hunt, result=result, skipped=skipped,
                                   version=versions[first.first_bad] if first is not None else None,
                                   reason=result.reason)

    # -- one sample ---------------------------------------------------------------------------------

    def _sample(self, pins: Mapping[str, str], label: str, note: str) -> tuple[float | None, str | None]:
        """One run of the probe in the environment of exactly `pins` (built on first use); a
        build that fails is a skip with its reason, never a slow run."""
        built = self.builder.build(pins)
        if not built.ok:
            value, reason = None, built.reason
        else:
            outcome = self.executor.run(self.spec, self.history.root, built.env(), label=label).outcome
            self.probes += 1
            value = outcome.sample.tok_s if outcome.sample is not None else None
            reason = outcome.skip_reason
        self.progress.sample(label, value, reason, False, probes=self.probes, cached_total=0, note=note)
        return value, reason
