"""One self-contained HTML page per report: inline CSS, plots inlined as base64 PNG data URIs, no
script and no external resource, so it can be mailed, attached to CI, or opened offline."""
from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any, Mapping, Sequence

from regressbisect.render import facts
from regressbisect.render.plots import render_plots
from regressbisect.render.report_hunks import HunkReport
from regressbisect.render.report_json import CommitCulprit, CommitReport, NightlyReport, Report
from regressbisect.render.report_load import load_report
from regressbisect.render.report_parts import HunkGroup

PAGE_NAME = "report.html"

_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 24px auto;
       max-width: 1180px; color: #1d1d1f; line-height: 1.4; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 18px; margin-top: 28px; }
h3 { font-size: 16px; }
.verdict { font-size: 17px; font-weight: 600; padding: 10px 14px; border-radius: 6px;
           background: #eef3fb; border-left: 5px solid #1f5fa8; }
.verdict.culprits, .verdict.alarm { background: #fdf0ef; border-left-color: #c8372d; }
.verdict.not-reproduced, .verdict.none, .verdict.not-localised, .verdict.undecided { background: #f2f7ef; border-left-color: #2a9d4b; }
.meta { color: #555; font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 13px; }
.culprit { border: 1px solid #ddd; border-radius: 6px; padding: 10px 14px; margin: 10px 0; }
.culprit .title { font-weight: 600; font-family: ui-monospace, Menlo, Consolas, monospace; }
.step { color: #c8372d; font-weight: 600; }
pre { background: #f6f8fa; padding: 8px; overflow-x: auto; font-size: 12px; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: left; }
th { background: #f3f3f3; } tr.culprit-row td { background: #fdf0ef; }
img { max-width: 100%; border: 1px solid #eee; margin: 8px 0; display: block; }
ul.notes { color: #333; font-size: 14px; } .status-ok { color: #2a9d4b; }
.status-slow, .status-busy { color: #c8372d; }
"""


def render_html(report: Mapping[str, Any] | Report, out_dir: Path) -> Path:
    """Write `out_dir/report.html` (and the PNGs it embeds, for reuse) and return the page path."""
    report = load_report(report)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    images = {path.name: path for path in render_plots(report, out_dir)}
    if isinstance(report, NightlyReport):
        title = "regressbisect nightly"
        body = _nightly(report, images)
    else:
        title = f"regressbisect {report.KIND}: {report.verdict or 'unknown'}"
        body = _hunt(report, images, prefix="", level=1)
    page = (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{_CSS}</style></head>\n<body>\n{body}\n</body></html>\n")
    path = out_dir / PAGE_NAME
    path.write_text(page, encoding="utf-8")
    return path


def _hunt(report: CommitReport | HunkReport, images: Mapping[str, Path], prefix: str, level: int) -> str:
    h, h2 = f"h{level}", f"h{min(level + 1, 6)}"
    verdict = str(report.verdict or "unknown")
    kind = "uncommitted hunks" if isinstance(report, HunkReport) else "commits"
    parts = [f"<{h}>regressbisect ({_e(kind)}) {_e(facts.short(report.good))}..{_e(facts.short(report.bad))}</{h}>",
             f"<div class=\"verdict {_e(verdict)}\">{_e(facts.verdict_line(report))}</div>"]
    if facts.has_endpoints(report):
        parts.append(f"<p class=\"meta\">{_e(facts.endpoint_text(report))}</p>")
    parts += [f"<p>{_e(line)}</p>" for line in facts.established_lines(report)]
    if report.facts.continue_command:
        parts.append(f"<p>{_e(facts.CONTINUE_LEAD)} <code>{_e(report.facts.continue_command)}</code></p>")
    culprits = report.culprits
    if culprits:
        parts.append(f"<{h2}>Culprits</{h2}>")
        for number, culprit in enumerate(culprits, 1):
            parts.append(_culprit(culprit, number, images.get(f"{prefix}culprit{number}-counters.png"), facts.unit(report)))
    ambiguous = facts.ambiguous_lines(report)
    if ambiguous:
        parts.append(f"<{h2}>Ambiguous steps</{h2}><pre>{_e(chr(10).join(ambiguous))}</pre>")
    notes = [n for n in (facts.not_measured_line(report), facts.footprint_line(report), facts.shape_line(report), facts.remainder_line(report), facts.overhead_line(report),
                         facts.isolation_line(report), facts.cost_line(report)) if n]
    notes += [n.strip() for n in facts.measurement_lines(report) if not n.startswith("    | ")]
    if notes:
        parts.append("<ul class=\"notes\">" + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>")
    if f"{prefix}candidates.png" in images:
        parts.append(_img(images[f"{prefix}candidates.png"], f"candidates: median {facts.unit(report)} with 95% CI"))
    rows = facts.candidate_rows(report)
    if rows:
        culprit_shas = {facts.short(c) for c in facts.culprit_commits(report)}
        parts.append(f"<{h2}>Candidates</{h2}>" + _table(facts.candidate_headers(report), rows,
                                                          lambda row: row[0] in culprit_shas))
    return "\n".join(parts)


def _culprit(culprit: CommitCulprit | HunkGroup, number: int, counters_png: Path | None, unit: str) -> str:
    c = facts.culprit_facts(culprit, unit)
    share = f", {_e(c.share)}" if c.share else ""
    parts = [f"<div class=\"culprit\"><div class=\"title\">{number}. {_e(c.title)}</div>",
             f"<div><span class=\"step\">{_e(c.step)}</span>{share}</div>"]
    if culprit.commit and not facts.is_hunk_group(culprit):
        parts.append(f"<div class=\"meta\">commit {_e(culprit.commit)}"
                     + (f", parent {_e(culprit.parent)}" if culprit.parent else "") + "</div>")
    if c.possible_commits:
        parts.append(f"<div>may be any of (skipped commits): {_e(', '.join(c.possible_commits))}</div>")
    parts += [f"<div>{_e(line)}</div>" for line in c.merge]
    if c.counters:
        parts.append("<div>Counters before &rarr; after:<ul>"
                     + "".join(f"<li>{_e(line)}</li>" for line in c.counters) + "</ul></div>")
    if c.work_reading:
        parts.append(f"<div class=\"reading\"><b>Reading:</b> {_e(c.work_reading)}</div>")
    if c.work_rows:
        parts.append(_table(c.work_headers, c.work_rows, lambda row: False))
    if c.drill:     # the drill's summary, named groups with their steps, remainder and suspects
        parts.append("<ul class=\"notes\">" + "".join(f"<li>{_e(line)}</li>" for line in facts.drill_lines(c)) + "</ul>")
    for hunk in c.hunks:
        parts.append(f"<div class=\"meta\">{_e(facts.hunk_location(hunk))}</div>")
        if hunk.hunk.excerpt:
            parts.append(f"<pre>{_e(str(hunk.hunk.excerpt))}</pre>")
    if counters_png is not None:
        parts.append(_img(counters_png, "counters before/after"))
    return "\n".join(parts) + "</div>"


def _nightly(report: NightlyReport, images: Mapping[str, Path]) -> str:
    status, reasons = facts.machine_lines(report)
    machine_status = str(report.machine.get("status") or "unknown")
    alarm = "alarm" if report.change_points else "none"
    parts = ["<h1>regressbisect nightly</h1>",
             f"<div class=\"verdict {alarm}\">{_e(facts.nightly_verdict_line(report))}</div>",
             f"<p class=\"status-{_e(machine_status)}\"><b>{_e(status)}</b></p>"]
    if reasons:
        parts.append("<ul class=\"notes\">" + "".join(f"<li>{_e(r)}</li>" for r in reasons) + "</ul>")
    points = facts.change_point_lines(report)
    if points:
        parts.append("<h2>Change points</h2><ul>" + "".join(f"<li>{_e(p)}</li>" for p in points) + "</ul>")
    if "series.png" in images:
        parts.append(_img(images["series.png"], "nightly series with change points"))
    rows = facts.series_rows(report)
    if rows:
        parts.append("<h2>Series</h2>" + _table(facts.series_headers(report), rows, lambda row: bool(row[-1].startswith("change"))))
    for number, hunt in enumerate(map(load_report, report.hunts), 1):
        parts.append(_hunt(hunt, images, prefix=f"hunt{number}-", level=2))
    return "\n".join(parts)


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], highlight) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    marked = ' class="culprit-row"'
    body = "".join(f"<tr{marked if highlight(row) else ''}>"
                   + "".join(f"<td>{_e(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _img(path: Path, alt: str) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return f"<img alt=\"{_e(alt)}\" src=\"data:image/png;base64,{data}\">"


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)
