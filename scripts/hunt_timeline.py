#!/usr/bin/env python3
"""Where a hunt's wall time went, round by round, from its store (docs/cost.md).

Reads every probe a hunt stored (Store.hunt_probe_spans: samples and skips, with the start times
of store schema 2; the store is opened as the tool opens it, so an older one is migrated) and
groups probes that started within `--gap` seconds of the round's first into one round. Per
round: when it started (seconds after the hunt's first probe), its probes, their shortest and
longest wall, and how long until the next round started (the round's share of the hunt's wall).
A round whose longest probe is far above its shortest waited for that one.

    python scripts/hunt_timeline.py .git/regressbisect/store.sqlite            # the last hunt
    python scripts/hunt_timeline.py store.sqlite --hunt 3 --json timeline.json
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from _common import write_results  # noqa: E402  (also puts the repository on sys.path)

from regressbisect.store import Store  # noqa: E402


def probe_spans(store_path: Path, hunt_id: int | None) -> tuple[int, list[dict]]:
    """(hunt id, its probes as {start, wall} sorted by start)."""
    with Store(store_path) as store:
        hunt_id = store.last_hunt_id() if hunt_id is None else hunt_id
        spans = [] if hunt_id is None else store.hunt_probe_spans(hunt_id)
    if any(start is None for start, _ in spans):
        raise SystemExit(f"{store_path}: probes without a start time (stored before schema 2): no timeline")
    return hunt_id, [{"start": start, "wall": wall} for start, wall in sorted(spans)]


def rounds_of(probes: list[dict], gap_s: float) -> list[dict]:
    """Consecutive probes that started within `gap_s` of their round's first probe."""
    rounds: list[list[dict]] = []
    for probe in probes:
        if rounds and probe["start"] - rounds[-1][0]["start"] <= gap_s:
            rounds[-1].append(probe)
        else:
            rounds.append([probe])
    t0 = probes[0]["start"]
    out = []
    for i, members in enumerate(rounds):
        start = members[0]["start"]
        end = max(p["start"] + p["wall"] for p in members)
        until_next = (rounds[i + 1][0]["start"] if i + 1 < len(rounds) else end) - start
        walls = [p["wall"] for p in members]
        out.append({"start_s": round(start - t0, 2), "probes": len(members), "wall_min_s": round(min(walls), 2),
                    "wall_max_s": round(max(walls), 2), "round_s": round(until_next, 2)})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("store", type=Path, help="a store.sqlite")
    parser.add_argument("--hunt", type=int, default=None, help="hunt id (default: the last one)")
    parser.add_argument("--gap", type=float, default=1.5, help="seconds within which probes start one round")
    parser.add_argument("--json", type=Path, default=None, help="write the rounds here")
    args = parser.parse_args()
    hunt_id, probes = probe_spans(args.store, args.hunt)
    if not probes:
        print(f"hunt {hunt_id} stored no probe", file=sys.stderr)
        return 1
    rounds = rounds_of(probes, args.gap)
    print(f"hunt {hunt_id}: {len(probes)} probes in {len(rounds)} rounds, "
          f"{rounds[-1]['start_s'] + rounds[-1]['round_s']:.0f} s from the first probe's start to the last one's end")
    print("| round | start s | probes | probe wall s, min / max | round s |")
    print("|---|---|---|---|---|")
    for i, r in enumerate(rounds):
        print(f"| {i} | {r['start_s']:.1f} | {r['probes']} | {r['wall_min_s']:.1f} / {r['wall_max_s']:.1f} | {r['round_s']:.1f} |")
    by_size: dict[int, list[float]] = {}
    for r in rounds[:-1]:
        by_size.setdefault(r["probes"], []).append(r["round_s"])
    for size, seconds in sorted(by_size.items()):
        print(f"rounds of {size}: {len(seconds)}, median {statistics.median(seconds):.1f} s, "
              f"{sum(seconds):.0f} s in all")
    if args.json:
        write_results(args.json, {"hunt_id": hunt_id, "rounds": rounds})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
