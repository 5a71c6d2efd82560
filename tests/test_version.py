"""Reports and results files name the code that wrote them (regressbisect/version.py)."""
from __future__ import annotations

import subprocess

import regressbisect
from regressbisect import version
from regressbisect.render.report_json import report_header


def _fresh(monkeypatch, root):
    monkeypatch.setattr(version, "SOURCE_ROOT", root)
    version.tool_commit.cache_clear()


def test_a_checkout_is_named_by_git_describe(monkeypatch, tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "a.py").write_text("x = 1\n")
    git = ["git", "-C", str(tmp_path), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(git + ["add", "a.py"], check=True)
    subprocess.run(git + ["commit", "-qm", "one"], check=True)
    sha = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    _fresh(monkeypatch, tmp_path)
    try:
        assert version.tool_commit() == sha
        (tmp_path / "a.py").write_text("x = 2\n")
        version.tool_commit.cache_clear()
        assert version.tool_commit() == f"{sha}-dirty"
    finally:
        version.tool_commit.cache_clear()


def test_an_installed_copy_is_named_by_its_package_metadata(monkeypatch, tmp_path):
    _fresh(monkeypatch, tmp_path)                    # no .git: not a checkout
    monkeypatch.setattr("importlib.metadata.version", lambda name: "9.8.7")
    try:
        assert version.tool_commit() == "9.8.7"
    finally:
        version.tool_commit.cache_clear()


def test_no_git_and_no_metadata_gives_unknown_and_never_raises(monkeypatch, tmp_path):
    (tmp_path / ".git").mkdir()                      # looks like a checkout, git cannot read it
    _fresh(monkeypatch, tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))        # no git on PATH

    def missing(name):
        from importlib.metadata import PackageNotFoundError
        raise PackageNotFoundError(name)
    monkeypatch.setattr("importlib.metadata.version", missing)
    try:
        assert version.tool_commit() == "unknown"
    finally:
        version.tool_commit.cache_clear()


def test_every_report_header_carries_version_and_commit():
    header = report_header("commits", "tok/s")
    assert header["tool_version"] == regressbisect.__version__
    assert header["tool_commit"] == version.tool_commit() != ""


def test_a_results_file_carries_tool_version_commit_date_machine_and_command(tmp_path):
    import json
    import sys
    sys.path.insert(0, str(version.SOURCE_ROOT / "scripts"))
    try:
        from _common import write_results
    finally:
        sys.path.remove(str(version.SOURCE_ROOT / "scripts"))
    path = write_results(tmp_path / "out.json", {"rows": [1.0, float("nan")]},
                         argv=["scripts/bench_x.py", "--pairs", "3"])
    data = json.loads(path.read_text())
    assert data["tool"] == "regressbisect"
    assert data["tool_version"] == regressbisect.__version__ and data["tool_commit"] == version.tool_commit()
    assert data["command"] == "python scripts/bench_x.py --pairs 3"
    assert data["date"].endswith("Z") and data["machine"]["host"]
    assert data["results"] == {"rows": [1.0, None]}          # strict JSON, as the reports


# ------------------------------------------------------------------ one version, everywhere

def test_a_wheel_built_from_the_tree_carries_the_version_its_reports_and_version_flag_print(tmp_path):
    """pyproject reads regressbisect/version.py (dynamic version): a tree whose version.py says
    9.8.7 builds a 9.8.7 wheel (what `pip install .` installs), and its reports and `--version`
    print 9.8.7."""
    import os
    import shutil
    import sys
    import zipfile

    tree = tmp_path / "tree"        # a copy: a build writes build/ and *.egg-info next to the sources
    shutil.copytree(version.SOURCE_ROOT / "regressbisect", tree / "regressbisect",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(version.SOURCE_ROOT / name, tree / name)
    source = tree / "regressbisect" / "version.py"
    text = source.read_text()
    assert f'__version__ = "{regressbisect.__version__}"' in text
    source.write_text(text.replace(f'__version__ = "{regressbisect.__version__}"', '__version__ = "9.8.7"'))

    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            "--no-index", "-w", str(tmp_path / "whl"), str(tree)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "whl").glob("regressbisect-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA")))
    assert "Version: 9.8.7" in metadata.decode().splitlines()

    printed = subprocess.run(
        [sys.executable, "-c", "from regressbisect.render.report_json import report_header;"
                               "print(report_header('commits', 'tok/s')['tool_version']);"
                               "from regressbisect.cli import main; main(['--version'])"],
        capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(tree)})
    assert printed.returncode == 0, printed.stderr
    report_version, flag_line = printed.stdout.splitlines()
    assert report_version == "9.8.7"
    assert flag_line.split()[:2] == ["regressbisect", "9.8.7"]


def test_every_declared_dependency_is_imported_by_the_package():
    """A dependency nothing imports is a download for nothing (unidiff was one)."""
    import re
    import tomllib

    project = tomllib.loads((version.SOURCE_ROOT / "pyproject.toml").read_text())["project"]
    declared = [*project["dependencies"], *project["optional-dependencies"]["slurm"]]
    import_names = {"gitpython": "git"}              # distributions imported under another name
    code = "\n".join(path.read_text() for path in (version.SOURCE_ROOT / "regressbisect").rglob("*.py"))
    unused = []
    for requirement in declared:
        name = re.match(r"[A-Za-z0-9_.-]+", requirement).group(0).lower()
        module = import_names.get(name, name)
        if not re.search(rf"^\s*(import|from) {re.escape(module)}(\.|\s|$)", code, re.MULTILINE):
            unused.append(name)
    assert unused == []
