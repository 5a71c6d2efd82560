"""A regression that exists only with several ranks, found by a multi-GPU hunt (issue: multi-GPU).

Builds the demo repository, branches from the commit before its first culprit, and scripts four
commits on top: three harmless ones and "Check received hidden states for NaN", which adds a
`.item()` host sync to the drafter's Receiver. Receiver only exists when targets and drafters are
separate ranks (world size 1 runs both roles in one process and never calls it), so the slowdown
appears only under torchrun: the sync makes the host wait for the previous step before it starts
the next step's host-side work (create_block_mask), and the GPU idles meanwhile.

    python scripts/bench_multirank_hunt.py /tmp/multirank --nproc 2 -- --json multirank.json

runs `regressbisect run HEAD~4 HEAD` there with the h200 preset on `--nproc` ranks (pass
`--preset tiny` for a CPU/gloo run; extra arguments after `--` go to `regressbisect run`).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from regressbisect.workload.demo import add_multirank_branch, build_demo_repo


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path", type=Path)
    ap.add_argument("--preset", default="h200")
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=None)
    args, run_args = ap.parse_known_args()   # the rest (after --) goes to regressbisect run
    args.run_args = [a for a in run_args if a != "--"]
    add_multirank_branch(build_demo_repo(args.path, preset=args.preset))
    tokens = args.tokens or (38400 if args.preset == "h200" else 960)
    cmd = f"python -m trainer --preset {args.preset} --nproc {args.nproc} --tokens {{tokens}}"
    print(f"built {args.path} (branch multirank); hunting HEAD~4..HEAD with: {cmd}", flush=True)
    return subprocess.run([sys.executable, "-m", "regressbisect", "run", "HEAD~4", "HEAD", "--cmd", cmd,
                           "--tokens", str(tokens), *args.run_args], cwd=args.path).returncode


if __name__ == "__main__":
    sys.exit(main())
