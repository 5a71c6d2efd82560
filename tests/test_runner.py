"""The probe runner, with real subprocesses: exit codes, timeouts, process-group kills, env."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from regressbisect.machine.fingerprint import environment_fingerprint
from regressbisect.probe.runner import (NO_METRIC_REASON, SHIM_DIR, ProbeSpec,
                                        run_probe, run_probe_all)
from regressbisect.testing.procs import DAEMONIZE, daemons, gone

PY = sys.executable


def _spec(command: str, **kwargs) -> ProbeSpec:
    kwargs.setdefault("tokens", 1000)
    kwargs.setdefault("timeout_s", 30)
    return ProbeSpec(command=command, **kwargs)


def _script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return f"{PY} {path}"


def _read_pid(path: Path, wait_s: float = 5.0) -> int:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.02)
    raise AssertionError(f"probe never wrote {path}")


def test_exit_0_with_protocol_line_is_measured(tmp_path):
    command = _script(tmp_path, "probe.py", """
        import os, sys
        from regressbisect.probe.protocol import report
        print("warming up"); print("a warning", file=sys.stderr)
        report(tokens=int(os.environ["REGRESSBISECT_TOKENS"]), seconds=0.5, iters=[{"ms": 5}])
        report(tokens=2000, seconds=0.5)
    """)
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    outcome, samples = run_probe_all(_spec(command, env=env), tmp_path)
    assert not outcome.skipped and outcome.exit_code == 0
    assert outcome.sample == samples[0]
    assert [s.tok_s for s in samples] == [2000.0, 4000.0]  # both measured runs, in order
    assert samples[0].iters == ({"ms": 5},)
    assert "warming up" in outcome.output_tail and "a warning" in outcome.output_tail
    assert outcome.wall_seconds > 0


def test_tokens_substitution_env_and_cwd(tmp_path):
    spec = _spec('echo "arg={tokens} env=$REGRESSBISECT_TOKENS flag=$REGRESSBISECT '
                 'unbuf=$PYTHONUNBUFFERED a=$A b=$B pwd=$(pwd)"; echo "{tokens} tok/s"',
                 tokens=4096, env={"A": "spec", "B": "spec"})
    outcome = run_probe(spec, tmp_path, extra_env={"B": "slot"})
    assert outcome.sample.tok_s == 4096
    assert (f"arg=4096 env=4096 flag=1 unbuf=1 a=spec b=slot pwd={tmp_path.resolve()}"
            in outcome.output_tail)


def test_exit_125_is_a_skip_requested_by_the_probe(tmp_path):
    outcome = run_probe(_spec("echo '500 tok/s'; exit 125"), tmp_path)
    assert outcome.skipped and outcome.exit_code == 125
    assert outcome.skip_reason == "exit 125 (probe asked to skip)"


def test_exit_1_keeps_the_last_stderr_line(tmp_path):
    command = f"{PY} -c \"print('1000 tok/s'); raise RuntimeError('CUDA error: device-side assert')\""
    outcome = run_probe(_spec(command), tmp_path)
    assert outcome.skipped and outcome.exit_code == 1  # a crash is never read as a measurement
    assert outcome.skip_reason == "exit 1: RuntimeError: CUDA error: device-side assert"
    assert "Traceback" in outcome.output_tail


def test_exit_127_is_command_not_found(tmp_path):
    outcome = run_probe(_spec("no-such-trainer --steps {tokens}"), tmp_path)
    assert outcome.exit_code == 127
    assert outcome.skip_reason == "command not found: no-such-trainer"


def test_killed_by_signal_is_a_skip_not_slow(tmp_path):
    outcome = run_probe(_spec(f"{PY} -c \"import os; print('1 tok/s', flush=True); "
                              f"os.kill(os.getpid(), 9)\""), tmp_path)
    assert outcome.skipped
    assert outcome.skip_reason == "killed by signal 9 (out of memory?)"


def test_no_metric_line_and_malformed_line_are_skips(tmp_path):
    outcome = run_probe(_spec("echo 'loss 2.3'"), tmp_path)
    assert outcome.skip_reason == NO_METRIC_REASON and outcome.exit_code == 0
    outcome = run_probe(_spec("echo '@regressbisect {broken'"), tmp_path)
    assert outcome.skipped and "malformed metrics line" in outcome.skip_reason
    outcome = run_probe(_spec("echo '77 tok/s'", metric_regex=None), tmp_path)
    assert outcome.skip_reason == NO_METRIC_REASON


def test_timeout_kills_the_whole_process_group(tmp_path):
    # The probe starts a child shell that ignores SIGTERM and leaves a sleeping grandchild:
    # only SIGKILL to the group after the grace period gets rid of it.
    pid_file = tmp_path / "grandchild.pid"
    command = _script(tmp_path, "hang.py", f"""
        import subprocess, time
        subprocess.Popen(["bash", "-c", "trap '' TERM; sleep 300 & echo $! > {pid_file}; wait"])
        time.sleep(300)
    """)
    outcome = run_probe(_spec(command, timeout_s=1.0), tmp_path, kill_grace_s=0.5)
    assert outcome.skipped and outcome.skip_reason == "timeout after 1s"
    grandchild = _read_pid(pid_file)
    assert gone(grandchild), "the grandchild survived the timeout"


def test_stragglers_are_killed_after_a_normal_exit(tmp_path):
    pid_file = tmp_path / "straggler.pid"
    outcome = run_probe(_spec(f"sleep 300 & echo $! > {pid_file}; echo '10 tok/s'"), tmp_path)
    assert outcome.sample.tok_s == 10
    assert gone(_read_pid(pid_file))


def test_a_process_left_behind_is_described_with_the_end_of_its_command_line():
    """A long interpreter path and a long directory filled the description's 120 characters, and
    the script's name was cut off (a leftover read '28745 /root/.pyenv/.../pytest-226/popen-gw1/test_a_daemon_the_probe_left_i...')."""
    from regressbisect.probe.reaper import DESCRIBE_CHARS, describe
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "/" + "d" * 150 + "/worker.py"])
    try:
        deadline = time.monotonic() + 5
        while not Path(f"/proc/{process.pid}/cmdline").read_bytes() and time.monotonic() < deadline:
            time.sleep(0.01)      # right after exec the kernel may show no command line yet
        line = describe(process.pid)
    finally:
        process.kill()
        process.wait()
    assert line.startswith(f"{process.pid} ") and line.endswith("/worker.py") and len(line) == DESCRIBE_CHARS


