"""What a probe reads and writes outside its worktree, as the shim records it (one record per
process, probe/isolation.py): the modules it imports from there are in the sample key
(docs/design.md, "Contracts"), and one file that probes running side by side both write is named
in a warning. Real probes: the shim is what is tested."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.cli import run_cli
from regressbisect.probe.isolation import Isolation, ProbeImports
from regressbisect.probe.runner import ProbeSpec, run_probe
from regressbisect.testing.gitrepo import make_repo


def _outside_bench(folder: Path, speed: float) -> Path:
    """A bench script outside any repository that imports a helper module beside it."""
    folder.mkdir(exist_ok=True)
    (folder / "helper.py").write_text(f"SPEED = {speed}\n")
    (folder / "bench.py").write_text("import helper\nprint(f'{helper.SPEED} tok/s')\n")
    return folder / "bench.py"


def test_a_helper_module_outside_the_repository_is_in_the_sample_key(tmp_path):
    bench = _outside_bench(tmp_path / "outside", 1000.0)
    repo = tmp_path / "repo"
    shas = make_repo(repo, [{"a.txt": "1\n"}, {"a.txt": "2\n"}])

    def hunt(n: int) -> dict:
        report = tmp_path / f"hunt{n}.json"
        code = run_cli(["run", "-C", str(repo), "--cmd", f"{sys.executable} {bench}", "--instrument", "off",
                        "--quiet", "--json", str(report), shas[0], shas[-1]])
        assert code == 2   # no regression: every run prints the helper's speed
        return json.loads(report.read_text())

    first = hunt(1)
    assert first["probes"] > 0 and first["endpoints"]["good"]["median_tok_s"] == 1000.0
    again = hunt(2)                       # nothing changed: the first hunt's samples serve it
    assert again["from_store_only"] and again["probes"] == 0
    (bench.parent / "helper.py").write_text("SPEED = 500.0\n")
    changed = hunt(3)                     # the helper changed: none of them may
    assert changed["probes"] > 0 and not changed["from_store_only"]
    assert changed["endpoints"]["good"]["median_tok_s"] == 500.0
    assert changed["endpoints"]["good"]["n"] == changed["endpoints"]["bad"]["n"] <= changed["probes"]
    assert hunt(4)["from_store_only"]      # and the changed helper's samples serve the next one


def _run(isolation: Isolation, worktree: Path, script: str) -> ProbeImports:
    """`script` run as a probe in `worktree` with the shim's recorder; its record read back."""
    worktree.mkdir(parents=True, exist_ok=True)
    (worktree / "probe.py").write_text(script)
    imports = isolation.prepare(worktree)
    outcome = run_probe(ProbeSpec(command=f"{sys.executable} probe.py", tokens=8, timeout_s=60), worktree,
                        imports.env)
    assert outcome.sample is not None, outcome.skip_reason + outcome.output_tail
    return imports


def test_the_record_names_the_modules_imported_from_outside_the_worktree_only(tmp_path):
    lib = tmp_path / "lib"
    (lib / "pkg").mkdir(parents=True)
    (lib / "helper.py").write_text("VALUE = 1\n")
    (lib / "pkg" / "__init__.py").write_text("")
    (lib / "pkg" / "deep.py").write_text("")
    (lib / "kernels").mkdir()
    (lib / "kernels" / "c2kernel.py").write_text("")   # loaded by its path, as inductor loads its kernels
    worktree = tmp_path / "worktree"
    (worktree / "local.py").parent.mkdir(parents=True)
    (worktree / "local.py").write_text("")
    script = f"""import importlib.util, json, sys  # json: the standard library's
sys.path.insert(0, {str(lib)!r})
import helper, pkg.deep, local, regressbisect
spec = importlib.util.spec_from_file_location("c2kernel", {str(lib / "kernels" / "c2kernel.py")!r})
spec.loader.exec_module(importlib.util.module_from_spec(spec))
print("1000 tok/s")
"""
    isolation = Isolation(user_root=tmp_path / "checkout", other_worktrees=())
    imports = _run(isolation, worktree, script)
    isolation.verify_round([imports])
    assert imports.outside.read == {str(lib / "helper.py"), str(lib / "pkg" / "__init__.py"),
                                    str(lib / "pkg" / "deep.py")}
    assert imports.outside.written == frozenset()   # probes one at a time: writes are not watched


