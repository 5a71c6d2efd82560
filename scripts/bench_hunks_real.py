#!/usr/bin/env python3
"""The hunk hunt on real processes: a 5-hunk uncommitted diff whose one slow hunk makes a noisy
busy-loop step about 15% slower, hunted end to end by the CLI (`regressbisect hunks`, one process
per sample), several times. Prints per hunt: the verdict, what was named, probes and wall time,
and the mean; a named neutral hunk is a false answer.

The probe and the diff are regressbisect.testing.noisyrepo's: WORK units of busy work (sized here
to about 60 ms), then a pause drawn from os.urandom (uniform, 0-40 ms), so that its runs vary by
about 13% between processes on a quiet machine (the script measures and prints the spread first).

    python scripts/bench_hunks_real.py --hunts 3 [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common  # noqa: E402,F401  (puts the repository on sys.path)

from regressbisect.probe.protocol import parse_output  # noqa: E402
from regressbisect.testing.noisyrepo import SLOW_HUNK, make_five_hunk_diff, make_noisy_repo  # noqa: E402

def tok_s_of(repo: Path) -> float:
    out = subprocess.run([sys.executable, "train.py"], cwd=repo, capture_output=True, text=True, check=True).stdout
    return parse_output(out)[-1].tok_s


def spread(repo: Path, runs: int) -> tuple[float, float]:
    values = [tok_s_of(repo) for _ in range(runs)]
    return statistics.mean(values), statistics.stdev(values) / statistics.mean(values)


def calibrate_work(target_s: float, tmp: Path) -> int:
    """WORK for which the probe's busy part takes about target_s here: its own run at 100,000
    units and no pause, scaled (the best of three runs)."""
    units = 100_000
    make_noisy_repo(tmp, units, 0.0)
    seconds = min(4096 / tok_s_of(tmp) for _ in range(3))
    return max(1000, int(units * target_s / seconds))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hunts", type=int, default=3)
    ap.add_argument("--work-s", type=float, default=0.06, help="busy time of one step, seconds")
    ap.add_argument("--pause-s", type=float, default=0.04, help="the random pause is uniform in 0..this")
    ap.add_argument("--min-effect", type=float, default=0.05)
    ap.add_argument("--json", type=Path, help="write the results here (scripts/_common.py envelope)")
    args = ap.parse_args()
    rows, hunts = [], []
    with tempfile.TemporaryDirectory() as tmp:
        work = calibrate_work(args.work_s, Path(tmp) / "calibrate")
        base = Path(tmp) / "base"
        make_noisy_repo(base, work, args.pause_s)
        level, cv = spread(base, 20)
        slow = Path(tmp) / "slow"
        make_noisy_repo(slow, work, args.pause_s)
        make_five_hunk_diff(slow, work, args.pause_s)
        slow_level, _ = spread(slow, 20)
        print(f"step: {work} units x 4, pause 0..{args.pause_s}s; BASE {level:.0f} tok/s, CV {cv:.1%} between "
              f"processes; BASE + all hunks {slow_level / level - 1:+.1%} (20 runs each)", flush=True)
        for k in range(args.hunts):
            repo = Path(tmp) / f"hunt{k}"
            make_noisy_repo(repo, work, args.pause_s)
            make_five_hunk_diff(repo, work, args.pause_s)
            out = repo.parent / f"hunt{k}.json"
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "regressbisect", "hunks", "-C", str(repo), "--cmd",
                            f"{sys.executable} train.py", "--instrument", "off", "--quiet",
                            "--min-effect", str(args.min_effect), "--json", str(out)],
                           stdout=subprocess.DEVNULL, check=False)
            wall = time.perf_counter() - started
            report = json.loads(out.read_text())
            named = [(h["file"], h["excerpt"]) for c in report["culprits"] for h in c["hunks"]]
            right = bool(named) and all(f == "train.py" and SLOW_HUNK in e for f, e in named)
            false = [n for n in named if not (n[0] == "train.py" and SLOW_HUNK in n[1])]
            reason = report.get("verdict_reason", "")
            hunts.append({"verdict": report["verdict"], "verdict_reason": reason, "named": named, "right": right, "false": len(false),
                          "probes": report["probes"], "wall_s": round(wall, 1),
                          "step_pct": [c["step_pct"] for c in report["culprits"]]})
            rows.append([k + 1, report["verdict"], "the slow hunk" if right else (f"{len(false)} neutral" if false else "nothing"),
                         report["probes"], f"{wall:.0f}"])
            print(f"hunt {k + 1}: {rows[-1][1:]}" + (f" ({reason})" if reason else ""), flush=True)
    _common.print_table(["hunt", "verdict", "named", "probes", "wall s"], rows)
    if hunts:
        print(f"right {sum(h['right'] for h in hunts)} of {len(hunts)}, neutral hunks named "
              f"{sum(h['false'] for h in hunts)}, mean probes {statistics.mean(h['probes'] for h in hunts):.0f}")
    if args.json:
        _common.write_results(args.json, {"work_units": work, "pause_s": args.pause_s, "base_cv": cv,
                                          "all_hunks_step": slow_level / level - 1, "hunts": hunts})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
