"""`regressbisect deps GOOD_ENV BAD_ENV`: which package of an upgrade, and which release of it,
made the command slower, on a local index of hand-written wheels (`--find-links`, `--no-index`:
no network). The environments are real (built with uv); the probe is a fake that reads which
versions its environment holds, except in the end-to-end test, which runs real processes."""
from __future__ import annotations

import json
import math
import random
import shutil
from pathlib import Path

import pytest

from regressbisect.cli import main
from regressbisect.config import build_config
from regressbisect.deps.builds import IndexOptions
from regressbisect.deps.envs import read_requirements
from regressbisect.git.history import History
from regressbisect.hunts.deps import DepsHunt
from regressbisect.render.report_deps import deps_summary
from regressbisect.samples import ProbeOutcome, Sample
from regressbisect.testing.gitrepo import make_repo, snapshot_checkout
from regressbisect.testing.wheels import write_broken_wheel, write_wheel
from tests.ci import missing

SLOW = 0.30
"""slowpkg 1.2 and later: tok/s divided by 1 + SLOW."""

STEP = """\
SPIN = {spin}


def step():
    total = 0
    for i in range(200 + SPIN):
        total += i
    return total
"""

BENCH = """\
import time
import slowpkg
for _ in range(50):
    slowpkg.step()
start = time.perf_counter()
steps = 3000
for _ in range(steps):
    slowpkg.step()
print(f"{steps / (time.perf_counter() - start):.1f} tok/s")
"""


def write_index(directory: Path, broken: str = "1.0.1") -> None:
    """slowpkg 1.0, 1.1, 1.2 (a busy loop), 1.3rc1, 2.0 (needs helper >= 2) and `broken` (does not
    install); helper 1.0 and 2.0; plain 1.0 and 1.1 (harmless)."""
    for version in ("1.0", "1.1", "1.2", "1.3rc1", "2.0"):
        spin = 60 if version >= "1.2" else 0
        write_wheel(directory, "slowpkg", version, {"slowpkg/__init__.py": STEP.format(spin=spin)},
                    requires=["helper>=2"] if version == "2.0" else ())
    write_broken_wheel(directory, "slowpkg", broken)
    for version in ("1.0", "2.0"):
        write_wheel(directory, "helper", version, {"helper/__init__.py": f"VERSION = {version!r}\n"})
    for version in ("1.0", "1.1"):
        write_wheel(directory, "plain", version, {"plain/__init__.py": ""})


GOOD = "slowpkg==1.0\nhelper==1.0\nplain==1.0\n"
BAD = "slowpkg==2.0\nhelper==2.0\nplain==1.1\n"


class VersionProbe:
    """tok/s from the versions the probe's environment holds: slowpkg 1.2 and later are SLOW
    slower; seeded lognormal noise. A run in an environment without slowpkg fails to import."""

    def __init__(self, noise: float = 0.02, seed: int = 0):
        self.rng = random.Random(seed)
        self.noise = noise
        self.environments: list[dict[str, str]] = []

    def __call__(self, spec, cwd: Path, extra_env=None) -> ProbeOutcome:
        venv = Path(extra_env["VIRTUAL_ENV"])
        versions = dict(p.name[:-len(".dist-info")].rsplit("-", 1)
                        for p in venv.glob("lib/python*/site-packages/*.dist-info"))
        self.environments.append(versions)
        if "slowpkg" not in versions:
            return ProbeOutcome(sample=None, skip_reason="exit 1: ModuleNotFoundError: No module named 'slowpkg'",
                                exit_code=1, wall_seconds=0.01)
        slow = tuple(map(int, versions["slowpkg"].split(".")[:2])) >= (1, 2)
        value = 1000.0 / (1 + SLOW * slow) * math.exp(self.rng.gauss(0, self.noise))
        return ProbeOutcome(sample=Sample(tok_s=value), skip_reason=None, exit_code=0, wall_seconds=0.01)


@pytest.fixture
def project(tmp_path):
    if shutil.which("uv") is None:
        missing("uv is not installed")
    write_index(tmp_path / "wheels")
    repo = tmp_path / "project"
    make_repo(repo, [{"bench.py": BENCH}])
    (tmp_path / "good.txt").write_text(GOOD)
    (tmp_path / "bad.txt").write_text(BAD)
    return repo


