"""A real git repository whose bench script's tok/s follows the code at each commit.

`speed.py` holds SPEED (tok/s at that commit); `bench.py` prints it times seeded lognormal noise.
The noise sequence is deterministic: each value is drawn from a counter kept per SPEED level in
BENCH_STATE (outside the repo), so a test gets the same numbers on every run.
`SpeedProbe` reads the same speed.py in a worktree, for hunts run with a fake executor;
`BenchProbe` is bench.py itself without its process (the same values, failures and output), for
the real CLI's end-to-end tests of verdicts, reports and exit codes.
"""
from __future__ import annotations

import json
import math
import os
import random
import shlex
import subprocess
import threading
import time
from pathlib import Path
from typing import Sequence

from regressbisect.probe.isolation import IMPORTS_DIR_ENV, MAIN_MODULE, PROJECT_MODULES_ENV
from regressbisect.probe.runner import finished_probe, probe_environment, run_probe
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


class BenchProbe:
    """bench.py run in-process (hyperfine's mock executor): what `python bench.py` would print,
    exit with and record for the isolation check in that worktree, read by the runner's own
    `finished_probe`, with no process started and no time spent.

    The same value sequence as the script (its counter files in BENCH_STATE, BENCH_NOISE,
    BENCH_SEED), its failures (BENCH_FAIL_AT and BENCH_FAIL_CODE, BENCH_STATE/broken-environment)
    and a hang at BENCH_HANG_AT read as the runner reads a timeout; BENCH_STARTUP and BENCH_SLEEP
    take no time. What needs a process (BENCH_DAEMONS, BENCH_GATED) is refused, and any other
    command or script runs as a real probe."""

    def __init__(self):
        self.lock = threading.Lock()   # slots run probes in threads; the counter files are shared
        self.runs = 0
        """Probes answered in-process."""
        self.processes = 0
        """Probes of another command, run as real processes."""

    def __call__(self, spec, worktree: Path, extra_env=None, **runner_options) -> ProbeOutcome:
        words = shlex.split(spec.render_command())
        if len(words) != 2 or words[1] != "bench.py" or (Path(worktree) / "bench.py").read_text() != BENCH:
            with self.lock:
                self.processes += 1
            return run_probe(spec, worktree, extra_env, **runner_options)
        env = probe_environment(spec, extra_env)
        for needs_a_process in ("BENCH_DAEMONS", "BENCH_GATED"):
            if env.get(needs_a_process):
                raise ValueError(f"{needs_a_process} needs a real probe process: run this test without BenchProbe")
        worktree = Path(worktree)
        speed = float((worktree / "speed.py").read_text().split("=")[1])
        state = Path(env["BENCH_STATE"])
        with self.lock:
            self.runs += 1
            run = self.runs
            state.mkdir(parents=True, exist_ok=True)
            (state / f"n-{speed}-{os.getpid()}-{time.time_ns()}-{run}").touch()
            n = len(list(state.glob(f"n-{speed}-*")))
        started_at = time.time()
        value = speed * math.exp(random.Random(f"{speed}-{n}-{env.get('BENCH_SEED', '0')}").gauss(
            0.0, float(env.get("BENCH_NOISE", "0.02"))))
        tokens = int(env["REGRESSBISECT_TOKENS"])
        code, stdout, stderr, timed_out = 0, "", "", False
        if (state / "broken-environment").exists():
            code, stderr = 1, "ImportError: the environment is broken\n"
        elif env.get("BENCH_HANG_AT") == str(speed):
            code, timed_out = -15, True   # killed at the timeout
        elif env.get("BENCH_FAIL_AT") == str(speed):
            code = int(env.get("BENCH_FAIL_CODE", "1"))
        else:
            metrics = {"tokens": tokens, "seconds": tokens / value, "tok_s": value}
            stdout = "@regressbisect " + json.dumps(metrics) + "\n"
        if not timed_out:   # the recorder writes at exit: a killed process leaves no record
            self._record_imports(env, worktree, run)
        wall_seconds = spec.timeout_s if timed_out else tokens / value
        outcome, _ = finished_probe(spec, code, stdout, stderr, timed_out=timed_out,
                                    wall_seconds=wall_seconds, started_at=started_at)
        return outcome

    @staticmethod
    def _record_imports(env, worktree: Path, run: int) -> None:
        """The isolation recorder's record of the script's process (probe/shim/sitecustomize.py):
        the script it ran and speed.py, where the hunt asked for the project's modules."""
        directory = env.get(IMPORTS_DIR_ENV)
        if not directory:
            return
        modules = {MAIN_MODULE: str(worktree / "bench.py")}
        if "speed" in env.get(PROJECT_MODULES_ENV, "").split(","):
            modules["speed"] = str(worktree / "speed.py")
        record = {"pid": os.getpid(), "rank": None, "modules": modules, "watched": [], "env_before_import": {}}
        (Path(directory) / f"{os.getpid()}-{run}.rec").write_text(repr(record))
