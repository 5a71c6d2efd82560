"""The JSON report of a hunt (schema in docs/report-schema.md): data only; `render` turns it into text/HTML.

Not named report.py: `regressbisect.report` is the one-line helper user scripts call.
"""
from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

from regressbisect.config import run_flags
from regressbisect.render.report_parts import (ABSENT, Absent, AmbiguousStep, DrillReport, BothEnds, Candidate, Endpoints,
                                               Established, Footprint, HuntFacts, Instrumentation, Merge, Night,
                                               NightlyVerdict, NotMeasuredCommit, Overhead, OverheadVerdict,
                                               PossibleCommit, Range, RefutedStep, SeriesRow, ShapeChange, Side, Summary,
                                               Suspect, ChangePoint, Isolation, Measurement, fields_json, flat, from_json,
                                               hunt_facts,
                                               isolation_part)
from regressbisect.search.verdicts import Verdict
from regressbisect.render.work import culprit_work, side_json, split_counts
from regressbisect.version import tool_identity

SCHEMA = 3
"""2: `verdict` 'none' became 'not-localised' (exit 5) or 'undecided' (exit 6); `exit_code`,
`verdict_reason`, `reproduced`, `suspects`, `refuted_steps` and `unresolved_ranges` were added.
3: counters come from the counting arm (its host ms are a share within it, never a time against
tok/s); `culprits[].work`, `endpoint_work` and `cost.counting_arm` were added."""


def report_header(kind: str, unit: str) -> dict[str, Any]:
    """The fields every JSON report starts with, whichever command wrote it. `unit` is the
    metric's unit for display; the fields keep their `tok_s` names whatever it is."""
    return {"schema": SCHEMA, "kind": kind, **tool_identity(), "unit": unit}


@dataclass(frozen=True)
class Report:
    """A JSON report: the header (report_header), then the kind's fields in their order. Each
    kind's dataclass is the definition of its report; docs/report-schema.md is tested against it
    (tests/test_report_schema.py)."""

    KIND: ClassVar[str]
    unit: str
    """The metric's unit (a header field)."""

    def to_json(self) -> dict[str, Any]:
        body = fields_json(self)
        body.pop("unit")
        return {**report_header(self.KIND, self.unit), **body}


def summary_part(summary) -> Summary | None:
    """A commit's samples (`stats.Summary`) as the report gives them; None: no samples."""
    if summary is None:
        return None
    return Summary(median_tok_s=summary.median, ci95=list(summary.ci95), n=summary.n, cv=summary.cv)


def _pct(x: float) -> float:
    return round(100.0 * x, 3)


def merge_part(parents: Sequence[str], flags: Sequence[str] = ()) -> Merge | None:
    """A culprit that is a merge: its parents, and per merged branch the hunt of that branch's own
    commits. The search follows first parents, so a merge is one step (its first parent to it);
    `git bisect` would go down the branch. The branch's commits lie between the merge base and
    the merged parent, so the follow-up hunts that range; it measures them without what the
    first parent brought since the merge base, so it reproduces the step only when the branch
    alone makes it (docs/search.md, "Merges"); with `flags`, this hunt's (config.run_flags), it
    measures as this hunt did. None for a commit with one parent."""
    if len(parents) < 2:
        return None
    first = parents[0]
    options = "".join(f"{shlex.quote(word)} " for word in flags)
    return Merge(parents=list(parents),
                 follow_up=[f"regressbisect run {options}$(git merge-base {first} {other}) {other}"
                            for other in parents[1:]])


def _step_json(c) -> dict[str, Any]:
    """A step's size, interval and share of the gap (culprits, ambiguous steps)."""
    return {"step_pct": _pct(c.step), "ci95_pct": [_pct(c.step_ci95[0]), _pct(c.step_ci95[1])],
            "step_tok_s": c.step_tok_s, "share_of_gap": round(c.share_of_gap, 4)}


def ambiguous_step(commits: Sequence, c, skip_reasons: Mapping[str, Sequence[str]]) -> AmbiguousStep:
    """A step whose ends are not adjacent: the commits between could not be measured, so it is any
    of them or the first commit measured at the new level (`git bisect`'s "could be any of"); no
    single commit is named. Each possible commit says why it is possible."""
    possible = []
    for i in range(c.last_good + 1, c.first_bad + 1):
        commit = commits[i]
        if i == c.first_bad:
            why = "measured at the new level, but its parent could not be measured"
        else:
            reasons = list(dict.fromkeys(skip_reasons.get(commit.sha) or ()))
            why = "skipped: " + ("; ".join(reasons) if reasons else "could not be measured")
        possible.append(PossibleCommit(commit=commit.sha, subject=commit.subject, index=i, why=why))
    return AmbiguousStep(last_good=commits[c.last_good].sha, first_bad=commits[c.first_bad].sha,
                         **_step_json(c), possible_commits=possible)


