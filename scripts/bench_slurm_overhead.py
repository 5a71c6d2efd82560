"""What one probe costs as a Slurm job beyond the probe itself (submission, scheduling, the
job's interpreter and submitit start, result file, state polls), on the cluster `sbatch` reaches.

    bash scripts/slurm_local.sh start && python scripts/bench_slurm_overhead.py --probes 6

Runs `--probes` jobs one after the other through the Slurm executor, each a shell probe that
sleeps `--sleep` s and prints a protocol line, and prints a table: the wall time from submission
to the returned outcome, the probe's own wall time, and the difference (the per-job overhead).
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from regressbisect.config import SlurmConfig
from regressbisect.probe.executors.slurm import SlurmExecutor
from regressbisect.probe.runner import ProbeSpec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probes", type=int, default=6)
    parser.add_argument("--sleep", type=float, default=0.2)
    parser.add_argument("--poll", type=float, default=0.5, help="poll_s of the executor")
    args = parser.parse_args()
    spec = ProbeSpec(command=f'sleep {args.sleep}; echo \'@regressbisect {{"tokens": 1, "seconds": 1}}\'',
                     tokens=1, timeout_s=60)
    with tempfile.TemporaryDirectory(dir=Path.cwd()) as tmp:  # under the cwd: shared with the node
        executor = SlurmExecutor(SlurmConfig(poll_s=args.poll), Path(tmp), probe_timeout_s=60)
        started = time.perf_counter()
        executor.fingerprint()
        preflight = time.perf_counter() - started
        rows = []
        for _ in range(args.probes):
            started = time.perf_counter()
            executed = executor.run(spec, Path(tmp), {}, label="bench")
            rows.append((time.perf_counter() - started, executed.outcome.wall_seconds))
    print(f"preflight job: {preflight:.1f} s (poll every {args.poll:g} s)\n")
    print("| job | submit -> outcome s | probe wall s | overhead s |")
    print("|---|---|---|---|")
    for i, (job, probe) in enumerate(rows, 1):
        print(f"| {i} | {job:.2f} | {probe:.2f} | {job - probe:.2f} |")
    overhead = [job - probe for job, probe in rows]
    print(f"| median | {statistics.median(r[0] for r in rows):.2f} | "
          f"{statistics.median(r[1] for r in rows):.2f} | {statistics.median(overhead):.2f} |")


if __name__ == "__main__":
    main()
