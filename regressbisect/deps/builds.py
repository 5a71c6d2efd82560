"""Candidate environments: a set of pins built into a virtualenv of the tool's, with uv.

    <common_dir>/regressbisect/venvs/deps-<key>/    key = hash of the pins, the interpreter, the index

Each is built once (`uv venv`, then `uv pip install --no-deps` of exactly the pins, then `uv pip
check`: a package whose requirements the other pins do not meet is a failed build, since an
environment that resolves differently is another candidate) and reused by every later hunt; the
ready marker of the slot venvs (probe/venvs.py) tells a finished one from one a kill left half
made, and `regressbisect clean` removes them with the slots' venvs. Nothing sees the user's own
packages (no --system-site-packages) and nothing is installed anywhere else. A build that fails
is remembered for the hunt (a failure of the index's is deterministic far more often than not)
and its reason is the last lines uv printed.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from regressbisect.deps.sources import CommitSource, PatchedSource, SourceUnavailable
from regressbisect.errors import UserError
from regressbisect.probe.venvs import READY_MARKER, activation_env, venv_key

Source = CommitSource | PatchedSource

REASON_CHARS = 300
"""A failed build's reason is cut to this many characters (a resolver's story can be long)."""


@dataclass(frozen=True)
class IndexOptions:
    """Where uv finds the releases: passed through to every `uv pip install` (and read by
    deps/releases.py to list a package's releases)."""

    index_url: str | None = None
    find_links: tuple[str, ...] = ()
    no_index: bool = False
    exclude_newer: str | None = None
    """uv's --exclude-newer: only files uploaded before this date (or RFC 3339 instant) install,
    so what a candidate resolves to is pinned to that day."""

    def uv_args(self, *, for_build: bool = False) -> list[str]:
        """`for_build`: a source's build requirements (setuptools, ...), which are no part of the
        environment measured: from the index as uv finds them, even with --no-index."""
        args = ["--index-url", self.index_url] if self.index_url else []
        for link in self.find_links:
            args += ["--find-links", link]
        args += ["--exclude-newer", self.exclude_newer] if self.exclude_newer else []
        return args + (["--no-index"] if self.no_index and not for_build else [])

    def key(self) -> str:
        # without --exclude-newer, the key an environment had before it existed
        return json.dumps([self.index_url, list(self.find_links), self.no_index]
                          + ([self.exclude_newer] if self.exclude_newer else []))


@dataclass(frozen=True)
class Built:
    """One candidate environment: its virtualenv, or why it could not be built."""

    path: Path | None
    reason: str | None = None
    seconds: float = 0.0
    """Time this build took (0 when it was found built)."""
    cached: bool = False

    @property
    def ok(self) -> bool:
        return self.path is not None

    def env(self) -> dict[str, str]:
        """What a probe in it gets: its bin first on PATH, VIRTUAL_ENV, and no user site packages."""
        assert self.path is not None
        return {**activation_env(self.path), "PYTHONNOUSERSITE": "1"}


def pins_text(pins: Mapping[str, str]) -> str:
    return "".join(f"{name}=={version}\n" for name, version in sorted(pins.items()))


class EnvBuilder:
    """Builds and caches the candidate environments of one hunt under `root`."""

    def __init__(self, root: Path, python: str, index: IndexOptions, timeout_s: float = 1800.0):
        uv = shutil.which("uv")
        if uv is None:
            raise UserError("deps builds each candidate environment with uv, which is not on PATH: "
                            "pip install uv (https://docs.astral.sh/uv/)")
        self.uv = uv
        self.root = Path(root)
        self.python = python
        self.index = index
        self.timeout_s = timeout_s
        self._python_key = venv_key(python)
        self._failed: dict[str, Built] = {}
        self.builds = 0
        """Environments built by this builder (not found built, failures included)."""
        self.build_seconds = 0.0

    def key(self, pins: Mapping[str, str], source: Source | None = None) -> str:
        parts = [self._python_key, self.index.key(), pins_text(pins)] + ([f"source {source.key}"] if source else [])
        return hashlib.sha1("\0".join(parts).encode()).hexdigest()[:16]

    def path(self, pins: Mapping[str, str]) -> Path:
        return self.root / f"deps-{self.key(pins)}"

    def build(self, pins: Mapping[str, str], source: Source | None = None) -> Built:
        """The environment of exactly `pins` (and with `source`, its package built from that
        commit's files, or a patched parent's), built on first use."""
        key = self.key(pins, source)
        where = self.root / f"deps-{key}"
        if (where / READY_MARKER).is_file() and (where / "bin" / "python").exists():
            return Built(where, cached=True)
        if key in self._failed:
            return self._failed[key]
        started = time.perf_counter()
        reason = self._make(where, pins, source)
        seconds = time.perf_counter() - started
        self.builds += 1
        self.build_seconds += seconds
        if reason is not None:
            shutil.rmtree(where, ignore_errors=True)
            self._failed[key] = Built(None, reason, seconds)
            return self._failed[key]
        (where / READY_MARKER).write_text(json.dumps({"python": self.python, "pins": dict(pins)}) + "\n")
        return Built(where, seconds=seconds)

    def _make(self, where: Path, pins: Mapping[str, str], source: Source | None) -> str | None:
        """Build `where`; None, or why it failed."""
        if where.exists():
            shutil.rmtree(where)
        where.parent.mkdir(parents=True, exist_ok=True)
        made = self._uv(["venv", "--quiet", "--python", self.python, str(where)])
        if made.returncode != 0:
            raise UserError(f"cannot create a virtualenv with {self.python}: {_reason(made.stderr)} "
                            "(check --python)")
        requirements = where / "requirements.txt"
        requirements.write_text(pins_text(pins))
        python = str(where / "bin" / "python")
        installed = self._uv(["pip", "install", "--python", python, "--no-deps", "-r", str(requirements),
                              *self.index.uv_args()])
        if installed.returncode != 0:
            return f"does not install: {_reason(installed.stderr)}"
        if source is not None:
            try:
                files = source.export(where / "source")
            except SourceUnavailable as exc:
                return f"does not build from source: {exc}"
            built = self._uv(["pip", "install", "--python", python, "--no-deps", str(files),
                              *self.index.uv_args(for_build=True)])
            shutil.rmtree(files, ignore_errors=True)
            if built.returncode != 0:
                return f"does not build from source: {_reason(built.stderr)}"
        checked = self._uv(["pip", "check", "--python", python])
        if checked.returncode != 0:
            return f"does not resolve: {_reason(checked.stdout + checked.stderr)}"
        return None

    def _uv(self, args: list[str]) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PYTHON", "PYTHONPATH")}
        try:
            return subprocess.run([self.uv, *args], capture_output=True, text=True, timeout=self.timeout_s, env=env)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(args, 1, "", f"uv {args[0]} ran past {self.timeout_s:.0f} s")


def _reason(output: str) -> str:
    """uv's story in one line: from its first 'error' (or the incompatibilities found), the lines
    joined, without the 'Using Python ...' and progress lines."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith(("Using Python", "Resolved ", "Prepared ", "Checked ",
                                                      "Installed ", "Audited ", "Found ", "+ ", "- "))]
    start = next((i for i, ln in enumerate(lines) if ln.lower().startswith(("error", "×"))), 0)
    text = "; ".join(ln.removeprefix("error: ") for ln in lines[start:]) or "uv failed without a message"
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS - 3] + "..."
