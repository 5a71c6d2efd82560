"""PNG plots of a report (matplotlib, Agg canvas; no pyplot, so no global state or GUI backend).

- the nightly series: median tok/s per commit with 95% CI bars, change points marked;
- each hunt's candidates: x = first-parent position, y = median tok/s with CI bars, culprits marked;
- each culprit's counters: before/after bars, one small panel per counter (units differ).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import Formatter

from regressbisect.render import facts
from regressbisect.render.report_hunks import HunkReport
from regressbisect.render.report_json import CommitCulprit, CommitReport, NightlyReport, Report
from regressbisect.render.report_load import load_report
from regressbisect.render.report_parts import Candidate, HunkCulprit, SeriesRow
from regressbisect.search.verdicts import CandidateCall

_VERDICT_COLOURS = {CandidateCall.GOOD: "#2a9d4b", CandidateCall.BAD: "#c8372d", CandidateCall.UNSURE: "#8a8a8a",
                    CandidateCall.SKIP: "#e0a100"}
_DPI = 100


def render_plots(report: Mapping[str, Any] | Report, out_dir: Path) -> list[Path]:
    """Write the report's plots into `out_dir` (created if needed); returns the PNG paths."""
    report = load_report(report)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    nightly = isinstance(report, NightlyReport)
    if nightly:
        if report.series:
            written.append(_save(_series_figure(report), out_dir / "series.png"))
        hunts = [load_report(hunt) for hunt in report.hunts]
    else:
        hunts = [report]
    for number, hunt in enumerate(hunts, 1):
        prefix = f"hunt{number}-" if nightly else ""
        if _plottable(facts.candidates(hunt)):
            written.append(_save(_candidates_figure(hunt), out_dir / f"{prefix}candidates.png"))
        for c_number, culprit in enumerate(hunt.culprits, 1):
            figure = _counters_figure(culprit)
            if figure is not None:
                written.append(_save(figure, out_dir / f"{prefix}culprit{c_number}-counters.png"))
    return written


def _series_figure(report: NightlyReport) -> Figure:
    series = report.series
    fig, ax = _figure(width=max(7.0, min(14.0, 0.35 * len(series) + 4)))
    xs = list(range(len(series)))
    medians = [_value(s.median_tok_s) for s in series]
    for flagged in (False, True):
        idx = [i for i in xs if bool(series[i].flagged) == flagged and math.isfinite(medians[i])]
        if not idx:
            continue
        low, high = _error_bars([series[i] for i in idx])
        ax.errorbar(idx, [medians[i] for i in idx], yerr=[low, high], fmt="x" if flagged else "o",
                    color="#8a8a8a" if flagged else "#1f5fa8", capsize=3, ms=5,
                    label="machine flagged" if flagged else f"median {facts.unit(report)} (95% CI)")
    for point in report.change_points:
        index = point.index
        ax.axvline(index - 0.5, color="#c8372d", ls="--", lw=1.2)
        ax.annotate(f"{facts.pct(facts.change_pct(point))} @ {facts.short(point.commit)}",
                    xy=(index - 0.5, 1.0), xycoords=("data", "axes fraction"), xytext=(3, -12),
                    textcoords="offset points", color="#c8372d", fontsize=9)
        # The segment levels either side, as the detector saw them.
        for level, span in ((point.before, (index - 3.5, index - 0.5)),
                            (point.after, (index - 0.5, index + 2.5))):
            if isinstance(level, (int, float)):
                ax.hlines(level, *span, color="#c8372d", lw=1, alpha=0.6)
    ax.set_xticks(xs)
    ax.set_xticklabels([facts.short(s.commit) for s in series], rotation=60, fontsize=7, ha="right")
    ax.set_xlabel("first-parent commit (oldest left)")
    ax.set_ylabel(facts.unit(report))
    ax.set_title("Nightly throughput")
    ax.legend(loc="lower left", fontsize=8)
    return fig


