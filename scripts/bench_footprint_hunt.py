#!/usr/bin/env python
"""A real-process hunt over a history most of whose commits touch nothing the probe reads: with the
probe's footprint (the default) and with `--no-footprint`, on the same repository.

Each trial builds a small pure-Python library in a temporary directory: a package `mylib` of five
modules, tests, docs, a CI workflow, and `bench.py`, which imports one module (`mylib.textproc`,
which imports `mylib._util`), reads `bench.cfg` with open() and prints its metric on the probe
contract's line (`@regressbisect {"tokens": ..., "seconds": ..., "tok_s": ...}`). GOOD is followed
by --commits commits (24): --touching of them (7) edit files the bench reads (the two modules, the
package's `__init__.py`, `bench.cfg`, `bench.py`), one of which is the planted slowdown (--step
more busy work in `textproc.process`: 0.15, ~13% slower) and the others harmless (a docstring, an
unused helper, a comment, a version bump, a config key nobody reads); the rest touch nothing it
reads (the workflow, README, CHANGELOG, docs, tests, `pyproject.toml`, `.gitignore`, and
`mylib/stats.py`, `mylib/cli.py` and a new `mylib/plot.py`, never imported). Where the touching
commits sit, and which of them is the culprit, is drawn per trial (--seed).

Then, on that repository, each arm runs (each with its own --store; the arm that goes first
alternates by trial)

    regressbisect run GOOD HEAD --cmd "python bench.py" --tokens T --instrument off --no-busy-check --quiet
        --json FILE --store FILE [--no-footprint]

and the table gives per trial and arm: the culprit named (and whether it is the planted one), the
commits measured (candidates with samples, besides GOOD and HEAD and with them), of those the
ones touching nothing the bench reads, the commits listed as not measured, the probes, and the
wall seconds; then their sums.

    python scripts/bench_footprint_hunt.py --trials 5
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common  # noqa: F401  (puts the repository on sys.path)

from regressbisect.testing.gitrepo import make_repo  # noqa: E402

BENCH = '''\
"""Throughput of mylib.textproc on a fixed amount of work (the probe of a regression hunt)."""
import json
import os
import time

from mylib import textproc


def load_config(path="bench.cfg"):
    config = {}
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                key, _, value = line.partition("=")
                config[key.strip()] = value.strip()
    return config


def main():
    config = load_config()
    tokens = int(os.environ.get("REGRESSBISECT_TOKENS", "4096"))
    units = tokens * int(config["units_per_token"])
    textproc.process(units // 20)                          # warm-up
    start = time.perf_counter()
    textproc.process(units)
    seconds = time.perf_counter() - start
    print("@regressbisect " + json.dumps({"tokens": tokens, "seconds": seconds, "tok_s": tokens / seconds}))
{main_guard}
'''

TEXTPROC = '''\
{doc}from mylib._util import mix


def process(units):
    total = 0
    for i in range(units):
        total = mix(total, i)
{slow}    return total
{helper}'''

TEXTPROC_DOC = '"""Text processing: the token loop."""\n'
TEXTPROC_HELPER = '''

def count_words(text):
    return len(text.split())
'''

UTIL = '''\
{doc}def mix(total, i):
    return (total * 31 + i) & 0xFFFF
'''

FILES = {
    "README.md": "# mylib\n\nA small text library.\n",
    "CHANGELOG.md": "# Changelog\n\n## 1.0.0\n\n- First release.\n",
    "pyproject.toml": '[project]\nname = "mylib"\nversion = "1.0.0"\nrequires-python = ">=3.9"\n',
    ".gitignore": "__pycache__/\n",
    ".github/workflows/ci.yml": "name: ci\non: [push]\njobs:\n  test:\n    runs-on: ubuntu-latest\n"
                                "    steps:\n      - uses: actions/checkout@v4\n      - run: python -m pytest\n",
    "docs/index.md": "# mylib\n\nStart here.\n",
    "docs/api.md": "# API\n\n`textproc.process(units)`\n",
    "tests/test_textproc.py": "from mylib import textproc\n\n\ndef test_process():\n"
                              "    assert textproc.process(3) >= 0\n",
    "tests/test_stats.py": "from mylib import stats\n\n\ndef test_mean():\n    assert stats.mean([1, 3]) == 2\n",
    "mylib/stats.py": "def mean(values):\n    return sum(values) / len(values)\n",
    "mylib/cli.py": "import sys\n\nfrom mylib import stats\n\n\ndef main():\n"
                    "    print(stats.mean([float(a) for a in sys.argv[1:]]))\n",
}


def _append(path: str, text: str):
    def edit(files: dict[str, str]) -> None:
        files[path] = files.get(path, "") + text
    return path, edit


def _set(path: str, text: str):
    def edit(files: dict[str, str]) -> None:
        files[path] = text
    return path, edit


# Commits that touch none of what bench.py reads: (subject, path, edit of the files).
UNTOUCHED = [
    ("ci: test on 3.12 too", *_append(".github/workflows/ci.yml", "      - run: echo py3.12\n")),
    ("ci: cache pip", *_append(".github/workflows/ci.yml", "      - run: echo cache\n")),
    ("README: install", *_append("README.md", "\n## Install\n\n    pip install mylib\n")),
    ("README: usage", *_append("README.md", "\n## Use\n\n    from mylib import textproc\n")),
    ("CHANGELOG: unreleased", *_append("CHANGELOG.md", "\n## Unreleased\n")),
    ("CHANGELOG: stats", *_append("CHANGELOG.md", "\n- stats.median\n")),
    ("docs: index", *_append("docs/index.md", "\nSee api.md.\n")),
    ("docs: api of stats", *_append("docs/api.md", "\n`stats.mean(values)`\n")),
    ("docs: a tutorial", *_set("docs/tutorial.md", "# Tutorial\n\nCount words.\n")),
    ("tests: process of nothing", *_append("tests/test_textproc.py",
                                           "\n\ndef test_nothing():\n    assert textproc.process(0) == 0\n")),
    ("tests: mean of one", *_append("tests/test_stats.py", "\n\ndef test_one():\n    assert stats.mean([2]) == 2\n")),
    ("tests: conftest", *_set("tests/conftest.py", "import pytest  # noqa: F401\n")),
    ("stats: median", *_append("mylib/stats.py", "\n\ndef median(values):\n"
                                                 "    return sorted(values)[len(values) // 2]\n")),
    ("cli: --help", *_append("mylib/cli.py", "\n\nUSAGE = 'mylib-cli NUMBERS...'\n")),
    ("plot: a new module", *_set("mylib/plot.py", "def bars(values):\n"
                                                  "    return ['#' * int(v) for v in values]\n")),
    ("pyproject: classifiers", *_append("pyproject.toml", 'classifiers = ["Programming Language :: Python"]\n')),
    (".gitignore: build", *_append(".gitignore", "build/\n")),
]


def _state_files(state: dict[str, Any]) -> dict[str, str]:
    """The files bench.py reads, as `state` (which harmless edits and the slowdown are in) has them."""
    slow = f"    for i in range(units * {state['step_pct']} // 100):   # check the tokens again\n" \
           "        total = mix(total, i)\n" if state["slow"] else ""
    config = f"units_per_token = {state['units_per_token']}\n"
    if state["cfg_comment"]:
        config = "# the bench's work per token\n" + config
    if state["cfg_key"]:
        config += "name = nightly\n"
    return {
        "bench.py": BENCH.replace("{main_guard}", '\n\nif __name__ == "__main__":\n    main()\n'
                                  if state["guard"] else "\n\nmain()\n"),
        "bench.cfg": config,
        "mylib/__init__.py": f'__version__ = "{state["version"]}"\n',
        "mylib/textproc.py": TEXTPROC.replace("{doc}", TEXTPROC_DOC if state["tp_doc"] else "")
                                     .replace("{slow}", slow).replace("{helper}", TEXTPROC_HELPER if state["helper"] else ""),
        "mylib/_util.py": UTIL.replace("{doc}", '"""Helpers."""\n\n\n' if state["util_doc"] else ""),
    }


# Commits that touch what bench.py reads, harmless: (subject, change of the state).
TOUCHING = [
    ("textproc: docstring", {"tp_doc": True}),
    ("textproc: count_words", {"helper": True}),
    ("_util: docstring", {"util_doc": True}),
    ("bench.cfg: a comment", {"cfg_comment": True}),
    ("bench.cfg: the run's name", {"cfg_key": True}),
    ("mylib 1.0.1", {"version": "1.0.1"}),
    ("bench.py: a main guard", {"guard": True}),
]
SLOWDOWN = ("textproc: check the tokens again", {"slow": True})


def build(path: Path, rng: random.Random, commits: int, touching: int, units_per_token: int,
          step: float) -> tuple[list[str], int, set[int]]:
    """The repository: GOOD, then `commits` commits; its shas, the culprit's position (GOOD = 0)
    and the positions of the commits touching what bench.py reads."""
    if not 1 <= touching <= len(TOUCHING) + 1 or commits - touching > len(UNTOUCHED):
        raise SystemExit(f"--touching must be 1..{len(TOUCHING) + 1}, --commits - --touching at most {len(UNTOUCHED)}")
    state = {"slow": False, "step_pct": round(step * 100), "units_per_token": units_per_token, "cfg_comment": False,
             "cfg_key": False, "version": "1.0.0", "tp_doc": False, "helper": False, "util_doc": False, "guard": False}
    positions = sorted(rng.sample(range(1, commits + 1), touching))
    edits = rng.sample(TOUCHING, touching - 1) + [SLOWDOWN]
    rng.shuffle(edits)
    culprit = positions[edits.index(SLOWDOWN)]
    untouched = iter(rng.sample(UNTOUCHED, commits - touching))
    files = dict(FILES)
    specs: list[dict[str, str]] = [{**FILES, **_state_files(state)}]
    subjects = ["mylib 1.0.0"]
    edit_of = dict(zip(positions, edits))
    for position in range(1, commits + 1):
        if position in edit_of:
            subject, change = edit_of[position]
            state.update(change)
            specs.append(_state_files(state))
        else:
            subject, rel, edit = next(untouched)
            edit(files)
            specs.append({rel: files[rel]})
        subjects.append(subject)
    return make_repo(path, specs, subjects), culprit, set(positions)


def hunt(repo: Path, shas: list[str], name: str, tokens: int, extra: list[str]) -> dict[str, Any]:
    """One `regressbisect run GOOD HEAD` with its own store; what the table reads of its report."""
    report, store = repo.parent / f"{name}.json", repo.parent / f"{name}.sqlite"
    cmd = [sys.executable, "-m", "regressbisect", "run", shas[0], "HEAD", "--cmd", "python bench.py",
           "--tokens", str(tokens), "--instrument", "off", "--no-busy-check", "--quiet",
           "--json", str(report), "--store", str(store), *extra]
    start = time.time()
    proc = subprocess.run(cmd, cwd=repo, capture_output=True, text=True)
    seconds = time.time() - start
    if not report.exists():
        sys.stderr.write(proc.stdout[-2000:] + proc.stderr[-2000:])
        return {"exit": proc.returncode, "named": [], "measured": [], "not_measured": [], "probes": 0, "s": seconds}
    data = json.loads(report.read_text())
    measured = [c["commit"] for c in data["candidates"] if c["n"] > 0 or c.get("interfered_tok_s")]
    return {"exit": proc.returncode, "named": [c["commit"] for c in data["culprits"]], "measured": measured,
            "not_measured": [c["commit"] for c in data["not_measured"]], "probes": data["probes"], "s": seconds,
            "footprint": data.get("footprint")}


ARMS = (("footprint", []), ("no-footprint", ["--no-footprint"]))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--commits", type=int, default=24, help="commits after GOOD")
    p.add_argument("--touching", type=int, default=7, help="of them, commits touching what bench.py reads (culprit included)")
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--units-per-token", type=int, default=150, help="loop iterations per token (4096 x 150: about 0.08 s on a 2-core VM)")
    p.add_argument("--step", type=float, default=0.15, help="more work from the culprit on (0.15: ~13%% slower)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--keep", type=Path, help="copy each trial's reports and stores here")
    args = p.parse_args()
    rng = random.Random(args.seed)
    rows = []
    for trial in range(args.trials):
        root = Path(tempfile.mkdtemp(prefix="rb-footprint-"))
        try:
            shas, culprit, touching = build(root / "repo", rng, args.commits, args.touching, args.units_per_token,
                                            args.step)
            position = {sha: i for i, sha in enumerate(shas)}
            row: dict[str, Any] = {"trial": trial, "planted": culprit, "touching": sorted(touching)}
            for name, extra in (ARMS if trial % 2 == 0 else ARMS[::-1]):
                r = hunt(root / "repo", shas, name, args.tokens, extra)
                inner = [position[c] for c in r["measured"] if position[c] not in (0, len(shas) - 1)]
                row[name] = {"exit": r["exit"], "named": [position[c] for c in r["named"]],
                             "right": r["named"] == [shas[culprit]], "measured": sorted(inner),
                             "measured_untouched": sorted(i for i in inner if i not in touching),
                             "not_measured": len(r["not_measured"]), "probes": r["probes"], "s": r["s"],
                             "footprint_note": (r.get("footprint") or {}).get("note")}
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
        finally:
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                for f in root.glob("*.json"):
                    shutil.copy(f, args.keep / f"{trial}-{f.name}")
                for f in root.glob("*.sqlite"):
                    shutil.copy(f, args.keep / f"{trial}-{f.name}")
            shutil.rmtree(root, ignore_errors=True)

    print(f"{args.commits} commits after GOOD, {args.touching} touching what bench.py reads (one a {args.step:.0%} "
          f"more work step), {args.trials} trials, seed {args.seed}\n")

    def named(arm: dict) -> str:
        got = ",".join(f"#{i}" for i in arm["named"]) or "none"
        return f"{got} ({'right' if arm['right'] else 'wrong' if arm['named'] else 'exit ' + str(arm['exit'])})"

    def cells(arm: dict) -> list[str]:
        n = len(arm["measured"])
        return [named(arm), f"{n} / {n + 2}", str(len(arm["measured_untouched"])), str(arm["not_measured"]),
                str(arm["probes"]), f"{arm['s']:.1f}"]

    headers = ["trial", "planted", "footprint: culprit named", "measured (inner / with ends)", "of them touching none",
               "not measured", "probes", "wall s", "--no-footprint: culprit named", "measured (inner / with ends)",
               "probes", "wall s"]
    table = []
    for r in rows:
        a, b = cells(r["footprint"]), cells(r["no-footprint"])
        table.append([r["trial"], f"#{r['planted']}", *a, b[0], b[1], b[4], b[5]])

    def total(arm: str, key: str) -> float:
        return sum(len(r[arm][key]) if isinstance(r[arm][key], list) else r[arm][key] for r in rows)

    right = {arm: sum(r[arm]["right"] for r in rows) for arm, _ in ARMS}
    table.append(["sum", "", f"{right['footprint']}/{len(rows)} right",
                  f"{total('footprint', 'measured'):.0f} / {total('footprint', 'measured') + 2 * len(rows):.0f}",
                  f"{total('footprint', 'measured_untouched'):.0f}", f"{total('footprint', 'not_measured'):.0f}",
                  f"{total('footprint', 'probes'):.0f}", f"{total('footprint', 's'):.1f}",
                  f"{right['no-footprint']}/{len(rows)} right",
                  f"{total('no-footprint', 'measured'):.0f} / {total('no-footprint', 'measured') + 2 * len(rows):.0f}",
                  f"{total('no-footprint', 'probes'):.0f}", f"{total('no-footprint', 's'):.1f}"])
    _common.print_table(headers, table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