def hunt(project: Path, probe, good: str = GOOD, bad: str = BAD, **config):
    cfg = build_config({}, {"cmd": "python bench.py", "instrument": "off", **config})
    index = IndexOptions(find_links=(str(project.parent / "wheels"),), no_index=True)
    return DepsHunt(History.open(project), cfg, read_requirements(good, "good.txt"), read_requirements(bad, "bad.txt"),
                    index=index, probe_runner=probe).run()


def test_the_package_and_its_first_slow_release_are_named_and_the_broken_release_skipped(project):
    before = snapshot_checkout(project)
    probe = VersionProbe(seed=1)
    outcome = hunt(project, probe)
    report = outcome.report
    assert report["verdict"] == "culprits" and int(outcome.exit_code) == 0
    (culprit,) = report["culprits"]
    assert (culprit["package"], culprit["good_version"], culprit["version"]) == ("slowpkg", "1.0", "1.2")
    assert -30 < culprit["step_pct"] < -20     # 1/1.3 - 1 = -23%
    assert culprit["interval"][0] < culprit["step_pct"] < culprit["interval"][1] < 0
    assert culprit["with"] == [{"package": "helper", "joined": "needed to run"}]   # slowpkg 2.0 needs helper >= 2
    assert report["needs"] == {"slowpkg": ["helper"]}
    releases = culprit["releases"]
    assert releases["tested"] == ["1.0", "1.0.1", "1.1", "1.2", "2.0"]     # 1.3rc1 left out
    assert [s["version"] for s in releases["steps"]] == ["1.2"]
    assert [s["version"] for s in releases["skipped"]] in ([], ["1.0.1"])   # tried only if the search asks
    # what became of the releases beside the step, as a commit report's sides, in the text too
    assert releases["sides"] and {side["outcome"] for side in releases["sides"]} <= {"cleared", "searched", "unresolved", "remainder"}
    assert all(side["from"] in releases["tested"] and side["to"] in releases["tested"] for side in releases["sides"])
    side = releases["sides"][0]
    assert f"releases {side['from']}..{side['to']}: " in deps_summary(report)
    # every environment measured is GOOD's pins with some of the changes: plain 1.1 never blamed
    assert all(set(env) == {"slowpkg", "helper", "plain"} for env in probe.environments)
    assert snapshot_checkout(project) == before
    assert report["environments_built"] >= 5


def test_a_release_that_does_not_install_beside_the_step_leaves_it_ambiguous(project):
    """1.1.1 between 1.1 (fast) and 1.2 (slow) does not install: the step is 1.1.1 or 1.2, and
    neither is named the first release with the change."""
    write_index(project.parent / "wheels", broken="1.1.1")
    (culprit,) = hunt(project, VersionProbe(seed=2)).report["culprits"]
    assert culprit["version"] is None and culprit["releases"]["steps"] == []
    (step,) = culprit["releases"]["ambiguous"]
    assert step["any_of"] == ["1.1.1", "1.2"] and step["after"] == "1.1"
    skipped = {s["version"]: s["reason"] for s in culprit["releases"]["skipped"]}
    assert skipped["1.1.1"].startswith("does not install")    # the fixture's 1.0.1 is broken too


def test_a_combination_that_does_not_resolve_is_a_crash_with_its_reason(project, monkeypatch):
    """A need the metadata did not give (read none): slowpkg 2.0 without helper 2.0 does not
    resolve; the search finds that it needs helper, and never blames the crash."""
    import regressbisect.hunts.deps as deps_hunt

    monkeypatch.setattr(deps_hunt, "change_needs", lambda *args: {})
    report = hunt(project, VersionProbe(seed=4)).report
    assert report["verdict"] == "culprits" and report["needs"] == {}
    (culprit,) = report["culprits"]
    assert culprit["package"] == "slowpkg" and culprit["version"] == "1.2"
    assert culprit["with"] == [{"package": "helper", "joined": "needed to run"}]
    crashes = {tuple(c["packages"]): c["reason"] for c in report["did_not_run"]}
    assert crashes[("slowpkg",)].startswith("does not resolve") and "helper>=2" in crashes[("slowpkg",)]


