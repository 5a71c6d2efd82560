"""Facts of the machine the probes run on, in one place: the fingerprint that keys every stored
sample, the CPU model, the GPUs nvidia-smi lists and how many of them a probe sees.

Cheap and stdlib only (the parent never imports torch): the torch version is read from package
metadata, and the GPU list is queried once per process.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import re
import shutil
import socket
import subprocess


def environment_fingerprint() -> tuple[str, dict]:
    """(hash, facts) of the machine and interpreter; samples taken elsewhere are not reused."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    facts = {
        "hostname": socket.gethostname(),
        "platform": platform.system(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "cpu": cpu_model(),
        "gpus": list(gpu_names()),
        "cuda_visible_devices": None if visible is None
        else len([d for d in visible.split(",") if d.strip()]),
        "torch": package_version("torch"),
    }
    digest = hashlib.sha1(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]
    return digest, facts


@functools.lru_cache(maxsize=1)
def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def nvidia_smi(args: list[str], timeout_s: float = 20) -> str | None:
    """nvidia-smi's stdout, or None where it is missing, fails or hangs."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        result = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout if result.returncode == 0 else None


def _listed_gpus(timeout_s: float) -> list[str]:
    """The `GPU n: ...` lines of `nvidia-smi -L`."""
    out = nvidia_smi(["-L"], timeout_s=timeout_s) or ""
    return [line.strip() for line in out.splitlines() if line.startswith("GPU ")]


@functools.lru_cache(maxsize=1)
def gpu_names() -> tuple[str, ...]:
    """GPU models from `nvidia-smi -L`, without UUIDs (any H200 of a host is the same machine)."""
    names = []
    for line in _listed_gpus(timeout_s=10):
        match = re.match(r"GPU \d+: (.*?)(?: \(UUID: .*\))?$", line)
        if match:
            names.append(match.group(1))
    return tuple(names)


def count_gpus() -> int:
    """GPUs visible to probes (CUDA_VISIBLE_DEVICES applied), without importing torch."""
    gpus = _listed_gpus(timeout_s=20)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return min(len(gpus), len([v for v in visible.split(",") if v.strip()]))
    return len(gpus)


@functools.lru_cache(maxsize=None)
def package_version(name: str) -> str | None:
    from importlib import metadata
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
