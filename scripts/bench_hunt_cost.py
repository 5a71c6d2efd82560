#!/usr/bin/env python3
"""What a hunt costs with each cost lever off and on (docs/cost.md): the same hunt, arms interleaved.

Each arm is `regressbisect run GOOD BAD` with its own flags (and, optionally, another copy of the
tool on PYTHONPATH: the code before the levers). Every hunt gets a fresh store (nothing reused
between hunts) and a fresh TMPDIR (so the default per-user inductor cache starts cold as well);
arms run round-robin, the order rotated every round, so a machine that drifts or gets busier
weighs on every arm alike. Prints one row per hunt and a median row per arm: probes, hunt wall,
probe wall, GPU-seconds, measured share, budget, culprits found.

Cases:
  --demo PRESET           build the demo repository (tiny on CPU, h200 on a GPU) and hunt HEAD~20..HEAD
  --repo DIR              an existing repository (its [tool.regressbisect] or --cmd)
  --bench-repo N,I,STEP,CV  a repository of N commits whose probe never imports torch (a python
                          script printing a protocol line with seeded lognormal noise), one step of
                          STEP (e.g. -0.03) at index I; also prints the search's own simulated cost

Examples:
  python scripts/bench_hunt_cost.py --demo tiny --rounds 1
  python scripts/bench_hunt_cost.py --demo h200 --rounds 2 --per-probe-tmp
  python scripts/bench_hunt_cost.py --bench-repo 128,77,-0.03,0.02 --rounds 3 \
      --arm "before@/tmp/base:--tokens 4096" --arm "now:--tokens 4096"

Arms: --arm 'NAME[@PYTHONPATH]:FLAGS' (repeatable). Default: 'fixed' (the pyproject budget, or
--fixed-tokens, and --no-shared-caches), 'auto' (--tokens auto --no-shared-caches), 'caches'
(fixed budget, shared caches), 'all' (--tokens auto, shared caches).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Arm:
    name: str
    flags: tuple[str, ...]
    pythonpath: str | None = None


def parse_arm(text: str) -> Arm:
    head, _, flags = text.partition(":")
    name, _, pythonpath = head.partition("@")
    return Arm(name=name.strip(), flags=tuple(shlex.split(flags)), pythonpath=pythonpath or None)


def default_arms(fixed_tokens: str) -> list[Arm]:
    fixed = ("--tokens", fixed_tokens)
    return [Arm("fixed", (*fixed, "--no-shared-caches")), Arm("auto", ("--tokens", "auto", "--no-shared-caches")),
            Arm("caches", fixed), Arm("all", ("--tokens", "auto"))]


def tool_command(python: str) -> list[str]:
    return [python, "-m", "regressbisect"]


def build_demo(where: Path, preset: str) -> tuple[Path, list[str]]:
    import _common  # noqa: F401  (puts the repository on sys.path)
    from regressbisect.workload.demo import build_demo_repo
    repo = where / f"demo-{preset}"
    record = where / f"demo-{preset}-culprits.json"
    if record.exists():  # the same --work again
        return repo, json.loads(record.read_text())
    info = build_demo_repo(repo, preset=preset)
    culprits = [c.sha for c in info.culprits]
    record.write_text(json.dumps(culprits))
    return info.path, culprits


def build_bench_repo(where: Path, spec: str) -> tuple[Path, list[str], tuple[int, int, float, float]]:
    n, index, step, cv = spec.split(",")
    n, index, step, cv = int(n), int(index), float(step), float(cv)
    import _common  # noqa: F401  (puts the repository on sys.path)
    from regressbisect.testing.benchrepo import make_bench_repo
    speeds = [1000.0] * index + [round(1000.0 * (1 + step), 3)] * (n - index)
    repo = where / "bench-repo"
    if repo.exists():  # the same --work again: hunts resume or are read back, against this repo
        shas = subprocess.run(["git", "-C", str(repo), "log", "--format=%H", "--reverse"],
                              capture_output=True, text=True, check=True).stdout.split()
    else:
        shas = make_bench_repo(repo, speeds)
    return repo, [shas[0], shas[index]], (n, index, step, cv)


def simulated_cost(n: int, index: int, step: float, cv: float, min_effect: float, seeds: int) -> float:
    import _common  # noqa: F401  (puts the repository on sys.path)
    from regressbisect.search.bisect import SearchSettings
    from regressbisect.search.simulate import FakeHistory, simulate, step_levels
    history = FakeHistory(levels=step_levels(n, {index: step}), cv=cv)
    runs = [simulate(history, SearchSettings(min_effect=min_effect), seed=s).executions for s in range(seeds)]
    return statistics.mean(runs)


def _env_with_root(pythonpath: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath or str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def run_hunt(arm: Arm, args, repo: Path, good: str, bad: str, work: Path, label: str) -> dict:
    hunt_dir = work / label
    out = hunt_dir / "hunt.json"
    if out.exists():  # finished in an earlier call with the same --work: read it back
        return summarise(arm, label, json.loads(out.read_text()), 0, math.nan, "", hunt_dir)
    # an interrupted hunt resumes from its store when the same --work is given again
    hunt_dir.mkdir(parents=True, exist_ok=True)
    cmd = [*tool_command(args.python), "run", good, bad, "-C", str(repo), "--quiet",
           "--store", str(hunt_dir / "store" / "store.sqlite"), "--json", str(out), *arm.flags]
    if args.cmd:
        cmd += ["--cmd", args.cmd]
    if args.slots:
        cmd += ["--slots", str(args.slots)]
    for pair in args.env:
        cmd += ["--env", pair]
    env = _env_with_root(arm.pythonpath)
    tmp = hunt_dir / "tmp"
    tmp.mkdir(exist_ok=True)
    env["TMPDIR"] = str(tmp)
    env["BENCH_STATE"] = str(hunt_dir / "bench-state")
    env["BENCH_SEED"] = label.rsplit("-r", 1)[-1]  # same noise sequence for every arm of a round
    started = time.monotonic()
    done = subprocess.run(cmd, cwd=str(repo), env=env, capture_output=True, text=True)
    wall = time.monotonic() - started
    report = json.loads(out.read_text()) if out.exists() else {}
    tail = done.stderr[-400:] if done.returncode not in (0, 2, 5, 6) else ""
    return summarise(arm, label, report, done.returncode, wall, tail, hunt_dir)


def store_totals(hunt_dir: Path, gpus: int) -> dict:
    """Probe totals from the hunt's store (for a tool version whose report has no cost block)."""
    import sqlite3
    path = hunt_dir / "store" / "store.sqlite"
    if not path.exists():
        return {}
    with sqlite3.connect(path) as con:
        n, wall, measured = con.execute("SELECT count(*), coalesce(sum(wall_seconds), 0), "
                                        "coalesce(sum(seconds), 0) FROM samples").fetchone()
        k, skip_wall = con.execute("SELECT count(*), coalesce(sum(wall_seconds), 0) FROM skips").fetchone()
    wall += skip_wall
    return {"probes": n + k, "probe_wall_s": wall, "gpu_s": wall * gpus,
            "measured_share": measured / wall if wall else None}