class StoppedProbe(VersionProbe):
    """A VersionProbe whose run number `stop_at` is a Ctrl-C."""

    def __init__(self, stop_at: int, **kw):
        super().__init__(**kw)
        self.stop_at = stop_at

    def __call__(self, spec, cwd: Path, extra_env=None) -> ProbeOutcome:
        if len(self.environments) + 1 == self.stop_at:
            raise KeyboardInterrupt
        return super().__call__(spec, cwd, extra_env)


def test_a_deps_hunt_interrupted_then_run_again_probes_no_stored_sample_again(project):
    """Every sample is stored as it is taken, keyed by its environment's hash: the hunt re-run
    after a Ctrl-C serves the samples stored in the order its searches ask, and one re-run after it
    finished takes no probe at all."""
    stopped = StoppedProbe(stop_at=7, seed=8)
    with pytest.raises(KeyboardInterrupt):
        hunt(project, stopped)
    assert len(stopped.environments) == 6
    resumed = VersionProbe(seed=9)
    report = hunt(project, resumed).report
    assert report["cached"] == 6 and report["probes"] == len(resumed.environments)
    (culprit,) = report["culprits"]
    assert (culprit["package"], culprit["version"]) == ("slowpkg", "1.2")
    again = VersionProbe(seed=10)
    repeated = hunt(project, again).report
    assert again.environments == [] and repeated["probes"] == 0
    assert repeated["culprits"] == report["culprits"] and repeated["hunt_id"] != report["hunt_id"]


PYPROJECT = """\
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "slowpkg"
version = "{version}"
"""


ABOUT = "NAME = 'slowpkg'\n"
"""slowpkg/about.py; the busy loop's commit gives it a docstring (a hunk that changes no speed)."""


def slowpkg_repo(path: Path) -> list[str]:
    """slowpkg's own repository: v1.0, v1.1, then a README, the busy loop (with a docstring in
    another file: two hunks) and a comment before v1.2; the shas, oldest first (index 3 is the
    busy loop)."""
    from regressbisect.testing.gitrepo import git

    def at(version: str, spin: int, extra: dict | None = None, about: str = ABOUT) -> dict:
        return {"pyproject.toml": PYPROJECT.format(version=version),
                "slowpkg/__init__.py": STEP.format(spin=spin), "slowpkg/about.py": about, **(extra or {})}

    documented = '"""What slowpkg is called."""\n' + ABOUT
    shas = make_repo(path, [at("1.0", 0), at("1.1", 0), at("1.1", 0, {"README": "slowpkg\n"}),
                            at("1.1", 60, {"README": "slowpkg\n"}, documented),
                            at("1.2", 60, {"README": "slowpkg\n", "NOTES": "busy\n"}, documented)],
                     messages=["v1.0", "v1.1", "readme", "a busy loop in step", "v1.2"])
    for tag, sha in (("v1.0", shas[0]), ("v1.1", shas[1]), ("v1.2", shas[4])):
        git(path, "tag", tag, sha)
    return shas


class SpinProbe(VersionProbe):
    """tok/s from the slowpkg its environment holds, by its code: SPIN > 0 is SLOW slower."""

    def __call__(self, spec, cwd: Path, extra_env=None) -> ProbeOutcome:
        (init,) = Path(extra_env["VIRTUAL_ENV"]).glob("lib/python*/site-packages/slowpkg/__init__.py")
        self.environments.append({"spin": init.read_text().split("\n")[0]})
        slow = "SPIN = 0" not in init.read_text()
        value = 1000.0 / (1 + SLOW * slow) * math.exp(self.rng.gauss(0, self.noise))
        return ProbeOutcome(sample=Sample(tok_s=value), skip_reason=None, exit_code=0, wall_seconds=0.01)


