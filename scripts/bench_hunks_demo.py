#!/usr/bin/env python3
"""The hunk hunt on the demo workload (real probes of the tiny preset on this machine): a large
uncommitted diff of mostly harmless hunks and one dependent group that slows the step only whole.

The demo repository (`regressbisect demo`'s, tiny preset) at its last commit, its own uncommitted
diff dropped, then:

* harmless hunks: a comment above each top-level `def`/`class` of the trainer package (and of
  methods, until --hunks is reached), each far enough from the next to be its own hunk;
* one slow group of six hunks, each needing the others: a new untracked module `trainer/refine.py`
  (a residual SwiGLU refinement), its import in drafter.py, the refinement built in each drafter
  layer, applied after the layer's MLP, a preset field `refine_ffn` and the tiny preset's width
  for it (--refine-ffn). Without every one of them the step is unchanged or does not run.

Prints the diff's size, BASE and BASE + all hunks measured (--spread runs each), then per hunt:
the verdict, the hunks named, probes and wall time. A right answer names the group's hunks and
nothing else (a harmless hunk named is a false answer). A hunt still running after --max-minutes
is interrupted (Ctrl-C, exit 130: its samples are stored, it writes no report) and recorded as
stopped, with its probes counted from its own log of runs.

    python scripts/bench_hunks_demo.py --hunks 54 --hunts 1 [--max-minutes 30] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common  # noqa: E402,F401  (puts the repository on sys.path)

from regressbisect.config import default_store_path  # noqa: E402
from regressbisect.probe.protocol import parse_output  # noqa: E402
from regressbisect.store import Store  # noqa: E402
from regressbisect.workload.demo import build_demo_repo  # noqa: E402

REFINE = '''\
"""A residual SwiGLU refinement of the drafter's hidden states (an experiment)."""
from __future__ import annotations

import torch
from torch import nn

from .layers import SwiGLU


class Refine(nn.Module):
    def __init__(self, hidden: int, ffn: int):
        super().__init__()
        self.mlp = SwiGLU(hidden, ffn)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(x)
