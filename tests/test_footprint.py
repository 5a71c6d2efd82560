"""The probe's footprint (probe/footprint.py, hunts/footprints.py): a commit hunt measures only
the commits that touch what the probe's Python processes read (the files they import or open,
the directories they list), recorded by the shim at GOOD, BAD and each commit measured; the
others are reported as not measured. Real git repositories and real Python probes: the shim's
record is what is tested."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from regressbisect.config import build_config
from regressbisect.git.history import Change, History
from regressbisect.hunts.commits import CommitHunt
from regressbisect.hunts.footprints import SET_ASIDE_REASON
from regressbisect.probe.footprint import Footprint, program_not_python, read_footprint
from regressbisect.probe.isolation import Isolation
from regressbisect.probe.runner import ProbeSpec, run_probe
from regressbisect.render import render_summary
from regressbisect.store import Store
from regressbisect.testing.gitrepo import make_repo
from tests.cli import run_cli

BENCH = '''\
import json, math, os, random
from pathlib import Path
import pkg
speed = pkg.SPEED
for config in pkg.CONFIGS:                    # configuration files, read with open()
    for line in open(config):
        key, _, value = line.partition("=")
        if key.strip() == "factor":
            speed *= float(value)
for name in sorted(os.listdir("plugins")):    # a directory listed: each plugin in it costs
    if name.endswith(".py"):
        speed *= 0.85
state = Path(os.environ["BENCH_STATE"])
state.mkdir(parents=True, exist_ok=True)
(state / f"n-{speed}-{os.getpid()}").touch()
n = len(list(state.glob(f"n-{speed}-*")))
value = speed * math.exp(random.Random(f"{speed}-{n}").gauss(0.0, 0.01))
tokens = int(os.environ["REGRESSBISECT_TOKENS"])
print("@regressbisect " + json.dumps({"tokens": tokens, "seconds": tokens / value}))
'''

PKG = 'from pkg.core import SPEED\nCONFIGS = ["conf/bench.cfg"]\n'
FIRST = {"bench.py": BENCH, "pkg/__init__.py": PKG, "pkg/core.py": "SPEED = 1000.0\n",
         "conf/bench.cfg": "factor = 1.0\n", "plugins/base.txt": "not a plugin\n", "README.md": "bench\n",
         "docs/guide.md": "how to\n"}


def _hunt(repo: Path, tmp_path: Path, shas: list[str], cmd: str = f"{sys.executable} bench.py", **flags):
    config = build_config({}, {"cmd": cmd, "tokens": 1000, "instrument": "off",
                               "env": {"BENCH_STATE": str(tmp_path / "state")}, **flags})
    hunt = CommitHunt(History.open(repo), shas[0], shas[-1], config, store_path=tmp_path / "store.sqlite")
    return hunt, hunt.run().report


def _measured(tmp_path: Path) -> set[str]:
    """The commits any probe of the store measured."""
    with Store(tmp_path / "store.sqlite", read_only=True) as store:
        return {row[0] for row in store._conn.execute("SELECT DISTINCT commit_sha FROM samples")}


def _set_aside(report: dict) -> list[str]:
    assert {c["reason"] for c in report["not_measured"]} <= {SET_ASIDE_REASON}
    return [c["commit"] for c in report["not_measured"]]


def test_a_commit_adding_a_module_and_its_import_is_measured_and_a_docs_only_one_never(tmp_path):
    repo = tmp_path / "repo"
    shas = make_repo(repo, [
        FIRST,
        {"docs/guide.md": "how to, again\n"},
        {"pkg/fast.py": "SLOWER = 0.8\n",
         "pkg/__init__.py": "from pkg.core import SPEED\nfrom pkg.fast import SLOWER\nSPEED *= SLOWER\n"
                            "CONFIGS = ['conf/bench.cfg']\n"},
        {"README.md": "bench, described\n"},
        {"pkg/core.py": "SPEED = 1000.0  # same\n"},
    ])
    hunt, report = _hunt(repo, tmp_path, shas)
    assert [c["commit"] for c in report["culprits"]] == [shas[2]]
    assert _set_aside(report) == [shas[1], shas[3]]
    assert shas[1] not in _measured(tmp_path) and shas[3] not in _measured(tmp_path)
    assert report["footprint"]["used"] and report["footprint"]["passes"] == 1
    assert "2 commits not measured: they touch none of the files the probe reads" in render_summary(report)



def test_a_commit_editing_a_config_file_the_probe_opens_is_measured(tmp_path):
    repo = tmp_path / "repo"
    shas = make_repo(repo, [
        FIRST,
        {"notes/n1.txt": "a note\n"},
        {"conf/other.cfg": "factor = 0.1\n"},      # beside the config, never read
        {"conf/bench.cfg": "factor = 0.8\n"},
        {"docs/guide.md": "how to, again\n"},
    ])
    hunt, report = _hunt(repo, tmp_path, shas)
    assert [c["commit"] for c in report["culprits"]] == [shas[3]]
    assert _set_aside(report) == [shas[1], shas[2]]
    assert _measured(tmp_path) <= {shas[0], shas[3], shas[4]}


def test_a_plugin_added_to_a_directory_the_probe_lists_is_measured(tmp_path):
    repo = tmp_path / "repo"
    shas = make_repo(repo, [
        FIRST,
        {"plugins/base.txt": "still not a plugin\n"},   # in the listed directory, changed, never read
        {"plugins/fancy.py": "# a plugin\n"},
        {"docs/plugins.md": "about plugins\n"},
    ])
    hunt, report = _hunt(repo, tmp_path, shas)
    assert [c["commit"] for c in report["culprits"]] == [shas[2]]
    assert _set_aside(report) == [shas[1]]
    assert shas[1] not in _measured(tmp_path)


def test_commits_touching_what_a_measured_candidate_read_come_back_as_candidates(tmp_path):
    """GOOD and BAD read neither conf/tune.cfg nor anything commit 3 touches; commit 2 starts
    reading it, so once commit 2 is measured commit 3 is a candidate again, and it is the culprit."""
    repo = tmp_path / "repo"
    tuned = 'from pkg.core import SPEED\nCONFIGS = ["conf/bench.cfg", "conf/tune.cfg"]\n'
    shas = make_repo(repo, [
        {**FIRST, "conf/tune.cfg": "factor = 1.0\n"},
        {"docs/guide.md": "how to, again\n"},
        {"pkg/__init__.py": tuned},
        {"conf/tune.cfg": "factor = 0.8\n"},
        {"conf/tune.cfg": None, "conf/tune2.cfg": "factor = 0.8\n",
         "pkg/__init__.py": tuned.replace("tune.cfg", "tune2.cfg")},
        {"README.md": "bench, described\n"},
    ])
    hunt, report = _hunt(repo, tmp_path, shas)
    assert [c["commit"] for c in report["culprits"]] == [shas[3]]
    assert report["footprint"]["added_back"] == [shas[3]] and report["footprint"]["passes"] == 2
    assert _set_aside(report) == [shas[1]]
    # the next hunt of the same range knows every footprint and sample: it runs nothing
    again = _hunt(repo, tmp_path, shas)[1]
    assert again["from_store_only"] and [c["commit"] for c in again["culprits"]] == [shas[3]]


SHELL_BENCH = """#!/bin/sh
speed=$(cat speed.txt)
echo "$speed tok/s"
"""


def test_a_probe_that_is_not_python_measures_every_commit_and_says_why(tmp_path, capsys):
    repo = tmp_path / "repo"
    shas = make_repo(repo, [
        {"bench.sh": SHELL_BENCH, "speed.txt": "1000\n", "docs/guide.md": "how to\n"},
        {"docs/guide.md": "how to, again\n"},
        {"speed.txt": "700\n"},
        {"docs/guide.md": "how to, once more\n"},
    ])
    out = tmp_path / "hunt.json"
    code = run_cli(["run", "-C", str(repo), "--cmd", "sh bench.sh", "--tokens", "1000", "--instrument", "off",
                    "--quiet", "--store", str(tmp_path / "store.sqlite"), "--json", str(out), shas[0], shas[-1]])
    assert code == 0
    report = json.loads(out.read_text())
    assert [c["commit"] for c in report["culprits"]] == [shas[2]]
    assert report["not_measured"] == [] and not report["footprint"]["used"] and report["footprint"]["fallback"]
    assert "the probe command runs sh, which is not Python" in report["footprint"]["note"]
    assert "every commit is a candidate" in capsys.readouterr().out


def test_a_python_probe_that_runs_a_script_of_its_worktree_measures_every_commit(tmp_path):
    repo = tmp_path / "repo"
    runner = "import subprocess, sys\nsys.exit(subprocess.run(['sh', 'bench.sh']).returncode)\n"
    shas = make_repo(repo, [
        {"run.py": runner, "bench.sh": SHELL_BENCH, "speed.txt": "1000\n", "docs/guide.md": "how to\n"},
        {"docs/guide.md": "how to, again\n"},
        {"speed.txt": "700\n"},
    ])
    hunt, report = _hunt(repo, tmp_path, shas, cmd=f"{sys.executable} run.py")
    assert [c["commit"] for c in report["culprits"]] == [shas[2]]
    assert [c.sha for c in hunt.commits] == shas and report["not_measured"] == []
    assert report["footprint"]["fallback"]
    assert "started sh, which is not Python, on bench.sh" in report["footprint"]["note"]
    assert "every commit is a candidate" in render_summary(report)


@pytest.mark.parametrize("flags, why", [({"footprint": False}, "off (--no-footprint)"),
                                        ({"setup": "true"}, "a setup step builds each candidate")])
def test_no_footprint_and_a_setup_step_measure_every_commit(tmp_path, flags, why):
    repo = tmp_path / "repo"
    shas = make_repo(repo, [FIRST, {"docs/guide.md": "how to, again\n"}, {"conf/bench.cfg": "factor = 0.8\n"}])
    hunt, report = _hunt(repo, tmp_path, shas, **flags)
    assert [c.sha for c in hunt.commits] == shas and report["not_measured"] == []
    assert why in report["footprint"]["note"] and not report["footprint"]["fallback"]
    assert "The probe's footprint" not in render_summary(report)


def _stored_footprints(tmp_path: Path) -> dict[str, dict]:
    """tree -> footprint JSON of every footprint the store keeps."""
    with Store(tmp_path / "store.sqlite", read_only=True) as store:
        return {tree: json.loads(data) for tree, data in store._conn.execute("SELECT tree, footprint FROM footprints")}


def test_a_hunt_rerun_over_a_footprint_that_could_not_be_read_probes_nothing(tmp_path):
    """GOOD's footprint could not be read, so the first hunt recorded no other (BAD's neither) and
    measured every commit; the same hunt again knows that from the store: it probes no commit to
    learn a footprint, and measures nothing."""
    repo = tmp_path / "repo"
    runner = "import subprocess, sys\nsys.exit(subprocess.run(['sh', 'bench.sh']).returncode)\n"
    shas = make_repo(repo, [
        {"run.py": runner, "bench.sh": SHELL_BENCH, "speed.txt": "1000\n", "docs/guide.md": "how to\n"},
        {"docs/guide.md": "how to, again\n"},
        {"speed.txt": "700\n"},
    ])
    first = _hunt(repo, tmp_path, shas, cmd=f"{sys.executable} run.py")[1]
    assert first["footprint"]["fallback"] and first["probes"] > 0
    history = History.open(repo)
    assert set(_stored_footprints(tmp_path)) == {history.tree_of(shas[0])}    # GOOD's: unreadable
    hunt, again = _hunt(repo, tmp_path, shas, cmd=f"{sys.executable} run.py")
    assert again["probes"] == 0 and again["from_store_only"]
    assert again["footprint"]["note"] == first["footprint"]["note"] and again["footprint"]["fallback"]
    assert [c.sha for c in hunt.commits] == shas and [c["commit"] for c in again["culprits"]] == [shas[2]]


def test_samples_stored_without_a_footprint_are_not_probed_again_to_learn_it(tmp_path):
    """A hunt that records no footprint (--no-footprint) stored every sample; the same hunt with the
    footprint finds GOOD's samples stored and its footprint not: one more probe of GOOD would
    learn it, a probe no search asks for, so every commit is a candidate and nothing is measured."""
    repo = tmp_path / "repo"
    shas = make_repo(repo, [FIRST, {"docs/guide.md": "how to, again\n"}, {"conf/bench.cfg": "factor = 0.8\n"},
                            {"README.md": "bench, described\n"}])
    first = _hunt(repo, tmp_path, shas, footprint=False)[1]
    assert first["probes"] > 0 and _stored_footprints(tmp_path) == {}
    hunt, again = _hunt(repo, tmp_path, shas)
    assert again["probes"] == 0 and again["from_store_only"]
    assert again["footprint"]["fallback"] and not again["footprint"]["used"]
    assert f"the samples stored of {shas[0][:10]} were taken without recording" in again["footprint"]["note"]
    assert [c.sha for c in hunt.commits] == shas and again["not_measured"] == []
    assert [c["commit"] for c in again["culprits"]] == [shas[2]]


def test_a_round_a_stop_ends_keeps_the_footprints_of_the_samples_it_stored(tmp_path):
    """A stop (Ctrl-C) during a round stores the samples that came back before it: the footprints
    their probes recorded are kept with them, so the hunt resumed knows them rather than finding
    samples without a footprint; a probe that was stopped keeps none."""
    from regressbisect.hunts.sampling import Request
    from regressbisect.samples import Arm, Candidate, ProbeOutcome, Sample

    repo = tmp_path / "repo"
    shas = make_repo(repo, [FIRST, {"conf/bench.cfg": "factor = 0.8\n"}])
    config = build_config({}, {"cmd": f"{sys.executable} bench.py", "tokens": 1000, "instrument": "off"})
    hunt = CommitHunt(History.open(repo), shas[0], shas[-1], config, store_path=tmp_path / "store.sqlite")
    footprints = hunt.footprints
    read = Footprint(files=frozenset({"bench.py"}))

    class Stopped:
        """A source whose round stores GOOD's sample, and is stopped while BAD's probe runs."""

        def __init__(self, store):
            self.store = store

        def key(self, candidate):
            return hunt.key_for(candidate)

        def draw_many(self, requests):
            for request in requests:
                footprints.recorded(footprints.trees[request.candidate.commit], read)
            good = requests[0].candidate
            self.store.add_outcome(self.key(good), good, ProbeOutcome(Sample(tok_s=1000.0), None, 0, 1.0),
                                   hunt_id=None, arm=Arm.MAIN)
            raise KeyboardInterrupt

    with Store(tmp_path / "store.sqlite") as store:
        with pytest.raises(KeyboardInterrupt):
            hunt._draw_checked(Stopped(store), [Request(Candidate(shas[0])), Request(Candidate(shas[1]))],
                               ["control arm", "control arm"])
        stored = store.footprints(footprints.config_key, footprints.env_fingerprint, footprints.trees.values())
    history = History.open(repo)
    assert stored == {history.tree_of(shas[0]): read.to_json()}


# -- the parts ---------------------------------------------------------------------------------

def _touches(footprint: Footprint, *changes: tuple[str, str, str]) -> bool:
    return footprint.touched_by([Change(status, path, kind) for status, path, kind in changes])


def test_what_touches_a_footprint():
    footprint = Footprint(files=frozenset({"bench.py", "conf/a.cfg", "vendor/lib/x.py"}),
                          probed=frozenset({"fast.py", "fast/__init__.py", "fast"}), dirs=frozenset({"plugins", ""}))
    assert _touches(footprint, ("M", "conf/a.cfg", "blob"))
    assert not _touches(footprint, ("M", "conf/b.cfg", "blob"), ("A", "conf/c.cfg", "blob"))
    assert _touches(footprint, ("A", "plugins/new.py", "blob"))                 # added to a listed directory
    assert _touches(footprint, ("D", "plugins/old.py", "blob"))                 # removed (a rename's half)
    assert not _touches(footprint, ("M", "plugins/old.py", "blob"))             # its listing stays
    assert _touches(footprint, ("A", "plugins/sub", "tree"), ("A", "plugins/sub/x.py", "blob"))
    assert not _touches(footprint, ("A", "plugins/sub/x.py", "blob"), ("M", "plugins/sub", "tree"))
    assert _touches(footprint, ("A", "README.md", "blob"))                      # the top was listed
    assert not _touches(footprint, ("M", "README.md", "blob"), ("M", "docs", "tree"), ("M", "docs/a.md", "blob"))
    assert _touches(footprint, ("A", "fast.py", "blob"))                        # where an import looked
    assert _touches(footprint, ("M", "vendor/lib", "gitlink"))                  # a submodule it read from
    assert not _touches(footprint, ("M", "vendor/other", "gitlink"))
    assert _touches(Footprint.unknown("not Python"), ("M", "docs/a.md", "blob"))
    assert Footprint.from_json(footprint.to_json()) == footprint
    assert Footprint.union([footprint, Footprint.unknown("why")]).unreadable == "why"


def test_changes_are_read_against_the_commit_before_in_the_range(tmp_path):
    repo = tmp_path / "repo"
    shas = make_repo(repo, [{"a.py": "1\n", "d/b.txt": "b\n"}, {"d/b.txt": None, "e/b.txt": "b\n"},
                            {"a.py": "2\n"}, {"x y.txt": "z\n"}])
    history = History.open(repo)
    changes = history.changes(history.first_parent_range(shas[0], shas[-1]))
    assert changes[shas[1]] == (Change("D", "d", "tree"), Change("D", "d/b.txt", "blob"),
                                Change("A", "e", "tree"), Change("A", "e/b.txt", "blob"))
    assert changes[shas[2]] == (Change("M", "a.py", "blob"),)
    assert changes[shas[3]] == (Change("A", "x y.txt", "blob"),)


@pytest.mark.parametrize("command, program", [
    (f"{sys.executable} bench.py --tokens {{tokens}}", None),
    ("OMP_NUM_THREADS=1 python3 -u bench.py", None),
    ("cd sub && python bench.py 2> err.log | tee out.log", None),
    ("timeout 600 python3.11 -m pkg.bench", None),
    ("bash bench.sh", "bash"),
    ("./bench", "./bench"),
    ("python prepare.py; make bench", "make"),
    ("python $(cat which.txt)", "a command substitution"),
])
def test_which_probe_commands_are_python(tmp_path, command, program):
    assert program_not_python(command, tmp_path) == program


def test_a_script_run_by_python_is_python(tmp_path):
    (tmp_path / "bench").write_text("#!/usr/bin/env python3\nprint(1)\n")
    (tmp_path / "bench.sh").write_text("#!/bin/sh\necho 1\n")
    assert program_not_python("./bench --fast", tmp_path) is None
    assert program_not_python("./bench.sh", tmp_path) == "./bench.sh"


def test_the_shim_records_what_a_process_reads_of_its_worktree(tmp_path):
    """Opened (and tried), listed by the program (not by the import system), imported (and tried),
    in a forked child too; nothing outside the worktree; a Python program it starts records itself."""
    worktree = tmp_path / "worktree"
    for rel, text in {"pkg/__init__.py": "", "pkg/mod.py": "X = 1\n", "conf.cfg": "x\n", "plugins/p.py": "",
                      "data/d.txt": "d\n", "probe.py": PROBE}.items():
        (worktree / rel).parent.mkdir(parents=True, exist_ok=True)
        (worktree / rel).write_text(text)
    (tmp_path / "outside.txt").write_text("o\n")
    isolation = Isolation(user_root=tmp_path / "checkout", footprint_for=lambda w: "tree")
    found: dict[str, Footprint] = {}
    isolation.on_footprint = lambda key, footprint: found.setdefault(key, footprint)
    imports = isolation.prepare(worktree)
    outcome = run_probe(ProbeSpec(command=f"{sys.executable} probe.py", tokens=8, timeout_s=60), worktree,
                        {**imports.env, "OUTSIDE": str(tmp_path / "outside.txt")})
    assert outcome.sample is not None, outcome.output_tail
    isolation.verify_round([imports])
    footprint = found["tree"]
    assert footprint.unreadable is None
    assert {"probe.py", "pkg/__init__.py", "pkg/mod.py", "conf.cfg", "missing.cfg", "data/d.txt"} <= footprint.files
    assert footprint.dirs == {"plugins"}
    assert {"optional.py", "optional/__init__.py", "pkg/maybe.py"} <= footprint.probed
    assert not any("outside" in f for f in footprint.files)


PROBE = """import multiprocessing, os, subprocess, sys
import pkg.mod
try:
    import optional
