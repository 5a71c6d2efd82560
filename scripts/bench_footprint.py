#!/usr/bin/env python
"""Overhead of recording the probe's footprint (the shim's audit hook, REGRESSBISECT_FOOTPRINT):
the reference workload with the import recorder on in both arms, the footprint's hook on in one,
interleaved; and the hook's cost per audit event.

    python scripts/bench_footprint.py                      # tiny preset, CPU, 10 pairs
    python scripts/bench_footprint.py --preset h200 --pairs 6 --device cuda   # on a GPU

Each pair runs both arms back to back, alternating which goes first (ABBA). Per pair the change is
log(tok_s(footprint) / tok_s(plain)); the table gives its mean as a percentage and its standard
error (`_common.paired_change`). Only the first probe of each candidate of a hunt runs with the
hook: this is what that probe pays inside its measured window. The per-event rows time a loop of
an event the hook ignores (`id()`, which raises `builtins.id`) and of one it records (`open` of a
file of the worktree), each in a fresh interpreter, with and without the hook. The last rows count
the audit events a measured step raises (two runs at two budgets, a counting hook: the
difference of their events over the difference of their steps) and price them at the per-event
cost: a bound on the hook's share of a step that machine noise does not blur. This process never
imports torch.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
import _common  # noqa: E402  (puts the repository on sys.path)

from regressbisect.probe.contract import FOOTPRINT_ENV, IMPORTS_DIR_ENV, INSTRUMENT_ENV  # noqa: E402
from regressbisect.workload.dflash import workload_command  # noqa: E402  (stdlib-only import)

SHIM_DIR = REPO_ROOT / "regressbisect" / "probe" / "shim"
PER_EVENT = """
import os, sys, time
n = {n}
t = time.perf_counter()
for _ in range(n):
    id(n)
