#!/usr/bin/env python3
"""What overlapped probes save in GPU time, and that they leave tok/s alone (docs/cost.md).

Builds the demo repository (`regressbisect demo DIR --build-only`), checks the commit `--ref`
(GOOD by default) out in K worktrees ("lanes", as a hunt with `--overlap K` does), and measures a
batch of K probes of it per round and arm, the arms interleaved round by round:

  alone     the K probes one after another (what a hunt without --overlap runs)
  overlap   the K probes at once through the window gate (probe/windows.py): start-ups side by
            side, each measured window alone with the other probes stopped

More arms of either kind with extra probe environment: `--arm NAME=MODE[,VAR=VALUE...]` (MODE
`alone` or `overlap`), e.g. `--arm ct1=overlap,TORCHINDUCTOR_COMPILE_THREADS=1`. Every arm forks
its probes from one preload server per lane and environment (`--preload`, as a hunt's default
does; `off` for fresh processes). Per arm: the batch's wall time (the GPU is held that long, so
GPU-seconds per probe = batch wall x GPUs / K), each probe's wall, tok/s (median, CV between
probes) and the paired ratio of the overlap arm's tok/s to the alone arm's in the same round.

    python scripts/bench_overlap.py --preset tiny --lanes 2 --rounds 4
    python scripts/bench_overlap.py --preset h200 --lanes 4 --rounds 3 --preload torch,torch._dynamo \\
        --work /tmp/ov --json h200-overlap.json
    python scripts/bench_overlap.py --preset h200 --lanes 3 --arm alone=alone --arm overlap=overlap \\
        --arm ct1=overlap,TORCHINDUCTOR_COMPILE_THREADS=1
"""
from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from _common import paired_change, write_results  # noqa: E402  (also puts the repository on sys.path)

from bench_probe_caches import demo_at  # noqa: E402

from regressbisect import __version__  # noqa: E402
from regressbisect.machine.fingerprint import count_gpus  # noqa: E402
from regressbisect.probe.preload import PreloadServers  # noqa: E402
from regressbisect.probe.runner import run_probe  # noqa: E402
from regressbisect.probe.windows import WindowGate  # noqa: E402


def lanes_at(repo: Path, work: Path, ref: str, k: int) -> list[Path]:
    """K worktrees at `ref`, fixed paths (a hunt's lanes)."""
    trees = []
    for lane in range(k):
        tree = work / f"lane-{lane}"
        if not tree.exists():
            subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", str(tree), ref],
                           check=True, capture_output=True)
        trees.append(tree)
    return trees


