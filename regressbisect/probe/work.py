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

That is the dispatch way. A compiled step never reaches a dispatch mode (dynamo runs it eagerly
under one: a program that is not the one measured), and higher-order ops (flex_attention,
torch.cond) cannot run under one at all. Both go through torch.compile (the higher-order ops
compile themselves), so its first call moves the process to the graph+profiler way: the modes are
left, counting starts over (WORK_SKIP_STEPS skipped again), and a step's counts are the graphs
dynamo captured times their calls, its graph breaks (probe/work_graphs.py) and one profiler trace
over the counted steps, CPU and CUDA (probe/work_profiler.py: kernels, syncs, outermost ops, the
FLOPs it has formulas for).

Boundaries: the optimizer step post-hook (the shim's). The first WORK_SKIP_STEPS steps (lazy
initialisation, compile) are not rows, the next WORK_STEPS are; then both modes are left and the
program runs on uncounted. A program with no optimizer step gets one row per measured window
(`regressbisect.report(tokens, seconds)` calls `window_end`: the counts since the last outermost
module forward that ended before the window began), else one row for the whole process.
"""
from __future__ import annotations

import time
from collections import Counter
from types import ModuleType
from typing import Any, Callable

from regressbisect.probe.contract import WORK_SKIP_STEPS, WORK_STEPS, WORK_WAYS
from regressbisect.probe.work_graphs import graph_breaks, patch_compile
from regressbisect.probe.work_profiler import ScheduledProfile, StepProfile, cuda_ready

DISPATCH, GRAPHS = WORK_WAYS

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
        self.way = DISPATCH
        self.steps = 0
        self.on = False
        self._modes: list = []
        self._hooks: list = []
        self._depth = 0
        self._mark: dict[str, float] | None = None   # cumulative counts at the current row's start
        self._mark_time = 0.0
        self._forward_ends: list[tuple[float, dict[str, float]]] = []
        self._profiler: StepProfile | None = None      # the dispatch way's, one per step
        self._schedule: ScheduledProfile | None = None  # the graph+profiler way's, one per process
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
        self._restart()
        patch_compile(self.torch, self._count_graphs, self._graph_called)

    def _restart(self) -> None:
        self._mark, self._mark_time = self.cumulative(), time.perf_counter()
        self._forward_ends = [(self._mark_time, self._mark)]

    def stop(self) -> None:
        """Leave the modes and the hooks."""
        if not self.on or not self._leave_modes():
            return
        self._stop_profiler()
        for hook in self._hooks:
            hook.remove()
        self.on = False

    def _leave_modes(self) -> bool:
        """Leave both modes, only when they are still the innermost (never pop a program's own;
        it entered one meanwhile: stay on, LIFO); whether they are left."""
        if self._modes:
            from torch.utils._python_dispatch import _get_current_dispatch_mode

            if _get_current_dispatch_mode() is not self._modes[-1]:
                return False
            for mode in reversed(self._modes):
                mode.__exit__(None, None, None)
            self._modes = []
        return True

    # -- the graph+profiler way ---------------------------------------------------------------

    def _count_graphs(self) -> bool:
        """torch.compile is called: from now on count by graphs (whether this process does)."""
        if self.way == GRAPHS:
            return True
        if not self.on or not self._leave_modes():
            return False   # counted already, or under a mode of the program's: stays dispatch
        self.way = GRAPHS
        self._stop_profiler()
        self.calls = Counter()   # what the modes counted is of the other way
        self.rows, self.steps, self.unit = [], 0, "run"
        self._restart()
        self._schedule = ScheduledProfile(self.torch, WORK_SKIP_STEPS, WORK_STEPS)
        return True

    def _graph_called(self, label: str, ops: Counter, higher: frozenset) -> None:
        """A compiled graph runs: its ops once more, and higher-order ops have no FLOP formula."""
        if not self.on or self.is_compiling():
            return
        calls = self.calls
        calls["graphs"] += 1
        calls["graphs:" + label] += 1
        for op, n in ops.items():
            calls["calls:" + op] += n
            if op in higher:
                calls["uncounted:" + op] += n

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
        if self.way == GRAPHS:
            row.update(graph_breaks())   # the process's so far: met while compiling, not per row
        row["arm_ms"] = round((time.perf_counter() - started) * 1e3, 3)
        return row

    # -- boundaries -------------------------------------------------------------------------

    def on_optimizer_step(self) -> None:
        if not self.on:
            return
        profiled = self._schedule.step() if self._schedule is not None else {}
        self.steps += 1
        if self.steps <= WORK_SKIP_STEPS:
            if self.steps == WORK_SKIP_STEPS:
                self._start_row()
            return
        row = self._row_since_mark(self._mark or {}, self._mark_time)
        row.update(self._stop_profiler())
        self.rows.append(row)
        for counted in self.rows[-WORK_STEPS:] if profiled else ():   # one trace over the counted steps
            counted.update(profiled)
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
        if self._schedule is not None:   # left here, outside any step's record_function range
            self._schedule.close()
            self._schedule = None
        if not self.rows and self.on:
            self.rows.append(self._row_since_mark(self._forward_ends[0][1] if self._forward_ends else {},
                                                  self._forward_ends[0][0] if self._forward_ends else 0.0))
            self.unit = "run"
        return self.rows, self.unit

    # Global module hooks are traced into a compiled forward: returning at once there keeps them
    # out of its graph (a clock read would break it)
    def _forward_in(self, module: Any, args: Any) -> None:
        if self.is_compiling():
            return
        self._depth += 1

    def _forward_out(self, module: Any, args: Any, output: Any) -> None:
        if self.is_compiling():
            return
        self._depth = max(0, self._depth - 1)
        if self._depth == 0 and not self.steps:   # window marks only matter without optimizer steps
            self._forward_ends.append((time.perf_counter(), self.cumulative()))

    # -- the profiler ---------------------------------------------------------------------------

    def _start_profiler(self) -> None:
        """The dispatch way's: CUDA activity, where the program uses CUDA."""
        if self.way == DISPATCH and cuda_ready(self.torch):
            self._profiler = StepProfile(self.torch)

    def _stop_profiler(self) -> dict[str, float]:
        profiler, self._profiler = self._profiler, None
        return profiler.finish() if profiler is not None else {}