ignored = (time.perf_counter() - t) / n
t = time.perf_counter()
for _ in range(n // 10):
    open({path!r}).close()
recorded = (time.perf_counter() - t) / (n // 10)
print(ignored, recorded)
"""
COUNT_EVENTS = """
import atexit, runpy, sys
count = [0]
def hook(event, args, count=count):
    count[0] += 1
sys.addaudithook(hook)
atexit.register(lambda: print("@events", count[0], file=sys.stderr))
sys.argv = [sys.argv[0]] + sys.argv[2:]
runpy.run_module({module!r}, run_name="__main__", alter_sys=True)
"""


def events_per_step(cmd: list[str], tokens: int, timeout: float) -> tuple[float, float]:
    """(audit events per measured step, median step ms): runs at `tokens` and 3x `tokens`."""
    module = cmd[cmd.index("-m") + 1]
    rest = cmd[cmd.index("-m") + 2:]
    seen = []
    for budget in (tokens, 3 * tokens):
        argv = [cmd[0], "-c", COUNT_EVENTS.format(module=module), "x", *rest, "--tokens", str(budget)]
        proc = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout,
                              env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                                  p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p)))
        line = next(line for line in proc.stdout.splitlines() if line.startswith("@regressbisect "))
        iters = json.loads(line.split(" ", 1)[1]).get("iters") or []
        events = int(next(line for line in proc.stderr.splitlines() if line.startswith("@events")).split()[1])
        seen.append((events, len(iters), statistics.median(row["ms"] for row in iters) if iters else math.nan))
    (e1, s1, _), (e2, s2, ms) = seen
    return (e2 - e1) / max(1, s2 - s1), ms


def _env(footprint: bool, records: str) -> dict[str, str]:
    """The recorder on (as in every probe of a hunt), the footprint's hook in one arm only."""
    env = {k: v for k, v in os.environ.items() if k not in (INSTRUMENT_ENV, FOOTPRINT_ENV)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SHIM_DIR), str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    env[IMPORTS_DIR_ENV] = records
    if footprint:
        env[FOOTPRINT_ENV] = str(REPO_ROOT)
    return env


def run_once(cmd: list[str], footprint: bool, timeout: float) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-footprint-") as records:
        proc = subprocess.run(cmd, cwd=REPO_ROOT, env=_env(footprint, records), capture_output=True, text=True,
                              timeout=timeout)
        if footprint and not any(Path(records).glob("*.rec")):
            raise RuntimeError("the footprint arm wrote no record")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("@regressbisect ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"run failed (exit {proc.returncode}): {proc.stderr[-1500:]}")
    return float(json.loads(lines[0].split(" ", 1)[1])["tok_s"])


def _budget(cmd: list[str], timeout: float) -> int:
    """The tokens one run of `cmd` measures (the preset's budget)."""
    with tempfile.TemporaryDirectory(prefix="bench-footprint-") as records:
        out = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout,
                             env=_env(False, records)).stdout
    line = next(line for line in out.splitlines() if line.startswith("@regressbisect "))
    return int(json.loads(line.split(" ", 1)[1])["tokens"])


def per_event(footprint: bool, n: int) -> tuple[float, float]:
    """Seconds per ignored event and per recorded open, in a fresh interpreter."""
    with tempfile.TemporaryDirectory(prefix="bench-footprint-") as records:
        code = PER_EVENT.format(n=n, path=str(REPO_ROOT / "README.md"))
        out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=_env(footprint, records),
                             capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), float(out[1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--tokens", type=int, default=None, help="budget per run (default: the preset's)")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--events", type=int, default=2_000_000, help="loop length of the per-event rows")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    args = ap.parse_args()
    cmd = workload_command(args.preset, 1, args.tokens) + ["--device", args.device]
    plain: list[float] = []
    hooked: list[float] = []
    for pair in range(args.pairs):
        order = (False, True) if pair % 2 == 0 else (True, False)
        got = {arm: run_once(cmd, arm, args.timeout) for arm in order}
        plain.append(got[False])
        hooked.append(got[True])
        print(f"pair {pair + 1}/{args.pairs}: plain {got[False]:.1f} tok/s, footprint {got[True]:.1f} tok/s",
              file=sys.stderr, flush=True)
    log_ratios = [math.log(h / p) for p, h in zip(plain, hooked)]
    tokens = args.tokens or _budget(cmd, args.timeout)
    per_step, step_ms = events_per_step(cmd, tokens, args.timeout)
    events = {arm: [per_event(arm, args.events) for _ in range(3)] for arm in (False, True)}
    ignored = {arm: statistics.median(e[0] for e in runs) for arm, runs in events.items()}
    recorded = {arm: statistics.median(e[1] for e in runs) for arm, runs in events.items()}
    _common.print_table(
        [f"{args.preset} ({args.device}), {args.pairs} pairs", "plain", "footprint's hook", "change (se)"],
        [("median tok/s", f"{statistics.median(plain):.1f}", f"{statistics.median(hooked):.1f}",
          _common.paired_change(log_ratios, digits=2)),
         ("ns per ignored audit event (`id()`)", f"{1e9 * ignored[False]:.0f}", f"{1e9 * ignored[True]:.0f}",
          f"+{1e9 * (ignored[True] - ignored[False]):.0f} ns"),
         ("ns per open() of a worktree file", f"{1e9 * recorded[False]:.0f}", f"{1e9 * recorded[True]:.0f}",
          f"+{1e9 * (recorded[True] - recorded[False]):.0f} ns"),
         ("audit events per measured step; median step ms", f"{per_step:.0f}", f"{step_ms:.1f} ms", ""),
         ("the hook's cost per step (events x ns per ignored event)", "",
          f"{per_step * (ignored[True] - ignored[False]) * 1e6:.1f} us",
          f"{100 * per_step * (ignored[True] - ignored[False]) * 1e3 / step_ms:+.3f}% of a step")])
    if args.json is not None:
        _common.write_results(args.json, {"preset": args.preset, "device": args.device, "plain_tok_s": plain,
                                          "footprint_tok_s": hooked, "ignored_event_s": ignored,
                                          "recorded_open_s": recorded, "events_per_step": per_step,
                                          "step_ms": step_ms})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
