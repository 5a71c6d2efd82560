"""One virtualenv per worktree slot (`--venv`), so an install for one candidate stays in its slot.

    <common_dir>/regressbisect/venvs/slot-<k>-<key>/    key = hash of the base interpreter

Created once per slot and base interpreter and then reused by every candidate the slot holds.
The base interpreter is the one regressbisect runs on (sys.executable): the user's environment.
Its packages stay visible: `--system-site-packages` covers a base that is a system or pyenv
Python, and a `.pth` file adds the base's own site directories (with their `.pth` files, e.g.
editable installs), because a venv made from a venv only sees the *system* site packages of
the interpreter underneath. The slot's own site-packages come first, so what the setup step
installs there shadows the user's copy. `uv venv` when uv is on PATH (tens of milliseconds),
`python -m venv` otherwise; either way `bin/pip` of the slot is a wrapper that runs pip with the
slot's interpreter, so `pip install ...` in a setup command can only install into the slot.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from regressbisect.errors import UserError

READY_MARKER = ".regressbisect-ready"
"""Written last: a venv without it is half-made (a killed hunt) and is rebuilt."""
_PTH_NAME = "_regressbisect_base_site.pth"


def base_interpreter() -> str:
    """The user's interpreter: the one regressbisect runs on, else `python3` on PATH."""
    return sys.executable or shutil.which("python3") or shutil.which("python") or "python3"


def venv_key(python: str) -> str:
    """Stable per base interpreter: its resolved path and version."""
    resolved = os.path.realpath(python)
    try:
        version = subprocess.run([python, "-c", "import sys; print(sys.version)"], capture_output=True,
                                 text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        version = ""
    return hashlib.sha1(f"{python}\0{resolved}\0{version}".encode()).hexdigest()[:10]


class SlotVenvs:
    """The slots' virtualenvs under `root` (<common_dir>/regressbisect/venvs)."""

    def __init__(self, root: Path, python: str | None = None):
        self.root = Path(root)
        self.python = python or base_interpreter()
        self.key = venv_key(self.python)

    def path(self, slot: int) -> Path:
        return self.root / f"slot-{slot}-{self.key}"

    def ensure(self, slot: int) -> Path:
        """The slot's venv, created on first use."""
        where = self.path(slot)
        if (where / READY_MARKER).is_file() and (where / "bin" / "python").exists():
            return where
        if where.exists():
            shutil.rmtree(where)
        where.parent.mkdir(parents=True, exist_ok=True)
        uv = shutil.which("uv")
        if uv is not None:
            command = [uv, "venv", "--quiet", "--system-site-packages", "--python", self.python, str(where)]
        else:
            command = [self.python, "-m", "venv", "--system-site-packages", "--without-pip", str(where)]
        result = subprocess.run(command, capture_output=True, text=True, timeout=600,
                                env={k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"})
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["?"])[-1]
            raise UserError(f"cannot create the slot virtualenv {where}: {last} (check {self.python}, "
                            f"or run without --venv)")
        self._inherit_base_site(where)
        self._pip_wrapper(where)
        (where / READY_MARKER).write_text(json.dumps({"python": self.python}) + "\n")
        return where

    def _inherit_base_site(self, where: Path) -> None:
        base_dirs = json.loads(_run_python(self.python, "import json, site; print(json.dumps("
                                           "site.getsitepackages() + [site.getusersitepackages()]))"))
        purelib = _run_python(str(where / "bin" / "python"),
                              "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip()
        # addsitedir appends (after the slot's own site-packages), skips directories already on
        # sys.path and runs their .pth files: the user's editable installs keep working.
        lines = [f"import site; site.addsitedir({d!r})" for d in base_dirs if os.path.isdir(d)]
        Path(purelib, _PTH_NAME).write_text("\n".join(lines) + "\n")

    @staticmethod
    def _pip_wrapper(where: Path) -> None:
        """`pip` of the slot: pip run by the slot's interpreter (pip from the user's packages),
        else `uv pip` aimed at the slot; never the user's own `pip` script further on PATH."""
        pip = where / "bin" / "pip"
        if pip.exists():
            return
        python = where / "bin" / "python"
        script = f'#!/bin/sh\nif "{python}" -c "import pip" 2>/dev/null; then exec "{python}" -m pip "$@"; fi\n'
        uv = shutil.which("uv")
        if uv is not None:
            script += f'exec "{uv}" pip "$@" --python "{python}"\n'
        else:
            script += 'echo "pip: neither pip nor uv is available to this virtualenv" >&2; exit 127\n'
        pip.write_text(script)
        pip.chmod(0o755)
        for alias in ("pip3",):
            if not (where / "bin" / alias).exists():
                (where / "bin" / alias).symlink_to("pip")


def activation_env(venv: Path, base_path: str | None = None) -> dict[str, str]:
    """What `source bin/activate` sets: the slot's bin first on PATH, VIRTUAL_ENV."""
    path = base_path if base_path is not None else os.environ.get("PATH", "")
    return {"PATH": os.pathsep.join(p for p in (str(venv / "bin"), path) if p),
            "VIRTUAL_ENV": str(venv)}


def _run_python(python: str, code: str) -> str:
    result = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise UserError(f"{python} failed while preparing a slot virtualenv: "
                        f"{(result.stderr.strip().splitlines() or ['?'])[-1]}")
    return result.stdout