def _skip_reasons(store_path: Path, hunt_id: int) -> dict[str, list[str]]:
    """The hunt's stored skip reasons per commit ({} when the store cannot be read: the report
    then says only that a commit could not be measured)."""
    from regressbisect.errors import UserError
    from regressbisect.store import Store

    try:
        store = Store(store_path, read_only=True)
    except UserError:
        return {}
    try:
        return store.skip_reasons_by_commit(hunt_id)
    finally:
        store.close()


@dataclass(frozen=True)
class CommitCulprit:
    """A named commit (docs/report-schema.md, "A culprit")."""

    commit: str
    parent: str
    subject: str
    index: int
    step_pct: float
    ci95_pct: list[float]
    step_tok_s: float
    share_of_gap: float
    last_good: str
    counters_before: dict[str, float]
    counters_after: dict[str, float]
    work: dict[str, Any] | None
    merge: Merge | None
    possible_commits: list[str] | Absent = ABSENT
    """Only for the step over the whole range of an all-skipped hunt."""
    hunks: DrillReport | Absent = ABSENT
    """Only with --drill: the hunt of its hunks (render/report_hunks.drill_report)."""

    def to_json(self) -> dict[str, Any]:
        return fields_json(self)


@dataclass(frozen=True)
class CommitReport(Report):
    """The report of `regressbisect run` (docs/report-schema.md, `kind: "commits"`)."""

    KIND: ClassVar[str] = "commits"
    JSON_ORDER: ClassVar[tuple[str, ...]] = (
        "good", "bad", "range_length", "verdict", "verdict_reason", "reproduced", "endpoints", "gap_pct",
        "unexplained_pct", "unexplained_share", "unexplained_share_ci95", "culprits", "ambiguous_steps",
        "suspects", "established", "refuted_steps", "unresolved_ranges", "sides", "endpoint_counters",
        "endpoint_work", "candidates", "paths", "not_measured", "footprint", "interfered_runs", "shape_change",
        "probes", "cached_samples", "instrumentation", "instrumentation_overhead_pct", "isolation", "settings",
        "environment", "store", "hunt_id", "measurement", "noise_prior", "exit_code", "continue_command", "cost",
        "from_store_only")
    """The order of its JSON keys (HuntFacts' among its own), as every report of this kind was written."""
    good: str
    bad: str
    range_length: int
    verdict: Verdict
    verdict_reason: str
    reproduced: bool
    endpoints: Endpoints
    gap_pct: float
    unexplained_pct: float
    unexplained_share: float
    unexplained_share_ci95: list[float]
    culprits: list[CommitCulprit]
    ambiguous_steps: list[AmbiguousStep]
    suspects: list[Suspect]
    established: Established | None
    refuted_steps: list[RefutedStep]
    unresolved_ranges: list[Range]
    sides: list[Side]
    endpoint_counters: BothEnds
    endpoint_work: BothEnds
    candidates: list[Candidate]
    paths: list[str]
    not_measured: list[NotMeasuredCommit]
    footprint: Footprint | None
    interfered_runs: int
    shape_change: ShapeChange | None
    settings: dict[str, Any]
    store: str
    noise_prior: dict[str, Any]
    exit_code: int
    facts: HuntFacts = flat()


def shape_part(shape) -> ShapeChange | None:
    """GOOD and BAD differed in shape (`search.control.ShapeChange`): on which side of their level
    the runs whose share changed lie, each end's share of them, their factor and the change of the
    mean of every run, in percent."""
    if shape is None:
        return None
    return ShapeChange(side="below" if shape.side < 0 else "above", good_share=round(shape.good_share, 4),
                       bad_share=round(shape.bad_share, 4),
                       factor=round(shape.factor, 4) if math.isfinite(shape.factor) else None,
                       mean_change_pct=_pct(shape.change))


