"""Test helper: a real repository whose package is installed (editable or not) into a test
virtualenv, as in a user's own setup, so a probe can import the wrong copy of it.

The package `mypkg` lives under src/ (setuptools, `packages.find.where = ["src"]`); its speed
(tok/s) is SPEED in src/mypkg/core.py at each commit. `bench.py` at the root, `python -m mypkg`
and the torchrun script `train.py` all print that speed times 1% noise as a protocol line.
No network: the venv sees the running interpreter's own site-packages (setuptools, pip, torch) and pip
installs with --no-build-isolation --no-deps.
"""
from __future__ import annotations

import hashlib
import os
import site
import subprocess
import sys
from pathlib import Path
from typing import Mapping, Sequence

from regressbisect.testing.gitrepo import git, make_repo

PYPROJECT = '''\
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "mypkg"
version = "0.1"

[tool.setuptools.packages.find]
where = ["src"]
'''
REPORT = '''\
def report(speed):
    import json, os, random
    value = speed * (1.0 + random.gauss(0.0, 0.01))
    tokens = int(os.environ.get("REGRESSBISECT_TOKENS", "1000"))
    print("@regressbisect " + json.dumps({"tokens": tokens, "seconds": tokens / value, "tok_s": value}), flush=True)
'''
BENCH = '''\
import mypkg

mypkg.report(mypkg.SPEED)
'''
MAIN = '''\
import mypkg

mypkg.report(mypkg.SPEED)
'''
TRAIN = '''\
import os
import torch
import torch.distributed as dist
import mypkg

dist.init_process_group("gloo")
speed = torch.tensor([mypkg.SPEED])
dist.all_reduce(speed)  # every rank measured: the sum over ranks
if dist.get_rank() == 0:
    mypkg.report(float(speed.item()))
dist.destroy_process_group()
'''


def package_files(speed: float, commit: int) -> dict[str, str]:
    return {"src/mypkg/core.py": f"SPEED = {speed!r}  # commit {commit}\n"}


def make_installed_repo(path: Path, speeds: Sequence[float], extra: Mapping[str, str] | None = None) -> list[str]:
    """A src-layout repository, one commit per speed (each commit changes core.py)."""
    first = {"pyproject.toml": PYPROJECT, "bench.py": BENCH, "train.py": TRAIN,
             "src/mypkg/__init__.py": "from mypkg.core import SPEED\nfrom mypkg._report import report\n",
             "src/mypkg/_report.py": REPORT, "src/mypkg/__main__.py": MAIN,
             **(extra or {}), **package_files(speeds[0], 0)}
    commits = [first] + [package_files(s, i) for i, s in enumerate(speeds[1:], 1)]
    return make_repo(path, commits)


def make_venv(path: Path) -> Path:
    """A virtualenv that sees this interpreter's site-packages; returns its python.

    `venv --system-site-packages` would not do: run from a virtualenv (as CI runs), it shows the
    base interpreter's site-packages, not this one's, and those may lack torch or a setuptools
    that builds wheels. A .pth file in the new venv names this interpreter's own directories."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, capture_output=True)
    python = path / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             check=True, capture_output=True, text=True).stdout.strip()
    Path(purelib, "_regressbisect_parent.pth").write_text("".join(f"{d}\n" for d in site.getsitepackages()))
    return python


def pip_install(python: Path, project: Path, editable: bool, mode: str | None = None) -> None:
    args = [str(python), "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps",
            "--no-index", "--disable-pip-version-check"]
    if mode:
        args += ["--config-settings", f"editable_mode={mode}"]
    args += ["-e", str(project)] if editable else [str(project)]
    subprocess.run(args, check=True, capture_output=True, env={**os.environ, "PIP_NO_INPUT": "1"})


def export_commit(repo: Path, sha: str, dest: Path) -> Path:
    """The tree of `sha` as plain files in `dest` (to install an older version from)."""
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(repo), "archive", sha], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def checkout_state(repo: Path) -> tuple[str, str, str]:
    """(git status --porcelain, HEAD, hash of every file outside .git): equal = byte-identical."""
    digest = hashlib.sha256()
    for file in sorted(p for p in repo.rglob("*") if ".git" not in p.relative_to(repo).parts):
        digest.update(str(file.relative_to(repo)).encode())
        digest.update(file.read_bytes() if file.is_file() else b"<dir>")
    return (git(repo, "status", "--porcelain", "--ignored"), git(repo, "rev-parse", "HEAD"), digest.hexdigest())
