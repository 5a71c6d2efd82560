"""One torch.profiler session per counted step of the counting arm (probe/work.py), and what it
counts: device kernels by name family (CUDA), host syncs, the outermost CPU ops and the FLOPs the
profiler has a formula for. Loaded in the probe process by path, like work.py; torch arrives as an
argument.

The dispatch way profiles CUDA activity only (kernels; none on CPU); the graph+profiler way also
profiles the CPU (its ops, syncs and FLOPs: a compiled step never reaches a dispatch mode).
"""
from __future__ import annotations

import re
import warnings
from collections import Counter
from types import ModuleType
from typing import Any, Iterator

SYNC_OPS = frozenset({"aten::_local_scalar_dense"})
"""The op every `.item()`-style read of a tensor's value ends in (on CUDA: a copy to the host and
a wait for the stream)."""
SYNC_CALLS = frozenset({"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize"})
"""CUDA runtime calls that wait for the device; counted when no SYNC_OPS op made them."""
_TEMPLATE = re.compile(r"[<(].*$")
_SUFFIX = re.compile(r"[_\d]+$")


def family(kernel: str) -> str:
    """A kernel's name family: 'triton_poi_fused_add_mul_0' -> 'triton_poi', 'void
    at::native::elementwise_kernel<128, 4, ...>(...)' -> 'at::native::elementwise_kernel',
    'Memcpy DtoH (Device -> Pageable)' -> 'Memcpy DtoH'."""
    name = _TEMPLATE.sub("", kernel.removeprefix("void ")).strip()
    if name.startswith("triton_"):
        return "_".join(name.split("_")[:2])
    return _SUFFIX.sub("", name) or name


def cuda_ready(torch: ModuleType) -> bool:
    """CUDA is there and the program has used it (never initialise it for a program)."""
    cuda = getattr(torch, "cuda", None)
    return cuda is not None and cuda.is_available() and cuda.is_initialized()


class StepProfile:
    """A profiler session from one step boundary to the next."""

    def __init__(self, torch: ModuleType, cpu: bool):
        from torch.profiler import ProfilerActivity, profile

        self.torch = torch
        self.cuda = cuda_ready(torch)
        activities = ([ProfilerActivity.CPU] if cpu else []) + ([ProfilerActivity.CUDA] if self.cuda else [])
        # shapes: the profiler's FLOP formulas need them
        self.session = profile(activities=activities, record_shapes=cpu, with_flops=cpu)
        with warnings.catch_warnings():   # its notes would land in the probe's output
            warnings.simplefilter("ignore")
            self.session.__enter__()

    def finish(self) -> dict[str, float]:
        if self.cuda:
            synchronize = getattr(self.torch._C, "_cuda_synchronize", None)   # not the shim's counted one
            (synchronize or self.torch.cuda.synchronize)()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.session.__exit__(None, None, None)
            counts = summary(self.torch, self.session.events())
        if self.cuda:
            counts.setdefault("kernels", 0)   # profiled: none is a count
        return counts


def summary(torch: ModuleType, events: Any) -> dict[str, float]:
    """Counts of one session: `kernels` and `kernels:<family>` (device activity), `syncs`,
    `cpu_ops` and `cpu_ops:<op>` (aten ops no other aten op called), `flops` and `flops:<op>`
    (outermost op with a formula)."""
    device = torch.autograd.DeviceType.CUDA
    counts: Counter = Counter()
    for event in events:
        name = event.name
        if event.device_type == device:
            counts["kernels"] += 1
            counts["kernels:" + family(name)] += 1
            continue
        above = list(_ancestors(event))
        if name in SYNC_OPS or (name in SYNC_CALLS and not any(a.name in SYNC_OPS for a in above)):
            counts["syncs"] += 1
        op = name.replace("::", ".")
        if name.startswith("aten::") and not any(a.name.startswith("aten::") for a in above):
            counts["cpu_ops"] += 1
            counts["cpu_ops:" + op] += 1
        flops = getattr(event, "flops", 0) or 0
        if flops and not any(getattr(a, "flops", 0) for a in above):   # aten::matmul over aten::mm: once
            counts["flops"] += flops
            counts["flops:" + op] += flops
    return dict(counts)


def _ancestors(event: Any) -> Iterator[Any]:
    parent = getattr(event, "cpu_parent", None)
    while parent is not None:
        yield parent
        parent = getattr(parent, "cpu_parent", None)
