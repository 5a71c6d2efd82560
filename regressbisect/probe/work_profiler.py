"""One torch.profiler session per counted step of the counting arm (probe/work.py), and what it
counts: device kernels by name family (CUDA), host syncs, the outermost CPU ops and the FLOPs the
profiler has a formula for. Loaded in the probe process by path, like work.py; torch arrives as an
argument.

The dispatch way profiles CUDA activity only (kernels; none on CPU); the graph+profiler way also
profiles the CPU (its ops, syncs and FLOPs: a compiled step never reaches a dispatch mode), and
CUDA where the program had used it by its first torch.compile call.
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
_SUFFIX = re.compile(r"(_\d+)+$")


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
    """The dispatch way's session: CUDA activity from one step boundary to the next."""

    def __init__(self, torch: ModuleType):
        from torch.profiler import ProfilerActivity, profile

        self.torch = torch
        self.session = profile(activities=[ProfilerActivity.CUDA])
        with warnings.catch_warnings():   # its notes would land in the probe's output
            warnings.simplefilter("ignore")
            self.session.__enter__()

    def finish(self) -> dict[str, float]:
        _synchronize(self.torch)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.session.__exit__(None, None, None)
            counts = summary(self.torch, self.session.events())
        counts.setdefault("kernels", 0)   # profiled: none is a count
        return counts


class ScheduledProfile:
    """The graph+profiler way's session: CPU (and CUDA where the program uses it), entered once,
    idle for the first `skip` steps, then one trace over the next `steps`: their counts divided by
    `steps` (a count per step). Stopping a CPU trace and starting the next at one step boundary
    corrupts the heap (torch 2.13 CPU, a compiled step with a graph break), so there is one trace."""

    def __init__(self, torch: ModuleType, skip: int, steps: int):
        from torch.profiler import ProfilerActivity, profile, schedule

        self.torch = torch
        self.steps = steps
        self.cuda = cuda_ready(torch)
        self.summary: dict[str, float] | None = None
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        with warnings.catch_warnings():   # its notes would land in the probe's output
            warnings.simplefilter("ignore")
            # shapes: the profiler's FLOP formulas need them
            self.session = profile(activities=activities, record_shapes=True, with_flops=True,
                                   schedule=schedule(skip_first=skip, wait=0, warmup=0, active=steps, repeat=1),
                                   on_trace_ready=self._ready)
            self.session.__enter__()

    def _ready(self, session: Any) -> None:
        counts = summary(self.torch, session.events())
        if self.cuda:
            counts.setdefault("kernels", 0)
        self.summary = {name: value / self.steps for name, value in counts.items()}

    def step(self) -> dict[str, float]:
        """A step boundary: the counts per step once the trace is over ({} before)."""
        if self.cuda:
            _synchronize(self.torch)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.session.step()
        done, self.summary = self.summary, None
        return done or {}

    def close(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.session.__exit__(None, None, None)


def _synchronize(torch: ModuleType) -> None:
    """Wait for the device, so that a step's kernels are in its session."""
    synchronize = getattr(torch._C, "_cuda_synchronize", None)   # not the shim's counted one
    (synchronize or torch.cuda.synchronize)()


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