def parse_arms(specs: list[str]) -> dict[str, tuple[str, dict[str, str]]]:
    """`NAME=MODE[,VAR=VALUE...]` -> {name: (mode, extra env)}, in the order given."""
    arms: dict[str, tuple[str, dict[str, str]]] = {}
    for spec in specs:
        name, _, rest = spec.partition("=")
        mode, *assignments = rest.split(",")
        if not name or mode not in ("alone", "overlap") or any("=" not in a for a in assignments):
            raise SystemExit(f"--arm {spec!r}: expected NAME=alone|overlap[,VAR=VALUE...]")
        arms[name] = (mode, dict(a.split("=", 1) for a in assignments))
    return arms


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="tiny", help="demo preset: tiny (CPU) or h200 (GPU)")
    parser.add_argument("--lanes", type=int, default=2, help="probes per batch (K of --overlap K)")
    parser.add_argument("--rounds", type=int, default=3, help="batches per arm (arms interleaved)")
    parser.add_argument("--ref", default="HEAD~20", help="the commit measured (default: GOOD, HEAD~20)")
    parser.add_argument("--preload", default="torch", help="modules each lane's server preloads, or 'off'")
    parser.add_argument("--work", type=Path, default=None, help="working directory (default: a temp dir)")
    parser.add_argument("--json", type=Path, default=None, help="write every probe's figures here")
    parser.add_argument("--arm", action="append", default=None, metavar="NAME=MODE[,VAR=VALUE...]",
                        help="an arm: MODE alone or overlap, then extra probe environment "
                             "(default: alone=alone and overlap=overlap)")
    args = parser.parse_args()
    arms = parse_arms(args.arm or ["alone=alone", "overlap=overlap"])
    work, repo, _, spec = demo_at(args.work, args.preset, "regressbisect-overlap-", args.ref)
    trees = lanes_at(repo, work, args.ref, args.lanes)
    servers = PreloadServers(args.preload)
    gate = WindowGate(args.lanes)
    gpus = count_gpus()
    rows: list[dict] = []
    batches: list[dict] = []
    started = time.time()

    def probe(arm: str, round_: int, lane: int, gated: bool) -> None:
        env = {**arms[arm][1], **(gate.env() if gated else {})}
        if gated:
            outcome = gate.run("", lambda on_start: servers.run(spec, trees[lane], env, run_probe, on_start=on_start))
        else:
            outcome = servers.run(spec, trees[lane], env, run_probe)
        if outcome.sample is None:
            print(f"{arm} lane {lane}: skipped: {outcome.skip_reason}\n{outcome.output_tail}", file=sys.stderr)
            return
        rows.append({"arm": arm, "round": round_, "lane": lane, "wall_s": outcome.wall_seconds,
                     "measured_s": outcome.sample.seconds, "tok_s": outcome.sample.tok_s})
        print(f"  {arm:7s} round {round_} lane {lane}: wall {outcome.wall_seconds:.2f} s, "
              f"{outcome.sample.tok_s:,.0f} tok/s", flush=True)

    try:
        for i in range(args.rounds):
            names = list(arms)
            for arm in (names if i % 2 == 0 else names[::-1]):
                t0 = time.perf_counter()
                if arms[arm][0] == "alone":
                    for lane in range(args.lanes):
                        probe(arm, i, lane, gated=False)
                else:
                    threads = [threading.Thread(target=probe, args=(arm, i, lane, True)) for lane in range(args.lanes)]
                    for t in threads:
                        t.start()
                    for t in threads:
                        t.join()
                batches.append({"arm": arm, "round": i, "wall_s": time.perf_counter() - t0})
                print(f"  {arm} round {i}: batch of {args.lanes} in {batches[-1]['wall_s']:.1f} s", flush=True)
        gate_stats = gate.stats.to_json()
        preload_stats = servers.stats.to_json()
    finally:
        gate.close()
        servers.close()
    if args.json:
        write_results(args.json, {"preset": args.preset, "cmd": spec.command,
                                  "tokens": spec.tokens, "lanes": args.lanes, "ref": args.ref,
                                  "arms": {n: {"mode": m, "env": e} for n, (m, e) in arms.items()},
                                  "gpus": gpus, "gate": gate_stats, "preload": preload_stats,
                                  "batches": batches, "rows": rows})
    print(f"\nregressbisect {__version__}, demo preset {args.preset} at {args.ref}, {spec.tokens} tokens, "
          f"{args.lanes} probes per batch, {args.rounds} batches per arm, arms interleaved, preload "
          f"{args.preload}, {gpus} GPU(s), {time.time() - started:.0f} s")
    print(f"gate: {gate_stats['windows']} windows, {gate_stats['probes_alone']} probe(s) alone, "
          f"{gate_stats['stops']} stops, {gate_stats['stopped_s']:.1f} s stopped")
    base = next(n for n, (mode, _) in arms.items() if mode == "alone") if any(
        mode == "alone" for mode, _ in arms.values()) else next(iter(arms))
    print(f"| arm | batches | batch wall s | held s per probe | probe wall s | tok/s | tok/s CV | tok/s vs {base}, paired (se) |")
    print("|---|---|---|---|---|---|---|---|")
    alone_by_round = {r: statistics.mean(math.log(x["tok_s"]) for x in rows if x["arm"] == base and x["round"] == r)
                      for r in {x["round"] for x in rows if x["arm"] == base}}
    for arm in arms:
        mine = [r for r in rows if r["arm"] == arm]
        walls = [b["wall_s"] for b in batches if b["arm"] == arm]
        if not mine:
            continue
        logs = [math.log(r["tok_s"]) for r in mine]
        pairs = [statistics.mean(math.log(x["tok_s"]) for x in mine if x["round"] == r) - alone_by_round[r]
                 for r in sorted({x["round"] for x in mine}) if r in alone_by_round]
        paired = "-" if arm == base else paired_change(pairs, digits=2)
        print(f"| {arm} | {len(walls)} | {statistics.median(walls):.1f} | {statistics.median(walls) / args.lanes:.2f} | "
              f"{statistics.median(r['wall_s'] for r in mine):.2f} | {statistics.median(r['tok_s'] for r in mine):,.0f} | "
              f"{statistics.stdev(logs) if len(logs) > 1 else float('nan'):.2%} | {paired} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
