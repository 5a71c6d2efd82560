"""Probe isolation end to end: real repositories whose package is installed into a test
virtualenv (editable in each setuptools mode, or a regular install of an older version), real
probe processes, the real CLI. Each hunt must measure the candidate's code: before the import
roots went first, every candidate measured the installed copy and the hunt answered "not
reproduced" (shown here by running the same hunt with the roots taken away).
"""
from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

from regressbisect.errors import ExitCode
from regressbisect.probe import isolation
from tests.cli import run_cli
from regressbisect.testing.gitrepo import write_files
from regressbisect.testing.isorepo import checkout_state, export_commit, make_installed_repo, make_venv, pip_install

pytestmark = pytest.mark.slow

SPEEDS = [1000.0] * 3 + [500.0] * 3       # the culprit is commit 3: half the speed
CULPRIT = 3


def hunt(repo: Path, cmd: str, out: Path, shas: list[str], *extra: str) -> int:
    return run_cli(["run", "-C", str(repo), "--cmd", cmd, "--instrument", "off", "--max-samples", "8",
                    "--min-effect", "0.1", "--quiet", "--json", str(out), *extra, shas[0], shas[-1]])


def without_import_roots(monkeypatch) -> None:
    """The tool as it was: no import roots on the probe's PYTHONPATH, nothing checked."""
    monkeypatch.setattr(isolation, "import_roots", lambda worktree: [])


@pytest.fixture
def repo(tmp_path):
    shas = make_installed_repo(tmp_path / "repo", SPEEDS)
    return tmp_path / "repo", shas


@pytest.mark.parametrize("mode", [None, "strict", "compat"])
def test_a_editable_src_layout_install_measures_each_candidate(tmp_path, repo, mode, monkeypatch):
    path, shas = repo
    python = make_venv(tmp_path / "venv")
    pip_install(python, path, editable=True, mode=mode)   # the user's checkout (at the slow HEAD)
    code = hunt(path, f"{python} bench.py", tmp_path / "after.json", shas)
    report = json.loads((tmp_path / "after.json").read_text())
    assert code == ExitCode.OK, report["verdict"]
    assert [c["commit"] for c in report["culprits"]] == [shas[CULPRIT]]
    assert report["isolation"]["check"] is True
    assert report["isolation"]["imported_from"]["mypkg.core"] == "src/mypkg/core.py"
    assert report["isolation"]["imported_from"]["__main__"] == "bench.py"

    without_import_roots(monkeypatch)
    before = hunt(path, f"{python} bench.py", tmp_path / "before.json", shas, "--no-isolation-check")
    assert before == ExitCode.NOT_REPRODUCED  # every candidate measured the installed checkout


def test_b_regular_install_of_an_older_version_measures_each_candidate(tmp_path, repo, monkeypatch):
    path, shas = repo
    python = make_venv(tmp_path / "venv")
    pip_install(python, export_commit(path, shas[0], tmp_path / "v0"), editable=False)
    code = hunt(path, f"{python} bench.py", tmp_path / "after.json", shas)
    report = json.loads((tmp_path / "after.json").read_text())
    assert code == ExitCode.OK
    assert [c["commit"] for c in report["culprits"]] == [shas[CULPRIT]]
    assert "src/mypkg/" in report["isolation"]["note"]

    without_import_roots(monkeypatch)
    before = hunt(path, f"{python} bench.py", tmp_path / "before.json", shas, "--no-isolation-check")
    assert before == ExitCode.NOT_REPRODUCED  # every candidate measured the installed v0


def test_d_python_dash_m_of_a_src_package(tmp_path, repo):
    path, shas = repo
    python = make_venv(tmp_path / "venv")
    pip_install(python, path, editable=True)
    code = hunt(path, f"{python} -m mypkg", tmp_path / "after.json", shas)
    report = json.loads((tmp_path / "after.json").read_text())
    assert code == ExitCode.OK
    assert [c["commit"] for c in report["culprits"]] == [shas[CULPRIT]]
    assert report["isolation"]["imported_from"]["__main__"] == "src/mypkg/__main__.py"


