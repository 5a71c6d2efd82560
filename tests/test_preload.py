"""Preload servers (probe/preload.py): a forked probe must be the probe a fresh process would be."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from regressbisect.config import HuntConfig, ProbeConfig
from regressbisect.errors import UserError
from regressbisect.probe.isolation import Isolation, IsolationError
from regressbisect.probe.preload import PreloadServers, parse_python_command
from regressbisect.probe.runner import ProbeSpec, run_probe
from regressbisect.testing.benchrepo import make_bench_repo
from tests.cli import run_cli
from regressbisect.testing.procs import DAEMONIZE, daemons, gone

PY = sys.executable

# A probe that reports what a Python program can see of how it was started.
SEEN = """
    import json, os, random, sys
    import {extra}
    main = sys.modules["__main__"]
    seen = {{"argv": sys.argv, "path": sys.path, "cwd": os.getcwd(), "name": __name__,
             "file": getattr(main, "__file__", None), "spec": getattr(getattr(main, "__spec__", None), "name", None),
             "tokens": os.environ["REGRESSBISECT_TOKENS"], "extra": os.environ.get("EXTRA"),
             "main_globals": sorted(k for k in globals() if not k.startswith("__")),
             "random": random.random(), "pgid_is_pid": os.getpgid(0) == os.getpid()}}
    print("seen " + json.dumps(seen))
    tokens = int(os.environ["REGRESSBISECT_TOKENS"])
    print("@regressbisect " + json.dumps({{"tokens": tokens, "seconds": 1.0, "tok_s": float(tokens)}}))
