"""The counting arm's compiled graphs (probe/work.py): torch.compile, patched in that arm only,
wraps the backend the program asked for in a counting one. It receives each FX graph dynamo
captured, counts its nodes by op (higher-order ops such as flex_attention and cond by name), hands
the graph on unchanged to that backend (inductor, or the program's own) and counts each call of
what it compiled. Graph breaks come from dynamo's own counters. Loaded in the probe process by path,
like work.py; torch arrives as an argument.
"""
from __future__ import annotations

import functools
import sys
from collections import Counter
from types import ModuleType
from typing import Any, Callable

REASON_CHARS = 100
"""A graph break's reason is the first line of dynamo's message, cut to this."""
_STRUCTURAL = frozenset({"operator.getitem"})
"""Nodes that unpack a tuple: no work."""


def op_name(target: Any) -> str:
    """'flex_attention' (a higher-order op), 'aten.mm' (an aten op), 'torch.linear',
    'operator.add', 'Tensor.sum' (a method)."""
    if isinstance(target, str):
        return "Tensor." + target
    packet = getattr(target, "overloadpacket", None)
    if packet is not None:
        return str(packet)
    if _is_higher_order(target):
        return target.name()
    name = getattr(target, "__name__", None) or type(target).__name__
    module = getattr(target, "__module__", None) or ""
    if module in ("_operator", "operator"):
        return "operator." + name
    return ("torch." + name) if module.startswith("torch") else name


def _is_higher_order(target: Any) -> bool:
    ops = sys.modules.get("torch._ops")
    return ops is not None and isinstance(target, ops.HigherOrderOperator)


def graph_ops(gm: Any) -> tuple[Counter, frozenset[str]]:
    """(calls per op of one run of the graph, the higher-order ops among them)."""
    ops: Counter = Counter()
    higher = set()
    for node in gm.graph.nodes:
        if node.op not in ("call_function", "call_method"):
            continue
        name = op_name(node.target)
        if name in _STRUCTURAL:
            continue
        ops[name] += 1
        if _is_higher_order(node.target):
            higher.add(name)
    return ops, frozenset(higher)


def graph_breaks() -> dict[str, float]:
    """`graph_breaks` and `break:<reason>`: the graph breaks dynamo met in this process so far."""
    utils = sys.modules.get("torch._dynamo.utils")
    breaks = dict(getattr(utils, "counters", {}).get("graph_break", {})) if utils is not None else {}
    counts: Counter = Counter()
    for reason, times in breaks.items():
        counts["graph_breaks"] += times
        counts["break:" + (str(reason).strip().splitlines() or [""])[0][:REASON_CHARS]] += times
    return dict(counts)


class CountingBackend:
    """A torch.compile backend: counts, then compiles with `inner` (what torch.compile would have
    made of the program's backend, mode and options)."""

    def __init__(self, label: str, inner: Callable, on_call: Callable[[str, Counter, frozenset], None]):
        self.label = label
        self.inner = inner
        self.on_call = on_call
        self.__name__ = getattr(inner, "compiler_name", "counting")

    def __call__(self, gm: Any, example_inputs: Any) -> Callable:
        ops, higher = graph_ops(gm)   # before the backend: inductor may rewrite the graph
        compiled = self.inner(gm, example_inputs)
        on_call, label = self.on_call, self.label

        def run(*args: Any) -> Any:
            on_call(label, ops, higher)
            return compiled(*args)

        if getattr(compiled, "_boxed_call", False):   # it takes its arguments as one list: so does run
            run._boxed_call = True   # type: ignore[attr-defined]
        return run

    def reset(self) -> None:
        if hasattr(self.inner, "reset"):
            self.inner.reset()


def patch_compile(torch: ModuleType, switch: Callable[[], bool],
                  on_call: Callable[[str, Counter, frozenset], None]) -> None:
    """Make torch.compile count: at its first call `switch()` moves the counting arm to this way
    (False: it stays with the dispatch mode, and torch.compile is left as it is)."""
    original = torch.compile
    made: dict[Any, CountingBackend] = {}

    @functools.wraps(original)
    def compile(model: Any = None, **kwargs: Any) -> Any:
        if model is None:   # the decorator with arguments
            return lambda fn: compile(fn, **kwargs)
        if not switch():
            return original(model, **kwargs)
        backend = kwargs.pop("backend", "inductor")
        mode, options, name = kwargs.pop("mode", None), kwargs.pop("options", None), kwargs.pop("name", None)
        options = dict(options) if options else options
        # torch.compile reads these options itself, not the backend
        own = {k: options.pop(k) for k in ("guard_filter_fn",) if options and k in options}
        inner = None if options and options.get("use_aoti") else _inner(torch, backend, mode, options,
                                                                           kwargs.get("dynamic"), name)
        if inner is None:   # AOT inductor, or a torch without the wrappers: compile as asked, uncounted
            original_options = {**(options or {}), **own} if (options or own) else None
            return original(model, backend=backend, mode=mode, options=original_options,
                            **({"name": name} if name else {}), **kwargs)
        label = _label(torch, model)
        # one backend per function and settings, as torch's own wrappers compare equal: a function
        # compiled again at each call (create_block_mask(_compile=True)) keeps dynamo's cache
        key = (label, getattr(model, "__code__", id(model)), backend, mode, repr(options),
               kwargs.get("dynamic")) if isinstance(backend, str) else None
        counting = made.get(key) if key else None
        if counting is None:
            counting = CountingBackend(label, inner, on_call)
            if key:
                made[key] = counting
        return original(model, backend=counting, options=own or None, **kwargs)

    torch.compile = compile


def _inner(torch: ModuleType, backend: Any, mode: Any, options: Any, dynamic: Any, name: Any) -> Any:
    """The backend torch.compile makes of (backend, mode, options); None on a torch without it."""
    if backend is None:
        try:
            from torch._dynamo.backends.registry import get_default_backend
        except ImportError:   # a torch from before the default could change
            backend = "inductor"
        else:
            backend = get_default_backend()
    if mode is None and options is None:
        mode = "default"
    if backend == "inductor":
        wrapper = getattr(torch, "_TorchCompileInductorWrapper", None)
        if wrapper is None:
            return None
        try:
            return wrapper(mode, options, dynamic, name)
        except TypeError:   # before torch took `name`
            return wrapper(mode, options, dynamic)
    wrapper = getattr(torch, "_TorchCompileWrapper", None)
    return wrapper(backend, mode, options, dynamic) if wrapper is not None else None


def _label(torch: ModuleType, model: Any) -> str:
    """What the graphs of a compiled object are called: its function's name, its module's class."""
    owner = getattr(model, "__self__", None)
    if isinstance(owner, torch.nn.Module):   # nn.Module.compile() compiles its _call_impl
        return type(owner).__name__
    if isinstance(model, torch.nn.Module):
        return type(model).__name__
    return getattr(model, "__name__", None) or type(model).__name__
