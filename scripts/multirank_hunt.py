"""A regression that exists only with several ranks, found by a multi-GPU hunt (issue: multi-GPU).

Builds the demo repository, branches from the commit before its first culprit, and scripts four
commits on top: three harmless ones and "Check received hidden states for NaN", which adds a
`.item()` host sync to the drafter's Receiver. Receiver only exists when targets and drafters are
separate ranks (world size 1 runs both roles in one process and never calls it), so the slowdown
appears only under torchrun: the sync makes the host wait for the previous step before it starts
the next step's host-side work (create_block_mask), and the GPU idles meanwhile.

    python scripts/multirank_hunt.py /tmp/multirank --nproc 2 -- --json multirank.json

runs `regressbisect run HEAD~4 HEAD` there with the h200 preset on `--nproc` ranks (pass
`--preset tiny` for a CPU/gloo run; extra arguments after `--` go to `regressbisect run`).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from regressbisect.demo import build_demo_repo

_RECEIVE = ("        self._post()\n"
            "        return unpack(ints, self.preset), hidden\n")
_RECEIVE_CHECKED = ("        self._post()\n"
                    "        # A bad target rank once sent NaN hidden states: refuse them here, not as a NaN loss.\n"
                    "        if not torch.isfinite(hidden).all().item():\n"
                    "            raise FloatingPointError(\"non-finite hidden states received\")\n"
                    "        return unpack(ints, self.preset), hidden\n")

COMMITS = [
    ("Comment the receive queue", "trainer/transport.py",
     "        self.posted: collections.deque = collections.deque()\n",
     "        # (ints, hidden, works) of the receives posted ahead, oldest first\n"
     "        self.posted: collections.deque = collections.deque()\n"),
    ("Check received hidden states for NaN", "trainer/transport.py", _RECEIVE, _RECEIVE_CHECKED),
    ("README: how to launch on several GPUs", "README.md", "It prints one line",
     "On several GPUs: `python -m trainer --preset h200 --nproc 8` (5 target ranks, 3 drafter ranks).\n\n"
     "It prints one line"),
    ("Name the sequence index in the sender loop", "trainer/train.py",
     "    for g in range(n_sequences):\n",
     "    for g in range(n_sequences):  # g: global sequence index, step * drafters + drafter\n"),
]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def build(path: Path, preset: str) -> None:
    build_demo_repo(path, preset=preset)
    git(path, "reset", "-q", "--hard")                # the demo's uncommitted diff is not wanted here
    mask = git(path, "log", "--format=%H", "--grep", "^Build the attention mask", "-n", "1").strip()
    git(path, "checkout", "-q", "-B", "multirank", f"{mask}~1")
    for subject, rel, old, new in COMMITS:
        target = path / rel
        text = target.read_text()
        if text.count(old) != 1:
            raise SystemExit(f"{rel}: expected one occurrence of {old!r}")
        target.write_text(text.replace(old, new))
        git(path, "commit", "-q", "-am", subject)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path", type=Path)
    ap.add_argument("--preset", default="h200")
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=None)
    args, run_args = ap.parse_known_args()   # the rest (after --) goes to regressbisect run
    args.run_args = [a for a in run_args if a != "--"]
    build(args.path, args.preset)
    tokens = args.tokens or (38400 if args.preset == "h200" else 960)
    cmd = f"python -m trainer --preset {args.preset} --nproc {args.nproc} --tokens {{tokens}}"
    print(f"built {args.path} (branch multirank); hunting HEAD~4..HEAD with: {cmd}", flush=True)
    return subprocess.run([sys.executable, "-m", "regressbisect", "run", "HEAD~4", "HEAD", "--cmd", cmd,
                           "--tokens", str(tokens), *args.run_args], cwd=args.path).returncode


if __name__ == "__main__":
    sys.exit(main())
