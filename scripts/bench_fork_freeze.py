#!/usr/bin/env python3
"""Does freezing a preload server's heap before the fork move a forked probe's tok/s? (docs/cost.md)

Builds the demo repository and checks out GOOD (HEAD~20), then starts one worker interpreter
there (the probe's own: this process never imports torch or the trainer). The worker imports
torch and torch._dynamo, as a preload server does, and forks one child per probe, the arms
alternating round by round (the order rotated):

  collect          the child collects the inherited heap before the program (the server before 2d2496c)
  freeze-collect   the parent calls gc.freeze() before the fork, the child then collects only
                   its own objects (the server at 2d2496c)
  collect-freeze   the parent calls gc.collect() and gc.freeze() before the fork, the child
                   collects nothing (the server since)
  fresh            no fork: a new interpreter runs the trainer (`python -m trainer ...`)

Each child runs the demo's trainer (`python -m trainer --preset P --tokens N`) through runpy, as
the server's children do, and exits as a probe does (interpreter teardown included). Per arm:
the child's wall (fork to exit), tok/s, and its paired difference to the first arm.

    python scripts/bench_fork_freeze.py --rounds 60 --arm collect --arm freeze-collect --arm fresh
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

from bench_probe_caches import demo_at  # noqa: E402  (also puts the repository on sys.path)
from _common import paired_change, print_table, write_results  # noqa: E402

from regressbisect import __version__  # noqa: E402

WORKER = r"""
import gc, json, os, subprocess, sys, time
import torch, torch._dynamo
rounds, arms, argv = int(sys.argv[1]), sys.argv[2].split(","), sys.argv[3:]


def forked(arm):   # the trainer's stdout from a child of this process, run as the server's run it
    if arm == "collect-freeze":
        gc.collect()
    if "freeze" in arm:
        gc.freeze()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        os.dup2(write, 1)
        if arm in ("collect", "freeze-collect"):
            gc.collect()
        import runpy
        sys.argv = ["-m"] + argv
        try:
            runpy._run_module_as_main("trainer", alter_argv=True)
        except SystemExit:
            pass
        sys.stdout.flush()
        sys.exit(0)
    os.close(write)
    out = b""
    while chunk := os.read(read, 65536):
        out += chunk
    os.close(read)
    os.waitpid(pid, 0)
    if "freeze" in arm:
        gc.unfreeze()   # the next arm starts from the same parent
    return out


for i in range(rounds):
    for arm in arms[i % len(arms):] + arms[:i % len(arms)]:
        started = time.time()
        if arm == "fresh":
            out = subprocess.run([sys.executable, "-m", "trainer"] + argv, capture_output=True).stdout
        else:
            out = forked(arm)
        wall = time.time() - started
        line = next(l for l in out.decode().splitlines() if l.startswith("@regressbisect "))
        tok_s = json.loads(line.split(" ", 1)[1])["tok_s"]
        print(json.dumps({"arm": arm, "round": i, "wall_s": wall, "tok_s": tok_s}), flush=True)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="tiny", help="demo preset: tiny (CPU) or h200 (GPU)")
    parser.add_argument("--rounds", type=int, default=30, help="probes per arm (arms alternated)")
    parser.add_argument("--arm", action="append", choices=["collect", "freeze-collect", "collect-freeze", "fresh"], default=None,
                        help="repeatable; the first is the reference (default: collect, freeze-collect)")
    parser.add_argument("--work", type=Path, default=None, help="working directory (default: a temp dir)")
    parser.add_argument("--json", type=Path, default=None, help="write every probe's figures here")
    args = parser.parse_args()
    if args.rounds < 2:
        parser.error("--rounds must be 2 or more (a paired standard error needs two pairs)")
    arms = args.arm or ["collect", "freeze-collect"]
    work, repo, tree, spec = demo_at(args.work, args.preset, "regressbisect-freeze-")
    trainer_argv = ["--preset", args.preset, "--tokens", str(spec.tokens)]
    done = subprocess.run([sys.executable, "-c", WORKER, str(args.rounds), ",".join(arms), *trainer_argv],
                          cwd=tree, capture_output=True, text=True)
    if done.returncode != 0:
        print(done.stderr[-2000:], file=sys.stderr)
        return 1
    rows = [json.loads(l) for l in done.stdout.splitlines() if l.startswith("{")]
    if args.json:
        write_results(args.json, {"preset": args.preset, "tokens": spec.tokens, "arms": arms, "rows": rows})
    print(f"regressbisect {__version__}, demo preset {args.preset}, {spec.tokens} tokens, "
          f"{args.rounds} probes per arm, arms alternated")
    reference = {r["round"]: r["tok_s"] for r in rows if r["arm"] == arms[0]}
    table = []
    for arm in arms:
        mine = [r for r in rows if r["arm"] == arm]
        pairs = [math.log(r["tok_s"] / reference[r["round"]]) for r in mine]
        table.append([arm, len(mine), f"{statistics.median(r['wall_s'] for r in mine):.2f}",
                      f"{statistics.median(r['tok_s'] for r in mine):,.0f}",
                      "-" if arm == arms[0] else paired_change(pairs)])
    print_table(["arm", "probes", "child wall s", "tok/s", f"tok/s vs {arms[0]}, paired (se)"], table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