'''

SLOW_GROUP = (   # (file, old text, new text): each of these is one hunk of the group
    ("trainer/drafter.py", "from .presets import Preset\n", "from .presets import Preset\nfrom .refine import Refine\n"),
    ("trainer/drafter.py", "        self.mlp = SwiGLU(p.hidden, p.ffn)\n",
     "        self.mlp = SwiGLU(p.hidden, p.ffn)\n        self.refine = Refine(p.hidden, p.refine_ffn) if p.refine_ffn else None\n"),
    ("trainer/drafter.py", "        return x + self.mlp(self.mlp_norm(x))\n",
     "        x = x + self.mlp(self.mlp_norm(x))\n        return self.refine(x) if self.refine is not None else x\n"),
    ("trainer/presets.py", "    \"\"\"Batches a target rank may have sent but not yet completed (bounded isend queue).\"\"\"\n",
     "    \"\"\"Batches a target rank may have sent but not yet completed (bounded isend queue).\"\"\"\n"
     "    refine_ffn: int = 0\n    \"\"\"Width of the drafter's residual refinement MLP (0: none).\"\"\"\n"),
)
TINY_LINE = "    warmup_steps=3, default_tokens=4096, lm_head_min_out=2048, lr=3e-4, max_in_flight=2,\n"


def harmless_hunks(repo: Path, wanted: int) -> int:
    """Comments above `def`/`class` lines of the trainer package, at least 8 lines apart (so that
    each is its own hunk) and away from the slow group's lines; returns how many were written."""
    group_lines = {old.splitlines()[0] for _, old, _ in SLOW_GROUP} | {TINY_LINE.rstrip("\n")}
    written = 0
    for path in sorted((repo / "trainer").glob("*.py")):
        lines = path.read_text().splitlines(keepends=True)
        out, last = [], -100
        for i, line in enumerate(lines):
            near_group = any(g in "".join(lines[max(0, i - 8):i + 9]) for g in group_lines)
            if (written < wanted and re.match(r"\s*(def|class) ", line) and i - last >= 8 and not near_group
                    and not (i > 0 and lines[i - 1].lstrip().startswith("@"))):
                indent = line[: len(line) - len(line.lstrip())]
                out.append(f"{indent}# reviewed: {path.stem}.{line.split()[1].split('(')[0].rstrip(':')}\n")
                written, last = written + 1, i
            out.append(line)
        path.write_text("".join(out))
    return written


def make_diff(repo: Path, harmless: int, refine_ffn: int) -> int:
    written = harmless_hunks(repo, harmless)
    for rel, old, new in SLOW_GROUP:
        path = repo / rel
        text = path.read_text()
        assert text.count(old) == 1, (rel, old)
        path.write_text(text.replace(old, new))
    presets = repo / "trainer" / "presets.py"
    presets.write_text(presets.read_text().replace(TINY_LINE, TINY_LINE.replace(
        "max_in_flight=2,", f"max_in_flight=2, refine_ffn={refine_ffn},"), 1))
    (repo / "trainer" / "refine.py").write_text(REFINE)
    return written


def fresh_demo(path: Path) -> Path:
    demo = build_demo_repo(path, preset="tiny")
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=demo.path, check=True)  # the demo's own diff dropped
    return demo.path


def tok_s(repo: Path, runs: int) -> list[float]:
    values = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-m", "trainer", "--preset", "tiny", "--tokens", "960"], cwd=repo,
                             capture_output=True, text=True, check=True).stdout
        values.append(parse_output(out)[-1].tok_s)
    return values


def _runs_logged(repo: Path) -> int | None:
    """Probes the repository's last hunt stored (its samples and skips), None without a store."""
    path = default_store_path(repo / ".git")
    if not path.exists():
        return None
    with Store(path, read_only=True) as store:
        hunt = store.last_hunt_id()
        return None if hunt is None else store.hunt_probe_totals(hunt)[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hunks", type=int, default=54, help="hunks in the diff, the slow group's six included")
    ap.add_argument("--refine-ffn", type=int, default=768, help="the slow group's MLP width (sets its cost)")
    ap.add_argument("--hunts", type=int, default=1)
    ap.add_argument("--spread", type=int, default=8, help="runs of BASE and of BASE + all hunks measured first")
    ap.add_argument("--max-minutes", type=float, default=None, help="interrupt a hunt still running after this long")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    hunts = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        base = fresh_demo(tmp / "base")
        slow = fresh_demo(tmp / "slow")
        harmless = make_diff(slow, args.hunks - 6, args.refine_ffn)
        diff = subprocess.run(["git", "diff"], cwd=slow, capture_output=True, text=True, check=True).stdout
        hunk_count = sum(line.startswith("@@ ") for line in diff.splitlines()) + 1   # + the untracked module
        lines = sum(1 for x in diff.splitlines() if x.startswith("+") and not x.startswith("+++")) + REFINE.count("\n")
        b, s = tok_s(base, args.spread), tok_s(slow, args.spread)
        step = statistics.median(s) / statistics.median(b) - 1
        cv = statistics.stdev(b) / statistics.mean(b)
        print(f"diff: {hunk_count} hunks ({harmless} harmless, the slow group's 6), {lines} added lines; "
              f"BASE {statistics.median(b):.0f} tok/s (CV {cv:.1%}), BASE + all hunks {step:+.1%} "
              f"({args.spread} runs each)", flush=True)
        for k in range(args.hunts):
            repo = fresh_demo(tmp / f"hunt{k}")
            make_diff(repo, args.hunks - 6, args.refine_ffn)
            out = tmp / f"hunt{k}.json"
            started = time.perf_counter()
            hunt = subprocess.Popen([sys.executable, "-m", "regressbisect", "hunks", "-C", str(repo), "--quiet",
                                     "--json", str(out)], stdout=subprocess.DEVNULL)
            try:
                rc = hunt.wait(timeout=None if args.max_minutes is None else args.max_minutes * 60)
            except subprocess.TimeoutExpired:
                hunt.send_signal(signal.SIGINT)      # the hunt stores its samples and exits 130
                rc = hunt.wait()
            wall = time.perf_counter() - started
            if not out.exists():
                # interrupted or failed: no report; its probes are the runs its log holds
                probes = _runs_logged(repo)
                hunts.append({"verdict": f"stopped (exit {rc})", "probes": probes, "wall_s": round(wall, 1)})
                print(f"hunt {k + 1}: stopped, exit {rc}, no report, {probes} probes, {wall / 60:.1f} min", flush=True)
                continue
            report = json.loads(out.read_text())
            named = [h for c in report["culprits"] for h in c["hunks"]]
            false = [h for h in named if "reviewed:" in h.get("excerpt", "")]     # a harmless comment hunk
            hunts.append({"verdict": report["verdict"], "group_hunks_named": len(named) - len(false),
                          "harmless_named": len(false), "probes": report["probes"], "wall_s": round(wall, 1),
                          "steps_pct": [c["step_pct"] for c in report["culprits"]],
                          "named": [f"{h['file']}: {h.get('excerpt', '')[:40]}" for h in named]})
            print(f"hunt {k + 1}: {report['verdict']}, group hunks named {len(named) - len(false)}, harmless named "
                  f"{len(false)}, {report['probes']} probes, {wall / 60:.1f} min", flush=True)
    if args.json:
        _common.write_results(args.json, {"hunks": hunk_count, "added_lines": lines, "base_cv": cv,
                                          "all_hunks_step": step, "refine_ffn": args.refine_ffn, "hunts": hunts})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