def test_a_daemon_the_probe_left_is_named_and_killed_when_it_ends(tmp_path):
    # fork + setsid + fork: the daemon is in no process group of the probe's, and its parent is gone
    pid_dir = tmp_path / "daemons"
    pid_dir.mkdir()
    command = _script(tmp_path, "daemon.py", DAEMONIZE + f"""
daemonize({str(pid_dir)!r})
print("10 tok/s")
""")
    outcome = run_probe(_spec(command), tmp_path)
    assert outcome.sample.tok_s == 10   # its own daemon ran beside it, as its workers would
    (daemon,) = daemons(pid_dir)
    assert gone(daemon, wait_s=1.0), "the probe's daemon outlived it"
    assert [left.split()[0] for left in outcome.leftovers] == [str(daemon)]
    assert "daemon.py" in outcome.leftovers[0]


def test_a_daemon_of_a_timed_out_probe_is_killed(tmp_path):
    pid_dir = tmp_path / "daemons"
    pid_dir.mkdir()
    command = _script(tmp_path, "daemon.py", DAEMONIZE + f"""
daemonize({str(pid_dir)!r})
time.sleep(300)
""")
    outcome = run_probe(_spec(command, timeout_s=1.0), tmp_path, kill_grace_s=0.5)
    assert outcome.skip_reason == "timeout after 1s"
    assert all(gone(pid, wait_s=1.0) for pid in daemons(pid_dir))
    assert len(outcome.leftovers) == 1


def test_keyboard_interrupt_kills_the_probe_and_is_reraised(tmp_path):
    pid_file = tmp_path / "child.pid"

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_probe(_spec(f"sleep 300 & echo $! > {pid_file}; wait", timeout_s=60),
                      tmp_path, kill_grace_s=0.5)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert gone(_read_pid(pid_file))


