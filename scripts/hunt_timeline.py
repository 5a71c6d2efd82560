#!/usr/bin/env python3
"""Where a hunt's wall time went, round by round, from its store (docs/cost.md).

Reads every probe a hunt stored (samples and skips, with the start times of store schema 2) and
groups probes that started within `--gap` seconds of the round's first into one round. Per
round: when it started (seconds after the hunt's first probe), its probes, their shortest and
longest wall, and how long until the next round started (the round's share of the hunt's wall).
A round whose longest probe is far above its shortest waited for that one.

    python scripts/hunt_timeline.py .git/regressbisect/store.sqlite            # the last hunt
    python scripts/hunt_timeline.py store.sqlite --hunt 3 --json timeline.json
"""
from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
from pathlib import Path


def probe_spans(store: Path, hunt_id: int | None) -> tuple[int, list[dict]]:
    """(hunt id, its probes as {start, wall, arm, commit, tok_s} sorted by start)."""
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        if hunt_id is None:
            hunt_id = db.execute("SELECT max(id) FROM hunts").fetchone()[0]
        rows = [{"start": s, "wall": w, "arm": a, "commit": c[:10], "tok_s": t} for s, w, a, c, t in db.execute(
            "SELECT started_at, wall_seconds, arm, commit_sha, tok_s FROM samples WHERE hunt_id = ? "
            "UNION ALL SELECT started_at, wall_seconds, 'skip', commit_sha, NULL FROM skips WHERE hunt_id = ?",
            (hunt_id, hunt_id))]
    if any(r["start"] is None for r in rows):
        raise SystemExit(f"{store}: probes without a start time (a store before schema 2): no timeline")
    return hunt_id, sorted(rows, key=lambda r: r["start"])


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
                    "wall_max_s": round(max(walls), 2), "round_s": round(until_next, 2),
                    "commits": [p["commit"] for p in members]})
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
        args.json.write_text(json.dumps({"hunt_id": hunt_id, "rounds": rounds}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