def commit_report(*, commits: Sequence, result, counters: Mapping[int, Mapping[str, float]], plan,
                  probes: int, builds: int | None, cached: int, config, env_facts: Mapping[str, Any],
                  store_path: Path, hunt_id: int, exit_code: int, measurement: dict[str, Any],
                  noise_prior: dict[str, Any], continue_command: str | None, cost: dict[str, Any],
                  cached_by_index: Mapping[int, int] | None = None, isolation=None,
                  drills: Mapping[str, Any] | None = None, range_commits: Sequence | None = None,
                  paths: Sequence[str] = (), footprint: Mapping[str, Any] | None = None,
                  not_measured_reason: str | None = None) -> CommitReport:
    """The report of a commit hunt from the search result, the counters and what the hunt paid
    (`cost`, `measurement`); `drills`: each culprit's hunks by its sha (--drill). `commits` are
    the candidates the search saw; `range_commits` the whole first-parent range (default: the
    same), whose others touch none of `paths` (`run GOOD BAD -- PATHS`), or none of what the probe
    reads (`footprint`, hunts/footprints.py: then `not_measured_reason` is its reason), and were
    not measured."""
    range_commits = list(range_commits if range_commits is not None else commits)
    cached_by_index = cached_by_index or {}
    drills = drills or {}
    culprits = []
    for c in result.culprits:
        first_bad = commits[c.first_bad]
        # the whole range of an all-skipped hunt: any of its commits may be the culprit
        possible = ([commits[i].sha for i in range(c.last_good + 1, c.first_bad + 1)]
                    if c.first_bad - c.last_good > 1 else ABSENT)
        culprits.append(CommitCulprit(
            commit=first_bad.sha,
            parent=commits[c.first_bad - 1].sha,
            subject=first_bad.subject,
            index=c.first_bad,
            **_step_json(c),
            last_good=commits[c.last_good].sha,
            counters_before=split_counts(counters.get(c.last_good))[0],
            counters_after=split_counts(counters.get(c.first_bad))[0],
            work=culprit_work(counters.get(c.last_good), counters.get(c.first_bad), _pct(c.step), config.unit),
            merge=merge_part(first_bad.parents, run_flags(config)),
            possible_commits=possible,
            hunks=drills.get(first_bad.sha, ABSENT)))
    ambiguous = [ambiguous_step(commits, c, _skip_reasons(store_path, hunt_id) if result.ambiguous else {})
                 for c in getattr(result, "ambiguous", ())]
    candidates = []
    for v in result.candidates:
        commit = commits[v.index]
        candidates.append(Candidate(index=v.index, commit=commit.sha, subject=commit.subject, patch=None,
                                    n=v.n, cached=cached_by_index.get(v.index, 0), verdict=v.verdict,
                                    median_tok_s=v.summary.median if v.summary else None,
                                    ci95=list(v.summary.ci95) if v.summary else None,
                                    interfered_tok_s=list(v.interfered)))
    not_measured = _not_measured(range_commits, commits, {v.index: v.verdict for v in result.candidates},
                                 reason=not_measured_reason or NOT_MEASURED_REASON)
    overhead = None
    if plan.overhead is not None:
        o = plan.overhead
        overhead = Overhead(value=_pct(-o.change), ci95=[_pct(-o.ci95[1]), _pct(-o.ci95[0])],
                            verdict=OverheadVerdict(o.verdict))
    good_summary, bad_summary = result.endpoints
    return CommitReport(
        unit=config.unit,
        good=commits[0].sha,
        bad=commits[-1].sha,
        range_length=len(range_commits),
        verdict=result.verdict,
        verdict_reason=result.reason,
        reproduced=result.reproduced,
        endpoints=Endpoints(good=summary_part(good_summary), bad=summary_part(bad_summary)),
        gap_pct=_pct(result.gap),
        unexplained_pct=_pct(result.unexplained * result.gap) if result.culprits else _pct(result.gap),
        unexplained_share=round(result.unexplained, 4),
        unexplained_share_ci95=[round(x, 4) for x in result.unexplained_ci95],
        culprits=culprits,
        ambiguous_steps=ambiguous,
        suspects=[Suspect(commit=commits[c.first_bad].sha, last_good=commits[c.last_good].sha, **_step_json(c))
                  for c in result.suspects],
        established=established_part(commits, getattr(result, "established", None)),
        refuted_steps=[RefutedStep(last_good=commits[a].sha, first_bad=commits[b].sha) for a, b in result.refuted],
        unresolved_ranges=[Range(from_=commits[a].sha, to=commits[b].sha) for a, b in result.unresolved],
        sides=[Side(from_=commits[side.lo].sha, to=commits[side.hi].sha, outcome=side.outcome,
                    ruled_out_pct=_pct(side.ruled_out), priced=side.priced) for side in result.sides],
        endpoint_counters=BothEnds(good=split_counts(counters.get(0))[0],
                                   bad=split_counts(counters.get(len(commits) - 1))[0]),
        endpoint_work=BothEnds(good=side_json(counters.get(0)), bad=side_json(counters.get(len(commits) - 1))),
        candidates=candidates,
        paths=list(paths),
        not_measured=not_measured,
        footprint=Footprint(**footprint) if footprint is not None else None,
        interfered_runs=sum(len(v.interfered) for v in result.candidates),
        shape_change=shape_part(getattr(result, "shape", None)),
        settings={**config.search_key("run"), "slots": config.slots, "overlap": config.overlap,
                  "tokens": config.probe.tokens, "cmd": config.probe.cmd},
        store=str(store_path),
        noise_prior=noise_prior,
        exit_code=exit_code,
        facts=hunt_facts(
            probes=probes, builds=builds, cached=cached,
            instrumentation=Instrumentation(mode=config.instrument, tok_s_from_shimmed_runs=plan.main_instrumented,
                                            note=plan.note, overhead_pairs=plan.overhead_pairs,
                                            counters_available=plan.counters_available),
            overhead=overhead, isolation=isolation, hunt_id=hunt_id, env_facts=env_facts, measurement=measurement,
            cost=cost, continue_command=continue_command))


