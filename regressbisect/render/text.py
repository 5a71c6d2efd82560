"""Plain-text rendering for the terminal: the candidate table and the end-of-hunt summary."""
from __future__ import annotations

from typing import Any, Mapping

from tabulate import tabulate

from regressbisect.render import facts
from regressbisect.render.report_json import CommitReport, NightlyReport, Report
from regressbisect.render.report_hunks import HunkReport
from regressbisect.render.report_load import load_report


def render_table(report: Mapping[str, Any] | Report) -> str:
    """Candidates of a hunt (or the measured series of a nightly report) as a text table."""
    report = load_report(report)
    if isinstance(report, NightlyReport):
        return tabulate(facts.series_rows(report), headers=facts.series_headers(report), tablefmt="simple",
                        disable_numparse=True)
    rows = facts.candidate_rows(report)
    if not rows:
        return "(no candidates measured)"
    return tabulate(rows, headers=facts.candidate_headers(report), tablefmt="simple", disable_numparse=True)


def render_summary(report: Mapping[str, Any] | Report) -> str:
    """What a hunt prints when it ends: verdict, culprits, table, remainder, overhead, cost."""
    report = load_report(report)
    if isinstance(report, NightlyReport):
        return _nightly_summary(report)
    return "\n".join(_hunt_lines(report))


def _hunt_lines(report: CommitReport | HunkReport) -> list[str]:
    lines = [facts.verdict_line(report)]
    stored_only = facts.store_only_line(report)
    if stored_only:
        lines.insert(0, stored_only)
    if facts.has_endpoints(report):
        lines.append("  " + facts.endpoint_text(report))
    lines += facts.established_lines(report)
    if report.facts.continue_command:
        lines.append(f"{facts.CONTINUE_LEAD} {report.facts.continue_command}")
    for number, culprit in enumerate(report.culprits, 1):
        c = facts.culprit_facts(culprit, facts.unit(report))
        lines.append(f"culprit {number}: {c.title}")
        lines.append(f"  step {c.step}" + (f", {c.share}" if c.share else ""))
        if c.possible_commits:
            lines.append(f"  any of (skipped between): {', '.join(c.possible_commits)}")
        lines += [f"  {line}" for line in c.merge]
        if c.drill:     # its hunks by named group, with their own steps, the remainder, the suspects
            lines += [f"  {line}" for line in facts.drill_lines(c)]
        else:
            lines += [f"  hunk {facts.hunk_location(hunk)}{facts.joined_note(hunk)}" for hunk in c.hunks]
        for counter in c.counters:
            lines.append(f"  {counter}")
        lines += _work_lines(c)
    lines += facts.ambiguous_lines(report)
    if report.candidates:
        lines += ["", render_table(report), ""]
    for extra in (facts.not_measured_line(report), facts.footprint_line(report), facts.shape_line(report), facts.remainder_line(report), facts.overhead_line(report), facts.isolation_line(report),
                  facts.cost_line(report)):
        if extra:
            lines.append(extra)
    lines += facts.measurement_lines(report) + [line for line in [_steady_load_line(report)] if line]
    return lines


def _steady_load_line(report: CommitReport | HunkReport) -> str | None:
    """The other load the samples were measured under (docs/contention.md), when there was some."""
    contention = report.facts.measurement.contention
    if not contention:
        return None
    cpus, moved = contention.steady_other_cpus, contention.level_changes
    if cpus is None or cpus < 0.1:
        return None
    under = contention.under_load
    return (f"Measured under {'a steady ' if not moved else ''}{cpus:.1f} CPUs of other load (median of the "
            f"samples used{f'; it moved {moved} time(s)' if moved else ''}; each pair under one load), waited "
            f"{contention.waited_s:.0f} s for quiet (at most {contention.rule.max_wait_share:.0%} "
            f"of the wall)" + (f"; {under} sample(s) on cores it oversubscribed" if under else "") + ".")


def _work_lines(c: facts.CulpritFacts) -> list[str]:
    """The culprit's work per step: the reading, then its small table."""
    if not c.work_reading and not c.work_rows:
        return []
    lines = [f"  reading: {c.work_reading}"] if c.work_reading else []
    if c.work_rows:
        table = tabulate(c.work_rows, headers=c.work_headers, tablefmt="simple", disable_numparse=True)
        lines += [f"    {line}" for line in table.splitlines()]
    return lines


def _nightly_summary(report: NightlyReport) -> str:
    status, reasons = facts.machine_lines(report)
    lines = [facts.nightly_verdict_line(report), status] + [f"  {r}" for r in reasons]
    if facts.isolation_line(report):
        lines.append(facts.isolation_line(report))
    lines += [f"change point: {line}" for line in facts.change_point_lines(report)]
    if report.series:
        lines += ["", render_table(report)]
    for hunt in map(load_report, report.hunts):
        lines += ["", f"hunt {facts.short(hunt.good)}..{facts.short(hunt.bad)}:"]
        lines += ["  " + line if line else "" for line in "\n".join(_hunt_lines(hunt)).splitlines()]
    lines += facts.measurement_lines(report)
    return "\n".join(lines)
