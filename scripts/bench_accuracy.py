#!/usr/bin/env python
"""Accuracy and cost of the commit search against simulated histories, next to three baselines.

Every trial draws a history (1 or 2 step commits at random positions, or none), lognormal noise
of a given CV and optionally a slow linear drift of the machine, then runs:

* ours      regressbisect.search.CommitSearch (slots 1, and 4 / 8 for the rounds column)
* naive     `git bisect run` with one sample per commit and the threshold halfway between GOOD
            and BAD measured once each (stops when BAD does not measure slower than GOOD)
* careful   the same with the median of 5 samples per commit (endpoints included)
* bayes     a Bayesian bisector fed one thresholded sample per probe: git_bayesect's Bisector
            (PyPI `git_bayesect`) when installed, else the equivalent Beta-Bernoulli posterior
            over the first bad commit implemented below; threshold halfway between the medians of
            5 samples of GOOD and of BAD, stop at posterior mass 0.95 (git bayesect's default)

Reported per cell and method: exact-hit rate (the reported culprits are exactly the true steps),
hit (at least one true step), both-found (two-step cells), false-culprit rate (a reported commit
that is no step), mean benchmark executions, and for ours the mean rounds at each slot count.

    python scripts/bench_accuracy.py --quick                       # CI smoke, a minute
    python scripts/bench_accuracy.py --interference --trials 100 [--read-interference]
    python scripts/bench_accuracy.py --trials 200 --out docs/results/accuracy-runs.md --out results.json
    python scripts/bench_accuracy.py --resume results.json --trials-other 30 --out docs/results/accuracy-runs.md

The full grid takes over an hour on 2 cores; cells are written to the outputs as they complete,
and --resume keeps the cells of an earlier results .json instead of running them again.
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")       # one BLAS thread per worker process
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import math  # noqa: E402
import multiprocessing as mp  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

import _common  # noqa: E402,F401  (puts the repository on sys.path)

from regressbisect.search.bisect import SearchSettings  # noqa: E402
from regressbisect.search.simulate import FakeExecutor, FakeHistory, Interference, simulate, step_levels  # noqa: E402

try:  # the real thing when available (pip install git_bayesect)
    from git_bayesect import Bisector as _BayesectBisector  # type: ignore[import-not-found]
    BAYES_IMPL = "git_bayesect " + __import__("importlib.metadata").metadata.version("git_bayesect")
except Exception:  # pragma: no cover - depends on the environment
    _BayesectBisector = None
    BAYES_IMPL = "built-in Beta-Bernoulli posterior (git_bayesect not installed)"

BAYES_CONFIDENCE = 0.95
BAYES_MAX_PROBES = 1500
OURS_SETTINGS = SearchSettings()        # replaced in each worker by --confidence
PRIOR_SAMPLES = 0                        # --noise-prior: samples behind a remembered noise scale


# ----------------------------------------------------------------------------- cells

@dataclass(frozen=True)
class Cell:
    """One grid cell: history length, step sizes (relative, negative = slower), noise, drift."""

    n: int
    steps: tuple[float, ...]
    cv: float
    drift: float = 0.0
    key: bool = False           # a cell a stated goal rests on: it gets the full trial count
    slots: tuple[int, ...] = (1,)
    interference: tuple[Interference, ...] = ()
    stall: Interference | None = None   # the first step's commit also sends runs to this kind (a step of 0: a pure change of shape)

    @property
    def name(self) -> str:
        kind = "A/A" if not self.steps else "+".join(f"{-s:.0%}" for s in self.steps)
        if self.stall is not None:
            kind = f"stall {self.stall.name}" + (f" with {kind}" if any(self.steps) else "")
        drift = f" drift {self.drift:+.2%}/round" if self.drift else ""
        runs_off = "".join(f" + {k.name}" for k in self.interference)
        return f"n={self.n} {kind} cv={self.cv * 100:g}%{runs_off}{drift}"


FLOOR_CELLS = (Cell(32, (-0.10,), 0.005, key=True), Cell(128, (-0.10,), 0.01, key=True),
               Cell(128, (-0.03,), 0.02, key=True), Cell(32, (-0.05,), 0.03, key=True),
               Cell(128, (-0.03,), 0.03, key=True), Cell(128, (-0.05, -0.08), 0.02, key=True),
               Cell(32, (), 0.005, key=True), Cell(128, (), 0.02, key=True), Cell(128, (), 0.03, key=True))
"""The cells of the cost goals (commits / step / CV as a user meets them: a GPU at 0.5-1% noise, a
shared machine at 2-3%), with A/A ranges at the same noise: `--floor`."""


_SLOW_QUARTER, _SLOW_TENTH = (Interference(0.25, 0.7),), (Interference(0.10, 0.8),)
_MEASURED_SHAPE = (Interference(0.25, 0.42, 0.55), Interference(0.19, 0.6, 0.97))
INTERFERENCE_CELLS = (Cell(32, (-0.10,), 0.02, key=True, interference=_SLOW_QUARTER),
                      Cell(128, (-0.05,), 0.01, key=True, interference=_SLOW_TENTH),
                      Cell(32, (), 0.02, key=True, interference=_SLOW_QUARTER),
                      Cell(128, (), 0.01, key=True, interference=_SLOW_TENTH),
                      Cell(32, (-0.10,), 0.02, key=True, interference=(Interference(0.10, 1.3),)),
                      Cell(32, (-0.10,), 0.02, key=True, interference=(Interference(0.15, 0.7), Interference(0.10, 1.3))),
                      Cell(32, (), 0.02, key=True, interference=(Interference(0.15, 0.7), Interference(0.10, 1.3))),
                      Cell(16, (-0.13,), 0.015, key=True, interference=_MEASURED_SHAPE),
                      Cell(16, (), 0.015, key=True, interference=_MEASURED_SHAPE))
"""Runs far off their level on top of lognormal noise (a fraction of runs at a factor: a busy
neighbour, a straggler, a pulsing pipeline; slow, fast, and both), with A/A ranges of the same
noise: `--interference`. The last two: the shape measured on the bimodal bench's runs
(`bench_bimodal_hunt.py`: a quarter of the runs at 0.42-0.55x, about one in seven anywhere in
0.6-0.97x, the rest at 1.5%)."""


def _modes(fraction: float, factor: float) -> tuple[Interference, ...]:
    return (Interference(fraction, factor),)


SHAPE_CELLS = (Cell(32, (-0.15,), 0.03, key=True, interference=_modes(0.30, 1.4)),
               Cell(32, (-0.15,), 0.02, key=True, interference=_modes(0.30, 1.3)),
               Cell(32, (-0.12,), 0.03, key=True, interference=_modes(0.40, 1.4)),
               Cell(32, (-0.10,), 0.02, key=True, interference=_modes(0.50, 0.7)),
               Cell(32, (-0.10,), 0.02, key=True, interference=_modes(0.30, 0.6)),
               Cell(32, (-0.10,), 0.01, key=True, interference=_modes(0.10, 0.5)),
               Cell(32, (-0.10,), 0.05, key=True, interference=_modes(0.20, 1.6)),
               Cell(32, (), 0.03, key=True, interference=_modes(0.30, 1.4)),
               Cell(32, (), 0.02, key=True, interference=_modes(0.50, 0.7)),
               Cell(32, (), 0.01, key=True, interference=_modes(0.10, 0.5)),
               Cell(32, (), 0.05, key=True, interference=_modes(0.20, 1.6)),
               Cell(16, (0.0,), 0.02, key=True, stall=Interference(0.40, 0.7)),
               Cell(16, (0.0,), 0.02, key=True, stall=Interference(0.40, 0.7), interference=_modes(0.10, 0.6)),
               Cell(32, (0.0,), 0.01, key=True, stall=Interference(0.30, 0.5)),
               Cell(32, (-0.05,), 0.02, key=True, stall=Interference(0.30, 0.7)))
"""Run times with a second mode (`--shapes`): the machine's, at the same share at every commit
(a share of 0.1-0.5 at 0.5-1.6x on 1-5% lognormal noise, faster and slower, with A/A ranges of
each), and a culprit's own (a stall: the first step's commit sends a share of runs slow, with and
without a level step and a machine's tail). A training run's time follows the mean time per token,
so a stall of 40% of runs at 0.7x is a slowdown of 15%: the culprit to name."""


def grid(quick: bool) -> list[Cell]:
    if quick:
        return [Cell(32, (-0.05,), 0.02, key=True, slots=(1, 8)), Cell(128, (-0.05,), 0.02, key=True),
                Cell(128, (-0.05, -0.08), 0.02, key=True), Cell(128, (), 0.02, key=True)]
    cells = []
    for n in (32, 128, 1024):
        for step in (0.03, 0.05, 0.10):
            for cv in (0.01, 0.02, 0.05):
                key = n == 128 and cv >= 0.02
                cells.append(Cell(n, (-step,), cv, key=key, slots=(1, 4, 8) if n == 128 else (1,)))
        for cv in (0.01, 0.02, 0.05):
            cells.append(Cell(n, (-0.05, -0.08), cv, key=(n == 128 and cv == 0.02)))
            cells.append(Cell(n, (), cv, key=True))
    cells.append(Cell(128, (), 0.02, drift=-0.001, key=True))
    cells.append(Cell(128, (-0.05,), 0.02, drift=-0.001, key=True))
    return cells


HIGH_NOISE_STEPS = {0.08: (0.15, 0.03), 0.12: (0.20, 0.03), 0.15: (0.20, 0.03)}
"""Per CV of a busy machine: a step the search should find within max_samples, and one (3%) it
cannot, which must come out 'could not decide' or 'not reproduced', never a culprit."""


@dataclass(frozen=True)
class HunkCell:
    """A simulated diff: one slow hunk (or none) among 4-10 neutral ones, in files of 3 hunks."""

    step: float | None
    """Slowdown of the slow hunk (0.2 = BASE + it runs at 1/1.2 of BASE's tok/s); None: no slow hunk."""
    cv: float
    key: bool = True
    slots: tuple[int, ...] = (1,)
    steps: tuple[float, ...] = ()
    drift: float = 0.0

    @property
    def name(self) -> str:
        what = f"1 slow hunk {self.step:.0%}" if self.step else "no slow hunk"
        return f"hunks: {what} + 4-10 neutral cv={self.cv:.0%}"


def high_noise_grid() -> list:
    """Commit hunts on a noisy machine (32 commits: the range a user bisects by hand on a laptop),
    and hunk hunts on the same noise."""
    cells: list = []
    for cv, steps in HIGH_NOISE_STEPS.items():
        cells += [Cell(32, (-step,), cv, key=True) for step in steps]
        cells.append(Cell(32, (), cv, key=True))
    for cv, steps in HIGH_NOISE_STEPS.items():
        cells += [HunkCell(steps[0], cv), HunkCell(None, cv)]
    return cells


def hunk_trial(cell: HunkCell, trial: int, base_seed: int) -> dict:
    """One simulated hunk hunt with the real decisions (search/hunkdecide.py)."""
    from regressbisect.search.hunkdecide import decide_hunks
    rng = np.random.default_rng([base_seed, 77, int(cell.cv * 1e4), int((cell.step or 0) * 1e4), trial])
    count = int(rng.integers(4, 11)) + (1 if cell.step else 0)
    ids = [f"h{i:02d}" for i in range(count)]
    slow = {ids[int(rng.integers(count))]} if cell.step else set()
    files = [ids[i:i + 3] for i in range(0, count, 3)]
    sigma = math.sqrt(math.log1p(cell.cv ** 2))
    noise = np.random.default_rng(int(rng.integers(2 ** 31)))
    runs = 0

    def measure(subset, purpose):
        nonlocal runs
        runs += 1
        level = 1000.0 / (1 + cell.step) if subset & slow else 1000.0
        return level * float(np.exp(noise.normal(0.0, sigma)))

    decision = decide_hunks(ids, [files], measure, OURS_SETTINGS)
    named = [set(c.hunks) for c in decision.culprits]
    found = set().union(*named) if named else set()
    return {"cell": cell.name, "method": "ours-1", "exact": bool(slow) and named == [slow],
            "hit": bool(found & slow), "both": False, "false": bool(found - slow), "executions": runs,
            "rounds": runs, "verdict": decision.verdict, "reproduced": decision.control.verdict == "reproduced"}


# ----------------------------------------------------------------------------- baselines

class _Measurer:
    """Counts executions; the samples of one round share the machine state (drift)."""

    def __init__(self, history: FakeHistory, seed: int):
        self.ex = FakeExecutor(history, seed)

    def __call__(self, index: int) -> float:
        value = self.ex.measure(index, self.ex.executions + 1)
        assert value is not None
        return value

    @property
    def executions(self) -> int:
        return self.ex.executions


def naive_bisect(history: FakeHistory, seed: int, per_commit: int) -> tuple[list[int], int]:
    """git bisect run: threshold halfway between the endpoints; per_commit samples (median)."""
    m = _Measurer(history, seed)
    n = len(history.levels)

    def value(i: int) -> float:
        return float(np.median([m(i) for _ in range(per_commit)]))

    good, bad = value(0), value(n - 1)
    if bad >= good:
        return [], m.executions                       # "not slower": nothing to bisect
    threshold = (good + bad) / 2
    lo, hi = 0, n - 1                                 # lo is good, hi is bad
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if value(mid) < threshold:
            hi = mid
        else:
            lo = mid
    return [hi], m.executions


class _BetaBernoulliBisector:
    """Equivalent of git_bayesect.Bisector (index 0 = newest): posterior over the first bad
    commit with Beta(1/2, 1/2) priors on the 'slow' rate before and after it, and the probe that
    minimises the expected posterior entropy."""

    def __init__(self, prior: np.ndarray):
        self.prior = prior.astype(float)
        self.yes = np.zeros(len(prior), dtype=np.int64)
        self.tot = np.zeros(len(prior), dtype=np.int64)

    def record(self, index: int, slow: bool) -> None:
        self.tot[index:] += 1
        if slow:
            self.yes[index:] += 1

    def _post(self) -> np.ndarray:
        from scipy.special import betaln
        yl, tl = self.yes, self.tot
        yr, tr = yl[-1] - yl, tl[-1] - tl
        ll = betaln(0.5 + yl, 0.5 + tl - yl) + betaln(0.5 + yr, 0.5 + tr - yr)
        lp = np.where(self.prior > 0, np.log(np.maximum(self.prior, 1e-300)), -np.inf) + ll
        p = np.exp(lp - lp.max())
        return p / p.sum()

    @property
    def distribution(self) -> np.ndarray:
        return self._post()

    def select(self) -> int:
        post = self._post()
        yl, tl = self.yes, self.tot
        yr, tr = yl[-1] - yl, tl[-1] - tl
        p_new = (0.5 + yl) / (1 + tl)
        p_old = (0.5 + yr) / (1 + tr)
        best, best_h = 0, math.inf
        for x in range(len(post)):
            # measuring x: slow with p_new if the first bad index b >= x (x is at or after it)
            q = float(np.sum(post[x:] * p_new[x:]) + np.sum(post[:x] * p_old[:x]))
            h = 0.0
            for outcome_p, w in ((q, np.concatenate([post[:x] * p_old[:x], post[x:] * p_new[x:]])),
                                 (1 - q, np.concatenate([post[:x] * (1 - p_old[:x]), post[x:] * (1 - p_new[x:])]))):
                if outcome_p > 0:
                    w = w[w > 0] / outcome_p
                    h += outcome_p * float(-np.sum(w * np.log(w)))
            if h < best_h - 1e-12:
                best, best_h = x, h
        return best


def bayes_bisect(history: FakeHistory, seed: int) -> tuple[list[int], int]:
    m = _Measurer(history, seed)
    n = len(history.levels)
    good = float(np.median([m(0) for _ in range(5)]))
    bad = float(np.median([m(n - 1) for _ in range(5)]))
    if bad >= good:
        return [], m.executions
    threshold = (good + bad) / 2
    prior = np.ones(n)
    prior[n - 1] = 0.0                       # relative index n-1 is GOOD: it cannot be the first bad
    bis = (_BayesectBisector or _BetaBernoulliBisector)(prior)
    while bis.distribution.max() < BAYES_CONFIDENCE and m.executions < BAYES_MAX_PROBES:
        rel = int(bis.select())
        bis.record(rel, m(n - 1 - rel) < threshold)
    return [n - 1 - int(np.argmax(bis.distribution))], m.executions


# ----------------------------------------------------------------------------- trials

def _history(cell: Cell, trial: int, base_seed: int) -> tuple[FakeHistory, set[int], int]:
    rng = np.random.default_rng([base_seed, cell.n, len(cell.steps), int(cell.cv * 1e4),
                                 int(abs(cell.steps[0]) * 1e4) if cell.steps else 0, int(cell.drift * 1e6) % 1000, trial])
    firsts = sorted(int(x) for x in rng.choice(np.arange(1, cell.n), size=len(cell.steps), replace=False))
    levels = step_levels(cell.n, dict(zip(firsts, cell.steps)))
    stalls = ((firsts[0], cell.stall),) if cell.stall is not None else ()
    return (FakeHistory(levels, cell.cv, cell.drift, interference=cell.interference, stalls=stalls), set(firsts),
            int(rng.integers(2 ** 31)))


def run_trial(task: tuple[Cell, str, int, int]) -> dict:
    import warnings
    warnings.simplefilter("ignore", RuntimeWarning)   # git_bayesect takes log(0) of zeroed priors
    cell, method, trial, base_seed = task
    if isinstance(cell, HunkCell):
        return hunk_trial(cell, trial, base_seed)
    history, truth, noise_seed = _history(cell, trial, base_seed)
    rounds = None
    if method.startswith("ours"):
        slots = int(method.split("-")[1])
        r = simulate(history, OURS_SETTINGS, slots=slots, seed=noise_seed, prior_samples=PRIOR_SAMPLES)
        found, executions, rounds = [c.first_bad for c in r.result.culprits], r.executions, r.rounds
    elif method == "naive":
        found, executions = naive_bisect(history, noise_seed, 1)
    elif method == "careful":
        found, executions = naive_bisect(history, noise_seed, 5)
    else:
        found, executions = bayes_bisect(history, noise_seed)
    found_set = set(found)
    return {"cell": cell.name, "method": method, "exact": found_set == truth and bool(truth),
            "hit": bool(found_set & truth), "both": bool(truth) and truth <= found_set,
            "false": bool(found_set - truth), "executions": executions, "rounds": rounds,
            "verdict": r.result.verdict if method.startswith("ours") else None,
            "reproduced": r.result.reproduced if method.startswith("ours") else None}


def _set_settings(confidence: float, drift_prior: float, max_samples: int, prior_samples: int = 0,
                  name_alpha: float = SearchSettings().name_alpha,
                  reproduce_alpha: float = SearchSettings().reproduce_alpha,
                  side_pairs: int | None = SearchSettings().side_pairs,
                  read_interference: bool = SearchSettings().read_interference) -> None:
    global OURS_SETTINGS, PRIOR_SAMPLES
    PRIOR_SAMPLES = prior_samples
    OURS_SETTINGS = SearchSettings(confidence=confidence, drift_prior=drift_prior, max_samples=max_samples,
                                   name_alpha=name_alpha, reproduce_alpha=reproduce_alpha, side_pairs=side_pairs,
                                   read_interference=read_interference)


def aggregate(rows: list[dict]) -> dict:
    out: dict = {}
    for r in rows:
        out.setdefault((r["cell"], r["method"]), []).append(r)
    table = {}
    for (cell, method), rs in out.items():
        t = len(rs)
        table.setdefault(cell, {})[method] = {
            "trials": t,
            "exact": sum(r["exact"] for r in rs) / t, "hit": sum(r["hit"] for r in rs) / t,
            "both": sum(r["both"] for r in rs) / t, "false": sum(r["false"] for r in rs) / t,
            "executions": float(np.mean([r["executions"] for r in rs])),
            "p95": float(np.percentile([r["executions"] for r in rs], 95)),
            "rounds": float(np.mean([r["rounds"] for r in rs])) if rs[0]["rounds"] is not None else None,
        }
        if rs[0].get("verdict") is not None:
            verdicts = [r["verdict"] for r in rs]
            table[cell][method]["reproduced"] = sum(r["reproduced"] for r in rs) / t
            table[cell][method]["undecided"] = sum(v in ("undecided", "not-localised") for v in verdicts) / t
    return table


def wilson_low(p: float, n: int, z: float = 1.96) -> float:
    """Lower end of the Wilson 95% interval of a rate: what a '99%' claim on n trials supports."""
    if n == 0:
        return 0.0
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - spread) / (1 + z * z / n)


