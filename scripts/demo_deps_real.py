#!/usr/bin/env python3
"""The deps hunt on a real PyPI package: an upgrade of pyparsing 3.0.0 -> 3.0.9 (beside two
harmless upgrades, six 1.15.0 -> 1.16.0 and idna 3.3 -> 3.4, that the benchmark never imports)
makes a small parsing benchmark about 30% slower; `regressbisect deps` should name pyparsing, and
among its releases 3.0.1 .. 3.0.9, the one that brought the slowdown.

Ground truth (timed by hand with one uv venv per release on the same benchmark; see
docs/results/deps-real.md, and `--verify` re-times it here): the benchmark's rate drops by about
28% at 3.0.5 (pyparsing 3.0.5 makes 24% more calls into pyparsing per parse of this grammar) and by
about 8% at 3.0.0 from 2.4.7 (with --good-version 2.4.7); no other release between 2.4.7 and 3.0.9
moves it by more than the noise of a 2-core shared machine (a few %).

The script writes, in a scratch directory, a tiny git project (bench.py: an arithmetic-expression
grammar with function calls, parsed for 0.5 CPU-seconds after a warm-up, printing
`parse rate: N ops/s`), good.txt and bad.txt (pinned requirements), runs

    python -m regressbisect deps good.txt bad.txt --cmd "python bench.py" \
        --metric-regex "([0-9.]+) ops/s" --json out.json

in it (environments built with uv from PyPI, so it needs the network), and prints a table: the
packages changed, the culprit package and release with its step and interval, probes and wall time,
beside the ground truth.

    python scripts/demo_deps_real.py [--verify 5] [--good-version 2.4.7] [--workdir DIR] [--json OUT]
        [-- EXTRA DEPS ARGS]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from packaging.version import Version

import _common  # noqa: F401  (puts the repository on sys.path)
from _common import print_table, write_results

PACKAGE = "pyparsing"
GOOD_PINS = {"pyparsing": "3.0.0", "six": "1.15.0", "idna": "3.3"}
BAD_PINS = {"pyparsing": "3.0.9", "six": "1.16.0", "idna": "3.4"}
TRUE_STEPS = {
    "3.0.0": "-8.0% after 2.4.7 (paired, 15 rounds, 95% -11.9%..-3.9%); pyparsing calls per parse 1063 -> 1090",
    "3.0.5": "-28.5% after 3.0.4 (paired, 15 rounds, 95% -33.0%..-23.8%); pyparsing calls per parse 1120 -> 1388",
}
"""The releases that made the benchmark slower, timed by hand (docs/results/deps-real.md): between
3.0.0 and 3.0.4 and between 3.0.5 and 3.0.9 no step was told from noise (3.0.0 -> 3.0.4 -2.2%,
95% -6.4%..+2.3%; 3.0.5 -> 3.0.9 -4.4%, 95% -9.4%..+0.9%; calls per parse 1090 -> 1120 at 3.0.3)."""
METRIC_REGEX = r"([0-9.]+) ops/s"

BENCH = '''\
"""A fixed pyparsing workload: parse two expressions (function calls, nesting, infix operators)
for 0.5 CPU-seconds after a warm-up; prints the parse rate."""
import time

import pyparsing as pp


def grammar():
    integer = pp.Word(pp.nums)
    ident = pp.Word(pp.alphas + "_", pp.alphanums + "_")
    expr = pp.Forward()
    call = ident + pp.Suppress("(") + pp.Optional(pp.delimitedList(expr)) + pp.Suppress(")")
    atom = call | integer | ident | pp.Group(pp.Suppress("(") + expr + pp.Suppress(")"))
    term = atom + pp.ZeroOrMore(pp.oneOf("* /") + atom)
    expr <<= term + pp.ZeroOrMore(pp.oneOf("+ -") + term)
    return expr


EXPR = grammar()
TEXTS = ["f(a, b + 3 * (c - 4)) / g(h(1), 2) + x * y - (z + 17) * 3",
         "alpha + beta * (gamma - delta) / epsilon + fn(1, 2, 3, (4 + 5))"] * 4


def work():
    for text in TEXTS:
        EXPR.parseString(text, parseAll=True)


for _ in range(20):
    work()
rounds = 0
start = time.process_time()
while time.process_time() - start < 0.5:
    work()
    rounds += 1
print(f"parse rate: {rounds * len(TEXTS) / (time.process_time() - start):.1f} ops/s")
'''


def pins_text(pins: dict[str, str]) -> str:
    return "".join(f"{name}=={version}\n" for name, version in sorted(pins.items()))


def write_project(root: Path) -> Path:
    """The project (a git repository holding bench.py) and the two requirement files beside it."""
    project = root / "project"
    project.mkdir(parents=True)
    (project / "bench.py").write_text(BENCH)
    env = {**os.environ, "GIT_AUTHOR_NAME": "demo", "GIT_AUTHOR_EMAIL": "demo@example.invalid",
           "GIT_COMMITTER_NAME": "demo", "GIT_COMMITTER_EMAIL": "demo@example.invalid"}
    for cmd in (["git", "init", "-q", "-b", "main"], ["git", "add", "bench.py"],
                ["git", "commit", "-q", "-m", "bench"]):
        subprocess.run(cmd, cwd=project, env=env, check=True)
    (root / "good.txt").write_text(pins_text(GOOD_PINS))
    (root / "bad.txt").write_text(pins_text(BAD_PINS))
    return project


def releases_between(good: str, bad: str) -> list[str]:
    """The final releases of PACKAGE from good to bad, both included (PyPI's JSON simple API)."""
    out = subprocess.run(["curl", "-s", "-H", "Accept: application/vnd.pypi.simple.v1+json",
                          f"https://pypi.org/simple/{PACKAGE}/"], capture_output=True, text=True, check=True).stdout
    versions = [Version(v) for v in json.loads(out)["versions"]]
    return [str(v) for v in sorted(versions) if not v.is_prerelease and Version(good) <= v <= Version(bad)]


def verify(root: Path, runs: int) -> dict[str, list[float]]:
    """The benchmark timed by hand: one uv venv per release between the ends, `runs` interleaved
    rounds; {release: rates}."""
    versions = releases_between(GOOD_PINS[PACKAGE], BAD_PINS[PACKAGE])
    for version in versions:
        venv = root / "verify" / version
        subprocess.run(["uv", "venv", "-q", str(venv)], check=True)
        subprocess.run(["uv", "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
                        f"{PACKAGE}=={version}"], check=True)
    rates: dict[str, list[float]] = {v: [] for v in versions}
    for _ in range(runs):
        for version in versions:
            out = subprocess.run([str(root / "verify" / version / "bin" / "python"), "bench.py"],
                                 cwd=root / "project", capture_output=True, text=True, check=True).stdout
            rates[version].append(float(out.split()[-2]))
    print_table(["release", "median ops/s", "min", "max", "vs first"],
                [(v, f"{statistics.median(r):.0f}", f"{min(r):.0f}", f"{max(r):.0f}",
                  f"{statistics.median(r) / statistics.median(rates[versions[0]]) - 1:+.1%}")
                 for v, r in rates.items()])
    return rates


def fmt_interval(interval: list[float] | None) -> str:
    return "-" if not interval else f"[{interval[0]:+.1f}%, {interval[1]:+.1f}%]"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", type=Path, help="scratch directory (default: a temporary one, removed)")
    ap.add_argument("--verify", type=int, default=0, metavar="RUNS",
                    help="first time every release by hand, RUNS interleaved rounds (the ground truth)")
    ap.add_argument("--good-version", default=GOOD_PINS[PACKAGE],
                    help=f"{PACKAGE} at GOOD (default %(default)s; 2.4.7 makes the hunt cross the 3.0 rewrite)")
    ap.add_argument("--json", type=Path, help="write the results here (scripts/_common.py envelope)")
    ap.add_argument("extra", nargs="*", help="further arguments of `regressbisect deps` (after --)")
    args = ap.parse_args()
    GOOD_PINS[PACKAGE] = args.good_version
    if shutil.which("uv") is None:
        print("uv is not installed (pip install uv)", file=sys.stderr)
        return 1
    scratch = args.workdir or Path(tempfile.mkdtemp(prefix="deps-real-"))
    try:
        project = write_project(scratch)
        rates = verify(scratch, args.verify) if args.verify else {}
        out = scratch / "out.json"
        cmd = [sys.executable, "-m", "regressbisect", "deps", str(scratch / "good.txt"), str(scratch / "bad.txt"),
               "--cmd", "python bench.py", "--metric-regex", METRIC_REGEX, "--json", str(out), *args.extra]
        print("$ " + " ".join(cmd[1:]), flush=True)
        started = time.perf_counter()
        rc = subprocess.run(cmd, cwd=project, check=False).returncode
        wall = time.perf_counter() - started
        if not out.exists():
            print(f"regressbisect deps exited {rc} without a report", file=sys.stderr)
            return 1
        report = json.loads(out.read_text())
    finally:
        if args.workdir is None:
            shutil.rmtree(scratch, ignore_errors=True)
    changed = ", ".join(f"{c['package']} {c['good_version']} -> {c['bad_version']}" for c in report["changes"])
    rows = [("packages changed", changed),
            ("verdict (exit code)", f"{report['verdict']} ({rc})"),
            ("GOOD -> BAD gap", f"{report['gap_pct']:+.1f}%" if report.get("gap_pct") is not None else "-")]
    for culprit in report["culprits"]:
        releases = culprit["releases"]
        rows.append(("culprit package", f"{culprit['package']}: step {culprit['step_pct']:+.1f}% "
                                        f"{fmt_interval(culprit['interval'])}"
                     + (f", with {culprit['with']}" if culprit["with"] else "")))
        for step in releases.get("steps", []):
            rows.append(("culprit release", f"{step['version']} (after {step['after']}): step {step['step_pct']:+.1f}% "
                                            f"{fmt_interval(step['interval'])}"))
        for step in releases.get("ambiguous", []):
            rows.append(("ambiguous releases", f"one of {step['any_of']} (after {step['after']}): "
                                               f"step {step['step_pct']:+.1f}% {fmt_interval(step['interval'])}"))
        rows.append(("releases tested", f"{', '.join(releases['tested'])} ({releases['probes']} probes, "
                                        f"{releases['verdict']})"))
        if releases.get("skipped"):
            rows.append(("releases skipped", "; ".join(f"{s['version']}: {s['reason']}" for s in releases["skipped"])))
    for suspect in report.get("suspects", []):
        rows.append(("suspect", f"{suspect['packages']}: {suspect['step_pct']:+.1f}% {fmt_interval(suspect['interval'])}"))
    rows += [("probes (cached)", f"{report['probes']} ({report['cached']})"),
             ("environments built", f"{report['environments_built']} ({report['build_seconds']:.0f} s building)"),
             ("wall time", f"{wall / 60:.1f} min (report: {report['wall_seconds']:.0f} s)")]
    truth = {v: why for v, why in TRUE_STEPS.items() if Version(GOOD_PINS[PACKAGE]) < Version(v)}
    rows += [("ground truth", f"{PACKAGE} {v}: {why}") for v, why in truth.items()]
    named = [(c["package"], s["version"]) for c in report["culprits"] for s in c["releases"].get("steps", [])]
    matched = sorted(named) == sorted((PACKAGE, v) for v in truth)
    rows.append(("matches ground truth", "yes" if matched else f"no (named {named})"))
    print()
    print_table(["", "regressbisect deps"], rows)
    if args.json:
        write_results(args.json, {"report": report, "wall_seconds": wall, "exit_code": rc, "verify": rates,
                                  "ground_truth": {"package": PACKAGE, "steps": truth}, "matches": matched})
    return 0


if __name__ == "__main__":
    sys.exit(main())