def summarise(arm: Arm, label: str, report: dict, exit_code: int, wall: float, tail: str,
              hunt_dir: Path) -> dict:
    if isinstance(report.get("commits"), dict):
        report = report["commits"]
    # totals over every run of the hunt (resumed ones too) when the tool reports them, else
    # from the hunt's own store (one hunt per store here)
    cost = ((report.get("cost") or {}).get("hunt") or report.get("cost")
            or store_totals(hunt_dir, len((report.get("environment") or {}).get("gpus") or ())))
    return {"arm": arm.name, "label": label, "exit": exit_code, "wall_s": wall,
            "probes": cost.get("probes", report.get("probes")), "probe_wall_s": cost.get("probe_wall_s"),
            "gpu_s": cost.get("gpu_s"), "measured_share": cost.get("measured_share"),
            "tokens": (report.get("settings") or {}).get("tokens"),
            "culprits": [c["commit"] for c in report.get("culprits") or ()],
            "overhead_pairs": (report.get("instrumentation") or {}).get("overhead_pairs"),
            "good_tok_s": ((report.get("endpoints") or {}).get("good") or {}).get("median_tok_s"),
            # probes that are not the search's evidence: overhead arm, counters runs, pilots
            "not_evidence": (cost.get("probes", report.get("probes")) or 0)
            - sum(c.get("n", 0) - c.get("cached", 0) for c in report.get("candidates") or ()),
            "wall_per_probe_s": (cost["probe_wall_s"] / cost["probes"]
                                 if cost.get("probe_wall_s") and cost.get("probes") else None),
            "stderr_tail": tail}


