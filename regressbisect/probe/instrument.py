"""Per-iteration compute counters, patched into a probe process by the `shim/sitecustomize.py`.

Counted (docs/design.md, "Counters"):
- lm_head_calls: calls of torch.nn.functional.linear whose output width (weight.shape[0]) is at
  least REGRESSBISECT_LMHEAD_MIN_OUT (default 32768). nn.Linear.forward calls it through the
  module attribute (`F.linear`), so patching the attribute covers both.
- create_block_mask_calls / create_block_mask_ms: calls and host milliseconds of
  torch.nn.attention.flex_attention.create_block_mask.
- host_syncs: calls of Tensor.item, Tensor.tolist and torch.cuda.synchronize.
Iteration boundaries come from the global optimizer step post-hook: counts made between two
optimizer steps belong to the later step; counts after the last step are not a row. A process
that made no optimizer step but built an nn.Module (an inference loop) reports one row: its
whole run. In the counting arm (REGRESSBISECT_WORK=1) probe/work.py also counts the work of a few
steps (or of the measured window), in the same line under "work".

Calls made while torch.compile traces are not counted (they are not executed per step).
At exit each process that saw any counts prints ONE line on stdout:
`@regressbisect-counters {"rank": r, "pid": p, "iters": [{...}, ...]}`.

This module imports nothing heavy at import time; torch arrives as the argument of the hooks.
The shim loads it by path, after probe/contract.py (regressbisect need not be importable in the
probe), both under their package names.
"""
from __future__ import annotations

import atexit
import functools
import json
import os
import sys
import time
from types import ModuleType
from typing import Any, Callable

from regressbisect.probe.contract import (COUNTER_NAMES, COUNTERS_PREFIX, DEFAULT_LMHEAD_MIN_OUT, INSTRUMENT_ENV,
                                          LMHEAD_ENV, WORK_ENV, WORK_KEY, WORK_ON, WORK_UNIT_KEY,
                                          WORK_WAY_KEY)


class _Counts:
    """Mutable counters (a plain object: the patched functions add to it on the hot path)."""

    __slots__ = COUNTER_NAMES

    def __init__(self) -> None:
        self.lm_head_calls = 0
        self.create_block_mask_calls = 0
        self.create_block_mask_ms = 0.0
        self.host_syncs = 0

    def as_row(self) -> dict[str, float]:
        return {"lm_head_calls": self.lm_head_calls,
                "create_block_mask_calls": self.create_block_mask_calls,
                "create_block_mask_ms": round(self.create_block_mask_ms, 3),
                "host_syncs": self.host_syncs}

    def any(self) -> bool:
        return bool(self.lm_head_calls or self.create_block_mask_calls or self.host_syncs)


_current = _Counts()   # since the last optimizer step
_total = _Counts()     # since the process started (what snapshot() returns)
_rows: list[dict[str, float]] = []
_torch_patched = False
_flex_patched = False
_printed = False
_modules_built = False   # an nn.Module was made: a process that computes, not a launcher
_work = None             # probe/work.WorkCounter in the counting arm


def enabled() -> bool:
    """The runner sets REGRESSBISECT_INSTRUMENT=1; '0' turns the shim off without a path change."""
    return os.environ.get(INSTRUMENT_ENV, "1") != "0"


def counting_work() -> bool:
    """The counting arm: REGRESSBISECT_WORK=1 as well."""
    return os.environ.get(WORK_ENV) == WORK_ON


def window_end(seconds: float) -> None:
    """`regressbisect.report` calls this as a measured window of `seconds` ends: the counting arm
    of a program without an optimizer step counts that window."""
    if _work is not None:
        _work.window_end(seconds)


def active() -> bool:
    """True once torch was imported in this process and the counters are patched in."""
    return _torch_patched


def snapshot() -> dict[str, float]:
    """Cumulative counters of this process (diff two snapshots to count a region)."""
    return _total.as_row()


def rows() -> list[dict[str, float]]:
    """Per-optimizer-step rows recorded so far."""
    return [dict(r) for r in _rows]


def lm_head_min_out() -> int:
    try:
        return int(os.environ.get(LMHEAD_ENV, DEFAULT_LMHEAD_MIN_OUT))
    except ValueError:
        return DEFAULT_LMHEAD_MIN_OUT


def _compiling_probe(torch: ModuleType) -> Callable[[], bool]:
    compiler = getattr(torch, "compiler", None)
    probe = getattr(compiler, "is_compiling", None)
    return probe if probe is not None else (lambda: False)


