"""The culprit rule: which confirmed steps are named, and how large each is.

Pure (numpy only). A step the naming gate passed (search/naming.py) is sized from the
piecewise-constant fit of log tok/s with breaks at the confirmed steps (and a linear drift in
time when it is significant), and named only if its point estimate reaches min_effect our way,
its interval excludes zero, and its own two commits differ the same way; the report then gives
each named step from its own fresh pairs (docs/verdicts.md; docs/search.md, sections 3 and 4).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Protocol, Sequence

import numpy as np

from regressbisect.config import Direction
from regressbisect.search.book import SampleBook
from regressbisect.search.naming import NamingGate
from regressbisect.search.stats import log_threshold, t_ppf

__all__ = ["Culprit", "CulpritRule", "remainder_of_gap", "share_interval", "shares_do_not_add_up"]


@dataclass(frozen=True)
class Culprit:
    """One confirmed step of tok/s."""

    first_bad: int
    """Index of the culprit commit (the first at the new level)."""
    last_good: int
    """Index of the last commit measured at the old level; first_bad - last_good > 1 when the
    commits between were unmeasurable (skipped): the culprit is then the whole range."""
    step: float
    """Relative change of tok/s at this step, e.g. -0.051, from its own pairs: the mean log ratio
    of first_bad to last_good over the pairs of the two taken after the step was picked (the
    naming gate's fresh pairs, each taken back to back, so a drift of the machine cancels). The
    naming rule itself reads the segment fit (`CulpritRule.segment_steps`); a segment also holds
    commits sampled at other times, and at another state of the machine."""
    step_ci95: tuple[float, float]
    """95% interval of `step`: a confidence sequence (valid at the gate's data-dependent stop),
    with the hunt's pooled noise."""
    step_tok_s: float
    """Absolute change, tok/s (step times last_good's level)."""
    share_of_gap: float
    """Fraction of the GOOD->BAD gap this step owns, on the log scale (steps compound)."""


class CulpritSettings(Protocol):
    min_effect: float
    direction: Direction
    share_limit: float


class CulpritRule:
    """The culprit rule over one search's samples: GOOD is index 0, BAD index n - 1."""

    def __init__(self, book: SampleBook, settings: CulpritSettings, gate: NamingGate, n: int):
        self.book = book
        self.settings = settings
        self.gate = gate
        self.n = n

    def remainder(self, steps: Sequence[Culprit], gap: float, gap_se: float) -> tuple[float, float]:
        """`remainder_of_gap` of these culprits (each sized by `own_step`); gap, gap_se:
        `end_difference()`. The report's interval (`unexplained_interval`) and the search's
        decision to look for the remainder in a cleared side (`commit.remainder.search_remainder`)
        both read it, so the hunt never searches for a remainder whose printed interval includes
        none."""
        return remainder_of_gap(gap, gap_se, [(c.step, c.step_ci95) for c in steps])

    def unexplained_interval(self, steps: Sequence[Culprit], unexplained: float, gap: float,
                             gap_se: float) -> tuple[float, float]:
        """95% interval of the share of the gap the steps leave (`SearchResult.unexplained_ci95`)."""
        _, half = self.remainder(steps, gap, gap_se)
        return share_interval(unexplained, half, gap)

    def named_culprits(self, confirmed: Sequence[Culprit]) -> tuple[tuple[Culprit, ...], tuple[Culprit, ...]]:
        """(named, suspects): drop the confirmed step with the weakest evidence while any fails the
        culprit rule, re-sizing the rest from a fit without it (its samples join a segment)."""
        kept = sorted(confirmed, key=lambda c: c.first_bad)
        dropped: list[Culprit] = []
        while kept:
            steps = self.segment_steps(kept)
            bounds = [c.first_bad for c in kept]
            fit = self.level_fit(lambda i, bounds=bounds: int(np.searchsorted(bounds, i, side="right")), len(bounds) + 1)
            drift = fit[3] if fit is not None else 0.0
            failing = [c for c in steps if not self.nameable(c, drift)]
            if not failing:
                return tuple(steps), tuple(sorted(dropped, key=lambda c: c.first_bad))
            weakest = min(failing, key=self.evidence)
            dropped.append(weakest)
            kept = [c for c in kept if c.first_bad != weakest.first_bad]
        return (), tuple(sorted(dropped, key=lambda c: c.first_bad))

    def own_step(self, c: Culprit) -> Culprit:
        """The culprit sized from its own fresh pairs (`NamingGate.own_size`); as the segment fit
        sized it when it has none."""
        size = self.gate.own_size(c.last_good, c.first_bad, self.book.pooled_sigma()[0])
        if size is None:
            return c
        est, half = size
        gap_log = self.total_log_gap()
        step = math.expm1(est)
        base = math.exp(float(np.mean(np.log(self.book.raw[c.last_good]))))
        return replace(c, step=step, step_ci95=(math.expm1(est - half), math.expm1(est + half)),
                       step_tok_s=step * base, share_of_gap=est / gap_log if gap_log else math.nan)

    def shares_do_not_add_up(self, culprits: Sequence[Culprit]) -> bool:
        """`shares_do_not_add_up` of these culprits' intervals, over the whole gap taken at the end
        of its 95% interval farthest from zero: 'surely more than share_limit of the gap' must
        hold for the gap's own error too. With the point estimate, a machine that got busy after
        the control arm (GOOD and BAD sampled again at 15% noise, the gap read as -9% +- 11% for a
        true -19%) made a confirmed -21% step 'own 255% of the gap', and the hunt named nothing
        (scripts/sim_rising_noise.py)."""
        gap, gap_se = self.end_difference()
        if math.isfinite(gap_se):
            gap = math.copysign(abs(gap) + 1.96 * gap_se, gap)
        return shares_do_not_add_up([c.step_ci95 for c in culprits], gap, self.settings.share_limit,
                                    direction=self.settings.direction)

    def nameable(self, c: Culprit, drift_per_round: float = 0.0) -> bool:
        """The culprit rule: point estimate >= min_effect our way and 95% interval excluding zero,
        from the segment fit and from the step's own two commits."""
        lo, hi = c.step_ci95
        if not (math.isfinite(c.step) and math.isfinite(lo) and math.isfinite(hi)):
            return False
        big = abs(math.log1p(c.step)) >= log_threshold(self.settings.min_effect)
        d = self.settings.direction
        slower = c.step < 0 and hi < 0
        faster = c.step > 0 and lo > 0
        if not (big and ((d != Direction.FASTER and slower) or (d != Direction.SLOWER and faster))):
            return False
        return self.own_step_shows(c, drift_per_round)

    def own_step_shows(self, c: Culprit, drift_per_round: float = 0.0) -> bool:
        """The step's own two commits differ the same way, 95% interval excluding zero (sigma
        pooled over every candidate; each sample corrected for the segment fit's drift, if any).
        The segment fit alone can show a step between two equal commits when the break is one
        commit off: on a noisy machine the commit beside the true step, measured at the wrong
        level by chance, became the culprit (1-1.5% of the hunts at 8-15% CV)."""
        def corrected(i: int) -> list[float]:
            return [math.log(v) - drift_per_round * t for v, t in zip(self.book.raw.get(i, []), self.book.time.get(i, []))]

        a, b = corrected(c.last_good), corrected(c.first_bad)
        sigma, df = self.book.pooled_sigma()
        if not (a and b and sigma > 0 and df > 0):
            return False
        est = float(np.mean(b) - np.mean(a))
        half = t_ppf(0.975, df) * sigma * math.sqrt(1 / len(a) + 1 / len(b))
        return est + half < 0 if c.step < 0 else est - half > 0

    @staticmethod
    def evidence(c: Culprit) -> float:
        """|step| in units of its interval's half width (log scale)."""
        lo, hi = (math.log1p(x) if x > -1 else -math.inf for x in c.step_ci95)
        half = (hi - lo) / 2
        return abs(math.log1p(c.step)) / half if half > 0 and math.isfinite(half) else 0.0

    def segment_steps(self, confirmed: Sequence[Culprit]) -> list[Culprit]:
        """Size every confirmed step from the piecewise-constant fit with breaks at the culprits.

        Each level is the mean log tok/s of every sample in its segment, so a step uses far more
        samples than its two commits, and is not inflated by the sequential stop that accepted it
        (the two commits' own samples are what crossed the threshold). Interval: t with the
        residual sigma of that fit. When a linear drift of the machine in time is significant
        (p < 0.01), the fit includes it: a segment sampled late would otherwise carry the drift
        into its level (0.1%/round turned confirmed 5% steps into -0.0% +- 2.2%).
        """
        culprits = sorted(confirmed, key=lambda c: c.first_bad)
        if not culprits:
            return []
        bounds = [c.first_bad for c in culprits]
        fit = self.level_fit(lambda i: int(np.searchsorted(bounds, i, side="right")), len(bounds) + 1)
        if fit is None:
            return [replace(c, share_of_gap=math.nan) for c in culprits]
        levels, cov, tq, _ = fit
        gap_log = self.total_log_gap()
        out = []
        for k, c in enumerate(culprits):
            est = float(levels[k + 1] - levels[k])
            se = math.sqrt(max(float(cov[k, k] + cov[k + 1, k + 1] - 2 * cov[k, k + 1]), 0.0))
            step = math.expm1(est)
            out.append(replace(c, step=step, step_ci95=(math.expm1(est - tq * se), math.expm1(est + tq * se)),
                               step_tok_s=step * math.exp(levels[k]),
                               share_of_gap=est / gap_log if gap_log else math.nan))
        return out

    def level_fit(self, segment_of, segments: int, indices: Sequence[int] | None = None):
        """Least-squares levels of log tok/s per segment (segment_of(index) -> 0..segments-1), plus
        a linear drift in rounds when that term is significant at 1%: (levels, their covariance,
        the t quantile for 95%, the drift per round or 0), or None when there are too few samples. Every measurable
        candidate's samples are used unless `indices` is given."""
        rows, ys, ts = [], [], []
        for i, vals in self.book.raw.items():
            if self.book.unmeasurable(i) or (indices is not None and i not in indices):
                continue
            seg = segment_of(i)
            for v, t in zip(vals, self.book.time.get(i, [])):
                rows.append(seg)
                ys.append(math.log(v))
                ts.append(t)
        y = np.array(ys)
        plain = np.zeros((len(ys), segments))
        plain[np.arange(len(ys)), rows] = 1.0
        used = plain[:, plain.sum(axis=0) > 0]
        if used.shape[1] < segments:
            # a segment without samples has no level: its steps are unknown
            return None
        t = np.array(ts, dtype=float)
        designs = [plain]
        if len(set(ts)) >= 3:
            designs.insert(0, np.column_stack([plain, (t - t.mean()) / max(float(np.ptp(t)), 1.0)]))
        for x in designs:
            df = len(ys) - x.shape[1]
            if df < 1:
                continue
            xtx_inv = np.linalg.pinv(x.T @ x)
            coef = xtx_inv @ x.T @ y
            resid = y - x @ coef
            sigma2 = float(resid @ resid) / df
            cov = sigma2 * xtx_inv
            if x.shape[1] > segments:
                drift_t = abs(coef[-1]) / math.sqrt(cov[-1, -1]) if cov[-1, -1] > 0 else 0.0
                if not drift_t > t_ppf(0.995, df):
                    continue   # no evidence of drift: the plain fit (the segment means)
            per_round = float(coef[-1]) / max(float(np.ptp(t)), 1.0) if x.shape[1] > segments else 0.0
            return coef[:segments], cov[:segments, :segments], t_ppf(0.975, df), per_round
        return None

    def total_log_gap(self) -> float:
        """Log tok/s of BAD minus GOOD from all their samples (nan until both have one): the
        difference of their means, or of their levels in a fit with a drift in time when the
        drift is significant (_level_fit)."""
        est, _ = self.end_difference()
        return est

    def end_difference(self) -> tuple[float, float]:
        """(BAD - GOOD in log tok/s, its standard error); se is nan when unknown."""
        good, bad = self.book.raw.get(0), self.book.raw.get(self.n - 1)
        if not (good and bad):
            return math.nan, math.nan
        plain = float(np.mean(np.log(bad)) - np.mean(np.log(good)))
        if len(good) + len(bad) < 4:
            return plain, math.nan
        fit = self.level_fit(lambda i: int(i == self.n - 1), 2, indices=(0, self.n - 1))
        if fit is None:
            return plain, math.nan
        levels, cov, _, _ = fit
        return float(levels[1] - levels[0]), math.sqrt(max(float(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1]), 0.0))


def shares_do_not_add_up(intervals: Sequence[tuple[float, float]], gap: float, share_limit: float, *,
                         direction: Direction, exempt_both: bool = True) -> bool:
    """The shares rule, for commits and hunks: some culprit owns surely more than share_limit of
    the log gap `gap` (either sign), or together they surely leave a remainder below -100% (the
    step model does not fit). 'Surely' = from the end of each culprit's 95% interval (relative
    change) nearest zero; an end at or below -100%, or not finite, tells nothing (a culprit with
    neither counts 0). False without a gap.

    exempt_both: with direction 'both' the rule does not apply (steps that cancel by design); the
    commit search's choice. The hunk hunt passes False and holds 'both' to it too: the two differ
    there, kept as they were until a later change makes them one."""
    if (exempt_both and direction == Direction.BOTH) or not gap or not math.isfinite(gap):
        return False
    least = []
    for interval in intervals:
        ends = [abs(math.log1p(x)) for x in interval if x > -1 and math.isfinite(x)]
        least.append(min(ends) / abs(gap) if ends else 0.0)
    return max(least) > share_limit or sum(least) > 2.0


def remainder_of_gap(gap: float, gap_se: float,
                     steps: Sequence[tuple[float, tuple[float, float]]]) -> tuple[float, float]:
    """(log change the steps leave of the gap, half width of its 95% interval), the one definition
    of the remainder's spread for commits and hunks; gap: the log change of the whole range, gap_se
    its standard error; steps: (relative change, its 95% interval) of each culprit.

    The remainder is gap - sum(steps); its half width combines the gap's (1.96 standard errors)
    and each step's own (for a commit, its confidence sequence on its fresh pairs, valid at the
    gate's data-dependent stop) in quadrature, the steps' samples taken apart from the ends'. A
    step whose own pairs are few has a wide interval, and so has the remainder: a remainder of 20%
    whose interval reaches 0 is no sign of a further step. (nan, nan) without steps or a known
    gap error."""
    if not (steps and math.isfinite(gap) and math.isfinite(gap_se) and gap):
        return math.nan, math.nan
    halves = [(math.log1p(ci[1]) - math.log1p(ci[0])) / 2 if min(ci) > -1 else math.inf for _, ci in steps]
    half = math.sqrt((1.96 * gap_se) ** 2 + sum(h * h for h in halves))
    if not math.isfinite(half):
        return math.nan, math.nan
    return gap - sum(math.log1p(step) for step, _ in steps), half


def share_interval(unexplained: float, half: float, gap: float) -> tuple[float, float]:
    """The remainder's 95% interval as a share of the gap: `unexplained` (1 - the steps' shares)
    +- half / |gap|, half from `remainder_of_gap` (nan, nan when either is unknown)."""
    if not (math.isfinite(unexplained) and math.isfinite(half) and gap):
        return math.nan, math.nan
    return unexplained - half / abs(gap), unexplained + half / abs(gap)