# ----------------------------------------------------------------------------- report

METHODS = ("ours-1", "naive", "careful", "bayes")


def markdown(cells: list[Cell], table: dict, args: argparse.Namespace, seconds: float) -> str:
    lines = [f"Simulated histories, lognormal noise; {BAYES_IMPL} for the Bayesian baseline; "
             f"seed {args.seed}; ours stops at posterior mass {args.confidence}, drift prior {args.drift_prior}, "
             f"max samples {args.max_samples}; name_alpha {args.name_alpha:g}, reproduce_alpha "
             f"{args.reproduce_alpha:g}; side pairs {args.side_pairs}; runs read as interfered: {'yes' if args.read_interference else 'no'}; "
             f"remembered noise from {args.noise_prior} samples; "
             f"{seconds / 60:.1f} min on {args.jobs} processes.", "",
             "| cell | method | trials | exact | hit | both | false culprit | reproduced | could not decide | executions | p95 | rounds s=1/4/8 |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for cell in cells:
        row = table.get(cell.name, {})
        for method in METHODS:
            if method not in row:
                continue
            m = row[method]
            rounds = ""
            if method == "ours-1":
                rounds = " / ".join(f"{row[f'ours-{s}']['rounds']:.1f}" for s in cell.slots if f"ours-{s}" in row)
            both = f"{m['both']:.1%}" if len(cell.steps) > 1 else ""
            verdicts = (f"{m['reproduced']:.1%} | {m['undecided']:.1%}" if "reproduced" in m else " | ")
            lines.append(f"| {cell.name} | {method.replace('ours-1', 'ours')} | {m['trials']} | {m['exact']:.1%} | "
                         f"{m['hit']:.1%} | {both} | {m['false']:.1%} | {verdicts} | {m['executions']:.1f} | "
                         f"{m.get('p95', math.nan):.0f} | {rounds} |")
    lines += ["", "Goals:", ""]
    lines += [f"- {'PASS' if ok else 'FAIL'}: {text}" for ok, text in goals(cells, table)]
    return "\n".join(lines) + "\n"


def goals(cells: list[Cell], table: dict) -> list[tuple[bool, str]]:
    out = []

    def get(n, steps, cv, method="ours-1", drift=0.0):
        name = Cell(n, steps, cv, drift).name
        return table.get(name, {}).get(method)

    key = get(128, (-0.03,), 0.02)
    if key:
        low = wilson_low(key["exact"], key["trials"])
        out.append((key["exact"] >= 0.99 and key["executions"] <= 60,
                    f"3% step, 2% CV, 128 commits: exact {key['exact']:.1%} (95% lower bound {low:.1%}, "
                    f"{key['trials']} trials), {key['executions']:.1f} executions (goal >= 99%, <= 60)"))
    noisy = [c for c in cells if c.steps and len(c.steps) == 1 and c.cv >= 0.02 and not c.drift]
    for c in noisy:
        ours, bayes = table.get(c.name, {}).get("ours-1"), table.get(c.name, {}).get("bayes")
        if ours and bayes:
            ok = ours["exact"] >= bayes["exact"] - 1e-9 and ours["executions"] <= 0.5 * bayes["executions"]
            out.append((ok, f"{c.name}: exact {ours['exact']:.1%} vs bayes {bayes['exact']:.1%}; executions "
                            f"{ours['executions']:.0f} vs {bayes['executions']:.0f} "
                            f"({ours['executions'] / bayes['executions']:.0%} of it; goal <= 50%, accuracy >= bayes)"))
    two = get(128, (-0.05, -0.08), 0.02)
    if two:
        out.append((two["both"] >= 0.95, f"5% + 8% at 2% CV, 128 commits: both found {two['both']:.1%} (goal >= 95%)"))
    for c in cells:
        if not c.steps and not getattr(c, "step", None) and "ours-1" in table.get(c.name, {}):
            m = table[c.name]["ours-1"]
            out.append((1 - m["false"] >= 0.99, f"{c.name}: no culprit in {1 - m['false']:.1%} of "
                                                f"{m['trials']} A/A ranges (goal >= 99%)"))
            if "reproduced" in m:
                out.append((m["reproduced"] <= 0.01, f"{c.name}: 'reproduced' in {m['reproduced']:.1%} of "
                                                     f"{m['trials']} A/A ranges (goal <= 1%)"))
    for c in cells:
        m = table.get(c.name, {}).get("ours-1")
        if c.cv >= 0.08 and m:
            out.append((m["false"] == 0, f"{c.name}: false culprit in {m['false']:.1%} of {m['trials']} hunts "
                                         "(goal 0)"))
    for c in cells:
        row = table.get(c.name, {})
        if "ours-8" in row and "ours-1" in row:
            ratio = row["ours-8"]["rounds"] / row["ours-1"]["rounds"]
            out.append((ratio <= 0.4, f"{c.name}: rounds with 8 slots are {ratio:.0%} of 1 slot (goal <= 40%)"))
    return out


def _write(args: argparse.Namespace, cells: list[Cell], table: dict, seconds: float) -> str:
    table = {c.name: table[c.name] for c in cells if c.name in table}     # complete cells only
    text = markdown(cells, table, args, seconds)
    for out in args.out:
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".json":
            _common.write_results(path, {"bayes_impl": BAYES_IMPL, "seed": args.seed, "cells": table,
                                         "goals": [{"ok": ok, "text": t} for ok, t in goals(cells, table)]})
        else:
            path.write_text("# Accuracy benchmark (scripts/bench_accuracy.py)\n\n" + _common.provenance_line() + "\n\n" + text)
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=200, help="trials per key cell (those the goals rest on)")
    p.add_argument("--trials-other", type=int, default=None, help="trials per other cell (default: trials / 2)")
    p.add_argument("--quick", action="store_true", help="a small grid with few trials (CI smoke)")
    p.add_argument("--seed", type=int, default=20240601)
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    p.add_argument("--only", default="", help="run only the cells whose name contains this text")
    p.add_argument("--key-only", action="store_true", help="run only the cells the goals rest on")
    p.add_argument("--resume", default=None, help="a results .json of an earlier run: its cells are kept, not re-run")
    p.add_argument("--out", action="append", default=[], help="write results (.json or .md); repeatable")
    p.add_argument("--confidence", type=float, default=SearchSettings().confidence,
                   help="posterior mass our search stops at (default 0.99; the Bayesian baseline stops at 0.95)")
    p.add_argument("--drift-prior", type=float, default=SearchSettings().drift_prior,
                   help="prior probability of the posterior's drift model (SearchSettings.drift_prior; 0 turns it off)")
    p.add_argument("--max-samples", type=int, default=SearchSettings().max_samples,
                   help="our search's cap of samples per candidate (SearchSettings.max_samples)")
    p.add_argument("--name-alpha", type=float, default=SearchSettings().name_alpha,
                   help="family-wise rate of naming a commit that is no step (SearchSettings.name_alpha)")
    p.add_argument("--reproduce-alpha", type=float, default=SearchSettings().reproduce_alpha,
                   help="level of the control arm's 'reproduced' (SearchSettings.reproduce_alpha)")
    p.add_argument("--side-pairs", type=int, default=SearchSettings().side_pairs,
                   help="size a side's margin also by the noise, for about this many fresh pairs "
                        "(SearchSettings.side_pairs; default: by the gap alone)")
    p.add_argument("--high-noise", action="store_true",
                   help="the busy-machine cells (CV 8, 12, 15%%; ours only, every cell gets --trials)")
    p.add_argument("--noise-prior", type=int, default=0, metavar="N",
                   help="give our search a remembered noise scale from N samples of an earlier commit "
                        "(an earlier hunt on the same machine; 0: none, the first hunt)")
    p.add_argument("--floor", action="store_true",
                   help="the cost goals' cells (FLOOR_CELLS; ours only, every cell gets --trials)")
    p.add_argument("--interference", action="store_true",
                   help="the cells whose runs are now and then far off their level (INTERFERENCE_CELLS), "
                        "beside the baselines")
    p.add_argument("--shapes", action="store_true",
                   help="the cells whose run times have a second mode, the machine's or a culprit's (SHAPE_CELLS)")
    p.add_argument("--read-interference", action=argparse.BooleanOptionalAction,
                   default=SearchSettings().read_interference,
                   help="our search reads runs far off their level as interfered (SearchSettings.read_interference; "
                        "default: its default)")
    p.add_argument("--ours-only", action="store_true",
                   help="run only our search with one slot, no baselines (to compare variants of it quickly)")
    args = p.parse_args(argv)
    if args.quick and args.trials == 200:
        args.trials = 20
    other = args.trials_other if args.trials_other is not None else max(1, args.trials // 2)
    if args.high_noise or args.floor:
        args.ours_only = True
    chosen = (list(FLOOR_CELLS) if args.floor else high_noise_grid() if args.high_noise
              else list(INTERFERENCE_CELLS) if args.interference else list(SHAPE_CELLS) if args.shapes
              else grid(args.quick))
    cells = [c for c in chosen
             if args.only in c.name and (c.key or not args.key_only)]
    kept: dict = _common.read_results(Path(args.resume))["cells"] if args.resume else {}
    tasks = []
    for cell in sorted(cells, key=lambda c: not c.key):    # the cells the goals rest on first
        if cell.name in kept:
            continue
        methods = ["ours-1"] if args.ours_only else [f"ours-{s}" for s in cell.slots] + ["naive", "careful", "bayes"]
        for method in methods:
            for trial in range(args.trials if cell.key else other):
                tasks.append((cell, method, trial, args.seed))
    start = time.time()
    expected: dict[str, int] = {}
    for cell, *_ in tasks:
        expected[cell.name] = expected.get(cell.name, 0) + 1
    rows: list[dict] = []
    done: dict[str, int] = {}
    with mp.Pool(args.jobs, initializer=_set_settings, initargs=(args.confidence, args.drift_prior, args.max_samples, args.noise_prior,
                                                                 args.name_alpha, args.reproduce_alpha, args.side_pairs,
                                                                 args.read_interference)) as pool:
        for row in pool.imap_unordered(run_trial, tasks, chunksize=2):
            rows.append(row)
            done[row["cell"]] = done.get(row["cell"], 0) + 1
            if done[row["cell"]] == expected[row["cell"]]:
                # a cell is complete: show it, and keep partial results on disk (runs are long)
                table = {**kept, **aggregate(rows)}
                finished = [c for c in cells if c.name in kept or done.get(c.name) == expected[c.name]]
                print(f"[{(time.time() - start) / 60:5.1f} min] {row['cell']} done "
                      f"({len(finished)}/{len(cells)} cells)", file=sys.stderr, flush=True)
                _write(args, finished, table, time.time() - start)
    table = {**kept, **aggregate(rows)}
    print(_write(args, cells, table, time.time() - start))
    return 0 if all(ok for ok, _ in goals(cells, table)) or args.quick else 1


if __name__ == "__main__":
    raise SystemExit(main())