"""


def _worktree(tmp_path: Path, extra: str = "json") -> Path:
    root = tmp_path / "wt"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "__main__.py").write_text(textwrap.dedent(SEEN.format(extra=extra)))
    (root / "bench.py").write_text(textwrap.dedent(SEEN.format(extra=extra)))
    (root / "lib").mkdir()
    return root


def _seen(outcome) -> dict:
    line = next(l for l in outcome.output_tail.splitlines() if l.startswith("seen "))
    return json.loads(line[len("seen "):])


@pytest.mark.parametrize("command", [
    "python -m trainer --preset tiny --tokens 960",
    "OMP_NUM_THREADS=1 python3 -u bench.py --x 1",
    "python3.11 -X importtime script.py",
])
def test_plain_python_invocations_can_be_forked(command):
    assert parse_python_command(command) is not None


@pytest.mark.parametrize("command", [
    "torchrun --nproc-per-node 2 train.py",       # another program
    "python bench.py | tee log",                  # a pipeline
    "python bench.py > log",                      # a redirection
    "cd sub && python bench.py",                  # a list
    "python $SCRIPT",                             # an expansion
    "python -E bench.py",                         # a flag that changes start-up
    "python -",                                   # stdin
    "python",                                     # nothing to run
])
def test_anything_else_runs_as_it_is(command):
    assert parse_python_command(command) is None


@pytest.mark.parametrize("command", ["{py} -m pkg --flag a", "{py} bench.py --flag a"])
def test_a_forked_probe_sees_what_a_fresh_one_sees(tmp_path, command):
    worktree = _worktree(tmp_path)
    command = command.format(py=PY)
    env = {"EXTRA": "slot-0", "PYTHONPATH": str(worktree / "lib")}
    spec = ProbeSpec(command=command, tokens=1000, timeout_s=60)
    servers = PreloadServers("email.mime.text")
    try:
        forked = servers.run(spec, worktree, env, run_probe)
        assert servers.stats.forked == 1 and servers.stats.servers == 1, servers.stats
    finally:
        servers.close()
    fresh = run_probe(spec, worktree, extra_env=env)
    assert forked.sample is not None and forked.sample.tok_s == 1000.0
    seen_forked, seen_fresh = _seen(forked), _seen(fresh)
    assert seen_forked.pop("random") != seen_fresh.pop("random")
    assert seen_forked == seen_fresh
    assert seen_forked["pgid_is_pid"] and seen_forked["path"][1] == str(worktree / "lib")


def test_each_forked_probe_gets_its_own_budget_and_random_state(tmp_path):
    worktree = _worktree(tmp_path)
    servers = PreloadServers("json")
    try:
        seen = [_seen(servers.run(ProbeSpec(command=f"{PY} bench.py", tokens=t, timeout_s=60), worktree, {},
                                  run_probe)) for t in (100, 200)]
    finally:
        servers.close()
    assert [s["tokens"] for s in seen] == ["100", "200"]
    assert seen[0]["random"] != seen[1]["random"]


def test_what_the_server_preloaded_is_frozen_and_the_probes_own_garbage_is_still_collected(tmp_path):
    # gc.freeze before the fork (docs/cost.md): no collection in the probe, in its measured window
    # or in its interpreter's teardown, walks (and so copies) the server's heap page by page
    worktree = tmp_path / "wt"
    worktree.mkdir()
    (worktree / "bench.py").write_text(textwrap.dedent("""
        import gc, json
        class Node:
            pass
        for _ in range(100):   # cycles the probe itself leaves behind
            a, b = Node(), Node()
            a.other, b.other = b, a
        del a, b
        seen = {"frozen": gc.get_freeze_count(), "collected": gc.collect()}
        print("seen " + json.dumps(seen))
        print("@regressbisect " + json.dumps({"tokens": 10, "seconds": 1.0, "tok_s": 10.0}))
    """))
    spec = ProbeSpec(command=f"{PY} bench.py", tokens=10, timeout_s=60)
    servers = PreloadServers("email.mime.text")
    try:
        forked = servers.run(spec, worktree, {}, run_probe)
        assert servers.stats.forked == 1, servers.stats
    finally:
        servers.close()
    fresh = run_probe(spec, worktree)
    assert _seen(fresh)["frozen"] == 0
    assert _seen(forked)["frozen"] > 1000               # the interpreter's and email's objects
    assert _seen(forked)["collected"] >= 200            # the probe's 100 cycles, two nodes each


def test_skips_crashes_and_timeouts_of_a_forked_probe_read_as_for_a_fresh_one(tmp_path):
    worktree = tmp_path / "wt"
    worktree.mkdir()
    (worktree / "skip.py").write_text("import sys; sys.exit(125)\n")
    (worktree / "crash.py").write_text("raise RuntimeError('boom')\n")
    (worktree / "hang.py").write_text("import os, time\nopen('pid', 'w').write(str(os.getpid()))\ntime.sleep(60)\n")
    servers = PreloadServers("json")
    try:
        def run(script, timeout_s=60.0):
            return servers.run(ProbeSpec(command=f"{PY} {script}", tokens=10, timeout_s=timeout_s),
                               worktree, {}, run_probe)
        skipped, crashed = run("skip.py"), run("crash.py")
        started = time.monotonic()
        hung = run("hang.py", timeout_s=2.0)
        took = time.monotonic() - started
        assert servers.stats.forked == 3
    finally:
        servers.close()
    assert skipped.skip_reason == "exit 125 (probe asked to skip)"
    assert crashed.exit_code == 1 and crashed.skip_reason.startswith("exit 1: RuntimeError: boom")
    assert hung.skip_reason == "timeout after 2s" and took < 20
    assert gone(int((worktree / "pid").read_text()), wait_s=1.0)


def test_a_server_that_would_preload_the_project_refuses_and_the_probe_runs_fresh(tmp_path):
    worktree = _worktree(tmp_path)
    installed = tmp_path / "site"   # an installed copy of the project, importable by the server
    (installed / "pkg").mkdir(parents=True)
    (installed / "pkg" / "__init__.py").write_text("")
    servers = PreloadServers("pkg")   # the project's own package: never preloaded
    try:
        outcome = servers.run(ProbeSpec(command=f"{PY} bench.py", tokens=10, timeout_s=60), worktree,
                              {"PYTHONPATH": str(installed)}, run_probe)
    finally:
        servers.close()
    assert outcome.sample is not None
    assert servers.stats.forked == 0 and servers.stats.fresh == 1
    assert "imported the project's pkg" in servers.stats.notes[0]


def test_the_isolation_check_sees_what_a_forked_probe_imported(tmp_path):
    """The import recorder runs in forked children too: a probe that puts the user's checkout
    first is caught, exactly as a fresh one is."""
    checkout = tmp_path / "checkout"
    (checkout / "pkg").mkdir(parents=True)
    (checkout / "pkg" / "__init__.py").write_text("")
    worktree = _worktree(tmp_path)
    (worktree / "wrong.py").write_text(f"import sys\nsys.path.insert(0, {str(checkout)!r})\nimport pkg\n"
                                       "print('@regressbisect {\"tokens\": 1, \"seconds\": 1, \"tok_s\": 1}')\n")
    isolation = Isolation(user_root=checkout, other_worktrees=())
    servers = PreloadServers("json")
    try:
        for script, caught in (("bench.py", False), ("wrong.py", True)):
            imports = isolation.prepare(worktree)
            outcome = servers.run(ProbeSpec(command=f"{PY} {script}", tokens=10, timeout_s=60), worktree,
                                  imports.env, run_probe)
            assert outcome.sample is not None
            if caught:
                with pytest.raises(IsolationError, match="pkg"):
                    isolation.verify(imports)
            else:
                assert isolation.verify(imports)["__main__"] == str(worktree / "bench.py")
        assert servers.stats.forked == 2
    finally:
        servers.close()


def test_auto_forks_from_the_second_probe_once_the_first_imported_torch(tmp_path):
    pytest.importorskip("torch")
    worktree = _worktree(tmp_path, extra="torch")
    (worktree / "plain.py").write_text("print('@regressbisect {\"tokens\": 1, \"seconds\": 1, \"tok_s\": 5}')\n")
    isolation = Isolation(user_root=tmp_path / "checkout", other_worktrees=())
    servers = PreloadServers("auto")
    try:
        for script in ("bench.py", "bench.py", "bench.py"):
            imports = isolation.prepare(worktree)
            assert servers.run(ProbeSpec(command=f"{PY} {script}", tokens=10, timeout_s=120), worktree,
                               imports.env, run_probe).sample is not None
            isolation.verify(imports)
        assert (servers.stats.fresh, servers.stats.forked, servers.stats.modules) == (1, 2, ["torch"])
        # a probe that never imports torch is never forked: nothing is worth a server for it
        other = tmp_path / "other"
        other.mkdir()
        (other / "plain.py").write_text("print('@regressbisect {\"tokens\": 1, \"seconds\": 1, \"tok_s\": 5}')\n")
        for _ in range(2):
            imports = isolation.prepare(other)
            servers.run(ProbeSpec(command=f"{PY} plain.py", tokens=10, timeout_s=60), other, imports.env, run_probe)
        assert (servers.stats.fresh, servers.stats.servers) == (3, 1)
    finally:
        servers.close()


def test_what_the_first_probe_imported_serves_every_slot(tmp_path):
    """Learned once per hunt: the first probe of a second worktree (another slot, or a lane of
    --overlap) is forked at once, from that worktree's own server."""
    pytest.importorskip("torch")
    first = _worktree(tmp_path / "a", extra="torch")
    second = _worktree(tmp_path / "b", extra="torch")
    isolation = Isolation(user_root=tmp_path / "checkout", other_worktrees=())
    servers = PreloadServers("auto")
    try:
        for worktree in (first, second):
            imports = isolation.prepare(worktree)
            assert servers.run(ProbeSpec(command=f"{PY} bench.py", tokens=10, timeout_s=120), worktree,
                               imports.env, run_probe).sample is not None
            isolation.verify(imports)
        assert (servers.stats.fresh, servers.stats.forked, servers.stats.servers) == (1, 1, 1)
    finally:
        servers.close()


