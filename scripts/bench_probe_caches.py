#!/usr/bin/env python3
"""What the shared probe caches save per probe, and that they leave tok/s alone (docs/cost.md).

Builds the demo repository (`regressbisect demo DIR --build-only`), then runs its probe command
at GOOD (HEAD~20) N times per arm, the arms interleaved (ABAB...), each probe in a fresh TMPDIR as
a batch scheduler would give it:

  cold     no cache variable set: the stack's default caches live under the fresh TMPDIR, so
           every probe compiles from scratch (a hunt without --shared-caches on such a machine)
  shared   TORCHINDUCTOR_CACHE_DIR / TRITON_CACHE_DIR (cost.SHARED_CACHES) in one directory kept
           across probes, as a hunt sets them: the first probe fills it, the others read it

Per arm: probe wall, start-up (wall - the probe's measured seconds), measured seconds, tok/s
(median, and CV between probes). Start-up is what the caches can save; tok/s must not move.

    python scripts/bench_probe_caches.py --preset h200 --pairs 4 --work /tmp/caches
    python scripts/bench_probe_caches.py --preset tiny --pairs 3          # CPU smoke run
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

from _common import print_table, write_results  # noqa: E402  (also puts the repository on sys.path)
from regressbisect import __version__
from regressbisect.hunts.cost import SHARED_CACHES
from regressbisect.probe.runner import ProbeSpec, run_probe


def build_demo(work: Path, preset: str) -> Path:
    repo = work / f"demo-{preset}"
    if not (repo / ".git").exists():
        subprocess.run([sys.executable, "-m", "regressbisect", "demo", str(repo), "--preset", preset,
                        "--build-only"], check=True)
    return repo


def probe_spec(repo: Path) -> ProbeSpec:
    table = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["regressbisect"]
    tokens = table.get("tokens")
    return ProbeSpec(command=table["cmd"], tokens=int(tokens) if isinstance(tokens, int) else 4096,
                     timeout_s=float(table.get("timeout", 900)))


def checkout_good(repo: Path, work: Path, ref: str = "HEAD~20") -> Path:
    """GOOD (or `ref`) in a worktree of its own (the user's checkout is never moved)."""
    tree = work / ("good" if ref == "HEAD~20" else "at-" + ref.replace("~", "-").replace("/", "-"))
    if not tree.exists():
        subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", str(tree), ref],
                       check=True, capture_output=True)
    return tree


def demo_at(work: Path | None, preset: str, prefix: str, ref: str = "HEAD~20") -> tuple[Path, Path, Path, ProbeSpec]:
    """(working directory, demo repository, worktree at `ref`, the demo's probe spec)."""
    work = work or Path(tempfile.mkdtemp(prefix=prefix))
    work.mkdir(parents=True, exist_ok=True)
    repo = build_demo(work, preset)
    return work, repo, checkout_good(repo, work, ref), probe_spec(repo)


def probe_row(arm: str, round_: int, outcome, width: int = 6) -> dict:
    """One probe's figures (start-up = wall - the probe's measured seconds), printed as it comes."""
    seconds = outcome.sample.seconds or 0.0
    row = {"arm": arm, "round": round_, "wall_s": outcome.wall_seconds, "measured_s": seconds,
           "startup_s": outcome.wall_seconds - seconds, "tok_s": outcome.sample.tok_s}
    print(f"  {arm:{width}s} round {round_}: wall {row['wall_s']:.2f} s, start-up {row['startup_s']:.2f} s, "
          f"{row['tok_s']:,.0f} tok/s", flush=True)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="tiny", help="demo preset: tiny (CPU) or h200 (GPU)")
    parser.add_argument("--pairs", type=int, default=4, help="probes per arm (interleaved)")
    parser.add_argument("--work", type=Path, default=None, help="working directory (default: a temp dir)")
    parser.add_argument("--json", type=Path, default=None, help="write every probe's figures here")
    args = parser.parse_args()
    work, repo, tree, spec = demo_at(args.work, args.preset, "regressbisect-caches-")
    shared = work / "shared-cache"
    rows: list[dict] = []
    started = time.time()
    for i in range(args.pairs):
        for arm in (("cold", "shared") if i % 2 == 0 else ("shared", "cold")):
            tmp = Path(tempfile.mkdtemp(prefix=f"probe-{arm}-", dir=work))
            env = {"TMPDIR": str(tmp)}
            if arm == "shared":
                env.update({var: str(shared / sub) for var, sub in SHARED_CACHES.items()})
            outcome = run_probe(spec, tree, extra_env=env)
            if outcome.sample is None:
                print(f"{arm}: skipped: {outcome.skip_reason}\n{outcome.output_tail}", file=sys.stderr)
                return 1
            rows.append(probe_row(arm, i, outcome))
    if args.json:
        write_results(args.json, {"preset": args.preset,
                                  "cmd": spec.command, "tokens": spec.tokens, "rows": rows})
    print(f"\nregressbisect {__version__}, demo preset {args.preset}, {spec.tokens} tokens, "
          f"{args.pairs} probes per arm, {time.time() - started:.0f} s")
    table = []
    for arm in ("cold", "shared"):
        mine = [r for r in rows if r["arm"] == arm]
        # The first shared probe fills the cache: the warm figures are the rest.
        warm = mine[1:] if arm == "shared" and len(mine) > 1 else mine
        tok = [r["tok_s"] for r in warm]
        cv = statistics.stdev(tok) / statistics.mean(tok) if len(tok) > 1 else float("nan")
        label = arm + (" (after the first)" if warm is not mine else "")
        table.append([label, len(warm), f"{statistics.median(r['wall_s'] for r in warm):.1f}",
                      f"{statistics.median(r['startup_s'] for r in warm):.1f}",
                      f"{statistics.median(r['measured_s'] for r in warm):.2f}", f"{statistics.median(tok):,.0f}",
                      f"{cv:.2%}"])
    print_table(["arm", "probes", "wall s", "start-up s", "measured s", "tok/s", "tok/s CV"], table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