def fmt(value, spec: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return format(value, spec)


def table(rows: list[dict], expected: list[str]) -> str:
    lines = ["| arm | hunt | exit | probes | not evidence | hunt wall s | probe wall s | s per probe | GPU-s | "
             "measured share | tokens | overhead pairs | GOOD tok/s | culprits found |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        found = len(set(r["culprits"]) & set(expected))
        extra = len(set(r["culprits"]) - set(expected))
        lines.append(f"| {r['arm']} | {r['label']} | {r['exit']} | {fmt(r['probes'])} | {fmt(r.get('not_evidence'))} | "
                     f"{fmt(r['wall_s'], '.0f')} | "
                     f"{fmt(r['probe_wall_s'], '.0f')} | {fmt(r['wall_per_probe_s'], '.1f')} | "
                     f"{fmt(r['gpu_s'], '.0f')} | {fmt(r['measured_share'], '.0%')} | {fmt(r['tokens'])} | "
                     f"{fmt(r['overhead_pairs'])} | {fmt(r['good_tok_s'], ',.1f')} | "
                     f"{found}/{len(expected)}{f' (+{extra} other)' if extra else ''} |")
    lines += ["", "| arm | hunts | mean probes | median probes | mean not evidence | median hunt wall s | "
                  "median s per probe | median GPU-s | median measured share | median GOOD tok/s | all culprits |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for arm in dict.fromkeys(r["arm"] for r in rows):
        mine = [r for r in rows if r["arm"] == arm]

        def med(key, mine=mine):
            vals = [r[key] for r in mine if r[key] is not None]
            return statistics.median(vals) if vals else None
        complete = sum(set(expected) <= set(r["culprits"]) for r in mine)

        def mean(key, mine=mine):
            vals = [r[key] for r in mine if r.get(key) is not None]
            return statistics.mean(vals) if vals else None
        lines.append(f"| {arm} | {len(mine)} | {fmt(mean('probes'), '.1f')} | {fmt(med('probes'))} | "
                     f"{fmt(mean('not_evidence'), '.1f')} | {fmt(med('wall_s'), '.0f')} | "
                     f"{fmt(med('wall_per_probe_s'), '.1f')} | {fmt(med('gpu_s'), '.0f')} | "
                     f"{fmt(med('measured_share'), '.0%')} | {fmt(med('good_tok_s'), ',.1f')} | "
                     f"{complete}/{len(mine)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    case = parser.add_mutually_exclusive_group(required=True)
    case.add_argument("--demo", metavar="PRESET", help="build the demo repository with this preset")
    case.add_argument("--repo", type=Path, help="an existing repository")
    case.add_argument("--bench-repo", metavar="N,I,STEP,CV", help="a no-torch probe repository")
    parser.add_argument("--good", help="default HEAD~20 (the bench repository: its first commit)")
    parser.add_argument("--bad", default="HEAD")
    parser.add_argument("--cmd", help="probe command (default: the repository's pyproject)")
    parser.add_argument("--slots", type=int)
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the probe")
    parser.add_argument("--arm", action="append", default=[], type=parse_arm)
    parser.add_argument("--fixed-tokens", default=None, help="budget of the fixed arms (default: pyproject's)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--first-round", type=int, default=0,
                        help="number of the first round (it seeds the bench repository's noise)")
    parser.add_argument("--expect", action="append", default=[], help="culprit sha (default: the case's)")
    parser.add_argument("--per-probe-tmp", action="store_true",
                        help="give every probe its own TMPDIR (as batch schedulers do): the default "
                             "inductor cache is then cold in every probe unless shared")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--sim-seeds", type=int, default=200)
    parser.add_argument("--min-effect", type=float, default=0.02)
    parser.add_argument("--work", type=Path, help="keep hunts here (default: a temporary directory)")
    args = parser.parse_args(argv)

    work = args.work or Path(tempfile.mkdtemp(prefix="bench-hunt-cost-"))
    work.mkdir(parents=True, exist_ok=True)
    expected: list[str] = []
    sim_line = ""
    if args.demo:
        repo, expected = build_demo(work, args.demo)
    elif args.bench_repo:
        repo, (first, *expected), (n, index, step, cv) = build_bench_repo(work, args.bench_repo)
        args.good = args.good or first
        args.cmd = args.cmd or f"{shlex.quote(args.python)} bench.py"
        args.env.append(f"BENCH_NOISE={cv}")
        sim = simulated_cost(n, index, step, cv, args.min_effect, args.sim_seeds)
        sim_line = (f"Search alone, simulated ({args.sim_seeds} seeds, same cell: {n} commits, step "
                    f"{step:+.0%} at #{index}, CV {cv:.0%}): {sim:.1f} executions.")
    else:
        repo = args.repo.resolve()
    expected = args.expect or expected
    args.good = args.good or "HEAD~20"
    if args.per_probe_tmp:
        base = args.cmd or _pyproject_cmd(repo)
        args.cmd = f'TMPDIR=$(mktemp -d) {base}'
    fixed = args.fixed_tokens or str(_pyproject_tokens(repo) or 4096)
    arms = args.arm or default_arms(fixed)

    header = (f"bench_hunt_cost: {repo} {args.good}..{args.bad}, arms {', '.join(a.name for a in arms)}, "
              f"{args.rounds} round(s); load {os.getloadavg()[0]:.1f} at start on {os.cpu_count()} CPUs")
    print(header, flush=True)
    rows = []
    for rnd in range(args.first_round, args.first_round + args.rounds):
        order = arms[rnd % len(arms):] + arms[:rnd % len(arms)]
        for arm in order:
            row = run_hunt(arm, args, repo, args.good, args.bad, work, f"{arm.name}-r{rnd}")
            row["load_end"] = os.getloadavg()[0]
            rows.append(row)
            print(f"  {arm.name} round {rnd}: exit {row['exit']}, {row['probes']} probes, "
                  f"{row['wall_s']:.0f} s, load {row['load_end']:.1f} {row['stderr_tail']}", flush=True)
    print()
    print(table(rows, expected))
    if sim_line:
        print()
        print(sim_line)
    print(f"\nload average at the end: {os.getloadavg()}; hunts kept in {work}")
    (work / "rows.json").write_text(json.dumps(rows, indent=1))
    return 0


def _pyproject_table(repo: Path) -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    path = repo / "pyproject.toml"
    if not path.exists():
        return {}
    return tomllib.loads(path.read_text()).get("tool", {}).get("regressbisect", {})


def _pyproject_cmd(repo: Path) -> str:
    cmd = _pyproject_table(repo).get("cmd")
    if not cmd:
        raise SystemExit("--per-probe-tmp needs --cmd or a cmd in the repository's pyproject")
    return cmd


def _pyproject_tokens(repo: Path) -> int | None:
    tokens = _pyproject_table(repo).get("tokens")
    return tokens if isinstance(tokens, int) else None


if __name__ == "__main__":
    sys.exit(main())
