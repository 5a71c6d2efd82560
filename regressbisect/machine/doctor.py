"""Hardware sanity check: is this machine as fast tonight as it usually is?

A slow night can be a slow machine rather than a slow commit (a neighbour on the GPU, a throttled
clock, a degraded host). Before trusting a nightly measurement we time two fixed kernels - a
matmul (compute) and a large tensor copy (memory bandwidth) - and look for other processes and
the clock state, then compare with this machine's own earlier checks.

The measuring half runs in a child process (`python -m regressbisect.machine.doctor --json`, one JSON
dict on stdout) because the CLI process never imports torch; `run_check` spawns it and
`assess` compares the result with history. Only `_measure` and below import torch.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from regressbisect.errors import UserError
from regressbisect.machine.fingerprint import cpu_model, nvidia_smi
from regressbisect.enums import WordEnum

SCHEMA = 1
# Each kernel is timed in blocks of at least this many seconds; the rate is the median over
# blocks (robust to one preempted block), after one untimed warm-up call.
_BLOCK_SECONDS = 0.2   # long enough that a scheduler tick of a shared VM is a small part
_BLOCKS = 7


@dataclass(frozen=True)
class MachineCheck:
    """One measurement of the machine, as printed by `python -m regressbisect.machine.doctor --json`."""

    device: str
    """What was measured, e.g. 'cuda: NVIDIA H200' or 'cpu: AMD EPYC 7B13 (2 threads)'."""
    matmul_tflops: float
    """Dense matmul rate, TFLOP/s (bf16 on GPU, fp32 on CPU), median over timed blocks."""
    copy_gbps: float
    """Tensor copy bandwidth, GB/s counting bytes read + written (STREAM convention)."""
    other_processes: int
    """Other compute processes on the GPU (nvidia-smi), or other running processes on a CPU."""
    clocks: dict = field(default_factory=dict)
    """Clock state: GPU sm/max MHz, temperature, power, throttle reasons; CPU MHz and governor."""
    raw: dict = field(default_factory=dict)
    """Everything else measured (sizes, per-block rates, process list, load average, versions)."""

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, **asdict(self)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "MachineCheck":
        return cls(device=str(data["device"]), matmul_tflops=float(data["matmul_tflops"]),
                   copy_gbps=float(data["copy_gbps"]),
                   other_processes=int(data.get("other_processes", 0)),
                   clocks=dict(data.get("clocks") or {}), raw=dict(data.get("raw") or {}))


class HealthStatus(WordEnum):
    """What a machine check says (`Health.status`, a nightly report's `machine.status`)."""

    OK = "ok"
    SLOW = "slow"
    """A kernel below the history median by more than the tolerance."""
    BUSY = "busy"
    """Other processes share the device."""
    NO_HISTORY = "no-history"
    """Nothing earlier of this device to compare with."""
    NOT_CHECKED = "not checked"
    """A nightly whose probes run as Slurm jobs: the submitting machine is not the one measured."""


@dataclass(frozen=True)
class Health:
    """Verdict on one check compared with the machine's history."""

    status: HealthStatus
    """`assess`'s reading of the check (never NOT_CHECKED)."""
    reasons: tuple[str, ...] = ()
    """One line each, e.g. "matmul 310 TFLOP/s is 41% below this machine's median 530 (12 checks)"."""

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "reasons": list(self.reasons)}


# ---------------------------------------------------------------- parent side (no torch)

def check_to_json(check: MachineCheck) -> dict[str, Any]:
    """The dict stored in the machine history (and accepted back by `assess`)."""
    return check.to_json()


