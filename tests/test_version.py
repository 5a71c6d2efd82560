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
