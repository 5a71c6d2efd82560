#!/usr/bin/env python3
"""The same small real hunt on a quiet machine and under a steady background load, side by side.

A 3-commit repository (1000, 1000, 700 tok/s, 2% seeded noise; its probe sleeps --sleep seconds,
so it needs little CPU) is hunted with the busy-machine guard on, once with nothing else
running and once beside a niced process that burns --load CPUs (--load x 100 ms of CPU, then a
sleep to the end of the 100 ms, over and over) started before the hunt. Each hunt has its own repository and store. Prints, per arm
and machine: the verdict (or the exit code), the probes run (contended ones included), how many
were contended, their wall time, the seconds waited for a quiet machine, the hunt's wall time and
the load the report names.

The guard's view of the machine is, by default, the load process and the hunt alone (`--view
scoped`): on a machine shared with other jobs their load would decide the result. `--view
machine` reads /proc/stat as it is. Arms are copies of the tool: --arm NAME@PATH runs the hunts
with the tool at PATH (e.g. `git worktree add --detach /tmp/rb-before <rev>`).

`--history footprint24` hunts instead the real history of `scripts/bench_footprint_hunt.py` (its
builder, imported: 24 commits after GOOD of a pure-Python library, 7 touching what bench.py reads,
one of them a 15% step; `--seed`, trial t the t-th history drawn, as that script draws them),
`regressbisect run GOOD HEAD --cmd "python bench.py" --tokens 4096 --instrument off` (`--drill`
adds --drill), each trial's history hunted on each machine in its own copy of the repository.

    python scripts/bench_steady_load.py
    python scripts/bench_steady_load.py --arm before@/tmp/rb-before --arm now --max-wait 60
    python scripts/bench_steady_load.py --history footprint24 --drill --trials 3
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

STEADY_LOOP = ("import os, sys, time\nos.nice(int(sys.argv[2]))\nbusy = float(sys.argv[1]) * 0.1\nwhile True:\n"
               "    end = time.process_time() + busy\n    while time.process_time() < end:\n        pass\n"
               "    time.sleep(0.1 - busy)\n")
"""--load CPUs: `load` x 100 ms of CPU, then the rest of 100 ms asleep; niced (--nice), as a background job."""


def _process_cpu(pid: int, clk_tck: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / clk_tck


def footprint24(path: Path, rng: random.Random) -> tuple[list[str], int]:
    """The 24-commit history of scripts/bench_footprint_hunt.py (its builder and defaults) at
    `path`: its shas and the planted culprit's position (GOOD = 0)."""
    import regressbisect  # noqa: F401  (the arm's copy first: the builder's module imports _common)
    saved = list(sys.path)
    try:
        import bench_footprint_hunt as fp
    finally:
        sys.path[:] = saved
    shas, culprit, _ = fp.build(path, rng, commits=24, touching=7, units_per_token=150, step=0.15)
    return shas, culprit


