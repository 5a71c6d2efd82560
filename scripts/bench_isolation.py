#!/usr/bin/env python
"""Probe isolation, measured: what the import recorder costs, and what a hunt answers without
the worktree's import roots first (docs/isolation.md).

    python scripts/bench_isolation.py                 # both tables
    python scripts/bench_isolation.py --pairs 40 --torch-pairs 10 --no-hunt

1. Recorder cost. The same probe, run with the worktree's import roots on PYTHONPATH, with and
   without the import recorder (the probe's sitecustomize plus its atexit record and the
   parent's read of it), in interleaved pairs (ABBA order). Per arm: median wall time of the
   whole probe process; the recorder's cost is the paired change of 1/wall (stats.compare).
   Probes: `python bench.py` (interpreter start-up and one small package: the worst case) and
   the same after `import torch` (a training probe's floor). Wall times of whole processes on a
   shared machine are noisy, so the recorder's own work is also timed inside one process.
2. Before/after. Case (a) of tests/test_isolation_integration.py: a src-layout package installed
   editable (the user's checkout, at the slow HEAD) into a virtualenv; commit 4 of 8 halves
   tok/s. The hunt runs twice through the real CLI code: as the tool was (no import roots, no
   check) and as it is.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
import _common  # noqa: E402,F401  (puts the repository on sys.path)

from tabulate import tabulate  # noqa: E402

from regressbisect.search import stats  # noqa: E402
from regressbisect.config import build_config  # noqa: E402
from regressbisect.git.history import History  # noqa: E402
from regressbisect.hunts.commits import CommitHunt, VERDICT_EXIT  # noqa: E402
from regressbisect.probe import isolation  # noqa: E402
from regressbisect.probe.runner import SHIM_DIR, ProbeSpec, run_probe  # noqa: E402
from regressbisect.testing.isorepo import make_installed_repo, make_venv, pip_install  # noqa: E402

PROBES = {
    "python bench.py": f"{sys.executable} bench.py",
    "import torch; bench.py": f"{sys.executable} -c 'import torch, runpy; runpy.run_path(\"bench.py\")'",
}


def recorder_cost(workdir: Path, pairs: int, torch_pairs: int) -> list[list[str]]:
    repo = workdir / "cost"
    make_installed_repo(repo, [1000.0])
    rows = []
    for label, command in PROBES.items():
        spec = ProbeSpec(command=command, tokens=1000, timeout_s=120)
        arms = {False: [], True: []}
        n = torch_pairs if "torch" in label else pairs
        for i in range(n):
            for check in ((False, True) if i % 2 == 0 else (True, False)):  # ABBA
                iso = isolation.Isolation(user_root=workdir / "elsewhere", check=check)
                probe = iso.prepare(repo)
                outcome = run_probe(spec, repo, extra_env=probe.env)
                iso.verify(probe)
                if outcome.sample is None:
                    raise SystemExit(f"probe failed: {outcome.skip_reason}\n{outcome.output_tail}")
                arms[check].append(outcome.wall_seconds)
        plain, recorded = arms[False], arms[True]
        cmp = stats.compare([1 / w for w in plain], [1 / w for w in recorded], min_effect=0.01, paired=True)
        rows.append([label, n, f"{statistics.median(plain) * 1e3:.1f}",
                     f"{statistics.median(recorded) * 1e3:.1f}",
                     f"{-cmp.change:+.2%}", f"{-cmp.ci95[1]:+.2%} .. {-cmp.ci95[0]:+.2%}"])
    return rows


IN_PROCESS = r"""
import importlib.util, json, os, sys, tempfile, time, statistics
import torch, mypkg
spec = importlib.util.spec_from_file_location("hook", sys.argv[1])
hook = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hook)
out = tempfile.mkdtemp()
times = []
for _ in range(50):
    started = time.perf_counter()
    hook._record_imports(out, ["mypkg"])
    times.append(time.perf_counter() - started)
