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

    python scripts/bench_steady_load.py
    python scripts/bench_steady_load.py --arm before@/tmp/rb-before --arm now --max-wait 60
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
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


def one_hunt(machine: str, args: argparse.Namespace, tmp: Path) -> dict:
    """One hunt in this interpreter (the arm's copy of the tool): what it decided and what it cost."""
    from regressbisect.cli import main
    from regressbisect.machine import contention as ct
    from regressbisect.testing.benchrepo import make_bench_repo

    shas = make_bench_repo(tmp / "repo", [1000.0, 1000.0, 700.0])
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

    ct.ContentionGuard.__init__ = init
    if args.view == "scoped":
        ct.read_proc_stat, ct.HuntCpu.total = scoped, total
    out = tmp / "r.json"
    command = ["run", "-C", str(tmp / "repo"), "--cmd", f"{sys.executable} bench.py", "--tokens", "1000",
               "--env", f"BENCH_STATE={tmp / 'state'}", "--env", f"BENCH_SLEEP={args.sleep}",
               "--instrument", "off", "--max-wait", str(args.max_wait), "--json", str(out), shas[0], shas[-1]]
    started = time.monotonic()
    text = io.StringIO()
    try:
        with contextlib.redirect_stdout(text), contextlib.redirect_stderr(io.StringIO()):
            try:
                main(command)
                code = 0
            except SystemExit as exc:
                code = int(exc.code or 0)
    finally:
        wall = time.monotonic() - started
        if loop is not None:
            os.killpg(loop.pid, signal.SIGKILL)
            loop.wait()
    with sqlite3.connect(tmp / "repo" / ".git" / "regressbisect" / "store.sqlite") as conn:
        probes, probe_wall = conn.execute("SELECT COUNT(*), COALESCE(SUM(wall_seconds), 0) FROM samples").fetchone()
        flagged = conn.execute("SELECT COUNT(*) FROM samples WHERE arm = 'flagged'").fetchone()[0]
        loads = [o for (o,) in conn.execute("SELECT l.other_cpus FROM samples s JOIN sample_loads l"
                                            " ON l.sample_id = s.id")]
    report = json.loads(out.read_text()) if out.exists() else {}
    right = [c["commit"] for c in report.get("culprits") or ()] == [shas[2]]
    named = next((line.split(" (")[0] for line in text.getvalue().splitlines() if line.startswith("Measured under")), "-")
    return {"machine": f"{machine} ({args.load:g} CPU)" if loop else machine,
            "verdict": (report.get("verdict", "?") + (", right" if right else ", wrong")) if report else f"exit {code}",
            "exit": code, "probes": probes, "contended": flagged, "probe wall s": round(probe_wall, 1),
            "waited s": round(sum(g.waited_s for g in guards), 1), "wall s": round(wall, 1),
            "median other CPUs": round(sorted(loads)[len(loads) // 2], 2) if loads else None, "report names": named}


def run_arm(args: argparse.Namespace) -> list[dict]:
    rows = []
    for machine in args.machines:
        with tempfile.TemporaryDirectory() as tmp:
            rows.append(one_hunt(machine, args, Path(tmp)))
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
    ap.add_argument("--json", type=Path, help="write the rows as a results file")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(run_arm(args)))
        return
    from _common import print_table, provenance_line, run_arms, write_results   # puts this checkout on sys.path

    rows = run_arms(__file__, args.arm, sys.argv[1:])
    print(f"3 commits (1000, 1000, 700 tok/s), probe sleeps {args.sleep:g} s, {args.cpus} CPUs, load "
          f"{args.load:g} CPU at nice {args.nice}, --max-wait {args.max_wait:g}, guard's view: {args.view}")
    print(provenance_line())
    headers = list(rows[0])
    print_table(headers, [[row[h] if row[h] is not None else "-" for h in headers] for row in rows])
    if args.json:
        write_results(args.json, {"rows": rows, "load": args.load, "sleep": args.sleep, "view": args.view})


if __name__ == "__main__":
    main()
