"""Test and benchmark helper: a repository whose probe is a noisy busy-loop training step, and a
five-hunk uncommitted diff of it with one slow hunk.

`train.py` runs WORK units of busy work four times, then pauses a random 0..PAUSE_S seconds (both
from `config.py`), and prints tok/s in the probe contract's metrics line. The pause is drawn from
the OS's entropy, or, with NOISE_STATE set, as the next of a seeded sequence (NOISE_SEED; one draw
per run, in the order of the runs), so that a hunt is reproducible.

The five hunks: a docstring, an import of a new untracked file, the slow hunk (a quarter more work
per step), a config constant and a format helper.
"""
from __future__ import annotations

from pathlib import Path

from regressbisect.testing.gitrepo import make_repo, write_files

__all__ = ["TRAIN", "SLOW_HUNK", "noisy_config", "make_noisy_repo", "make_five_hunk_diff"]

TRAIN = '''\
"""A training step stand-in: WORK units of busy work, then a random pause (a noisy machine)."""
import json
import os
import random
import time
from pathlib import Path

from config import WORK, PAUSE_S
from fmt import fmt_rate


def step(units):
    total = 0
    for i in range(units):
        total += i * i % 7
    return total


def pause_fraction():
    """Uniform in 0..1: from the OS's entropy, or, with NOISE_STATE set, the next of a seeded
    sequence (one draw per run, in the order of the runs), so that a hunt is reproducible."""
    state = os.environ.get("NOISE_STATE")
    if not state:
        return int.from_bytes(os.urandom(2), "little") / 65535
    counter = Path(state) / "runs"
    k = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(k + 1))
    return random.Random(f"{os.environ.get('NOISE_SEED', '0')}-{k}").random()


def main():
    start = time.perf_counter()
    for _ in range(4):
        step(WORK)
    time.sleep(PAUSE_S * pause_fraction())   # the noise; a loaded machine adds its own
    seconds = time.perf_counter() - start
    tokens = 4096
    print(fmt_rate(tokens / seconds))
    print("@regressbisect " + json.dumps({"tokens": tokens, "seconds": seconds, "tok_s": tokens / seconds}))


if __name__ == "__main__":
    main()
'''
FMT = 'def fmt_rate(x):\n    return "%.1f tok/s" % x\n'
SLOW_HUNK = "step(WORK // 4)"
"""Text of the slow hunk's added line (what a right answer names)."""


def noisy_config(work: int, pause_s: float, log_every: int = 10) -> str:
    return f"WORK = {work}\nPAUSE_S = {pause_s}\nLOG_EVERY = {log_every}\n"


def make_noisy_repo(path: Path, work: int, pause_s: float, commits: int = 1) -> list[str]:
    """The probe's repository; commits after the first only add notes (an A/A range)."""
    files = {"train.py": TRAIN, "config.py": noisy_config(work, pause_s), "fmt.py": FMT}
    specs = [files] + [{f"notes/n{i}.txt": f"note {i}\n"} for i in range(1, commits)]
    return make_repo(path, specs, [f"c{i + 1}" for i in range(commits)])


def make_five_hunk_diff(repo: Path, work: int, pause_s: float) -> None:
    train = TRAIN.replace('"""A training step stand-in:', '"""A training step (stand-in):')            # docstring
    train = train.replace("from fmt import fmt_rate\n", "from fmt import fmt_rate\nimport helpers  # noqa: F401\n")
    train = train.replace("        step(WORK)\n", f"        step(WORK)\n        {SLOW_HUNK}\n")   # the slow hunk
    write_files(repo, {"train.py": train, "config.py": noisy_config(work, pause_s, log_every=20),
                       "fmt.py": FMT.replace("%.1f tok/s", "%.2f tok/s"),                         # a format helper
                       "helpers.py": "def unused():\n    return 1\n"})                             # new, untracked