def on_torch_imported(torch: ModuleType) -> None:
    """Patch linear, the host-sync entry points and the optimizer hook (once)."""
    global _torch_patched
    if _torch_patched or not enabled():
        return
    is_compiling = _compiling_probe(torch)
    min_out: list[int] = []   # read at the first call, not here: the program may set it after torch
    functional = torch.nn.functional   # is imported (a forked probe finds torch imported already)
    original_linear = functional.linear

    def linear(input: Any, weight: Any, bias: Any = None) -> Any:
        if not min_out:
            min_out.append(lm_head_min_out())
        if not is_compiling() and weight.shape[0] >= min_out[0]:
            _current.lm_head_calls += 1
            _total.lm_head_calls += 1
        return original_linear(input, weight, bias)

    functional.linear = linear

    def counting_sync(original: Callable) -> Callable:
        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not is_compiling():
                _current.host_syncs += 1
                _total.host_syncs += 1
            return original(*args, **kwargs)
        return wrapper

    torch.Tensor.item = counting_sync(torch.Tensor.item)
    torch.Tensor.tolist = counting_sync(torch.Tensor.tolist)
    torch.cuda.synchronize = counting_sync(torch.cuda.synchronize)

    from torch.optim.optimizer import register_optimizer_step_post_hook

    register_optimizer_step_post_hook(_on_optimizer_step)
    module_init = torch.nn.Module.__init__

    @functools.wraps(module_init)
    def noting_init(self: Any, *args: Any, **kwargs: Any) -> None:
        global _modules_built
        _modules_built = True
        module_init(self, *args, **kwargs)

    torch.nn.Module.__init__ = noting_init
    atexit.register(print_counters_line)
    _torch_patched = True
    if counting_work():
        _start_work(torch, is_compiling)
    flex = sys.modules.get("torch.nn.attention.flex_attention")
    if flex is not None:
        on_flex_attention_imported(flex)


def on_flex_attention_imported(flex: ModuleType) -> None:
    """Wrap create_block_mask to count calls and their host milliseconds (once)."""
    global _flex_patched
    if _flex_patched or not enabled():
        return
    original = flex.create_block_mask
    torch = sys.modules.get("torch")
    is_compiling = _compiling_probe(torch) if torch is not None else (lambda: False)

    @functools.wraps(original)
    def create_block_mask(*args: Any, **kwargs: Any) -> Any:
        if is_compiling():
            return original(*args, **kwargs)
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            ms = (time.perf_counter() - started) * 1e3
            for counts in (_current, _total):
                counts.create_block_mask_calls += 1
                counts.create_block_mask_ms += ms

    flex.create_block_mask = create_block_mask
    _flex_patched = True


def _start_work(torch: ModuleType, is_compiling: Callable[[], bool]) -> None:
    """The counting arm: probe/work.py and the modules it imports, loaded the way the shim loaded
    this module."""
    global _work
    for name in ("work_graphs", "work_profiler", "work"):
        module = _probe_module(name)
    _work = module.WorkCounter(torch, snapshot, is_compiling)
    _work.start()


def _probe_module(name: str) -> ModuleType:
    full_name = "regressbisect.probe." + name
    module = sys.modules.get(full_name)
    if module is None:
        import importlib.util

        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py")
        spec = importlib.util.spec_from_file_location(full_name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[full_name] = module
        spec.loader.exec_module(module)
    return module


def _on_optimizer_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    global _current
    _rows.append(_current.as_row())
    _current = _Counts()
    if _work is not None:
        _work.on_optimizer_step()


def counters_line() -> str:
    # No optimizer step, but a model was built (an inference loop): its whole run is the row
    rows = _rows or ([_total.as_row()] if _modules_built else [])
    record: dict[str, Any] = {"rank": int(os.environ.get("RANK", "0")), "pid": os.getpid(), "iters": rows}
    if _work is not None:
        work_rows, unit = _work.at_exit()
        record[WORK_KEY], record[WORK_UNIT_KEY], record[WORK_WAY_KEY] = work_rows, unit, _work.way
    return COUNTERS_PREFIX + json.dumps(record, separators=(",", ":"))


def print_counters_line() -> None:
    """atexit: one line per process, only when something was counted (a torchrun launcher
    that imports torch but trains nothing stays silent)."""
    global _printed
    if _printed or not (_rows or _total.any() or _modules_built):
        return
    _printed = True
    try:
        sys.stdout.write(counters_line() + "\n")
        sys.stdout.flush()
    except (OSError, ValueError):  # stdout closed: nothing to report to
        pass
