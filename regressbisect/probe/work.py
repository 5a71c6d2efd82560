"""The counting arm's work counts in a probe process (REGRESSBISECT_WORK=1; docs/design.md, "Work per step").

Loaded by instrument.py once torch is imported, only in the counting arm. Counts are exact and
survive instrumentation; its timings do not, so they only ever give shares within this arm:

- FLOPs by op: PyTorch's own torch.utils.flop_counter.FlopCounterMode (matmul, attention,
  convolution), with the formulas of the CPU flash attention kernels it lacks added from its own
  sdpa_flop_count;
- calls per aten op: a TorchDispatchMode on top of the flop counter (it sees the ops the program
  runs, before the flop counter decomposes any), and matmul calls by output width;
- device kernels on CUDA: a torch.profiler session per counted step, CUDA activity only
  (kernels, memcpy, memset: what the device was asked to run, including those of compiled and
  Triton code, which never reach the dispatcher; a dispatch-mode proxy would miss them). None on CPU.

Boundaries: the optimizer step post-hook (the shim's). The first WORK_SKIP_STEPS steps (lazy
initialisation, compile) are not rows, the next WORK_STEPS are; then both modes are left and the
program runs on uncounted. A program with no optimizer step gets one row per measured window
(`regressbisect.report(tokens, seconds)` calls `window_end`: the counts since the last outermost
module forward that ended before the window began), else one row for the whole process.
"""
from __future__ import annotations

import time
import warnings
from collections import Counter
from types import ModuleType
from typing import Any, Callable

from regressbisect.probe.contract import WORK_SKIP_STEPS, WORK_STEPS

_MATMULS = frozenset({"aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm", "aten._scaled_mm"})
"""Ops whose calls are also counted by output width (`width:aten.mm@2048`): an lm_head-width matmul."""


def _cpu_attention_flops(torch: ModuleType) -> dict:
    """FlopCounterMode formulas for the CPU flash attention kernels (F.scaled_dot_product_attention
    on CPU), which its registry lacks: the same count as the CUDA flash kernels'."""
    from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count

    def forward(query, key, value, *args: Any, out_shape=None, **kwargs: Any) -> int:
        return sdpa_flop_count(query, key, value)

    def backward(grad_out, query, key, value, *args: Any, out_shape=None, **kwargs: Any) -> int:
        return sdpa_backward_flop_count(grad_out, query, key, value)

    aten = torch.ops.aten
    mapping = {}
    for name, formula in (("_scaled_dot_product_flash_attention_for_cpu", forward),
                          ("_scaled_dot_product_flash_attention_for_cpu_backward", backward)):
        if hasattr(aten, name):
            mapping[getattr(aten, name)] = formula
    return mapping


