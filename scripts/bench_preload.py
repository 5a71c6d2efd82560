#!/usr/bin/env python3
"""What a preload server saves per probe, and that it leaves tok/s alone (docs/cost.md).

Builds the demo repository (`regressbisect demo DIR --build-only`), then runs its probe command
at GOOD (HEAD~20) N times per arm, the arms interleaved round by round (the order rotates):

  fresh            every probe a new process (`bash -c`), as with --preload off
  <modules>        forked from a preload server that imported those modules (probe/preload.py),
                   one server per arm, started before the first round (its start-up is shown
                   apart: a hunt pays it once per slot)

Per arm: probe wall, start-up (wall - the probe's measured seconds), tok/s (median, CV between
probes) and the ratio of its median tok/s to fresh's. Start-up is what preloading can save;
tok/s must not move.

    python scripts/bench_preload.py --preset tiny --rounds 8
    python scripts/bench_preload.py --preset h200 --rounds 3 --arm torch \\
        --arm torch,torch._dynamo,torch._inductor.compile_fx --work /tmp/preload --json out.json
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

from _common import paired_change, write_results  # noqa: E402  (also puts the repository on sys.path)

from bench_probe_caches import demo_at, probe_row  # noqa: E402

from regressbisect import __version__  # noqa: E402
from regressbisect.probe.preload import PreloadServers  # noqa: E402
from regressbisect.probe.runner import run_probe  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="tiny", help="demo preset: tiny (CPU) or h200 (GPU)")
    parser.add_argument("--rounds", type=int, default=6, help="probes per arm (arms interleaved)")
    parser.add_argument("--arm", action="append", default=None,
                        help="modules a server preloads, comma-separated (repeatable; default: torch; "
                             "--arm '' for none)")
    parser.add_argument("--tokens", type=int, default=None, help="token budget (default: the demo's)")
    parser.add_argument("--ref", default="HEAD~20", help="the commit measured (default: GOOD, HEAD~20)")
    parser.add_argument("--prefix-arm", action="append", default=[], metavar="NAME=PREFIX",
                        help="a fresh arm whose command runs under PREFIX (e.g. 'pinned=taskset -c 0-7')")
    parser.add_argument("--work", type=Path, default=None, help="working directory (default: a temp dir)")
    parser.add_argument("--json", type=Path, default=None, help="write every probe's figures here")
    args = parser.parse_args()
    work, repo, tree, spec = demo_at(args.work, args.preset, "regressbisect-preload-", args.ref)
    if args.tokens:
        spec = type(spec)(command=spec.command, tokens=args.tokens, timeout_s=spec.timeout_s)
    prefixes = dict(p.split("=", 1) for p in args.prefix_arm)
    arms = ["fresh"] + list(prefixes) + ([a for a in args.arm if a] if args.arm is not None else ["torch"])
    servers = {arm: PreloadServers(arm) for arm in arms[1:] if arm not in prefixes}
    rows: list[dict] = []
    refused: dict[str, str] = {}
    started = time.time()
    try:
        for i in range(args.rounds):
            order = arms[i % len(arms):] + arms[:i % len(arms)]
            for arm in order:
                if arm == "fresh":
                    outcome = run_probe(spec, tree)
                elif arm in prefixes:
                    outcome = run_probe(type(spec)(command=f"{prefixes[arm]} {spec.command}", tokens=spec.tokens,
                                                   timeout_s=spec.timeout_s), tree)
                elif arm in refused:
                    continue
                else:
                    outcome = servers[arm].run(spec, tree, {}, run_probe)
                    if servers[arm].stats.forked == 0:   # the server refused: this arm is dropped
                        refused[arm] = "; ".join(servers[arm].stats.notes)
                        print(f"  {arm}: {refused[arm]}", flush=True)
                        continue
                if outcome.sample is None:
                    print(f"{arm}: skipped: {outcome.skip_reason}\n{outcome.output_tail}", file=sys.stderr)
                    return 1
                rows.append(probe_row(arm, i, outcome, width=40))
        server_start = {arm: s.stats.server_start_s for arm, s in servers.items()}
    finally:
        for s in servers.values():
            s.close()
    if args.json:
        write_results(args.json, {"preset": args.preset, "cmd": spec.command,
                                  "tokens": spec.tokens, "server_start_s": server_start,
                                  "refused": refused, "rows": rows})
    print(f"\nregressbisect {__version__}, demo preset {args.preset}, {spec.tokens} tokens, "
          f"{args.rounds} probes per arm, arms interleaved, {time.time() - started:.0f} s")
    print("| arm | probes | wall s | start-up s | tok/s | tok/s CV | tok/s vs fresh, paired (se) | server start s |")
    print("|---|---|---|---|---|---|---|---|")
    fresh_by_round = {r["round"]: r["tok_s"] for r in rows if r["arm"] == "fresh"}
    fresh_tok = statistics.median(r["tok_s"] for r in rows if r["arm"] == "fresh")
    for arm in arms:
        mine = [r for r in rows if r["arm"] == arm]
        if not mine:
            print(f"| {arm} | 0 | refused: {refused.get(arm, '?')} | | | | | |")
            continue
        logs = [math.log(r["tok_s"]) for r in mine]
        cv = statistics.stdev(logs) if len(logs) > 1 else float("nan")
        tok = statistics.median(r["tok_s"] for r in mine)
        start = f"{server_start[arm]:.1f}" if arm in server_start else "-"
        # per round, log(arm / fresh): the rounds share the machine's state, so pairs cancel drift
        pairs = [math.log(r["tok_s"] / fresh_by_round[r["round"]]) for r in mine if r["round"] in fresh_by_round]
        paired = "-" if arm == "fresh" else (
            paired_change(pairs) if len(pairs) > 1 else f"{tok / fresh_tok - 1:+.1%}")
        print(f"| {arm} | {len(mine)} | {statistics.median(r['wall_s'] for r in mine):.2f} | "
              f"{statistics.median(r['startup_s'] for r in mine):.2f} | {tok:,.0f} | {cv:.1%} | "
              f"{paired} | {start} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