def one_hunt(machine: str, args: argparse.Namespace, tmp: Path, history: tuple[Path, list[str], int] | None = None) -> dict:
    """One hunt in this interpreter (the arm's copy of the tool): what it decided and what it cost.
    `history`: a built repository, its shas and the culprit's position, copied to `tmp` and hunted
    with its own bench.py; else the 3-commit repository."""
    from regressbisect.cli import main
    from regressbisect.machine import contention as ct
    from regressbisect.testing.benchrepo import make_bench_repo

    if history is None:
        shas, culprit = make_bench_repo(tmp / "repo", [1000.0, 1000.0, 700.0]), 2
        probe = ["--cmd", f"{sys.executable} bench.py", "--tokens", "1000", "--env", f"BENCH_STATE={tmp / 'state'}",
                 "--env", f"BENCH_SLEEP={args.sleep}"]
    else:
        built, shas, culprit = history
        shutil.copytree(built, tmp / "repo", symlinks=True)
        probe = ["--cmd", f"{sys.executable} bench.py", "--tokens", "4096"]
    loop = None
    if machine == "steady":
        loop = subprocess.Popen([sys.executable, "-c", STEADY_LOOP, str(args.load), str(args.nice)], start_new_session=True)
        time.sleep(1.0)   # running before the hunt starts
    guards = []
    real_init, real_total = ct.ContentionGuard.__init__, ct.HuntCpu.total
    ours = ct.HuntCpu()
    scan_of_this_thread = threading.local()

    def init(self, *a, **kw) -> None:
        real_init(self, *a, **kw)
        guards.append(self)

    def scoped() -> tuple[float, int]:
        # the load process and the hunt; the hunt's part is handed to the guard's own next scan
        scan_of_this_thread.value = real_total(ours)
        return (_process_cpu(loop.pid, ct.CLK_TCK) if loop else 0.0) + scan_of_this_thread.value, args.cpus

    def total(self) -> float:
        value = real_total(self)
        if self is not ours and getattr(scan_of_this_thread, "value", None) is not None:
            value, scan_of_this_thread.value = scan_of_this_thread.value, None
        return value

    real_read = ct.read_proc_stat
    ct.ContentionGuard.__init__ = init
    if args.view == "scoped":
        ct.read_proc_stat, ct.HuntCpu.total = scoped, total
    out = tmp / "r.json"
    command = ["run", "-C", str(tmp / "repo"), *probe, "--instrument", "off", "--max-wait", str(args.max_wait),
               *(["--drill"] if args.drill else []), "--json", str(out), shas[0], shas[-1]]
    started = time.monotonic()
    text, errors = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(text), contextlib.redirect_stderr(errors):
            try:
                main(command)
                code = 0
            except SystemExit as exc:
                code = int(exc.code or 0)
    finally:
        wall = time.monotonic() - started
        ct.ContentionGuard.__init__, ct.read_proc_stat, ct.HuntCpu.total = real_init, real_read, real_total
        if loop is not None:
            os.killpg(loop.pid, signal.SIGKILL)
            loop.wait()
    with sqlite3.connect(tmp / "repo" / ".git" / "regressbisect" / "store.sqlite") as conn:
        probes, probe_wall = conn.execute("SELECT COUNT(*), COALESCE(SUM(wall_seconds), 0) FROM samples").fetchone()
        flagged = conn.execute("SELECT COUNT(*) FROM samples WHERE arm = 'flagged'").fetchone()[0]
        loads = [o for (o,) in conn.execute("SELECT l.other_cpus FROM samples s JOIN sample_loads l"
                                            " ON l.sample_id = s.id")]
    report = json.loads(out.read_text()) if out.exists() else {}
    right = [c["commit"] for c in report.get("culprits") or ()] == [shas[culprit]]
    named = next((line.split(" (")[0] for line in text.getvalue().splitlines() if line.startswith("Measured under")), "-")
    row = {"trial": args.trial} if history is not None or args.trials > 1 else {}
    if history is not None:
        row["planted"] = f"#{culprit}"
    if args.drill:
        drills = [c.get("hunks") or {} for c in report.get("culprits") or ()]   # a DrillReport each
        row["drill"] = "; ".join(f"{d.get('verdict')} ({d.get('hunk_count')} hunk(s), {d.get('probes')} probes)"
                                 for d in drills) or "-"
    if history is not None and not right:
        row["reason"] = report.get("verdict_reason") or " / ".join((text.getvalue() + errors.getvalue()).strip().splitlines()[-1:])
    return {**row, "machine": f"{machine} ({args.load:g} CPU)" if loop else machine,
            "verdict": (report.get("verdict", "?") + (", right" if right else ", wrong")) if report else f"exit {code}",
            "exit": code, "probes": probes, "contended": flagged, "probe wall s": round(probe_wall, 1),
            "waited s": round(sum(g.waited_s for g in guards), 1), "wall s": round(wall, 1),
            "median other CPUs": round(sorted(loads)[len(loads) // 2], 2) if loads else None, "report names": named}


def run_arm(args: argparse.Namespace) -> list[dict]:
    rows = []
    rng = random.Random(args.seed)
    for trial in range(args.trials):
        args.trial = trial
        with tempfile.TemporaryDirectory() as base:
            history = None
            if args.history == "footprint24":
                shas, culprit = footprint24(Path(base) / "repo", rng)
                history = (Path(base) / "repo", shas, culprit)
            for machine in args.machines:
                with tempfile.TemporaryDirectory() as tmp:
                    rows.append(one_hunt(machine, args, Path(tmp), history))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--load", type=float, default=0.8, help="CPUs the background process uses (default 0.8)")
    ap.add_argument("--nice", type=int, default=19, help="the background process's niceness (default 19)")
    ap.add_argument("--sleep", type=float, default=0.5, help="seconds each probe sleeps (default 0.5)")
    ap.add_argument("--max-wait", type=float, default=600.0, help="the hunts' --max-wait (default 600)")
    ap.add_argument("--view", choices=("scoped", "machine"), default="scoped")
    ap.add_argument("--cpus", type=int, default=os.cpu_count() or 2,
                    help="CPUs of the scoped machine (default: this machine's)")
    ap.add_argument("--machines", nargs="+", choices=("quiet", "steady"), default=["quiet", "steady"])
    ap.add_argument("--arm", action="append", default=[], help="NAME[@PATH]: a copy of the tool (repeatable)")
    ap.add_argument("--history", choices=("tiny", "footprint24"), default="tiny",
                    help="tiny: the 3-commit repository (default); footprint24: the 24-commit history of "
                         "scripts/bench_footprint_hunt.py")
    ap.add_argument("--drill", action="store_true", help="pass --drill to the hunts")
    ap.add_argument("--trials", type=int, default=1, help="hunts per machine (footprint24: a history each)")
    ap.add_argument("--seed", type=int, default=0, help="footprint24: the histories' seed (default 0)")
    ap.add_argument("--json", type=Path, help="write the rows as a results file")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(run_arm(args)))
        return
    from _common import print_table, provenance_line, run_arms, write_results   # puts this checkout on sys.path

    rows = run_arms(__file__, args.arm, sys.argv[1:])
    what = (f"3 commits (1000, 1000, 700 tok/s), probe sleeps {args.sleep:g} s" if args.history == "tiny" else
            f"footprint24: 24 commits after GOOD, 7 touching what bench.py reads, a 15% step (seed {args.seed})")
    print(f"{what}, {args.cpus} CPUs, load {args.load:g} CPU at nice {args.nice}, --max-wait {args.max_wait:g}, "
          f"guard's view: {args.view}{', --drill' if args.drill else ''}")
    print(provenance_line())
    headers = list(dict.fromkeys(h for row in rows for h in row))
    print_table(headers, [[row.get(h) if row.get(h) is not None else "-" for h in headers] for row in rows])
    if args.json:
        write_results(args.json, {"rows": rows, "load": args.load, "sleep": args.sleep, "view": args.view,
                                  "history": args.history, "drill": args.drill, "seed": args.seed})


if __name__ == "__main__":
    main()
