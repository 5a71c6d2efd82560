#!/usr/bin/env python
"""Overhead of the counters shim on the reference workload: shimmed vs unshimmed runs, interleaved.

    python scripts/bench_instrument.py                      # tiny preset, CPU, 10 pairs
    python scripts/bench_instrument.py --preset h200 --pairs 8 --nproc 1   # on an H200

Each pair runs both arms back to back, alternating which goes first (ABBA), so slow drift hits
both arms alike. Per pair the overhead is 1 - tok_s(shim) / tok_s(plain). The estimate is the
Hodges-Lehmann one-sample estimator (median of the Walsh averages) with its distribution-free 95%
confidence interval from the exact Wilcoxon signed-rank distribution (Hollander & Wolfe,
"Nonparametric Statistical Methods", 3.2). This process never imports torch.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
import _common  # noqa: E402,F401  (puts the repository on sys.path)

from regressbisect.workload.dflash import workload_command  # noqa: E402  (stdlib-only import)

SHIM_DIR = REPO_ROOT / "regressbisect" / "probe" / "shim"


@dataclass(frozen=True)
class Estimate:
    """A location estimate with its confidence interval."""

    value: float
    """Point estimate."""
    low: float
    """Lower end of the interval."""
    high: float
    """Upper end of the interval."""
    confidence: float
    """Achieved coverage of the interval (the exact distribution is discrete)."""


def signed_rank_cdf(n: int) -> list[float]:
    """P(T <= t) for the Wilcoxon signed-rank statistic T with n pairs, t = 0..n(n+1)/2."""
    counts = [1] + [0] * (n * (n + 1) // 2)
    for rank in range(1, n + 1):  # subset-sum counts of {1..n}
        for total in range(len(counts) - 1, rank - 1, -1):
            counts[total] += counts[total - rank]
    cdf, running, all_subsets = [], 0, 2 ** n
    for c in counts:
        running += c
        cdf.append(running / all_subsets)
    return cdf


def hodges_lehmann(values: list[float], alpha: float = 0.05) -> Estimate:
    """Median of the Walsh averages and the signed-rank confidence interval."""
    n = len(values)
    walsh = sorted((values[i] + values[j]) / 2 for i in range(n) for j in range(i, n))
    center = statistics.median(walsh)
    cdf = signed_rank_cdf(n)
    # Largest c with P(T <= c) <= alpha/2: the interval is [W_(c+1), W_(M-c)] (1-indexed).
    c = max((t for t, p in enumerate(cdf) if p <= alpha / 2), default=-1)
    if c < 0:  # too few pairs for this confidence: report the range
        return Estimate(center, walsh[0], walsh[-1], 1.0 - 2 * cdf[0])
    return Estimate(center, walsh[c], walsh[len(walsh) - 1 - c], 1.0 - 2 * cdf[c])


def run_once(cmd: list[str], shim: bool, timeout: float) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REGRESSBISECT_INSTRUMENT")}
    path = [str(REPO_ROOT)] + ([str(SHIM_DIR)] if shim else [])
    if shim:
        path.reverse()  # the shim directory first, as the runner puts it
        env["REGRESSBISECT_INSTRUMENT"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(path + [env["PYTHONPATH"]] if env.get("PYTHONPATH") else path)
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("@regressbisect ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"run failed (exit {proc.returncode}): {proc.stderr[-1500:]}")
    return float(json.loads(lines[0].split(" ", 1)[1])["tok_s"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--nproc", type=int, default=1)
    ap.add_argument("--tokens", type=int, default=None, help="budget per run (default: the preset's)")
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args()
    cmd = workload_command(args.preset, args.nproc, args.tokens)
    plain: list[float] = []
    shimmed: list[float] = []
    for pair in range(args.pairs):
        order = (False, True) if pair % 2 == 0 else (True, False)
        got = {arm: run_once(cmd, arm, args.timeout) for arm in order}
        plain.append(got[False])
        shimmed.append(got[True])
        print(f"pair {pair + 1}/{args.pairs}: plain {got[False]:.1f} tok/s, shim {got[True]:.1f} tok/s",
              file=sys.stderr, flush=True)
    overhead_pct = [100.0 * (1.0 - s / p) for p, s in zip(plain, shimmed)]
    est = hodges_lehmann(overhead_pct)
    rows = [("plain (no shim)", f"{statistics.median(plain):.1f}", ""),
            ("shim (counters)", f"{statistics.median(shimmed):.1f}", ""),
            ("overhead %", f"{est.value:+.2f}", f"[{est.low:+.2f}, {est.high:+.2f}] "
                                                  f"({100 * est.confidence:.1f}% CI, Hodges-Lehmann)")]
    try:
        from tabulate import tabulate

        print(tabulate(rows, headers=[f"{args.preset}, {args.pairs} pairs", "median tok/s", "interval"],
                       disable_numparse=True))
    except ImportError:
        for row in rows:
            print("  ".join(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