WRITER = """import os, tempfile
for path in [{shared!r}, "scratch.txt", os.devnull, {lock!r}]:
    with open(path, "w") as f:
        f.write(str(os.getpid()))
with tempfile.NamedTemporaryFile("w") as f:   # a name of its own
    f.write("x")
print("1000 tok/s")
"""


def test_a_file_two_probes_side_by_side_both_write_is_named_once(tmp_path, capsys):
    shared, lock = tmp_path / "scratch.txt", tmp_path / "cache.lock"
    script = WRITER.format(shared=str(shared), lock=str(lock))
    isolation = Isolation(user_root=tmp_path / "checkout", other_worktrees=(), record_writes=True)
    rounds = [[_run(isolation, tmp_path / f"slot{slot}", script) for slot in (0, 1)] for _ in range(2)]
    for probes in rounds:
        isolation.verify_round(probes)
    # not its worktree's file, /dev/null, a lock, a temporary file
    assert rounds[0][0].outside.written == {str(shared)}
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, warnings
    assert f"both wrote {shared}, outside their worktrees" in warnings[0]
    assert "give each probe its own path" in warnings[0] and "--slots 1" in warnings[0]


def test_one_probe_writing_a_file_outside_its_worktree_is_no_warning(tmp_path, capsys):
    script = WRITER.format(shared=str(tmp_path / "scratch.txt"), lock=str(tmp_path / "x.lock"))
    isolation = Isolation(user_root=tmp_path / "checkout", other_worktrees=(), record_writes=True)
    for _ in range(2):   # one after the other, each alone in its round
        isolation.verify_round([_run(isolation, tmp_path / "slot0", script)])
    assert "warning" not in capsys.readouterr().err


def test_a_hunt_with_slots_names_the_scratch_file_its_probes_share(tmp_path, capsys):
    scratch = tmp_path / "scratch.txt"
    probe = f"""import os, time
with open({str(scratch)!r}, "w") as f:
    f.write(str(os.getpid()))
time.sleep(0.2)
print(("1000" if open({str(scratch)!r}).read() == str(os.getpid()) else "700") + " tok/s")
"""
    repo = tmp_path / "repo"
    shas = make_repo(repo, [{"probe.py": probe, "a.txt": "1\n"}, {"a.txt": "2\n"}, {"a.txt": "3\n"}])
    code = run_cli(["run", "-C", str(repo), "--cmd", f"{sys.executable} probe.py", "--instrument", "off",
                    "--slots", "2", "--max-samples", "4", "--quiet", shas[0], shas[-1]])
    assert code in (0, 2, 5, 6)   # whatever it concluded from measurements that disturb each other
    warnings = [line for line in capsys.readouterr().err.splitlines() if "both wrote" in line]
    assert len(warnings) == 1 and str(scratch) in warnings[0], warnings


def test_a_store_an_older_version_wrote_names_no_imported_files_until_it_is_opened_to_write(tmp_path):
    import sqlite3

    from regressbisect.store import Store

    path = tmp_path / "store.sqlite"
    Store(path).close()
    with sqlite3.connect(path) as raw:
        raw.execute("DROP TABLE outside_imports")
    with Store(path, read_only=True) as store:   # a hunt starting reads it so, before it opens it to write
        assert store.outside_imports("key") == []
    with Store(path) as store:
        store.add_outside_imports("key", ["/home/me/lib/helper.py"])
        assert store.outside_imports("key") == ["/home/me/lib/helper.py"]