def test_servers_of_lanes_started_at_once_all_start(tmp_path):
    """Three lanes' first forked probes start their servers at the same moment (--overlap 3):
    each server must get a socket of its own, or a lane runs fresh for the rest of the hunt."""
    import threading

    worktrees = [_worktree(tmp_path / f"lane{i}", extra="email.mime.text") for i in range(3)]
    servers = PreloadServers("email.mime.text")
    outcomes: list = [None] * len(worktrees)
    barrier = threading.Barrier(len(worktrees))

    def lane(i: int) -> None:
        barrier.wait()
        outcomes[i] = servers.run(ProbeSpec(command=f"{PY} bench.py", tokens=10, timeout_s=60),
                                  worktrees[i], {}, run_probe)

    threads = [threading.Thread(target=lane, args=(i,)) for i in range(len(worktrees))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        servers.close()
    assert all(o is not None and o.sample is not None for o in outcomes)
    assert (servers.stats.servers, servers.stats.forked, servers.stats.fresh) == (3, 3, 0), servers.stats.notes


def _auto_runs(tmp_path: Path, worktree: Path, runs: int):
    """`python probe.py` run `runs` times with --preload auto and the import check, as a hunt runs
    it; (the servers, closed, and the last outcome)."""
    isolation = Isolation(user_root=tmp_path / "checkout", other_worktrees=())
    servers = PreloadServers("auto")
    try:
        for _ in range(runs):
            imports = isolation.prepare(worktree)
            outcome = servers.run(ProbeSpec(command=f"{PY} probe.py", tokens=10, timeout_s=120), worktree,
                                  imports.env, run_probe)
            isolation.verify(imports)
    finally:
        servers.close()
    return servers, outcome


def test_a_probe_that_sets_the_environment_before_importing_torch_is_not_forked(tmp_path):
    """A server's torch was imported before the program ran: a program that configures torch
    through the environment first would not get what it asked for."""
    pytest.importorskip("torch")
    worktree = tmp_path / "wt"
    worktree.mkdir()
    (worktree / "probe.py").write_text(
        "import os\nos.environ['TORCH_LOGS'] = '-all'\nimport torch\n"
        "print('@regressbisect {\"tokens\": 1, \"seconds\": 1, \"tok_s\": 5}')\n")
    servers, _ = _auto_runs(tmp_path, worktree, 2)
    assert (servers.stats.fresh, servers.stats.forked, servers.stats.servers) == (2, 0, 0)
    assert "torch not preloaded: the probe sets TORCH_LOGS before importing it" in servers.stats.notes[0]


def test_only_the_modules_imported_before_the_environment_changed_are_preloaded(tmp_path):
    pytest.importorskip("torch")
    worktree = tmp_path / "wt"
    worktree.mkdir()
    (worktree / "probe.py").write_text(
        "import os, sys\nimport torch\nos.environ['TORCHDYNAMO_VERBOSE'] = '0'\nimport torch._dynamo\n"
        "print('dynamo preloaded', 'torch._dynamo' in sys.modules and os.environ.get('TORCHDYNAMO_VERBOSE'))\n"
        "print('@regressbisect {\"tokens\": 1, \"seconds\": 1, \"tok_s\": 5}')\n")
    servers, outcome = _auto_runs(tmp_path, worktree, 2)
    assert outcome.sample is not None, outcome.output_tail
    assert (servers.stats.fresh, servers.stats.forked, servers.stats.modules) == (1, 1, ["torch"])
    assert servers.stats.notes == ["torch._dynamo not preloaded: the probe sets TORCHDYNAMO_VERBOSE before "
                                   "importing it, which a server's import would not see"]


def test_counters_are_counted_in_a_forked_probe(tmp_path):
    pytest.importorskip("torch")
    worktree = tmp_path / "wt"
    worktree.mkdir()
    (worktree / "probe.py").write_text(textwrap.dedent("""
        import os
        os.environ["REGRESSBISECT_LMHEAD_MIN_OUT"] = "3000"   # set by the program, as the demo does
        import torch
        from regressbisect.probe.protocol import report
        for _ in range(3):
            torch.nn.functional.linear(torch.randn(1, 4), torch.randn(2000, 4))    # not an lm_head
            torch.nn.functional.linear(torch.randn(1, 4), torch.randn(3000, 4))    # an lm_head
            torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1).step()
        report(tokens=10, seconds=1.0)
    """))
    servers = PreloadServers("torch")
    try:
        outcome = servers.run(ProbeSpec(command=f"{PY} probe.py", tokens=10, timeout_s=120, instrument=True),
                              worktree, {}, run_probe)
        assert servers.stats.forked == 1
    finally:
        servers.close()
    assert outcome.sample is not None, outcome.output_tail
    assert outcome.sample.counters["lm_head_calls"] == 1.0


def test_a_daemon_a_forked_probe_left_is_named_and_killed_when_it_ends(tmp_path):
    worktree = tmp_path / "wt"
    worktree.mkdir()
    pid_dir = tmp_path / "daemons"
    pid_dir.mkdir()
    (worktree / "daemon.py").write_text(DAEMONIZE + f"daemonize({str(pid_dir)!r})\nprint('10 tok/s')\n")
    servers = PreloadServers("json")
    try:
        outcomes = [servers.run(ProbeSpec(command=f"{PY} daemon.py", tokens=10, timeout_s=60), worktree, {},
                                run_probe) for _ in range(2)]
        assert servers.stats.forked == 2
        first, second = daemons(pid_dir)
        assert gone(first, wait_s=1.0) and gone(second, wait_s=1.0), "a forked probe's daemon outlived it"
    finally:
        servers.close()
    assert [o.sample.tok_s for o in outcomes] == [10.0, 10.0]
    assert sorted(int(o.leftovers[0].split()[0]) for o in outcomes) == [first, second]


def test_servers_end_with_the_process_that_started_them(tmp_path):
    worktree = _worktree(tmp_path)
    driver = tmp_path / "driver.py"
    driver.write_text(textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from regressbisect.probe.preload import PreloadServers
        from regressbisect.probe.runner import ProbeSpec, run_probe
        servers = PreloadServers("json")
        servers.run(ProbeSpec(command="{PY} bench.py", tokens=10, timeout_s=60), Path({str(worktree)!r}), {{}}, run_probe)
        print(*[s.process.pid for s in servers._servers.values()], flush=True)
        time.sleep(120)
    """))
    driver_process = subprocess.Popen([PY, str(driver)], stdout=subprocess.PIPE, text=True)
    try:
        server_pid = int(driver_process.stdout.readline())
    finally:
        driver_process.send_signal(signal.SIGKILL)   # kill -9: no cleanup code runs
        driver_process.wait()
    assert gone(server_pid), "the preload server outlived the hunt's process"



def test_preload_takes_auto_off_or_module_names():
    probe = ProbeConfig(cmd="python bench.py")
    assert HuntConfig(probe=probe).preload == "auto"
    assert HuntConfig(probe=probe, preload="torch,numpy.linalg").preload == "torch,numpy.linalg"
    with pytest.raises(UserError, match="--preload"):
        HuntConfig(probe=probe, preload="torch; rm -rf")


def test_a_server_that_was_killed_is_started_again(tmp_path):
    worktree = _worktree(tmp_path)
    spec = ProbeSpec(command=f"{PY} bench.py", tokens=10, timeout_s=60)
    servers = PreloadServers("json")
    try:
        assert servers.run(spec, worktree, {}, run_probe).sample is not None
        (server,) = servers._servers.values()
        os.kill(server.process.pid, signal.SIGKILL)
        server.process.wait()
        outcomes = [servers.run(spec, worktree, {}, run_probe) for _ in range(2)]
    finally:
        servers.close()
    assert all(o.sample is not None for o in outcomes)
    assert (servers.stats.forked, servers.stats.fresh, servers.stats.servers) == (3, 0, 2)


def test_a_hunt_forks_its_probes_and_finds_the_step(tmp_path):
    """The CLI end to end with --preload: every probe forked, the culprit found, the import check
    done on forked probes, the report saying so."""
    speeds = [1000.0] * 4 + [900.0] * 4          # culprit: index 4
    shas = make_bench_repo(tmp_path / "repo", speeds)
    out = tmp_path / "hunt.json"
    code = run_cli(["run", "-C", str(tmp_path / "repo"), "--cmd", f"{PY} bench.py", "--tokens", "1000",
                    "--env", f"BENCH_STATE={tmp_path / 'state'}", "--env", "BENCH_NOISE=0.005",   # few probes
                    "--instrument", "off", "--preload", "json",
                    "--quiet", "--json", str(out), shas[0], shas[-1]])
    report = json.loads(out.read_text())
    assert code == 0 and [c["commit"] for c in report["culprits"]] == [shas[4]]
    preload = report["measurement"]["preload"]
    assert preload["mode"] == "json" and preload["servers"] == 1
    assert preload["probes_forked"] == report["probes"] and preload["probes_fresh"] == 0
    assert report["isolation"]["probes_checked"] == report["probes"]
    assert report["isolation"]["imported_from"]["__main__"] == "bench.py"


@pytest.fixture
def short_tmp():
    """A temporary directory of a short path: a socket's path has at most 107 bytes, and pytest's
    tmp_path with a long test name and the preload folder in it is longer."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="rb-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _hunt_in_a_process(tmp_path: Path, shas: list[str], state: Path, tmp: Path) -> subprocess.Popen:
    """The CLI's hunt as its own process (TMPDIR `tmp`), its first probe forked and asleep for a minute."""
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.Popen(
        [PY, "-m", "regressbisect", "run", "-C", str(tmp_path / "repo"), "--cmd", f"{PY} bench.py",
         "--tokens", "1000", "--env", f"BENCH_STATE={state}", "--env", "BENCH_SLEEP=60", "--preload", "json",
         "--instrument", "off", "--quiet", shas[0], shas[-1]],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _forked_probe(state: Path, wait_s: float = 60.0) -> tuple[int, int, Path]:
    """(probe, server, the server's folder) once a probe forked from a preload server runs
    (bench.py's marker file names the probe)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        for marker in state.glob("n-*") if state.exists() else []:
            probe = int(marker.name.split("-")[2])
            try:
                server = int(Path(f"/proc/{probe}/stat").read_text().rsplit(")", 1)[1].split()[1])
                words = Path(f"/proc/{server}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(w.endswith(b"preload_server.py") for w in words):   # SCRIPT SOCKET PRELOAD PROJECT
                return probe, server, Path(words[-4].decode()).parent
        time.sleep(0.05)
    raise AssertionError("no probe was forked")


def test_a_hunt_killed_by_sigkill_takes_its_preload_server_probe_and_folder_with_it(tmp_path, short_tmp):
    shas = make_bench_repo(tmp_path / "repo", [1000.0] * 2 + [900.0] * 2)
    state = tmp_path / "state"
    hunt = _hunt_in_a_process(tmp_path, shas, state, short_tmp)
    try:
        probe, server, folder = _forked_probe(state)
        assert folder.parent == short_tmp
        assert any(folder.glob("*.sock")) and any(folder.glob("*.log"))
    finally:
        hunt.send_signal(signal.SIGKILL)   # kill -9: no cleanup code of the hunt runs
        hunt.wait()
    assert gone(server, wait_s=2.0), "the preload server outlived the hunt's process"
    assert gone(probe, wait_s=2.0), "the forked probe of a dead hunt ran on"
    deadline = time.monotonic() + 2.0
    while folder.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not folder.exists(), sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("then", ["clean", "the hunt again"])
def test_the_folder_of_a_server_killed_with_its_hunt_goes_at_the_next_hunt_or_clean_and_a_live_ones_stays(
        tmp_path, short_tmp, monkeypatch, fake_probes, capsys, then):
    import tempfile

    from regressbisect.probe.preload import FOLDER_PREFIX, _owner

    shas = make_bench_repo(tmp_path / "repo", [1000.0] * 2 + [900.0] * 2)
    state = tmp_path / "state"
    hunt = _hunt_in_a_process(tmp_path, shas, state, short_tmp)
    try:
        probe, server, folder = _forked_probe(state)
        # both at once (the hunt stopped first, so that it starts no other server): nothing is
        # left to remove the folder
        hunt.send_signal(signal.SIGSTOP)
        os.kill(server, signal.SIGKILL)
        assert gone(server)
    finally:
        hunt.send_signal(signal.SIGKILL)
        hunt.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(probe, signal.SIGKILL)   # orphaned with its server
    assert folder.exists()
    live = short_tmp / f"{FOLDER_PREFIX}{_owner(os.getpid())}-running"   # this process's: running
    live.mkdir()
    foreign = short_tmp / f"{FOLDER_PREFIX}unknown"   # no owner recorded: never removed
    foreign.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(short_tmp))
    if then == "clean":
        assert run_cli(["clean", "-C", str(tmp_path / "repo")]) == 0
        assert "removed 1 preload folder(s)" in capsys.readouterr().out
    else:
        assert run_cli(["run", "-C", str(tmp_path / "repo"), "--cmd", f"{PY} bench.py", "--tokens", "1000",
                        "--env", f"BENCH_STATE={state}", "--instrument", "off", "--quiet",
                        shas[0], shas[-1]]) == 0, capsys.readouterr().err
    assert not folder.exists()
    assert live.exists() and foreign.exists()