@pytest.mark.slow
def test_with_the_package_repository_the_commit_between_the_release_tags_is_named(project, tmp_path):
    """--package-repo slowpkg=PATH: after the release (1.2), the commits between the tags v1.1
    and v1.2, each built from source with uv (its build backend from the index), bisected: the busy
    loop's commit named; then its two hunks, each subset built from source: the busy loop named."""
    shas = slowpkg_repo(tmp_path / "slowpkg")
    cfg = build_config({}, {"cmd": "python bench.py", "instrument": "off"})
    index = IndexOptions(find_links=(str(tmp_path / "wheels"),), no_index=True)
    outcome = DepsHunt(History.open(project), cfg, read_requirements(GOOD, "good.txt"),
                       read_requirements(BAD, "bad.txt"), index=index, probe_runner=SpinProbe(seed=11),
                       package_repos={"slowpkg": tmp_path / "slowpkg"}).run()
    (culprit,) = outcome.report["culprits"]
    assert culprit["version"] == "1.2"
    assert culprit["commit_search"]["tested"] == shas[1:], culprit["commit_search"]
    (commit,) = culprit["commits"]
    assert (commit["sha"], commit["after"]) == (shas[3], shas[2]) and commit["step_pct"] < -15
    (hunk,) = commit["hunks"]       # the docstring in about.py is not named
    assert (hunk["file"], hunk["lines"]) == ("slowpkg/__init__.py", [1, 1]), commit["hunk_search"]
    assert hunk["interval"][0] < hunk["step_pct"] < hunk["interval"][1] < 0
    assert commit["hunk_search"]["tested"] == 2
    from regressbisect.render.report_deps import deps_summary
    summary = deps_summary(outcome.report)
    assert f"commit {shas[3][:10]} a busy loop in step (after {shas[2][:10]})" in summary
    assert f"hunk slowpkg/__init__.py:1 (in {shas[3][:10]})" in summary


def test_a_subset_of_a_culprit_commits_hunks_is_its_parent_with_them_applied(tmp_path):
    """The drill's candidate source: the parent exported, the subset's patch applied there, even
    under another repository's .git (where the environments live), keyed by the subset."""
    from regressbisect.deps.sources import CommitSource, PatchedSource, SourceUnavailable
    from regressbisect.git.hunks import collect_hunks

    shas = slowpkg_repo(tmp_path / "slowpkg")
    history = History.open(tmp_path / "slowpkg")
    spin, docstring = sorted(collect_hunks(history.root, shas[2], target=shas[3]), key=lambda h: h.file)
    assert (spin.file, docstring.file) == ("slowpkg/__init__.py", "slowpkg/about.py")
    parent = CommitSource(history, history.commit_info(shas[2]))
    make_repo(tmp_path / "project", [{"bench.py": BENCH}])
    files = PatchedSource(parent, (docstring,)).export(tmp_path / "project" / ".git" / "deps-x" / "source")
    assert (files / "slowpkg" / "about.py").read_text().startswith('"""What slowpkg is called."""')
    assert (files / "slowpkg" / "__init__.py").read_text().startswith("SPIN = 0\n")
    keys = {parent.key, PatchedSource(parent, (spin,)).key, PatchedSource(parent, (docstring,)).key}
    assert len(keys) == 3
    v12 = CommitSource(history, history.commit_info(shas[4]))      # SPIN = 60 already: the hunk's old line is not there
    with pytest.raises(SourceUnavailable, match=f"do not apply to {shas[4][:10]}"):
        PatchedSource(v12, (spin,)).export(tmp_path / "v12")


def test_a_drill_that_cannot_run_is_one_line_under_its_commit():
    from regressbisect.render.report_deps import deps_summary

    commit = {"sha": "a" * 40, "subject": "a busy loop", "after": "b" * 40, "step_pct": -23.0,
              "interval": [-25.0, -21.0], "hunks": [],
              "hunk_search": {"tested": 0, "probes": 0, "verdict": None, "reason": "commit aaaa changes nothing"}}
    report = {"good_env": "good.txt", "bad_env": "bad.txt", "changes": [], "verdict": "culprits",
              "culprits": [{"package": "slowpkg", "good_version": "1.0", "bad_version": "2.0", "version": "1.2",
                            "with": [], "step_pct": -20.0, "interval": [-22.0, -18.0], "releases": {},
                            "commits": [commit], "commit_search": {"reason": "", "verdict": "culprits"}}],
              "probes": 1, "environments_built": 1, "build_seconds": 0.0, "wall_seconds": 1.0}
    lines = deps_summary(report).splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(f"  commit {'a' * 10} a busy loop"))
    assert lines[at + 1] == "  hunk not told: commit aaaa changes nothing"