def _candidates_figure(hunt: CommitReport | HunkReport) -> Figure:
    candidates = sorted((c for c in facts.candidates(hunt) if _finite(c.median_tok_s)), key=lambda c: c.index)
    fig, ax = _figure()
    for verdict in sorted({str(c.verdict) for c in candidates}):
        group = [c for c in candidates if str(c.verdict) == verdict]
        xs = [c.index for c in group]
        low, high = _error_bars(group)
        ax.errorbar(xs, [c.median_tok_s for c in group], yerr=[low, high], fmt="o", capsize=3,
                    color=_VERDICT_COLOURS.get(verdict, "#444444"), label=verdict)
    for culprit in hunt.culprits:
        match = [c for c in candidates if c.commit == culprit.commit]
        if not match:
            continue
        x = match[0].index
        ax.axvline(x - 0.5, color="#c8372d", ls="--", lw=1.2)
        ax.annotate(f"{facts.short(culprit.commit)} {facts.pct(culprit.step_pct)}",
                    xy=(x - 0.5, 1.0), xycoords=("data", "axes fraction"), xytext=(3, -12),
                    textcoords="offset points", color="#c8372d", fontsize=9)
    ax.set_xlabel(f"first-parent position ({facts.short(hunt.good)} = 0)")
    ax.set_ylabel(f"median {facts.unit(hunt)} (95% CI)")
    ax.set_title(f"Candidates {facts.short(hunt.good)}..{facts.short(hunt.bad)}")
    ax.legend(fontsize=8)
    return fig


def _counters_figure(culprit: CommitCulprit | HunkCulprit) -> Figure | None:
    before, after = culprit.counters_before, culprit.counters_after
    names = [n for n in sorted(set(before) & set(after)) if _finite(before[n]) and _finite(after[n])]
    if not names:
        return None
    moved = [n for n in names if abs(after[n] - before[n]) > 1e-9]
    names = (moved or names)[:8]  # the ones that explain something first
    fig = Figure(figsize=(max(3.6, 2.2 * len(names) + 1), 3.2), dpi=_DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(names), squeeze=False)[0]
    for ax, name in zip(axes, names):
        ax.bar(["before", "after"], [before[name], after[name]], color=["#2a9d4b", "#c8372d"])
        ax.yaxis.set_major_formatter(CompactFormatter())
        ax.set_title(name, fontsize=8)
        ax.tick_params(labelsize=8)
    if facts.is_hunk_group(culprit):
        title = "per iteration: without -> with the hunk(s)"
    else:
        title = f"per iteration: {facts.short(culprit.parent)} -> {facts.short(culprit.commit)}"
    fig.suptitle(title, fontsize=9)
    return fig


def _figure(width: float = 8.0, height: float = 4.0):
    fig = Figure(figsize=(width, height), dpi=_DPI, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.yaxis.set_major_formatter(CompactFormatter())
    return fig, ax


class CompactFormatter(Formatter):
    """Tick labels such as 22.25M, 14.2K or 950: no '1e7' offset above the axis, and as many
    decimals as the tick values need to be written exactly."""

    _SCALES = ((1e9, 1e9, "G"), (1e6, 1e6, "M"), (1e4, 1e3, "K"))
    """(from, scale, suffix): plain numbers up to 9999, where '0.98K' would read worse than 980."""

    def __init__(self) -> None:
        self._ticks: list[float] = []

    def set_locs(self, locs: Sequence[float]) -> None:
        self._ticks = [float(v) for v in locs]

    def __call__(self, x: float, pos: int | None = None) -> str:
        locs = sorted(v for v in self._ticks if math.isfinite(v)) or [x]
        top = max(abs(v) for v in locs)
        scale, suffix = next(((s, n) for start, s, n in self._SCALES if top >= start), (1.0, ""))
        scaled = [v / scale for v in locs]
        decimals = next((d for d in range(6) if all(abs(round(v, d) - v) < 1e-6 * max(1.0, abs(v))
                                                    for v in scaled)), 6)
        return f"{x / scale:.{decimals}f}{suffix}"


def _save(fig: Figure, path: Path) -> Path:
    fig.savefig(path, format="png")
    return path


def _error_bars(rows: Sequence[Candidate | SeriesRow]) -> tuple[list[float], list[float]]:
    """Distances from the median to the CI ends (0 where no CI is known)."""
    low, high = [], []
    for r in rows:
        median, ci = _value(r.median_tok_s), r.ci95 or ()
        ok = len(ci) == 2 and all(_finite(v) for v in ci) and math.isfinite(median)
        low.append(max(0.0, median - ci[0]) if ok else 0.0)
        high.append(max(0.0, ci[1] - median) if ok else 0.0)
    return low, high


def _plottable(candidates: Sequence[Candidate]) -> bool:
    return any(_finite(c.median_tok_s) for c in candidates)


def _value(value: Any) -> float:
    return float(value) if _finite(value) else math.nan


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
