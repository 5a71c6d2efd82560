"""Markdown for a CI comment (GitHub flavoured): verdict, culprits with counters, the table."""
from __future__ import annotations

from typing import Any, Mapping

from tabulate import tabulate

from regressbisect.render import facts
from regressbisect.render.report_hunks import HunkReport
from regressbisect.render.report_json import CommitReport, NightlyReport, Report
from regressbisect.render.report_load import load_report


def render_markdown(report: Mapping[str, Any] | Report) -> str:
    report = load_report(report)
    if isinstance(report, NightlyReport):
        return "\n".join(_nightly(report)) + "\n"
    return "\n".join(_hunt(report, level=2)) + "\n"


def _hunt(report: CommitReport | HunkReport, level: int) -> list[str]:
    h = "#" * level
    kind = "uncommitted hunks" if isinstance(report, HunkReport) else "commits"
    lines = [f"{h} regressbisect ({kind}): {report.verdict or 'unknown'}", "",
             f"**{facts.verdict_line(report)}**", ""]
    if facts.has_endpoints(report):
        lines += [_code(facts.endpoint_text(report)), ""]
    lines += [f"- {_escape(line)}" for line in facts.established_lines(report)]
    if report.facts.continue_command:
        lines += [f"- {facts.CONTINUE_LEAD} {_code(report.facts.continue_command)}", ""]
    culprits = report.culprits
    if culprits:
        lines += [f"{h}# Culprits", ""]
        for number, culprit in enumerate(culprits, 1):
            c = facts.culprit_facts(culprit, facts.unit(report))
            share = f", {c.share}" if c.share else ""
            lines.append(f"{number}. **{_escape(c.title)}**: {c.step}{share}")
            if c.possible_commits:
                lines.append(f"   - may be any of (skipped commits): {', '.join(map(_code, c.possible_commits))}")
            lines += [f"   - {line}" for line in c.merge]
            if c.counters:
                lines.append(f"   - counters before -> after: {'; '.join(c.counters)}")
            if c.work_reading:
                lines.append(f"   - reading: {_escape(c.work_reading)}")
            if c.work_rows:
                table = tabulate([[_escape(cell) for cell in row] for row in c.work_rows], headers=c.work_headers,
                                 tablefmt="github", disable_numparse=True)
                lines += [""] + [f"     {line}" for line in table.splitlines()] + [""]
            if c.drill:
                lines += _drill(c)
            else:
                for hunk in c.hunks:
                    lines += _hunk(hunk, _escape(facts.joined_note(hunk)))
        lines.append("")
    ambiguous = facts.ambiguous_lines(report)
    if ambiguous:
        lines += [f"{h}# Ambiguous steps", "", "```", *ambiguous, "```", ""]
    rows = facts.candidate_rows(report)
    if rows:
        lines += [f"{h}# Candidates", "",
                  tabulate([[_escape(cell) for cell in row] for row in rows], headers=facts.candidate_headers(report),
                           tablefmt="github", disable_numparse=True), ""]
    for extra in (facts.not_measured_line(report), facts.footprint_line(report), facts.shape_line(report), facts.remainder_line(report), facts.overhead_line(report), facts.isolation_line(report),
                  facts.cost_line(report)):
        if extra:
            lines.append(f"- {extra}")
    # Setup step, venvs, contention (a failed setup's output tail is in the JSON and the log).
    lines += [f"- {_escape(line.strip())}" for line in facts.measurement_lines(report)
              if not line.startswith("    | ")]
    return lines


def _nightly(report: NightlyReport) -> list[str]:
    status, reasons = facts.machine_lines(report)
    lines = ["## regressbisect nightly", "", f"**{facts.nightly_verdict_line(report)}**", "",
             f"- {status}"] + [f"  - {_escape(r)}" for r in reasons] + [""]
    points = facts.change_point_lines(report)
    if points:
        lines += ["### Change points", ""] + [f"- {_escape(p)}" for p in points] + [""]
    rows = facts.series_rows(report)
    if rows:
        lines += ["<details><summary>Series (" + str(len(rows)) + " commits)</summary>", "",
                  tabulate([[_escape(cell) for cell in row] for row in rows], headers=facts.series_headers(report),
                           tablefmt="github", disable_numparse=True), "", "</details>", ""]
    for hunt in map(load_report, report.hunts):
        lines += _hunt(hunt, level=3) + [""]
    return lines


def _hunk(hunk: facts.ShownHunk, note: str = "") -> list[str]:
    lines = [f"   - {_code(facts.hunk_location(hunk))}{note}"]
    if hunk.hunk.excerpt:
        lines += ["", "     ```diff"] + [f"     {line}" for line in str(hunk.hunk.excerpt).splitlines()] + ["     ```", ""]
    return lines


def _drill(c: facts.CulpritFacts) -> list[str]:
    """A commit culprit's drill: what it found, each named group's hunks with its own step, the
    share of the commit's step they leave, what it suspected without naming."""
    lines = [f"   - {_escape(c.drill)}"]
    for group in c.drill_groups:
        if len(group.hunks) == 1:
            lines += _hunk(group.hunks[0], f": {_escape(group.step)}")
        else:
            lines.append(f"   - {len(group.hunks)} hunks together: {_escape(group.step)}")
            for hunk in group.hunks:
                lines += _hunk(hunk, _escape(facts.joined_note(hunk)))
    if c.drill_remainder:
        lines.append(f"   - {_escape(c.drill_remainder)}")
    for group in c.drill_suspects:
        where = ", ".join(_code(facts.hunk_location(h)) for h in group.hunks)
        lines.append(f"   - drill suspect: {where}: {_escape(group.step)} ({_escape(group.why or '')})")
    return lines


def _code(text: str) -> str:
    return f"`{text.replace('`', '')}`"


def _escape(text: str) -> str:
    """Keep table cells and titles from breaking the Markdown (pipes, stray HTML)."""
    return str(text).replace("|", "\\|").replace("<", "&lt;")