def test_a_release_without_its_tag_is_one_line_and_no_commit_search(project, tmp_path):
    from regressbisect.testing.gitrepo import git

    slowpkg_repo(tmp_path / "slowpkg")
    git(tmp_path / "slowpkg", "tag", "-d", "v1.2")
    cfg = build_config({}, {"cmd": "python bench.py", "instrument": "off"})
    index = IndexOptions(find_links=(str(tmp_path / "wheels"),), no_index=True)
    report = DepsHunt(History.open(project), cfg, read_requirements(GOOD, "good.txt"),
                      read_requirements(BAD, "bad.txt"), index=index, probe_runner=VersionProbe(seed=12),
                      package_repos={"slowpkg": tmp_path / "slowpkg"}).run().report
    (culprit,) = report["culprits"]
    assert culprit["commits"] == [] and culprit["commit_search"]["reason"].startswith("no tag v1.2 or 1.2 in ")


def lock(pins: dict[str, str]) -> str:
    """A uv.lock of the project (editable) and `pins` from a registry."""
    text = 'version = 1\nrequires-python = ">=3.10"\n\n[[package]]\nname = "project"\nversion = "0.1"\n' \
           'source = { editable = "." }\n'
    return text + "".join(f'\n[[package]]\nname = "{n}"\nversion = "{v}"\nsource = {{ registry = "https://pypi.org/simple" }}\n'
                          for n, v in pins.items())


def test_two_lockfiles_with_a_transitive_change_name_the_direct_package(project, tmp_path):
    """uv.lock files: the project's direct dependency slowpkg moved, and with it helper, which only
    slowpkg requires (a transitive change the lockfile records)."""
    from regressbisect.deps.envs import read_environment

    (tmp_path / "good.lock").write_text(lock({"slowpkg": "1.0", "helper": "1.0", "plain": "1.0"}))
    (tmp_path / "bad.lock").write_text(lock({"slowpkg": "2.0", "helper": "2.0", "plain": "1.0"}))
    good, bad = read_environment(tmp_path / "good.lock"), read_environment(tmp_path / "bad.lock")
    assert good.unsupported == ("project (editable)",)
    cfg = build_config({}, {"cmd": "python bench.py", "instrument": "off"})
    index = IndexOptions(find_links=(str(tmp_path / "wheels"),), no_index=True)
    report = DepsHunt(History.open(project), cfg, good, bad, index=index, probe_runner=VersionProbe(seed=7)).run().report
    assert [c["package"] for c in report["changes"]] == ["helper", "slowpkg"]
    (culprit,) = report["culprits"]
    assert (culprit["package"], culprit["version"]) == ("slowpkg", "1.2")
    assert culprit["with"] == [{"package": "helper", "joined": "needed to run"}]


def test_an_upgrade_of_harmless_packages_is_not_reproduced(project):
    outcome = hunt(project, VersionProbe(seed=5), bad="slowpkg==1.0\nhelper==2.0\nplain==1.1\n")
    assert outcome.report["verdict"] == "not-reproduced" and int(outcome.exit_code) == 2
    assert outcome.report["culprits"] == []
    assert "GOOD->BAD" in outcome.report["reason"] and "BASE" not in outcome.report["reason"]


def test_an_end_that_does_not_build_is_one_line_and_exit_1(project, capsys):
    code = _cli(project, "slowpkg==1.0.1\nhelper==1.0\n", BAD, "--quiet")
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "GOOD" in err[0] and "does not install" in err[0]


def test_the_command_prints_the_package_and_release_and_writes_the_json(project, capsys, monkeypatch, tmp_path):
    from regressbisect.probe import executors

    monkeypatch.setattr(executors, "LOCAL_RUNNER", VersionProbe(seed=6))
    (project.parent / "good.txt").write_text("-e git+https://example.org/me/project.git@0123#egg=project\n" + GOOD)
    code = _cli(project, None, BAD, "--quiet", "--json", str(tmp_path / "deps.json"))
    out, err = capsys.readouterr()
    assert code == 0
    assert "culprit 1: package slowpkg 1.0 -> 2.0 (with helper: needed to run)" in out
    assert "release slowpkg 1.2 (after 1.1)" in out
    assert err.count("requirement(s) left out") == 1 and "-e git+" in err     # the editable line, said once
    report = json.loads((tmp_path / "deps.json").read_text())
    assert [(c["package"], c["good_version"], c["version"]) for c in report["culprits"]] == [("slowpkg", "1.0", "1.2")]
    assert {"step_pct", "interval"} <= set(report["culprits"][0])