class WorkCounter:
    """Cumulative counts while on; rows are differences at boundaries."""

    def __init__(self, torch: ModuleType, base_totals: Callable[[], dict[str, float]],
                 is_compiling: Callable[[], bool]):
        self.torch = torch
        self.base_totals = base_totals
        """The shim's four counters since the process started (instrument.snapshot)."""
        self.is_compiling = is_compiling
        self.calls: Counter = Counter()
        self.rows: list[dict[str, float]] = []
        self.unit = "run"
        self.steps = 0
        self.on = False
        self._modes: list = []
        self._hooks: list = []
        self._depth = 0
        self._mark: dict[str, float] | None = None   # cumulative counts at the current row's start
        self._mark_time = 0.0
        self._forward_ends: list[tuple[float, dict[str, float]]] = []
        self._profiler = None
        self._names: dict[Any, str] = {}

    # -- on and off -------------------------------------------------------------------------

    def start(self) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils.flop_counter import FlopCounterMode

        counter = self

        class CallCounter(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                if not counter.is_compiling():
                    counter._count(func, out)
                return out

        flops = FlopCounterMode(display=False, custom_mapping=_cpu_attention_flops(self.torch))
        flops.flop_registry = {op: self._or_uncounted(op, formula) for op, formula in flops.flop_registry.items()}
        calls = CallCounter()
        flops.__enter__()
        calls.__enter__()   # on top: it sees each op before the flop counter decomposes it
        self._modes = [flops, calls]
        modules = self.torch.nn.modules.module
        self._hooks = [modules.register_module_forward_pre_hook(self._forward_in),
                       modules.register_module_forward_hook(self._forward_out, always_call=True)]
        self.on = True
        self._mark, self._mark_time = self.cumulative(), time.perf_counter()
        self._forward_ends = [(self._mark_time, self._mark)]

    def stop(self) -> None:
        """Leave both modes (only when they are still the innermost: never pop a program's own)."""
        if not self.on:
            return
        from torch.utils._python_dispatch import _get_current_dispatch_mode

        if _get_current_dispatch_mode() is not self._modes[-1]:
            return   # the program entered a mode of its own meanwhile: stay on, LIFO
        self._stop_profiler()
        for mode in reversed(self._modes):
            mode.__exit__(None, None, None)
        for hook in self._hooks:
            hook.remove()
        self.on = False

    # -- counting ---------------------------------------------------------------------------

    def _or_uncounted(self, op: Any, formula: Callable[..., int]) -> Callable[..., int]:
        """A flop formula that, on shapes it does not know, counts the call as `uncounted:<op>`
        and no FLOPs instead of failing the program: torch's sdpa formula asserts that query and
        key/value have the same heads and lengths, which grouped-query attention on CUDA breaks."""
        name = "uncounted:" + str(op)

        def count(*args: Any, **kwargs: Any) -> int:
            try:
                return formula(*args, **kwargs)
            except Exception:
                self.calls[name] += 1
                return 0
        return count

    def _count(self, func: Any, out: Any) -> None:
        name = self._names.get(func)
        if name is None:
            name = self._names[func] = str(func.overloadpacket)
        if name.startswith("profiler."):   # record_function markers (the optimizer's), not work
            return
        self.calls["calls:" + name] += 1
        if name in _MATMULS:
            shape = getattr(out, "shape", None)
            if shape:
                self.calls[f"width:{name}@{shape[-1]}"] += 1

    def cumulative(self) -> dict[str, float]:
        counts: dict[str, float] = dict(self.calls)
        counts["calls"] = sum(v for k, v in self.calls.items() if k.startswith("calls:"))
        flop_counts = self._modes[0].flop_counts.get("Global", {}) if self._modes else {}
        for packet, value in flop_counts.items():
            counts["flops:" + str(packet)] = value
        counts["flops"] = sum(flop_counts.values())
        counts.update(self.base_totals())
        return counts

    def _row_since_mark(self, mark: dict[str, float], started: float) -> dict[str, float]:
        now = self.cumulative()
        row = {k: v - mark.get(k, 0) for k, v in now.items() if v - mark.get(k, 0)}
        row["calls"], row["flops"] = row.get("calls", 0), row.get("flops", 0)
        row["arm_ms"] = round((time.perf_counter() - started) * 1e3, 3)
        return row

    # -- boundaries -------------------------------------------------------------------------

    def on_optimizer_step(self) -> None:
        if not self.on:
            return
        self.steps += 1
        if self.steps <= WORK_SKIP_STEPS:
            if self.steps == WORK_SKIP_STEPS:
                self._start_row()
            return
        row = self._row_since_mark(self._mark or {}, self._mark_time)
        kernels = self._stop_profiler()
        if kernels is not None:
            row["kernels"] = kernels
        self.rows.append(row)
        self.unit = "step"
        if self.steps >= WORK_SKIP_STEPS + WORK_STEPS:
            self.stop()
        else:
            self._start_row()

    def _start_row(self) -> None:
        self._mark, self._mark_time = self.cumulative(), time.perf_counter()
        self._start_profiler()

    def window_end(self, seconds: float) -> None:
        """A measured window of `seconds` just ended (a program without an optimizer step)."""
        if not self.on or self.unit == "step" or self.steps:
            return
        now = time.perf_counter()
        began = now - float(seconds)
        mark, at = self._forward_ends[0]
        for end, counts in self._forward_ends:
            if end <= began:
                mark, at = counts, end
        row = self._row_since_mark(mark, at)
        row["arm_ms"] = round(float(seconds) * 1e3, 3)
        self.rows.append(row)
        self.unit = "window"

    def at_exit(self) -> tuple[list[dict[str, float]], str]:
        """The rows to print, and what each covers."""
        if not self.rows and self.on:
            self.rows.append(self._row_since_mark(self._forward_ends[0][1] if self._forward_ends else {},
                                                  self._forward_ends[0][0] if self._forward_ends else 0.0))
            self.unit = "run"
        return self.rows, self.unit

    def _forward_in(self, module: Any, args: Any) -> None:
        self._depth += 1

    def _forward_out(self, module: Any, args: Any, output: Any) -> None:
        self._depth = max(0, self._depth - 1)
        if self._depth == 0 and not self.steps:   # window marks only matter without optimizer steps
            self._forward_ends.append((time.perf_counter(), self.cumulative()))

    # -- kernels (CUDA only) ------------------------------------------------------------------

    def _start_profiler(self) -> None:
        cuda = getattr(self.torch, "cuda", None)
        if cuda is None or not cuda.is_available() or not cuda.is_initialized():
            return
        from torch.profiler import ProfilerActivity, profile

        self._profiler = profile(activities=[ProfilerActivity.CUDA])
        with warnings.catch_warnings():   # its notes would land in the probe's output
            warnings.simplefilter("ignore")
            self._profiler.__enter__()

    def _stop_profiler(self) -> int | None:
        profiler, self._profiler = self._profiler, None
        if profiler is None:
            return None
        synchronize = getattr(self.torch._C, "_cuda_synchronize", None)   # not the shim's counted one
        (synchronize or self.torch.cuda.synchronize)()
        device = self.torch.autograd.DeviceType.CUDA
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            profiler.__exit__(None, None, None)
            return sum(1 for event in profiler.events() if event.device_type == device)
