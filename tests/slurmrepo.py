"""Test helper for the Slurm tests: a repository whose probe is light (one short Python process)
and can be told to hang, so that a test can scancel or interrupt a job while it runs.

`speed.py` holds SPEED at each commit; `probe.py` prints it with 0.5% seeded noise. Hanging: the
test writes N into $PROBE_STATE/hang-budget; the first N probes of commits that are not endpoints
each claim one token (mkdir is atomic), write $PROBE_STATE/hanging-<job id> and sleep.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from regressbisect.testing.gitrepo import make_repo

PROBE = '''\
import os, random, sys, time, uuid
from pathlib import Path
from speed import SPEED, ENDPOINT
state = Path(os.environ["PROBE_STATE"])
budget = state / "hang-budget"
if not ENDPOINT and budget.exists():
    for i in range(int(budget.read_text())):
        try:
            (state / f"hang-token-{i}").mkdir()
        except FileExistsError:
            continue
        (state / f"hanging-{os.environ.get('SLURM_JOB_ID', os.getpid())}").write_text(str(SPEED))
        time.sleep(600)
(state / "probes").mkdir(exist_ok=True)
(state / "probes" / uuid.uuid4().hex).write_text(os.environ.get("SLURM_JOB_ID", ""))
value = SPEED * (1 + random.Random().gauss(0, 0.005))
print('@regressbisect {"tokens": 1000, "seconds": %.6f, "tok_s": %.3f}' % (1000 / value, value))
'''


def make_slurm_repo(path: Path, speeds: Sequence[float], *, pyproject: str = "") -> list[str]:
    """One commit per speed; the first carries probe.py (and pyproject.toml, when given)."""
    commits = []
    for i, speed in enumerate(speeds):
        endpoint = i in (0, len(speeds) - 1)
        files = {"speed.py": f"SPEED = {speed!r}\nENDPOINT = {endpoint}\n"}
        if i == 0:
            files["probe.py"] = PROBE
            if pyproject:
                files["pyproject.toml"] = pyproject
        commits.append(files)
    return make_repo(path, commits)