def test_flags_a_deps_hunt_cannot_use_are_refused(project, capsys):
    assert _cli(project, GOOD, BAD, "--slots", "2") == 1
    assert "deps takes no --slots" in capsys.readouterr().err


def _cli(project: Path, good: str | None, bad: str, *more: str) -> int:
    if good is not None:
        (project.parent / "good.txt").write_text(good)
    (project.parent / "bad.txt").write_text(bad)
    with pytest.raises(SystemExit) as exit_info:
        main(["deps", str(project.parent / "good.txt"), str(project.parent / "bad.txt"), "-C", str(project),
              "--cmd", "python bench.py", "--find-links", str(project.parent / "wheels"), "--no-index",
              "--instrument", "off", *more])
    return int(exit_info.value.code)


@pytest.mark.slow
def test_end_to_end_with_real_probes_names_the_release_and_clean_removes_the_environments(project, capsys, tmp_path):
    """Real processes: `python bench.py` in each candidate's virtualenv, slowpkg 1.2's busy loop
    measured; `clean` then removes every environment the hunt built."""
    code = _cli(project, GOOD, BAD, "--quiet", "--json", str(tmp_path / "deps.json"))
    out = capsys.readouterr().out
    report = json.loads((tmp_path / "deps.json").read_text())
    assert code == 0, out
    assert [(c["package"], c["version"]) for c in report["culprits"]] == [("slowpkg", "1.2")]
    assert report["culprits"][0]["step_pct"] < -10
    venvs = project / ".git" / "regressbisect" / "venvs"
    assert 5 <= len(list(venvs.glob("deps-*"))) <= report["environments_built"]   # a failed build leaves none
    with pytest.raises(SystemExit) as exit_info:
        main(["clean", "-C", str(project)])
    assert exit_info.value.code == 0 and not venvs.exists()


class NightlyProbe:
    """tok/s from nightpkg's version in the environment: the nightlies from 2.6.0.dev20250103 on
    are SLOW slower; seeded lognormal noise."""

    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)

    def __call__(self, spec, cwd: Path, extra_env=None) -> ProbeOutcome:
        (dist,) = Path(extra_env["VIRTUAL_ENV"]).glob("lib/python*/site-packages/nightpkg-*.dist-info")
        slow = dist.name.removesuffix(".dist-info").rsplit("-", 1)[1] >= "2.6.0.dev20250103"
        value = 1000.0 / (1 + SLOW * slow) * math.exp(self.rng.gauss(0, 0.02))
        return ProbeOutcome(sample=Sample(tok_s=value), skip_reason=None, exit_code=0, wall_seconds=0.01)


def test_nightlies_are_bisected_in_order_of_upload_and_the_step_named_with_its_date(project, tmp_path):
    """Two nightly ends on an index whose JSON API gives upload times: the three nightlies between
    are bisected by date (no --pre needed), and the first slow one is named with its day."""
    from regressbisect.render.report_deps import deps_summary
    from tests.test_deps_builds import nightly_index

    cfg = build_config({}, {"cmd": "python bench.py", "instrument": "off"})
    with nightly_index(tmp_path / "nightlies") as url:
        outcome = DepsHunt(History.open(project), cfg, read_requirements("nightpkg==2.6.0.dev20250101\n", "good.txt"),
                           read_requirements("nightpkg==2.6.0.dev20250105\n", "bad.txt"),
                           index=IndexOptions(index_url=url), probe_runner=NightlyProbe(seed=3)).run()
    (culprit,) = outcome.report["culprits"]
    releases = culprit["releases"]
    assert releases["axis"] == "date"
    assert releases["tested"] == [f"2.6.0.dev2025010{day}" for day in range(1, 6)]
    assert releases["uploaded"]["2.6.0.dev20250103"].startswith("2025-01-03")
    (step,) = releases["steps"]
    assert (step["version"], step["after"]) == ("2.6.0.dev20250103", "2.6.0.dev20250102")
    assert culprit["version"] == "2.6.0.dev20250103"
    assert ("release nightpkg 2.6.0.dev20250103, uploaded 2025-01-03 (after 2.6.0.dev20250102, uploaded "
            "2025-01-02)") in deps_summary(outcome.report)