# The ranks' script: each rank imports the package and rank 0 reports the sum of every rank's
# speed, as train.py's all_reduce does, through files (one per rank, named by the launch's run id)
# instead of torch.distributed: torch's import in each of the two ranks was two thirds of a probe.
RANKS_TRAIN = """\
import os, time
from pathlib import Path
import mypkg

folder = Path(os.environ["RANK_SPEEDS"]) / os.environ["TORCHELASTIC_RUN_ID"]
folder.mkdir(parents=True, exist_ok=True)
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
(folder / f"writing-{rank}").write_text(repr(mypkg.SPEED))
(folder / f"writing-{rank}").rename(folder / f"rank-{rank}")   # whole when it appears
if rank == 0:
    ranks = [folder / f"rank-{r}" for r in range(world)]
    deadline = time.monotonic() + 60
    while not all(path.exists() for path in ranks) and time.monotonic() < deadline:
        time.sleep(0.01)
    mypkg.report(sum(float(path.read_text()) for path in ranks))
"""


def test_d_torchrun_script_every_rank_imports_the_worktree(tmp_path):
    pytest.importorskip("torch")
    # Two commits (a torchrun probe, its launcher importing torch, takes 2-4 s on 2 cores); 12
    # samples of each: the control arm decides at 6 pairs at the earliest, then fresh pairs name the
    # step (docs/verdicts.md).
    shas = make_installed_repo(tmp_path / "repo", [1000.0, 500.0], extra={"train.py": RANKS_TRAIN})
    python = make_venv(tmp_path / "venv")
    pip_install(python, tmp_path / "repo", editable=True)
    cmd = (f"{python} -m torch.distributed.run --nproc-per-node 2 --standalone train.py")
    code = run_cli(["run", "-C", str(tmp_path / "repo"), "--cmd", cmd, "--instrument", "off",
                    "--max-samples", "12", "--min-effect", "0.1", "--quiet", "--timeout", "120",
                    "--env", "OMP_NUM_THREADS=1", "--env", f"RANK_SPEEDS={tmp_path / 'ranks'}",
                    "--json", str(tmp_path / "r.json"), shas[0], shas[-1]])
    report = json.loads((tmp_path / "r.json").read_text())
    assert code == ExitCode.OK
    assert [c["commit"] for c in report["culprits"]] == [shas[1]]
    assert report["isolation"]["processes_per_probe"] == 2   # both ranks recorded their imports
    assert report["isolation"]["imported_from"]["mypkg.core"] == "src/mypkg/core.py"


@pytest.mark.parametrize("how", ["sys.path", "cd"])
def test_unfixable_import_from_the_checkout_stops_before_any_sample(tmp_path, capsys, how):
    path = tmp_path / "repo"
    # A bench script that puts the user's checkout first on sys.path (an absolute path in the
    # repository), or a probe command that changes into the checkout: no PYTHONPATH can win.
    bench = f"import sys\nsys.path.insert(0, {str(path / 'src')!r})\n"
    shas = make_installed_repo(path, SPEEDS, extra={"bench_abs.py": bench + "import mypkg\nmypkg.report(mypkg.SPEED)\n"})
    cmd = f"{sys.executable} bench_abs.py" if how == "sys.path" else f"cd {path} && {sys.executable} bench.py"
    before = checkout_state(path)
    capsys.readouterr()
    code = hunt(path, cmd, tmp_path / "r.json", shas)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == ExitCode.ISOLATION
    assert len(err) == 1 and err[0].startswith("regressbisect: error: isolation:")
    assert str(path) in err[0] and "slot-0" in err[0] and "--no-isolation-check" in err[0]
    assert ("mypkg" if how == "sys.path" else "ran the script") in err[0]
    assert checkout_state(path) == before
    assert not (tmp_path / "r.json").exists()
    with sqlite3.connect(path / ".git" / "regressbisect" / "store.sqlite") as con:
        assert con.execute("select count(*) from samples").fetchone()[0] == 0  # nothing of the wrong code


