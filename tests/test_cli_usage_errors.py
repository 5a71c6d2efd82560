"""Usage errors (an unknown flag, a missing argument) end in one line and exit 1, also where the
`click` package is not installed: typer >= 0.20-ish vendors click as `typer._click` and pip no
longer installs `click` beside it, so nothing of ours may import the top-level `click`."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import run_cli

ROOT = Path(__file__).resolve().parents[1]

USAGE_ERRORS = [
    (["run", "--bogus", "HEAD~1", "HEAD"], "--bogus"),
    (["run"], "good"),
    (["hunks", "--tokens", "many"], "--tokens"),
]


@pytest.mark.parametrize("argv, word", USAGE_ERRORS)
def test_usage_error_is_one_line_without_click(monkeypatch, capsys, argv, word):
    # None in sys.modules makes `import click` raise ImportError, as on a fresh install.
    for name in [m for m in sys.modules if m == "click" or m.startswith("click.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "click", None)
    code = run_cli(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1, err
    assert len(err) == 1, err
    assert err[0].startswith("regressbisect: error: ") and word in err[0], err[0]


@pytest.mark.slow
def test_usage_error_through_console_script_of_a_fresh_venv(tmp_path):
    """The installed `regressbisect` script in a new virtualenv, with `import click` failing."""
    venv = tmp_path / "venv"
    # The packages of the environment running the tests (typer, rich, pip, setuptools) are
    # given to the new venv by a .pth file, so nothing comes from the network; the project itself
    # is installed into the new venv; a `click` that cannot be imported shadows any click there.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site_dir = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip()
    outer = [p for p in sys.path if p.endswith("site-packages")]
    (Path(site_dir) / "outer-packages.pth").write_text("\n".join(outer) + "\n")
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "-e", str(ROOT)], check=True, capture_output=True, cwd=tmp_path)
    shadow = tmp_path / "shadow" / "click"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('click is not installed')\n")
    env = {**os.environ, "PYTHONPATH": str(shadow.parent)}
    check = subprocess.run([str(python), "-c", "import click"], env=env, capture_output=True, text=True)
    assert check.returncode != 0, "the shadow must make `import click` fail"
    for argv, word in USAGE_ERRORS:
        proc = subprocess.run([str(venv / "bin" / "regressbisect"), *argv], env=env,
                              capture_output=True, text=True, cwd=tmp_path, timeout=120)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 1, proc.stderr
        assert len(lines) == 1 and word in lines[0], proc.stderr


@pytest.mark.parametrize("command", ["run", "hunks", "nightly"])
def test_help_shows_the_pyproject_table_name(command, capsys):
    """Rich reads `[tool.regressbisect]` as markup and drops it unless it is escaped."""
    from typer.testing import CliRunner

    from regressbisect.cli import app

    result = CliRunner().invoke(app, [command, "--help"], terminal_width=200, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "[tool.regressbisect]" in result.output, result.output
