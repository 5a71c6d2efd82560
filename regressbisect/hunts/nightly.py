"""Nightly: measure the branch tip, keep the throughput series, find change points, hunt them.

One night:
  1. hardware sanity check (doctor) against this machine's own history; a slow or busy machine's
     night is flagged: its samples are stored apart and never used as evidence;
  2. measure the tip and commits the store has not seen (newest first, up to --max-new),
     interleaved, `samples_per_commit` each - re-running a night re-measures nothing;
  3. the series (median tok/s per first-parent commit, main arm only) -> change points with a
     maintained library (changepoints.py);
  4. each NEW change point in the hunted direction is bisected by a CommitHunt between the last
     commit before it and the first after it (with `paths`, `nightly -- PATHS`, a hunt of the
     commits touching them; a point whose range has none is not hunted, and says so);
  5. the report: JSON, Markdown, HTML and PNG plots in --report-dir.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from regressbisect.config import (NIGHTLY_BRANCH, NIGHTLY_LOOKBACK, NIGHTLY_MAX_NEW, NIGHTLY_SAMPLES_PER_COMMIT,
                                  Executor, HuntConfig)
from regressbisect.errors import ExitCode, UserError
from regressbisect.git.history import CommitInfo, History
from regressbisect.hunts.commits import CommitHunt
from regressbisect.hunts.common import hunting, key_for
from regressbisect.hunts.sampling import Request
from regressbisect.hunts.skeleton import Hunt
from regressbisect.jsonio import dumps
from regressbisect.machine.doctor import HealthStatus
from regressbisect.probe.executors import ProbeExecutor
from regressbisect.probe.isolation import Isolation
from regressbisect.probe.runner import run_probe
from regressbisect.render.progress import HuntProgress
from regressbisect.render.report_json import nightly_report
from regressbisect.samples import Arm, Candidate, ProbeOutcome, SampleKey
from regressbisect.search import stats
from regressbisect.search.changepoints import ChangePointSettings, detect
from regressbisect.search.verdicts import Verdict
from regressbisect.store import Store


@dataclass(frozen=True)
class NightlySettings:
    """How a night is spent."""

    branch: str = NIGHTLY_BRANCH
    """Branch whose tip is measured."""
    samples_per_commit: int = NIGHTLY_SAMPLES_PER_COMMIT
    """Samples per measured commit (interleaved across the night's commits)."""
    max_new: int = NIGHTLY_MAX_NEW
    """Commits measured per night, the tip included, newest first (unseen ones only)."""
    lookback: int = NIGHTLY_LOOKBACK
    """First-parent commits from the tip that form the series."""
    changepoints: ChangePointSettings = field(default_factory=ChangePointSettings)
    """Minimum magnitude and significance of a change point."""
    hunt: bool = True
    """Bisect each new change point automatically."""
    paths: tuple[str, ...] = ()
    """`nightly -- PATHS`: each hunt's candidates are the commits touching these (git pathspecs,
    from the top of the repository), as `run GOOD BAD -- PATHS`; () for every commit."""


NOT_HUNTED = "no commit of its range touches PATHS"
"""Why a change point of a night limited to PATHS was not hunted (its `not_hunted`)."""

NIGHT_KEPT = "the night's samples are stored, and the exit code is the night's"
"""What a report file that could not be written at the end of a night leaves standing."""


@dataclass(frozen=True)
class NightOutcome:
    report: dict[str, Any]
    exit_code: ExitCode
    report_files: tuple[Path, ...] = ()


class Nightly(Hunt):
    """One night (or, with `replay`, a sequence of past nights) on one repository."""

    def __init__(self, history: History, config: HuntConfig, settings: NightlySettings, *,
                 store_path: Path | None = None, report_dir: Path | None = None,
                 progress: HuntProgress | None = None,
                 probe_runner: Callable[..., ProbeOutcome] = run_probe,
                 machine_check: Callable[[], Any] | None = None,
                 executor: ProbeExecutor | None = None):
        self.settings = settings
        self.report_dir = report_dir
        self.machine_check = machine_check
        # One executor for the night: its measurements and its hunts share the Slurm preflight.
        super().__init__(history, config, store_path=store_path, progress=progress, probe_runner=probe_runner,
                         executor=executor)
        self._isolation: Isolation | None = None  # set by the night's measuring; in its report
        self._measurement: dict[str, Any] | None = None   # the same

    # -- public --------------------------------------------------------------------------------

    def run(self, tip_ref: str | None = None) -> NightOutcome:
        with hunting(self.executor):
            return self._night(tip_ref)

    def _night(self, tip_ref: str | None) -> NightOutcome:
        tip = self.history.resolve(tip_ref or self.settings.branch)
        if self.settings.paths:   # a pathspec git refuses stops the night before it measures
            self.history.touching(tip, tip, self.settings.paths)
        commits = self._lineage(tip)
        health = self._check_machine()
        flagged = health["status"] in (HealthStatus.SLOW, HealthStatus.BUSY)
        measured = self._measure(commits, flagged)
        series = self._series(commits)
        points = self._change_points(series)
        hunts, new_alarms = self._hunt(points)
        report = nightly_report(
            unit=self.config.unit, tip=tip, date=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            measured=measured, flagged=flagged, machine=health, series=series, change_points=points,
            new_alarms=new_alarms, hunts=hunts, settings=self._settings_json(), isolation=self._isolation,
            env_facts=self.env_facts, measurement=self._measurement).to_json()
        files = self._write_report(report, tip)
        code = ExitCode.NIGHTLY_REGRESSION if new_alarms else ExitCode.OK
        return NightOutcome(report=report, exit_code=code, report_files=files)

    def replay(self, nights: int) -> list[NightOutcome]:
        """Re-live the last `nights` commits of the branch as one night each (oldest first)."""
        tip = self.history.resolve(self.settings.branch)
        lineage = self._lineage(tip)
        if nights < 1 or nights > len(lineage):
            raise UserError(f"--replay {nights}: the branch has {len(lineage)} commits within "
                            f"--lookback {self.settings.lookback}; pick 1..{len(lineage)}")
        return [self.run(c.sha) for c in lineage[-nights:]]

    # -- steps ---------------------------------------------------------------------------------

    def _lineage(self, tip: str) -> list[CommitInfo]:
        """First-parent commits ending at `tip`, oldest first, at most `lookback`."""
        return self.history.lineage(tip, self.settings.lookback)

    def _check_machine(self) -> dict[str, Any]:
        from regressbisect.machine import doctor

        if self.config.executor == Executor.SLURM and self.machine_check is None:
            # This process runs on a login node: its own load says nothing about the job nodes.
            return {"status": HealthStatus.NOT_CHECKED, "check": None,
                    "reasons": ["probes run as Slurm jobs; the submitting machine is not the one measured"]}
        check = (self.machine_check or doctor.run_check)()
        with Store(self.store_path) as store:
            past = store.machine_checks(self.env_fingerprint)
            history = past.drop(columns="created_at").to_dict("records") if len(past) else []
            health = doctor.assess(check, history)
            store.record_machine_check(self.env_fingerprint, doctor.check_to_json(check))
        return {"status": health.status, "reasons": list(health.reasons),
                "check": doctor.check_to_json(check)}

    @property
    def config_hash(self) -> str:
        # the night's series is measured one commit at a time (its hunts use the configured slots)
        return self.config.probe.alone().config_hash()

    def key_for(self, candidate: Candidate) -> SampleKey:
        return key_for(self.history, candidate, config_hash=self.config_hash,
                       env_fingerprint=self.env_fingerprint)

    def _measure(self, commits: Sequence[CommitInfo], flagged: bool) -> list[str]:
        """Measure the tip and unseen commits; returns the shas measured tonight."""
        with Store(self.store_path) as store:
            seen = set(store.series(config_hash=self.config_hash,
                                    env_fingerprint=self.env_fingerprint)["commit"])
        tip = commits[-1].sha
        todo = [tip] + [c.sha for c in reversed(commits[:-1]) if c.sha not in seen]
        todo = list(dict.fromkeys(todo))[: self.settings.max_new]
        self.progress.phase(f"nightly: measuring {len(todo)} commit(s) ending at {tip[:10]}"
                            + (" (machine flagged: samples kept apart)" if flagged else ""))
        # the meter's start-up env is the night's hunts' too: their samples and these share keys
        with self.rig(one_lane=True) as rig:
            source = rig.source(self, self.key_for)
            self._isolation = source.isolation
            # Round-robin over the night's commits: drift during the night spreads evenly.
            for _ in range(self.settings.samples_per_commit):
                for sha in todo:
                    (draw,) = source.draw_many([Request(Candidate(sha), namespace="nightly", flagged=flagged)])
                    self.progress.sample(sha[:10], draw.value, draw.skip_reason, draw.cached,
                                         probes=source.probes_run, cached_total=source.cached_used,
                                         note="nightly")
            self._measurement = source.measurement_json()
        return todo

    def _series(self, commits: Sequence[CommitInfo]) -> list[dict[str, Any]]:
        """The lineage's measured commits, in first-parent order: main-arm samples; a commit
        measured only on flagged nights (machine check failed) is shown from its flagged samples
        with "flagged": true, and is never evidence for a change point."""
        rows = []
        with Store(self.store_path) as store:
            for c in commits:
                key = self.key_for(Candidate(c.sha))
                flagged = False
                values = [s.tok_s for s in store.samples(key, instrumented=False, arm=Arm.MAIN)]
                if not values:
                    flagged = True
                    values = [s.tok_s for s in store.samples(key, instrumented=False, arm=Arm.FLAGGED)]
                if not values:
                    continue
                summary = stats.summarize(values)
                rows.append({"commit": c.sha, "subject": c.subject, "date": c.date, "n": summary.n,
                             "median_tok_s": summary.median, "ci95": list(summary.ci95),
                             "flagged": flagged})
        return rows

    def _change_points(self, series: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Change points of the unflagged rows; each point's index is its row in `series`."""
        evidence = [i for i, row in enumerate(series) if not row["flagged"]]
        values = [series[i]["median_tok_s"] for i in evidence]
        points = detect(values, self.settings.changepoints, direction=self.config.direction)
        out = []
        for p in points:
            index, before = evidence[p.index], evidence[p.index - 1]
            out.append({"index": index, "commit": series[index]["commit"],
                        "before_commit": series[before]["commit"],
                        "before": p.before, "after": p.after, "change": p.change,
                        "change_pct": round(100 * p.change, 3), "p_value": p.p_value, "not_hunted": None})
        return out

    def _hunt(self, points: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Bisect each change point once; a point hunted on an earlier night is only reported."""
        hunts: list[dict[str, Any]] = []
        new_alarms: list[dict[str, Any]] = []
        for point in points:
            previous = self._finished_hunt(point["before_commit"], point["commit"])
            if previous is not None:
                hunts.append({**previous, "first_reported": False})
                continue
            if not self.settings.hunt:
                new_alarms.append(point)
                continue
            paths = self.settings.paths
            if paths and not self.history.touching(point["before_commit"], point["commit"], paths):
                # by the user's word no commit of the range can have made the step: nothing to hunt
                point["not_hunted"] = NOT_HUNTED
                self.progress.phase(f"nightly: change point {point['change_pct']:+.1f}% at {point['commit'][:10]}: "
                                    f"not hunted, {NOT_HUNTED} ({' '.join(paths)})")
                continue
            self.progress.phase(f"nightly: change point {point['change_pct']:+.1f}% at "
                                f"{point['commit'][:10]}: hunting {point['before_commit'][:10]}..{point['commit'][:10]}")
            hunt = CommitHunt(self.history, point["before_commit"], point["commit"], self.config,
                              store_path=self.store_path, progress=self.progress,
                              executor=self.executor, paths=self.settings.paths)
            outcome = hunt.run()
            hunts.append({**outcome.report, "first_reported": True})
            # an ambiguous step is a regression too: only which of its commits is unknown
            if outcome.report["verdict"] in (Verdict.CULPRITS, Verdict.AMBIGUOUS):
                new_alarms.append(point)
        return hunts, new_alarms

    def _finished_hunt(self, good: str, bad: str) -> dict[str, Any] | None:
        with Store(self.store_path) as store:
            table = store.hunts()
            if table.empty:
                return None
            done = table[(table["kind"] == "commits") & (table["good"] == good) & (table["bad"] == bad)
                         & (table["config_hash"] == self.config.probe.config_hash())   # a hunt's, with its slots
                         & table["finished_at"].notna()]
            # the last such hunt over the same PATHS (`run GOOD BAD -- PATHS` is another hunt)
            for hunt_id in reversed(done["id"].tolist()):
                report = store.hunt_report(int(hunt_id))
                if report is not None and list(report.get("paths") or ()) == list(self.settings.paths):
                    return report
            return None

    def _settings_json(self) -> dict[str, Any]:
        """The report's `settings`: how the night was spent."""
        return {"branch": self.settings.branch, "samples_per_commit": self.settings.samples_per_commit,
                "max_new": self.settings.max_new,
                "min_magnitude": self.settings.changepoints.min_magnitude,
                "alpha": self.settings.changepoints.alpha,
                "min_segment": self.settings.changepoints.min_segment,
                "paths": list(self.settings.paths)}

    def _write_report(self, report: dict[str, Any], tip: str) -> tuple[Path, ...]:
        """The night's JSON, Markdown and HTML in --report-dir; () when there is none or it
        could not be written (one line says so: the night's answer and samples stand)."""
        if self.report_dir is None:
            return ()
        from regressbisect.render import render_html, render_markdown
        from regressbisect.render.outputs import write_text, written_after_work
        from regressbisect.render.report_load import load_report

        out = self.report_dir
        stem = f"nightly-{tip[:10]}"
        typed = load_report(report)

        def write() -> tuple[Path, ...]:
            return (write_text(out / f"{stem}.json", dumps(report)),
                    write_text(out / f"{stem}.md", render_markdown(typed)),
                    render_html(typed, out / stem))

        files = written_after_work("--report-dir", out, write, kept=NIGHT_KEPT)
        return files or ()