NOT_MEASURED_REASON = "not measured: touches none of PATHS"


def _not_measured(range_commits: Sequence, candidates: Sequence, verdicts: Mapping[int, str],
                  reason: str = NOT_MEASURED_REASON) -> list[NotMeasuredCommit]:
    """The commits of the range that were no candidate (they touch none of PATHS, or of what the
    probe reads): each shares the verdict of the candidate before it, whose code there it keeps;
    none is ever blamed."""
    index_of = {c.sha: i for i, c in enumerate(candidates)}
    out: list[NotMeasuredCommit] = []
    before = 0
    for position, commit in enumerate(range_commits):
        if commit.sha in index_of:
            before = index_of[commit.sha]
            continue
        out.append(NotMeasuredCommit(commit=commit.sha, subject=commit.subject, position=position,
                                     reason=reason, same_as=candidates[before].sha, verdict=verdicts.get(before)))
    return out


@dataclass(frozen=True)
class NightlyReport(Report):
    """The report of `regressbisect nightly` (docs/report-schema.md, `kind: "nightly"`)."""

    KIND: ClassVar[str] = "nightly"
    good: str
    bad: str
    verdict: NightlyVerdict
    night: Night
    machine: dict[str, Any]
    """`{"status", "reasons", "check"}` (a Slurm night writes `check` before `reasons`)."""
    series: list[SeriesRow]
    change_points: list[ChangePoint]
    new_alarms: list[str]
    hunts: list[dict[str, Any]]
    """Each change point's hunt: a commit report's JSON plus `first_reported`."""
    culprits: list[dict[str, Any]]
    settings: dict[str, Any]
    isolation: Isolation | None
    environment: dict[str, Any]
    measurement: Measurement | None


def nightly_report(*, unit: str, tip: str, date: str, measured: Sequence[str], flagged: bool,
                   machine: dict[str, Any], series: list[dict[str, Any]], change_points: list[dict[str, Any]],
                   new_alarms: Sequence[Mapping[str, Any]], hunts: list[dict[str, Any]],
                   settings: dict[str, Any], isolation, env_facts: Mapping[str, Any],
                   measurement: dict[str, Any] | None) -> NightlyReport:
    """A night's report: its series, change points and hunts (each a commit report plus
    `first_reported`); `new_alarms`: the change points first reported tonight."""
    culprits = [c for h in hunts for c in h.get("culprits", [])]
    return NightlyReport(
        unit=unit,
        good=series[0]["commit"] if series else tip, bad=tip,
        verdict=NightlyVerdict.CULPRITS if culprits else NightlyVerdict.NONE,
        night=Night(tip=tip, date=date, measured=list(measured), flagged=flagged),
        machine=machine,
        series=[SeriesRow(**row) for row in series],
        change_points=[ChangePoint(**point) for point in change_points],
        new_alarms=[p["commit"] for p in new_alarms],
        hunts=hunts,
        culprits=culprits,
        settings=settings,
        isolation=isolation_part(isolation),
        environment=dict(env_facts),
        measurement=from_json(Measurement, measurement) if measurement is not None else None)


def established_part(commits: Sequence, step) -> Established | None:
    """An undecided hunt's leading step (`bisect.LeadingStep`): its two commits, the bracket it
    was searched in, its posterior probability and the two commits' tok/s (None: no such step)."""
    if step is None:
        return None
    return Established(last_good=commits[step.last_good].sha, first_bad=commits[step.first_bad].sha,
                       last_good_index=step.last_good, first_bad_index=step.first_bad,
                       bracket=Range(from_=commits[step.lo].sha, to=commits[step.hi].sha),
                       probability=None if math.isnan(step.mass) else round(step.mass, 4),
                       before=summary_part(step.before), after=summary_part(step.after),
                       confirmed_by_pairs=step.confirmed)