def test_instrument_puts_the_shim_first_on_pythonpath(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/user/path")
    monkeypatch.setenv("REGRESSBISECT_INSTRUMENT", "1")  # must not leak into a plain probe
    command = 'echo "pp=$PYTHONPATH instr=${REGRESSBISECT_INSTRUMENT:-unset}"; echo "5 tok/s"'
    plain = run_probe(_spec(command), tmp_path)
    assert "pp=/user/path instr=unset" in plain.output_tail
    assert not plain.sample.instrumented
    instrumented = run_probe(_spec(command, instrument=True), tmp_path)
    assert f"pp={SHIM_DIR}{os.pathsep}/user/path instr=1" in instrumented.output_tail
    assert SHIM_DIR.name == "shim" and SHIM_DIR.parent.name == "probe"
    assert instrumented.sample.instrumented


def test_probe_spec_validates():
    with pytest.raises(ValueError):
        ProbeSpec(command="  ", tokens=1, timeout_s=1)
    with pytest.raises(ValueError):
        ProbeSpec(command="x", tokens=0, timeout_s=1)
    with pytest.raises(ValueError):
        ProbeSpec(command="x", tokens=1, timeout_s=0)
    # braces in the command are not format fields
    assert _spec("echo ${HOME} {tokens} {}", tokens=7).render_command() == "echo ${HOME} 7 {}"


def test_environment_fingerprint_is_stable_and_sees_visible_devices(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    first, facts = environment_fingerprint()
    assert environment_fingerprint()[0] == first
    assert facts["python"].count(".") == 2 and facts["cpu"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    two, facts2 = environment_fingerprint()
    assert facts2["cuda_visible_devices"] == 2 and two != first


def test_runner_imports_neither_torch_nor_pandas():
    code = ("import sys, regressbisect.probe.runner, regressbisect.machine.fingerprint as f; f.environment_fingerprint(); "
            "bad = [m for m in ('torch', 'pandas', 'numpy') if m in sys.modules]; "
            "sys.exit(str(bad) if bad else 0)")
    result = subprocess.run([PY, "-c", code], capture_output=True, text=True,
                            cwd=Path(__file__).resolve().parents[1])
    assert result.returncode == 0, result.stderr


def test_metrics_and_counters_are_read_from_both_streams(tmp_path):
    # `logging` writes to stderr; the counters shim may too. stdout's regex match is preferred.
    logged = run_probe(_spec("echo 'INFO step 5 | 2,500 tok/s' >&2; echo 'loss 1.0'"), tmp_path)
    assert logged.sample.tok_s == 2500
    both = run_probe(_spec("echo '300 tok/s' >&2; echo '100 tok/s'"), tmp_path)
    assert both.sample.tok_s == 100
    counters = ('@regressbisect-counters {"rank": 0, "pid": 1, "iters": [{"host_syncs": 4}]}')
    line = '@regressbisect {"tokens": 10, "seconds": 1}'
    outcome = run_probe(_spec(f"echo '{counters}' >&2; echo '{line}'", instrument=True), tmp_path)
    assert outcome.sample.tok_s == 10 and outcome.sample.counters == {"host_syncs": 4.0}


def test_after_a_stopped_hunt_the_process_may_run_probes_again(tmp_path):
    """A stop refuses every probe while its hunt unwinds (ProbeCancelled), and only then: the
    same process (the demo runs `run`, then `hunks`; a test suite runs many hunts) probes again."""
    from regressbisect.probe.interrupts import INTERRUPTS, ProbeCancelled

    probe = _spec(f'{PY} -c "print(\'@regressbisect {{\\"tokens\\": 1, \\"seconds\\": 1}}\')"')
    with pytest.raises(KeyboardInterrupt):
        with INTERRUPTS.hunt():
            INTERRUPTS.stop()
            with pytest.raises(ProbeCancelled):
                run_probe(probe, tmp_path)
            raise KeyboardInterrupt
    assert run_probe(probe, tmp_path).sample is not None