def test_a_probe_that_is_not_python_is_reported_and_the_opt_out_is_stated(tmp_path, repo, capsys):
    path, shas = repo
    echo = 'echo "@regressbisect {\\"tokens\\": 1000, \\"seconds\\": 1.0$((RANDOM % 90 + 10))}"'
    code = hunt(path, echo, tmp_path / "on.json", shas)
    assert code == ExitCode.NOT_REPRODUCED
    assert json.loads((tmp_path / "on.json").read_text())["isolation"]["note"].startswith(
        "no project module was imported")
    capsys.readouterr()
    hunt(path, echo, tmp_path / "off.json", shas, "--no-isolation-check")
    off = json.loads((tmp_path / "off.json").read_text())["isolation"]
    assert off["check"] is False
    assert "imports: isolation check off (--no-isolation-check)" in capsys.readouterr().out


def test_hunks_measure_the_worktree_not_the_installed_dirty_checkout(tmp_path, repo):
    path, shas = repo
    python = make_venv(tmp_path / "venv")
    pip_install(python, path, editable=True)
    write_files(path, {"src/mypkg/core.py": "SPEED = 250.0  # uncommitted\n", "notes.txt": "unrelated\n"})
    code = run_cli(["hunks", "-C", str(path), "--cmd", f"{python} bench.py", "--instrument", "off",
                    "--max-samples", "8", "--min-effect", "0.1", "--quiet", "--include-untracked",
                    "--json", str(tmp_path / "h.json")])
    report = json.loads((tmp_path / "h.json").read_text())
    assert code == ExitCode.OK, report["verdict"]
    assert [h["file"] for c in report["culprits"] for h in c["hunks"]] == ["src/mypkg/core.py"]
    assert report["isolation"]["imported_from"]["mypkg.core"] == "src/mypkg/core.py"


def test_doctor_cmd_shows_what_was_imported_from_where(tmp_path, repo, capsys):
    path, _ = repo
    capsys.readouterr()
    assert run_cli(["doctor", "-C", str(path), "--cmd", f"{sys.executable} bench.py"]) == 0
    out = capsys.readouterr().out
    assert "import roots, first on PYTHONPATH: src/, ." in out
    assert ["mypkg.core", "src/mypkg/core.py"] in [line.split() for line in out.splitlines()]
    assert ["__main__", "bench.py"] in [line.split() for line in out.splitlines()]
    assert "probe: " in out and "tok/s" in out
    assert run_cli(["doctor", "-C", str(path), "--cmd", f"cd {path} && {sys.executable} bench.py"]) == ExitCode.ISOLATION


def test_nightly_measures_each_commit_not_the_installed_checkout(tmp_path, repo):
    from regressbisect.config import build_config
    from regressbisect.machine.doctor import MachineCheck
    from regressbisect.git.history import History
    from regressbisect.hunts.nightly import Nightly, NightlySettings

    path, shas = repo
    python = make_venv(tmp_path / "venv")
    pip_install(python, path, editable=True)
    config = build_config({}, {"cmd": f"{python} bench.py", "instrument": "off"})
    night = Nightly(History.open(path), config,
                    NightlySettings(branch="HEAD", samples_per_commit=2, max_new=len(shas), hunt=False),
                    store_path=tmp_path / "store.sqlite",
                    machine_check=lambda: MachineCheck("test", 1.0, 1.0, 0)).run("HEAD")
    medians = {row["commit"]: row["median_tok_s"] for row in night.report["series"]}
    assert all(medians[s] > 900 for s in shas[:CULPRIT]) and all(medians[s] < 600 for s in shas[CULPRIT:])
    assert night.report["isolation"]["imported_from"]["mypkg.core"] == "src/mypkg/core.py"