except ImportError:
    pass
try:
    import pkg.maybe
except ImportError:
    pass
open("conf.cfg").read()
open(os.environ["OUTSIDE"]).read()
try:
    open("missing.cfg")
except OSError:
    pass
sorted(os.listdir("plugins"))
open("written.txt", "w").close()


def child():
    open("data/d.txt").read()


if __name__ == "__main__":
    multiprocessing.set_start_method("fork")
    worker = multiprocessing.Process(target=child)
    worker.start()
    worker.join()
    subprocess.run([sys.executable, "-c", "open('conf.cfg').read()"], check=True)
    print("1000 tok/s")
"""


def test_a_record_without_a_footprint_or_none_at_all_is_unreadable(tmp_path):
    assert "not Python" in read_footprint([], tmp_path).unreadable
    assert "without the footprint's recorder" in read_footprint([None], tmp_path).unreadable
    overflow = {"opened": [], "listed": [], "probed": [], "modules": [], "spawned": [], "overflow": True}
    assert "more files" in read_footprint([overflow], tmp_path).unreadable
    isolated = {**overflow, "overflow": False,
                "spawned": [{"cwd": str(tmp_path), "recorded": True, "argv": [sys.executable, "-I", "x.py"]}]}
    assert "with -I" in read_footprint([isolated], tmp_path).unreadable