def contention_figures(seconds: float = 2.0, guard=None) -> dict[str, Any]:
    """Other processes' load right now, as the busy-machine guard sees it during a sample
    (docs/contention.md): CPUs, share of the machine, GPU, and the rule's verdict."""
    from regressbisect.config import HuntConfig, ProbeConfig
    from regressbisect.machine.contention import BusyRule, ContentionGuard

    if guard is None:
        defaults = HuntConfig(probe=ProbeConfig(cmd="true"))
        rule = BusyRule(cpus=defaults.busy_cpus, share=defaults.busy_share, gpu=defaults.busy_gpu)
        guard = ContentionGuard(rule, max_wait_s=0.0)
    load = guard.measure(seconds)
    reason = guard.rule.reason(load)
    return {**load.to_json(), "contended": reason is not None, "reason": reason,
            "text": f"{load.describe()} ({load.machine_share:.0%} of the machine): "
                    + (f"busy, a sample now would be re-taken ({reason})" if reason else "quiet")}


def run_check(timeout_s: float = 120) -> MachineCheck:
    """Measure this machine in a fresh child process and return its result."""
    package_root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    command = [sys.executable, "-m", "regressbisect.machine.doctor", "--json"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        raise UserError(f"machine check timed out after {timeout_s:g}s") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise UserError(f"machine check failed (exit {done.returncode}): {last}")
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            return MachineCheck.from_json(json.loads(line))
    raise UserError("machine check printed no JSON result")


def assess(check: MachineCheck, history: Sequence[MachineCheck | Mapping[str, Any]], *,
           tolerance: float = 0.15) -> Health:
    """Compare `check` with earlier checks of the same device (median of each metric).

    Status precedence: busy (a cause we can name) > slow > no-history > ok. `tolerance` is the
    relative drop below the median that still counts as normal (0.15 = 15%).
    """
    past = [h if isinstance(h, MachineCheck) else MachineCheck.from_json(h) for h in history]
    past = [h for h in past if h.device == check.device]
    reasons: list[str] = []
    busy = check.other_processes > 0
    if busy:
        reasons.append(_busy_reason(check))
    slow = False
    if past:
        for label, attr, unit in (("matmul", "matmul_tflops", "TFLOP/s"), ("copy", "copy_gbps", "GB/s")):
            value = getattr(check, attr)
            values = [getattr(h, attr) for h in past]
            median = statistics.median(values)
            drop = 1 - value / median if median > 0 else 0.0
            allowed = _allowed_drop(values, median, tolerance)
            where = f"this machine's median {_fmt(median)} ({len(past)} checks)"
            if drop > allowed:
                slow = True
                reasons.append(f"{label} {_fmt(value)} {unit} is {drop:.0%} below {where}")
            else:
                # Only slowness matters: a faster check than usual is fine (and says so plainly).
                relation = (f"is within {allowed:.0%} of" if drop > -allowed else
                            f"is {-drop:.0%} above")
                reasons.append(f"{label} {_fmt(value)} {unit} {relation} {where}")
    else:
        reasons.append(f"no earlier checks of {check.device!r} to compare with")
    throttle = _throttle_reason(check.clocks)
    if throttle:
        reasons.append(throttle)
    status = (HealthStatus.BUSY if busy else HealthStatus.SLOW if slow else HealthStatus.OK if past
              else HealthStatus.NO_HISTORY)
    return Health(status=status, reasons=tuple(reasons))


def _allowed_drop(values: Sequence[float], median: float, tolerance: float) -> float:
    """The drop below the median that still counts as this machine's normal spread.

    `tolerance`, widened to 3 robust standard deviations (1.4826 * MAD, the normal-consistent
    median absolute deviation) once there are 5 checks to estimate the spread from: a shared VM
    whose own checks scatter by 10% must not have every third night called slow.
    """
    if len(values) < 5 or median <= 0:
        return tolerance
    mad = statistics.median(abs(v - median) for v in values)
    return max(tolerance, 3 * 1.4826 * mad / median)


def _busy_reason(check: MachineCheck) -> str:
    names = [f"{p.get('pid')} {p.get('name', '')}".strip() for p in check.raw.get("processes", [])]
    listed = f": {', '.join(names[:5])}" if names else ""
    where = "on the GPU" if check.device.startswith("cuda") else "running on the CPU"
    return f"{check.other_processes} other process(es) {where}{listed}"


def _throttle_reason(clocks: Mapping[str, Any]) -> str | None:
    """nvidia-smi's active throttle reasons, ignoring 'GPU idle' (bit 0x1), which is normal."""
    active = clocks.get("throttle_reasons_active")
    if not isinstance(active, str) or not active.startswith("0x"):
        return None
    bits = int(active, 16) & ~0x1
    return f"GPU clocks throttled (reasons {hex(bits)})" if bits else None


def _fmt(value: float) -> str:
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


# ---------------------------------------------------------------- child side (imports torch)

def _measure() -> dict[str, Any]:
    import torch

    cuda = torch.cuda.is_available()
    # Look for neighbours before we start loading the device ourselves.
    processes = _gpu_processes() if cuda else _busy_cpu_processes()
    if cuda:
        device, dtype, size = torch.device("cuda"), torch.bfloat16, 8192
        copy_elements = 256 * 1024 * 1024  # 512 MiB of bf16: far beyond any cache
        name = f"cuda: {torch.cuda.get_device_name(device)}"
        sync: Callable[[], None] = torch.cuda.synchronize
    else:
        # one thread, as the probes use: a multi-threaded check on a small shared VM measures
        # mostly its neighbours (and our own parent process), and swings 3x from night to night
        torch.set_num_threads(1)
        device, dtype, size = torch.device("cpu"), torch.float32, 512
        copy_elements = 32 * 1024 * 1024  # 128 MiB of fp32: beyond the last-level cache
        name = f"cpu: {cpu_model()} ({torch.get_num_threads()} threads)"
        sync = lambda: None  # noqa: E731 - CPU ops are synchronous

    matmul_rates = _matmul_rates(torch, device, dtype, size, sync)
    copy_rates = _copy_rates(torch, device, dtype, copy_elements, sync)

    check = MachineCheck(
        device=name,
        matmul_tflops=statistics.median(matmul_rates),
        copy_gbps=statistics.median(copy_rates),
        other_processes=len(processes),
        clocks=_gpu_clocks() if cuda else _cpu_clocks(),
        raw={"matmul": {"n": size, "dtype": str(dtype), "block_tflops": matmul_rates},
             "copy": {"bytes": copy_elements * (2 if cuda else 4), "block_gbps": copy_rates},
             "processes": processes,
             "loadavg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
             "torch": torch.__version__, "python": sys.version.split()[0],
             "hostname": os.uname().nodename if hasattr(os, "uname") else None,
             "when": time.time()},
    )
    return check.to_json()


def _matmul_rates(torch, device, dtype, size: int, sync: Callable[[], None]) -> list[float]:
    """TFLOP/s of a size x size matmul (2 n^3 flops), per timed block."""
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    out = torch.empty(size, size, device=device, dtype=dtype)
    return _rates(lambda: torch.matmul(a, b, out=out), 2 * size ** 3 / 1e12, sync)


def _copy_rates(torch, device, dtype, elements: int, sync: Callable[[], None]) -> list[float]:
    """GB/s of copying `elements` values into another tensor, read + write bytes counted."""
    src = torch.ones(elements, device=device, dtype=dtype)
    dst = torch.empty_like(src)
    copied_gb = 2 * src.numel() * src.element_size() / 1e9
    return _rates(lambda: dst.copy_(src), copied_gb, sync)


def _rates(kernel: Callable[[], object], work: float, sync: Callable[[], None]) -> list[float]:
    """Work units per second of `kernel`, one value per timed block of >= _BLOCK_SECONDS."""
    kernel()
    sync()  # warm-up: allocator, kernel selection, page faults
    start = time.perf_counter()
    kernel()
    sync()
    once = max(time.perf_counter() - start, 1e-7)
    reps = max(1, math.ceil(_BLOCK_SECONDS / once))
    rates = []
    for _ in range(_BLOCKS):
        start = time.perf_counter()
        for _ in range(reps):
            kernel()
        sync()
        rates.append(reps * work / (time.perf_counter() - start))
    return rates


def _gpu_processes() -> list[dict[str, Any]]:
    text = nvidia_smi(["--query-compute-apps=pid,process_name,used_memory,gpu_bus_id",
                 "--format=csv,noheader,nounits"]) or ""
    visible_bus = _visible_bus_id()
    processes = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4 or not parts[0].isdigit() or int(parts[0]) == os.getpid():
            continue
        if visible_bus and parts[3].lower()[-len(visible_bus):] != visible_bus:
            continue  # on another GPU of the host
        processes.append({"pid": int(parts[0]), "name": parts[1], "used_memory_mib": parts[2]})
    return processes


def _visible_bus_id() -> str | None:
    """'bb:dd.0' of the GPU torch uses, to match nvidia-smi's bus ids (which carry a domain)."""
    try:
        import torch
        props = torch.cuda.get_device_properties(0)
        return f"{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    except Exception:  # older torch without pci ids: count processes on every GPU
        return None


def _gpu_clocks() -> dict[str, Any]:
    fields = ["clocks.sm", "clocks.max.sm", "temperature.gpu", "power.draw"]
    for throttle_field in ("clocks_throttle_reasons.active", "clocks_event_reasons.active"):
        text = nvidia_smi([f"--query-gpu=pci.bus_id,{','.join(fields)},{throttle_field}",
                     "--format=csv,noheader,nounits"])
        if text:
            break
    else:
        return {}
    visible_bus = _visible_bus_id()
    rows = [[p.strip() for p in line.split(",")] for line in text.strip().splitlines()]
    row = next((r for r in rows if visible_bus and r[0].lower().endswith(visible_bus)), rows[0])
    names = ["sm_mhz", "max_sm_mhz", "temperature_c", "power_w", "throttle_reasons_active"]
    return {key: _number(value) for key, value in zip(names, row[1:])}


def _busy_cpu_processes() -> list[dict[str, Any]]:
    """Processes in state R (running) other than us, sampled a few times (median sample kept)."""
    me = {os.getpid(), os.getppid()}
    samples: list[list[dict[str, Any]]] = []
    for _ in range(5):
        running = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                text = stat.read_text()
            except OSError:
                continue
            pid = int(stat.parent.name)
            name, rest = text[text.find("(") + 1: text.rfind(")")], text[text.rfind(")") + 2:]
            if rest[:1] == "R" and pid not in me:
                running.append({"pid": pid, "name": name})
        samples.append(running)
        time.sleep(0.02)
    samples.sort(key=len)
    return samples[len(samples) // 2]


def _cpu_clocks() -> dict[str, Any]:
    clocks: dict[str, Any] = {}
    try:
        mhz = [float(line.split(":", 1)[1]) for line in Path("/proc/cpuinfo").read_text().splitlines()
               if line.startswith("cpu MHz")]
    except OSError:
        mhz = []
    if mhz:
        clocks.update(mhz_min=min(mhz), mhz_median=statistics.median(mhz), mhz_max=max(mhz))
    cpufreq = Path("/sys/devices/system/cpu/cpu0/cpufreq")
    for key, name in (("governor", "scaling_governor"), ("max_khz", "cpuinfo_max_freq")):
        try:
            clocks[key] = _number((cpufreq / name).read_text().strip())
        except OSError:
            pass
    return clocks


def _number(text: str) -> Any:
    try:
        return float(text)
    except ValueError:
        return text  # '[N/A]', '0x0000000000000001', 'performance'


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m regressbisect.machine.doctor",
                                     description="Measure matmul rate, copy bandwidth, neighbours and clocks.")
    parser.add_argument("--json", action="store_true", help="print one JSON dict (for run_check)")
    args = parser.parse_args(argv)
    result = _measure()
    if args.json:
        print(json.dumps(result))
    else:
        check = MachineCheck.from_json(result)
        print(f"device          {check.device}")
        print(f"matmul          {check.matmul_tflops:.3g} TFLOP/s")
        print(f"copy            {check.copy_gbps:.3g} GB/s")
        print(f"other processes {check.other_processes}")
        print(f"clocks          {check.clocks}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
