"""Machine sanity check: assess() against fake histories, run_check() for real on this CPU."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from regressbisect.machine import doctor
from regressbisect.machine.doctor import Health, HealthStatus, MachineCheck, assess, check_to_json

REPO = Path(__file__).resolve().parents[1]
DEVICE = "cuda: NVIDIA H200"


def machine(matmul: float = 530.0, copy: float = 3900.0, others: int = 0,
            device: str = DEVICE, **raw) -> MachineCheck:
    return MachineCheck(device=device, matmul_tflops=matmul, copy_gbps=copy,
                        other_processes=others, clocks={}, raw=dict(raw))


def history(n: int = 12) -> list[MachineCheck]:
    # Spread around 530 TFLOP/s and 3900 GB/s: medians 530 and 3900.
    return [machine(530 + d, 3900 + 10 * d) for d in range(-(n // 2), n - n // 2)]


def test_thirty_percent_slower_matmul_is_slow_and_named():
    health = assess(machine(matmul=0.7 * 530), history())
    assert health.status == "slow"
    slow_lines = [r for r in health.reasons if "below" in r]
    assert len(slow_lines) == 1
    assert slow_lines[0].startswith("matmul 371 TFLOP/s is 30% below this machine's median")
    assert "(12 checks)" in slow_lines[0]


def test_slow_copy_bandwidth_is_slow_and_named():
    health = assess(machine(copy=2000), history())
    assert health.status == "slow"
    assert any(r.startswith("copy 2000 GB/s is 49% below") for r in health.reasons)


def test_within_tolerance_is_ok():
    health = assess(machine(matmul=530 * 0.9, copy=3900 * 1.05), history())
    assert health == Health("ok", health.reasons)
    assert not any("below" in r for r in health.reasons)


def test_tolerance_is_respected():
    check = machine(matmul=530 * 0.9)
    assert assess(check, history(), tolerance=0.15).status == "ok"
    assert assess(check, history(), tolerance=0.05).status == "slow"


def test_empty_history_or_other_device_is_no_history():
    assert assess(machine(), []).status == "no-history"
    other_gpu = [machine(device="cuda: NVIDIA A100") for _ in range(5)]
    health = assess(machine(matmul=100), other_gpu)
    assert health.status == "no-history"
    assert "no earlier checks" in health.reasons[0]


def test_other_processes_make_it_busy_and_are_listed():
    check = machine(matmul=300, others=2, processes=[{"pid": 4242, "name": "python"},
                                                     {"pid": 4343, "name": "trainer"}])
    health = assess(check, history())
    assert health.status == "busy"
    assert "2 other process(es) on the GPU: 4242 python, 4343 trainer" in health.reasons
    assert any("matmul" in r and "below" in r for r in health.reasons)  # the effect is still shown
    assert assess(check, []).status == "busy"


def test_history_may_be_stored_dicts():
    stored = [json.loads(json.dumps(check_to_json(c))) for c in history()]
    assert assess(machine(matmul=200), stored).status == "slow"
    assert MachineCheck.from_json(stored[0]) == history()[0]


def test_throttled_clocks_are_reported_but_idle_bit_is_not():
    throttled = MachineCheck(DEVICE, 530, 3900, 0, {"throttle_reasons_active": "0x0000000000000004"}, {})
    idle = MachineCheck(DEVICE, 530, 3900, 0, {"throttle_reasons_active": "0x0000000000000001"}, {})
    assert any("throttled (reasons 0x4)" in r for r in assess(throttled, history()).reasons)
    assert not any("throttled" in r for r in assess(idle, history()).reasons)


def test_run_check_measures_this_cpu_without_importing_torch_in_the_parent():
    # A fresh interpreter: this test process may have torch loaded by other tests already.
    code = ("import json, sys; from regressbisect.machine.doctor import run_check; c = run_check(); "
            "assert 'torch' not in sys.modules, 'parent imported torch'; print(json.dumps(c.to_json()))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, done.stderr
    check = MachineCheck.from_json(json.loads(done.stdout.strip().splitlines()[-1]))
    assert check.device.startswith("cpu: ")
    for value in (check.matmul_tflops, check.copy_gbps):
        assert math.isfinite(value) and value > 0
    assert check.other_processes >= 0
    assert len(check.raw["matmul"]["block_tflops"]) == doctor._BLOCKS
    assert all(r > 0 for r in check.raw["copy"]["block_gbps"])
    assert {"torch", "loadavg", "processes"} <= set(check.raw)
    if Path("/proc/cpuinfo").exists():
        assert check.clocks.get("mhz_median", 0) > 0


def test_doctor_cli_rejects_unknown_flags():
    done = subprocess.run([sys.executable, "-m", "regressbisect.machine.doctor", "--bogus"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--bogus" in done.stderr


@pytest.mark.parametrize("status", ["ok", "slow", "busy", "no-history"])
def test_health_serialises(status):
    assert Health(status, ("a",)).to_json() == {"status": status, "reasons": ["a"]}
    member = Health(HealthStatus(status), ("a",))     # what assess gives: written as its word
    assert json.dumps(member.to_json()) == json.dumps({"status": status, "reasons": ["a"]})
    assert f"status: {member.status}" == f"status: {status}"


def test_a_machine_that_scatters_widely_is_judged_against_its_own_spread():
    # A shared VM whose checks scatter +-20% around 0.1 TFLOP/s: a 25% low reading is within its
    # normal spread (3 robust SDs), a 70% low one is not.
    scattered = [machine(0.1 * f, 10.0, device="cpu: vm") for f in (0.8, 0.85, 0.9, 1.0, 1.0, 1.1, 1.15, 1.2)]
    assert assess(machine(0.075, 10.0, device="cpu: vm"), scattered).status == "ok"
    assert assess(machine(0.03, 10.0, device="cpu: vm"), scattered).status == "slow"
    # a steady GPU keeps the plain tolerance: 10% spread of its history is under 15%
    assert assess(machine(matmul=0.8 * 530), history()).status == "slow"
