"""Import roots per build backend, project module names, PYTHONPATH mapping and the check's
verdict on recorded imports (pure and fast; one real interpreter for the recorder)."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from regressbisect.errors import ExitCode
from regressbisect.probe.isolation import (IMPORTS_DIR_ENV, PROJECT_MODULES_ENV, Isolation, IsolationError,
                                           import_roots, map_into_worktree, probe_pythonpath,
                                           project_modules)
from regressbisect.probe.runner import SHIM_DIR


def tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def rel_roots(root: Path) -> list[str]:
    return [os.path.relpath(r, root) for r in import_roots(root)]


PKG = {"__init__.py": ""}


def package(where: str, name: str = "pkg") -> dict[str, str]:
    return {f"{where}/{name}/__init__.py": ""}


@pytest.mark.parametrize("pyproject, files, expected", [
    ('[tool.setuptools.packages.find]\nwhere = ["lib"]\n', package("lib"), ["lib", "."]),
    ('[tool.setuptools]\npackage-dir = {"" = "lib"}\n', package("lib"), ["lib", "."]),
    ('[tool.setuptools]\npackage-dir = {"pkg" = "code/pkg"}\n', package("code"), ["code", "."]),
    ('[tool.setuptools]\npackage-dir = {"pkg" = "code/other"}\n', package("code", "other"), ["."]),
    ('[tool.hatch.build.targets.wheel]\npackages = ["lib/pkg"]\n', package("lib"), ["lib", "."]),
    ('[tool.hatch.build.targets.wheel]\nsources = ["lib"]\n', package("lib"), ["lib", "."]),
    ('[tool.hatch.build.targets.wheel.sources]\n"lib" = ""\n', package("lib"), ["lib", "."]),
    ('[tool.flit.module]\nname = "pkg"\n', package("src"), ["src", "."]),
    ('[build-system]\nbuild-backend = "flit_core.buildapi"\n[project]\nname = "pkg"\n',
     {"src/pkg.py": ""}, ["src", "."]),
    ('[tool.poetry]\npackages = [{include = "pkg", from = "lib"}]\n', package("lib"), ["lib", "."]),
    ('[tool.pdm.build]\npackage-dir = "lib"\n', package("lib"), ["lib", "."]),
    ('[tool.maturin]\npython-source = "python"\n', package("python"), ["python", "."]),
    ('[tool.scikit-build]\nwheel.packages = ["lib/pkg"]\n', package("lib"), ["lib", "."]),
    ('', package("src"), ["src", "."]),                          # src/ by convention
    ('', {"pkg/__init__.py": ""}, ["."]),                        # flat layout: the root
    ('[tool.setuptools.packages.find]\nwhere = ["../outside", "/abs", "missing"]\n', PKG, ["."]),
    ('this is [not toml', package("src"), ["src", "."]),        # a broken pyproject: convention
])
def test_import_roots_per_backend(tmp_path, pyproject, files, expected):
    tree(tmp_path, {"pyproject.toml": pyproject, **files})
    assert rel_roots(tmp_path) == expected


def test_setup_cfg_and_setup_py(tmp_path):
    a = tree(tmp_path / "a", {"setup.cfg": "[options]\npackage_dir =\n    =lib\n", **package("lib")})
    b = tree(tmp_path / "b", {"setup.cfg": "[options.packages.find]\nwhere = code\n", **package("code")})
    c = tree(tmp_path / "c", {"setup.py": 'setup(name="x", package_dir={"": "py"})\n', **package("py")})
    assert rel_roots(a) == ["lib", "."]
    assert rel_roots(b) == ["code", "."]
    assert rel_roots(c) == ["py", "."]


def test_project_modules_packages_modules_extensions_and_namespaces(tmp_path):
    tree(tmp_path, {
        "src/mypkg/__init__.py": "", "src/mypkg/core.py": "",
        "src/fast.cpython-311-x86_64-linux-gnu.so": "", "src/single.py": "",
        "src/company/team/__init__.py": "",                 # namespace package in a declared root
        "bench.py": "", "tests/__init__.py": "",
        "docs/conf.py": "",                                 # a plain directory at the root: not a package
        "typing.py": "", "sitecustomize.py": "",            # stdlib and start-up names: never ours
    })
    names = project_modules(import_roots(tmp_path), tmp_path)
    assert names == ["bench", "company.team", "fast", "mypkg", "single", "tests"]


def test_user_pythonpath_entries_in_the_checkout_are_mapped_into_the_worktree(tmp_path):
    user, worktree, other = tmp_path / "user", tmp_path / "wt", tmp_path / "other"
    for d in (user / "lib", worktree / "src", other):
        d.mkdir(parents=True)
    assert map_into_worktree(str(user / "lib"), user, worktree) == str(worktree / "lib")
    assert map_into_worktree(str(user), user, worktree) == str(worktree)
    assert map_into_worktree(str(other), user, worktree) == str(other)
    assert map_into_worktree(str(user / ".git" / "x"), user, worktree) == str(user / ".git" / "x")
    inherited = os.pathsep.join([str(user / "lib"), str(other), str(worktree / "src")])
    path = probe_pythonpath([worktree / "src", worktree], inherited, user, worktree)
    assert path.split(os.pathsep) == [str(worktree / "src"), str(worktree), str(worktree / "lib"), str(other)]


# ---------------------------------------------------------------- the check on recorded imports

@pytest.fixture
def places(tmp_path):
    user = tree(tmp_path / "user", {"src/mypkg/__init__.py": ""})
    pool = tmp_path / "user" / ".git" / "regressbisect" / "worktrees"
    worktree = tree(pool / "slot-0", {"src/mypkg/__init__.py": "", "src/mypkg/core.py": ""})
    other = tree(pool / "slot-1", {"src/mypkg/__init__.py": ""})
    site = tree(tmp_path / "venv" / "lib" / "python3.11" / "site-packages", {"mypkg/__init__.py": ""})
    return {"user": user, "pool": pool, "worktree": worktree, "other": other, "site": site}


def record(probe, modules: dict[str, Path], pid: int = 1) -> None:
    (probe.records_dir / f"{pid}.rec").write_text(repr({"modules": {k: str(v) for k, v in modules.items()}}))


def isolation(places, check: bool = True) -> Isolation:
    return Isolation(user_root=places["user"], other_worktrees=[places["pool"]], check=check)


def test_modules_from_the_worktree_pass_and_are_reported_relative(places):
    iso = isolation(places)
    probe = iso.prepare(places["worktree"])
    assert probe.env[PROJECT_MODULES_ENV] == "mypkg"
    assert probe.env["PYTHONPATH"].split(os.pathsep)[:2] == [str(places["worktree"] / "src"), str(places["worktree"])]
    record(probe, {"mypkg": places["worktree"] / "src/mypkg/__init__.py", "__main__": places["worktree"] / "bench.py"}, 1)
    record(probe, {"mypkg.core": places["worktree"] / "src/mypkg/core.py"}, 2)
    iso.verify(probe)
    assert not probe.records_dir.exists()  # records are removed once read
    report = iso.report()
    assert report["imported_from"] == {"__main__": "bench.py", "mypkg": "src/mypkg/__init__.py",
                                       "mypkg.core": "src/mypkg/core.py"}
    assert report["processes_per_probe"] == 2 and report["check"] is True


@pytest.mark.parametrize("source, where", [("user", "your checkout"), ("other", "another worktree"),
                                           ("site", "an installed copy")])
def test_a_module_from_elsewhere_is_one_line_naming_both_paths_and_the_flag(places, source, where):
    iso = isolation(places)
    probe = iso.prepare(places["worktree"])
    wrong = places[source] / ("mypkg/__init__.py" if source == "site" else "src/mypkg/__init__.py")
    # one rank from the worktree, one from elsewhere: the wrong one decides
    record(probe, {"mypkg": places["worktree"] / "src/mypkg/__init__.py"}, 1)
    record(probe, {"mypkg": wrong}, 2)
    with pytest.raises(IsolationError) as caught:
        iso.verify(probe)
    message = caught.value.message
    assert caught.value.exit_code == ExitCode.ISOLATION
    assert "\n" not in message
    assert "mypkg" in message and str(wrong) in message and f"({where})" in message
    assert str(places["worktree"] / "src/mypkg/__init__.py") in message
    assert "--no-isolation-check" in message


def test_the_candidates_script_run_from_the_checkout_is_an_error_but_a_launcher_or_harness_is_not(places):
    iso = isolation(places)
    launcher = iso.prepare(places["worktree"])
    record(launcher, {"__main__": places["site"] / "torch/distributed/run.py"})
    iso.verify(launcher)
    assert iso.report()["note"].startswith("no project module was imported")
    harness = iso.prepare(places["worktree"])  # a script the candidate does not have: a fixed harness
    record(harness, {"__main__": places["user"] / "harness.py"})
    iso.verify(harness)
    (places["worktree"] / "bench.py").write_text("")
    cd_probe = iso.prepare(places["worktree"])
    record(cd_probe, {"__main__": places["user"] / "bench.py"})
    with pytest.raises(IsolationError, match=r"ran the script from .*bench.py \(your checkout\)"):
        iso.verify(cd_probe)


def test_check_off_records_nothing_and_says_so(places):
    iso = isolation(places, check=False)
    probe = iso.prepare(places["worktree"])
    assert probe.env[IMPORTS_DIR_ENV] == "" and probe.records_dir is None
    assert probe.env["PYTHONPATH"].startswith(str(places["worktree"] / "src"))  # roots first anyway
    iso.verify(probe)
    assert iso.report()["check"] is False and "check off" in iso.report()["note"]


def test_recorder_runs_in_a_real_interpreter_and_chains_to_an_existing_sitecustomize(tmp_path):
    user_site = tree(tmp_path / "usersite", {"sitecustomize.py": "import os\nos.environ['CHAINED'] = '1'\n"})
    project = tree(tmp_path / "proj", {"mypkg/__init__.py": "", "mypkg/sub.py": ""})
    records = tmp_path / "records"
    records.mkdir()
    env = {**os.environ, IMPORTS_DIR_ENV: str(records), PROJECT_MODULES_ENV: "mypkg",
           "PYTHONPATH": os.pathsep.join([str(SHIM_DIR), str(project), str(user_site)])}
    env.pop("REGRESSBISECT_INSTRUMENT", None)
    code = ("import os, sys, mypkg.sub, json; "
            "print(os.environ.get('CHAINED'), 'regressbisect.probe.instrument' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "False"]  # chained; counters only when REGRESSBISECT_INSTRUMENT=1
    (written,) = records.glob("*.rec")
    modules = ast.literal_eval(written.read_text())["modules"]
    assert modules == {"mypkg": str(project / "mypkg" / "__init__.py"),
                       "mypkg.sub": str(project / "mypkg" / "sub.py")}
