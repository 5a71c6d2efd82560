#!/usr/bin/env python
"""Throughput and run-to-run spread of the reference workload, one process per run (as probes are).

    python scripts/bench_workload.py --preset tiny --runs 5
    python scripts/bench_workload.py --preset h200 --runs 5          # on an H200

Per run: tok/s of the measured stage, its wall time, and the time before the first measured step
(process start, imports, compilation, warm-up): what a probe pays before it measures anything.
Across runs: median tok/s and the coefficient of variation between processes. Also the
per-iteration ms of the measured steps (first step vs median) to show the stage is steady.
This process never imports torch; runs go through the same runner as the hunt's probes.
"""
from __future__ import annotations

import argparse
import shlex
import statistics
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
from _common import write_results  # noqa: E402  (also puts the repository on sys.path)

from tabulate import tabulate  # noqa: E402

from regressbisect.probe.runner import ProbeSpec, run_probe  # noqa: E402
from regressbisect.workload.dflash import get_preset, workload_command  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--nproc", type=int, default=1)
    ap.add_argument("--tokens", type=int, default=None)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--json", type=Path, default=None, help="write every run's numbers here")
    args = ap.parse_args()
    tokens = args.tokens or get_preset(args.preset).default_tokens
    command = shlex.join(workload_command(args.preset, args.nproc, tokens))
    spec = ProbeSpec(command=command, tokens=tokens, timeout_s=args.timeout)
    rows, runs = [], []
    for i in range(args.runs):
        outcome = run_probe(spec, REPO_ROOT)
        if outcome.sample is None:
            print(f"run {i}: skipped: {outcome.skip_reason}\n{outcome.output_tail}", file=sys.stderr)
            continue
        s = outcome.sample
        step_ms = [r["ms"] for r in s.iters if "ms" in r]
        before = outcome.wall_seconds - (s.seconds or 0.0)
        runs.append({"tok_s": s.tok_s, "tokens": s.tokens, "seconds": s.seconds,
                     "wall_seconds": outcome.wall_seconds, "before_measuring_s": before,
                     "step_ms": step_ms})
        rows.append([i, f"{s.tok_s:,.0f}", f"{s.tokens:,.0f}", f"{s.seconds:.2f}", f"{outcome.wall_seconds:.1f}",
                     f"{before:.1f}", f"{step_ms[0]:.1f}" if step_ms else "-",
                     f"{statistics.median(step_ms):.1f}" if step_ms else "-"])
        print(f"run {i}: {s.tok_s:,.1f} tok/s, wall {outcome.wall_seconds:.1f}s", file=sys.stderr, flush=True)
    print(f"preset {args.preset}, nproc {args.nproc}, command: {command}")
    print(tabulate(rows, headers=["run", "tok/s", "tokens", "measured s", "wall s", "before 1st step s",
                                  "1st step ms", "median step ms"], tablefmt="github"))
    if len(runs) >= 2:
        values = [r["tok_s"] for r in runs]
        cv = statistics.stdev(values) / statistics.mean(values)
        walls = [r["wall_seconds"] for r in runs]
        measured = [r["seconds"] for r in runs]
        print(f"\nmedian {statistics.median(values):,.0f} tok/s, CV between processes {100 * cv:.2f}% "
              f"over {len(values)} runs; measured share of wall time "
              f"{100 * sum(measured) / sum(walls):.0f}%")
    if args.json:
        write_results(args.json, {"preset": args.preset, "nproc": args.nproc, "runs": runs})


if __name__ == "__main__":
    main()
