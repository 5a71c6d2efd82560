"""A real git repository whose bench script's tok/s follows the code at each commit.

`speed.py` holds SPEED (tok/s at that commit); `bench.py` prints it times seeded lognormal noise.
The noise sequence is deterministic: each value is drawn from a counter kept per SPEED level in
BENCH_STATE (outside the repo), so a test gets the same numbers on every run.
`SpeedProbe` reads the same speed.py in a worktree, for hunts run with a fake executor.
"""
from __future__ import annotations

import json
import math
import random
import subprocess
import threading
from pathlib import Path
from typing import Sequence

from regressbisect.samples import ProbeOutcome, Sample
from regressbisect.testing.gitrepo import make_repo
from regressbisect.testing.procs import DAEMONIZE

BENCH = '''\
import json, math, os, random, sys, time
from pathlib import Path
from speed import SPEED
''' + DAEMONIZE + '''

state = Path(os.environ["BENCH_STATE"])
state.mkdir(parents=True, exist_ok=True)
# One marker file per run (safe when --slots runs probes concurrently); n = this run's number.
(state / f"n-{SPEED}-{os.getpid()}-{time.time_ns()}").touch()
n = len(list(state.glob(f"n-{SPEED}-*")))
cv = float(os.environ.get("BENCH_NOISE", "0.02"))
rng = random.Random(f"{SPEED}-{n}-{os.environ.get('BENCH_SEED', '0')}")
value = SPEED * math.exp(rng.gauss(0.0, cv))
startup_end = time.monotonic() + float(os.environ.get("BENCH_STARTUP", "0"))
while time.monotonic() < startup_end:   # start-up work (imports, set-up) before the window
    sum(range(1000))
if os.environ.get("BENCH_DAEMONS"):   # leaves a daemon behind, its pid file in that directory
    daemonize(os.environ["BENCH_DAEMONS"])
if os.environ.get("BENCH_GATED"):   # announces its measured window (REGRESSBISECT_WINDOW)
    from regressbisect.workload.dflash.window import measured_window
else:
    from contextlib import nullcontext as measured_window
with measured_window():
    time.sleep(float(os.environ.get("BENCH_SLEEP", "0")))
if (state / "broken-environment").exists():  # a failure the user fixes outside the repo
    sys.exit("ImportError: the environment is broken")
if os.environ.get("BENCH_HANG_AT") == str(SPEED):   # hangs past any --timeout
    time.sleep(3600)
if os.environ.get("BENCH_FAIL_AT") and os.environ["BENCH_FAIL_AT"] == str(SPEED):
    sys.exit(int(os.environ.get("BENCH_FAIL_CODE", "1")))
tokens = int(os.environ["REGRESSBISECT_TOKENS"])
print("@regressbisect " + json.dumps({"tokens": tokens, "seconds": tokens / value, "tok_s": value}))
'''


def make_bench_repo(path: Path, speeds: Sequence[float], *, pyproject: dict | None = None) -> list[str]:
    """One commit per speed; commits that keep the speed touch an unrelated file instead."""
    commits: list[dict] = []
    previous = None
    for i, speed in enumerate(speeds):
        files: dict[str, str] = {}
        if i == 0:
            files["bench.py"] = BENCH
            files["README.md"] = "bench repo\n"
            if pyproject is not None:
                lines = ["[tool.regressbisect]"]
                for key, value in pyproject.items():
                    lines.append(f"{key} = {json.dumps(value)}")
                files["pyproject.toml"] = "\n".join(lines) + "\n"
        if speed != previous:
            files["speed.py"] = f"SPEED = {speed!r}\n"
        else:
            files[f"notes/n{i}.txt"] = f"harmless change {i}\n"
        commits.append(files)
        previous = speed
    messages = [f"{'set speed ' + str(s) if i == 0 or s != speeds[i - 1] else 'harmless ' + str(i)}"
                for i, s in enumerate(speeds)]
    return make_repo(path, commits, messages)


class SpeedProbe:
    """Fake executor (hyperfine's mock) for a bench repo: tok/s from the worktree's speed.py,
    seeded lognormal noise, no process."""

    def __init__(self, noise: float):
        self.noise = noise
        self.lock = threading.Lock()   # slots run probes in threads
        self.runs = 0
        self.count: dict[str, int] = {}

    def __call__(self, spec, worktree: Path, extra_env=None) -> ProbeOutcome:
        speed = float((worktree / "speed.py").read_text().split("=")[1])
        commit = subprocess.run(["git", "-C", str(worktree), "rev-parse", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
        with self.lock:
            self.runs += 1
            self.count[commit] = self.count.get(commit, 0) + 1
            n = self.count[commit]
        # noise by commit and its sample number: the same hunt whatever order the threads start in
        value = speed * math.exp(random.Random(f"{commit}-{n}").gauss(0.0, self.noise))
        return ProbeOutcome(sample=Sample(tok_s=value, tokens=1000, seconds=1000 / value),
                            skip_reason=None, exit_code=0, wall_seconds=0.01)