print(json.dumps({"modules": len(sys.modules), "record_us": statistics.median(times) * 1e6}))
"""


def in_process_cost(workdir: Path) -> list[list[str]]:
    """The recorder's own work, timed inside one process: start-up (python -X importtime) and
    the record written at exit, with torch loaded (about 1,500 modules to walk)."""
    import json
    import os
    import subprocess

    repo = workdir / "cost"
    env = {**os.environ, "PYTHONPATH": f"{SHIM_DIR}{os.pathsep}{repo / 'src'}",
           isolation.IMPORTS_DIR_ENV: str(workdir), isolation.PROJECT_MODULES_ENV: "mypkg"}
    startups = []
    for _ in range(20):
        trace = subprocess.run([sys.executable, "-X", "importtime", "-c", "pass"], env=env,
                               capture_output=True, text=True).stderr
        startups += [int(line.split("|")[1]) for line in trace.splitlines()
                     if line.count("|") == 2 and line.split("|")[2].strip() == "sitecustomize"]
    done = subprocess.run([sys.executable, "-c", IN_PROCESS, str(SHIM_DIR / "sitecustomize.py")],
                          env={**env, "PYTHONPATH": str(repo / "src")}, capture_output=True, text=True, check=True)
    record = json.loads(done.stdout.strip().splitlines()[-1])
    return [["start-up: import of the probe's sitecustomize (recorder on)", f"{statistics.median(startups):.0f}"],
            [f"at exit: the record, {record['modules']} modules loaded (torch)", f"{record['record_us']:.0f}"]]


def before_after(workdir: Path, max_samples: int) -> list[list[str]]:
    speeds = [1000.0] * 4 + [500.0] * 4
    repo = workdir / "hunt"
    shas = make_installed_repo(repo, speeds)
    python = make_venv(workdir / "venv")
    pip_install(python, repo, editable=True)
    rows = []
    real_import_roots = isolation.import_roots
    for arm in ("before (no import roots, no check)", "after"):
        before = arm.startswith("before")
        isolation.import_roots = (lambda worktree: []) if before else real_import_roots
        flags = {"cmd": f"{python} bench.py", "instrument": "off", "max_samples": max_samples,
                 "min_effect": 0.1, "isolation_check": not before}
        history = History.open(repo)
        config = build_config({}, flags)
        started = time.perf_counter()
        outcome = CommitHunt(history, shas[0], shas[-1], config, store_path=workdir / f"{before}.sqlite").run()
        seconds = time.perf_counter() - started
        report = outcome.report
        culprits = [c["commit"] for c in report["culprits"]]
        rows.append([arm, report["verdict"], int(VERDICT_EXIT[report["verdict"]]),
                     ", ".join(c[:10] for c in culprits) or "-",
                     "yes" if culprits == [shas[4]] else "no", report["probes"],
                     f"{report['gap_pct']:+.1f}%", f"{seconds:.1f}"])
    isolation.import_roots = real_import_roots
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20, help="interleaved pairs per probe (recorder cost)")
    parser.add_argument("--torch-pairs", type=int, default=8, help="pairs of the probe that imports torch")
    parser.add_argument("--max-samples", type=int, default=6, help="--max-samples of the two hunts")
    parser.add_argument("--no-hunt", action="store_true", help="only the recorder's cost")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-isolation-") as tmp:
        workdir = Path(tmp)
        print("Import recorder cost: wall time of the whole probe process, with vs without the recorder")
        print(tabulate(recorder_cost(workdir, args.pairs, args.torch_pairs),
                       headers=["probe", "pairs", "median ms, no recorder", "median ms, recorder",
                                "cost", "95% CI"], tablefmt="github"))
        print()
        print("The recorder's own work, timed inside the process (median)")
        print(tabulate(in_process_cost(workdir), headers=["what", "microseconds"], tablefmt="github"))
        if args.no_hunt:
            return
        print()
        print("Case (a): src layout installed editable (the checkout, at the slow HEAD); commit 4 of 8 halves tok/s")
        print(tabulate(before_after(workdir, args.max_samples),
                       headers=["arm", "verdict", "exit", "culprit", "right", "probes", "gap", "seconds"],
                       tablefmt="github"))


if __name__ == "__main__":
    main()
