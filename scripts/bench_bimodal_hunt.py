#!/usr/bin/env python
"""A real-process hunt whose runs are bimodal, beside careful `git bisect run`s (median of k).

Each trial builds a repository of --commits commits whose bench.py runs a busy loop; from a random
commit on the loop does --step more work (a real slowdown). In one run of four, drawn per run,
the bench also doubles its work (`--shape double`: the run reads at half its level) or sleeps as
long as its work took (`--shape sleep`): runs far off their level, as a busy neighbour or a
pulsing pipeline makes them. Then, on the same repository, in an order that rotates per trial
(the machine's drift falls on each method alike):

* regressbisect  `regressbisect run FIRST HEAD --cmd "python bench.py"` (its own store);
* careful k      for each k of --careful-k: `git bisect run` with a script that runs the bench k
                 times and calls a commit bad when the median is below the midpoint of GOOD's
                 and BAD's medians of k (measured first: 2k runs), the way a careful user
                 scripts it.

Prints, per trial and in sum: whether each method named the planted commit, the bench runs each
took; then the yardstick at equal accuracy: the cheapest careful k right at least as often as
regressbisect, our mean runs over its mean, and our p90 over our median.

    python scripts/bench_bimodal_hunt.py --trials 8 --commits 16 --work 1500000
    python scripts/bench_bimodal_hunt.py --trials 3 --shape sleep --careful-k 5
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common  # noqa: F401  (puts the repository on sys.path)

from regressbisect.testing.gitrepo import make_repo  # noqa: E402

BENCH = '''\
"""A training step stand-in: busy work; now and then a run far off its level."""
import json
import os
import time

from config import WORK, SHAPE


def step(units):
    total = 0
    for i in range(units):
        total += i * i % 7
    return total


def main():
    off = int.from_bytes(os.urandom(2), "little") % 4 == 0       # one run in four
    start = time.perf_counter()
    step(WORK)
    if off and SHAPE == "double":
        step(WORK)
    elif off:
        time.sleep(time.perf_counter() - start)
    seconds = time.perf_counter() - start
    count = os.environ.get("BENCH_RUNS")
    if count:
        with open(count, "a") as f:
            f.write("1\\n")
    tokens = 4096
    print("@regressbisect " + json.dumps({"tokens": tokens, "seconds": seconds, "tok_s": tokens / seconds}))


if __name__ == "__main__":
    main()
'''

CAREFUL = '''\
#!/bin/sh
# git bisect run: the median of {k} runs below the midpoint is bad (exit 1), else good (exit 0)
python3 - "$@" <<'EOF'
import json, statistics, subprocess, sys
def tok_s():
    out = subprocess.run([sys.executable, "bench.py"], capture_output=True, text=True, check=True).stdout
    line = [l for l in out.splitlines() if l.startswith("@regressbisect ")][-1]
    return json.loads(line.split(" ", 1)[1])["tok_s"]
median = statistics.median(tok_s() for _ in range({k}))
sys.exit(1 if median < {threshold} else 0)
EOF
'''


def config(work: int, shape: str) -> str:
    return f"WORK = {work}\nSHAPE = {shape!r}\n"


def build(path: Path, commits: int, first_bad: int, work: int, step: float, shape: str) -> list[str]:
    specs = [{"bench.py": BENCH, "config.py": config(work, shape)}]
    for i in range(1, commits):
        spec = {f"notes/n{i}.txt": f"note {i}\n"}
        if i == first_bad:
            spec["config.py"] = config(int(work * (1 + step)), shape)
        specs.append(spec)
    return make_repo(path, specs, [f"c{i}" for i in range(commits)])


def runs(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def median_of(k: int, repo: Path, sha: str, env: dict) -> float:
    subprocess.run(["git", "checkout", "-q", sha], cwd=repo, check=True)
    values = []
    for _ in range(k):
        out = subprocess.run([sys.executable, "bench.py"], cwd=repo, env=env, capture_output=True, text=True,
                             check=True).stdout
        values.append(json.loads(out.splitlines()[-1].split(" ", 1)[1])["tok_s"])
    return statistics.median(values)


def careful_bisect(k: int, repo: Path, shas: list[str], counter: Path) -> tuple[str | None, int, float]:
    env = {**os.environ, "BENCH_RUNS": str(counter)}
    start = time.time()
    good, bad = median_of(k, repo, shas[0], env), median_of(k, repo, shas[-1], env)
    if not bad < good:
        return None, runs(counter), time.time() - start
    script = repo.parent / f"careful{k}.sh"
    script.write_text(CAREFUL.replace("{threshold}", repr((good + bad) / 2)).replace("{k}", str(k)))
    script.chmod(0o755)
    subprocess.run(["git", "bisect", "start", shas[-1], shas[0]], cwd=repo, check=True, capture_output=True)
    out = subprocess.run(["git", "bisect", "run", str(script)], cwd=repo, env=env, capture_output=True, text=True)
    found = next((line.split()[0] for line in out.stdout.splitlines() if "is the first bad commit" in line), None)
    subprocess.run(["git", "bisect", "reset"], cwd=repo, check=True, capture_output=True)
    return found, runs(counter), time.time() - start


def ours(repo: Path, shas: list[str], counter: Path, extra: list[str]) -> tuple[list[str], int, float, int]:
    report = repo.parent / "hunt.json"
    env = {**os.environ, "BENCH_RUNS": str(counter)}
    start = time.time()
    proc = subprocess.run([sys.executable, "-m", "regressbisect", "run", shas[0], shas[-1], "--cmd", "python bench.py",
                           "--json", str(report), "--store", str(repo.parent / "store.sqlite"), "--instrument", "off",
                           "--quiet", *extra], cwd=repo, env=env, capture_output=True, text=True)
    seconds = time.time() - start
    if not report.exists():
        sys.stderr.write(proc.stderr[-2000:])
        return [], runs(counter), seconds, -1
    data = json.loads(report.read_text())
    return ([c["commit"] for c in data["culprits"]], runs(counter), seconds, data.get("interfered_runs", 0))


def p90(values: list[int]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[-1] if len(values) > 1 else float(values[0])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--commits", type=int, default=16)
    p.add_argument("--work", type=int, default=400_000, help="busy-loop units of one run (about 0.1 s)")
    p.add_argument("--step", type=float, default=0.15, help="more work from the planted commit on (0.15: ~13%% slower)")
    p.add_argument("--shape", choices=("double", "sleep"), default="double")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--careful-k", default="5,9,15", help="the careful bisects' runs per commit, comma-separated")
    p.add_argument("--no-interference", action="store_true", help="our hunt with --no-interference")
    p.add_argument("--keep", type=Path, help="copy each trial's JSON report and sample store here (hunt-N.json, store-N.sqlite)")
    args = p.parse_args()
    rng = random.Random(args.seed)
    ks = [int(k) for k in args.careful_k.split(",")]
    methods = ["ours"] + [f"careful {k}" for k in ks]
    extra = ["--no-busy-check"] + (["--no-interference"] if args.no_interference else [])
    rows = []
    for trial in range(args.trials):
        root = Path(tempfile.mkdtemp(prefix="rb-bimodal-"))
        try:
            first_bad = rng.randrange(1, args.commits)
            shas = build(root / "repo", args.commits, first_bad, args.work, args.step, args.shape)
            row = {"trial": trial, "planted": first_bad}
            order = methods[trial % len(methods):] + methods[:trial % len(methods)]
            for method in order:
                counter = root / f"{method.replace(' ', '')}.count"
                if method == "ours":
                    named, n, seconds, off = ours(root / "repo", shas, counter, extra)
                    row.update({"ours_right": named == [shas[first_bad]], "ours_named": len(named), "interfered": off})
                else:
                    found, n, seconds = careful_bisect(int(method.split()[1]), root / "repo", shas, counter)
                    row[f"{method}_right"] = found == shas[first_bad]
                row[f"{method}_runs"], row[f"{method}_s"] = n, round(seconds, 1)
            rows.append(row)
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        finally:
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                shutil.copy(root / "hunt.json", args.keep / f"hunt-{trial}.json")
                shutil.copy(root / "store.sqlite", args.keep / f"store-{trial}.sqlite")
            shutil.rmtree(root, ignore_errors=True)
    print(f"{args.commits} commits, a {args.step:.0%} more work step, one run in 4 {args.shape}d "
          f"({'--no-interference' if args.no_interference else 'interference read'}), {args.trials} trials\n")
    print("| trial | planted | " + " | ".join(f"{m}: right, runs" for m in methods) + " | runs read as interfered |")
    print("|---|---|" + "---|" * (len(methods) + 1))
    for r in rows:
        cells = " | ".join(f"{'yes' if r[f'{m}_right'] else 'NO'}, {r[f'{m}_runs']}" for m in methods)
        print(f"| {r['trial']} | {r['planted']} | {cells} | {r['interfered']} |")
    print("\n| method | right | mean runs | median | p90 | mean seconds |")
    print("|---|---|---|---|---|---|")
    summary = {}
    for m in methods:
        runs_m = [r[f"{m}_runs"] for r in rows]
        summary[m] = (sum(r[f"{m}_right"] for r in rows), statistics.mean(runs_m), statistics.median(runs_m), p90(runs_m))
        right, mean, median, tail = summary[m]
        print(f"| {m} | {right}/{len(rows)} | {mean:.1f} | {median:.0f} | {tail:.0f} | "
              f"{statistics.mean(r[f'{m}_s'] for r in rows):.1f} |")
    ours_right, ours_mean, ours_median, ours_p90 = summary["ours"]
    as_good = [m for m in methods[1:] if summary[m][0] >= ours_right]
    yardstick = min(as_good, key=lambda m: summary[m][1]) if as_good else None
    print(f"\nours p90 / median: {ours_p90 / max(ours_median, 1):.2f}")
    if yardstick:
        print(f"cheapest careful bisect right as often as ours: {yardstick} ({summary[yardstick][1]:.1f} runs); "
              f"ours / it: {ours_mean / max(summary[yardstick][1], 1):.2f}")
    else:
        print("no careful k was right as often as ours")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
