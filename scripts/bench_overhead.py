#!/usr/bin/env python3
"""Per-probe overhead of regressbisect: worktree switch + process start, against the probe's run.

Builds a 50-commit repository (a few hundred files, each commit touching several), then for each
probe: switches a pooled worktree to the next commit (as a hunt does) and runs a probe that works
for a fixed time and reports its own measured seconds. Overhead = tool wall time - the probe's own
measured time. Prints one table; README quotes it.

    python scripts/bench_overhead.py [--commits 50] [--probes 30] [--probe-seconds 1.0]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common  # noqa: E402,F401  (puts the repository on sys.path)

from tabulate import tabulate  # noqa: E402

from regressbisect.git.history import History  # noqa: E402
from regressbisect.git.worktrees import WorktreePool  # noqa: E402
from regressbisect.probe.runner import ProbeSpec, run_probe  # noqa: E402

PROBE = """\
import time, json, os
t0 = time.perf_counter()
while time.perf_counter() - t0 < {seconds}:
    pass
dt = time.perf_counter() - t0
print("@regressbisect " + json.dumps({{"tokens": 1000, "seconds": dt, "tok_s": 1000 / dt}}))
"""


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def build_repo(root: Path, commits: int, files: int, seconds: float) -> list[str]:
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "bench@example.com")
    git(root, "config", "user.name", "bench")
    for i in range(files):
        sub = root / "src" / f"pkg{i % 10}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"mod{i}.py").write_text("".join(f"def f{j}():\n    return {j}\n" for j in range(40)))
    (root / "probe.py").write_text(PROBE.format(seconds=seconds))
    shas = []
    for c in range(commits):
        for k in range(5):  # each commit touches 5 files, as real history does
            j = (c * 7 + k) % files
            path = root / "src" / f"pkg{j % 10}" / f"mod{j}.py"
            path.write_text(path.read_text() + f"# commit {c}\n")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", f"commit {c}")
        shas.append(git(root, "rev-parse", "HEAD").strip())
    return shas


def measure(history: History, shas: list[str], probes: int, command: str, seconds: float):
    switch_ms, start_ms, overhead_pct, own_s = [], [], [], []
    spec = ProbeSpec(command=command, tokens=1000, timeout_s=60)
    with WorktreePool(history, slots=1) as pool:
        pool.checkout(0, shas[0])  # first use creates the worktree: not a per-probe cost
        for p in range(probes):
            sha = shas[(p * 17 + 3) % len(shas)]  # bisection jumps around the range
            t0 = time.perf_counter()
            worktree = pool.checkout(0, sha)
            t1 = time.perf_counter()
            outcome = run_probe(spec, worktree)
            t2 = time.perf_counter()
            assert outcome.sample is not None, outcome.skip_reason
            inner = outcome.sample.seconds
            switch_ms.append((t1 - t0) * 1e3)
            start_ms.append(((t2 - t1) - inner) * 1e3)
            overhead_pct.append(100 * ((t2 - t0) - inner) / inner)
            own_s.append(inner)
    return switch_ms, start_ms, overhead_pct, own_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--commits", type=int, default=50)
    ap.add_argument("--files", type=int, default=300)
    ap.add_argument("--probes", type=int, default=30)
    ap.add_argument("--probe-seconds", type=float, default=1.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        root.mkdir()
        shas = build_repo(root, args.commits, args.files, args.probe_seconds)
        history = History.open(root)
        rows = []
        # The shell probe isolates the tool's own cost (switch, spawn, capture, parse) from the
        # probe interpreter's start-up, which the python rows include.
        shell = (f"sleep {args.probe_seconds}; echo '@regressbisect "
                 f"{{\"tokens\": 1000, \"seconds\": {args.probe_seconds}, \"tok_s\": {1000 / args.probe_seconds}}}'")
        for name, command in [("shell: sleep + echo", shell),
                              ("python probe.py", f"{sys.executable} probe.py"),
                              ("python -S probe.py", f"{sys.executable} -S probe.py")]:
            sw, st, ov, own = measure(history, shas, args.probes, command, args.probe_seconds)
            q = lambda xs, p: sorted(xs)[min(len(xs) - 1, int(p * len(xs)))]  # noqa: E731
            rows.append([name, f"{statistics.median(own):.3f}", f"{statistics.median(sw):.1f}",
                         f"{q(sw, 0.9):.1f}", f"{statistics.median(st):.1f}", f"{q(st, 0.9):.1f}",
                         f"{statistics.median(ov):.2f}%", f"{q(ov, 0.9):.2f}%"])
    print(f"{args.commits}-commit repo, {args.files} files, {args.probes} probes each, "
          f"probe works {args.probe_seconds:.1f} s")
    print(tabulate(rows, headers=["probe", "own s", "switch ms", "p90", "start+exit ms", "p90",
                                  "overhead", "p90"], tablefmt="github"))


if __name__ == "__main__":
    main()
