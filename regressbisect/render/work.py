"""The work per step of a culprit and its parent, and the one-line reading that puts it against
throughput (docs/design.md, "Work per step"). Pure: the counting arm's counts in (Sample.counters
under `work.`, probe/work.py), JSON-ready dicts and strings out; no torch, no I/O.

The reading never names a cause the counts do not show: it says whether the FLOPs moved enough to
explain the throughput step (time taken as proportional to FLOPs: the most compute could explain),
and lists only counts that changed. A compiled program is counted the graph+profiler way (graph
calls by compiled function, graph breaks, the profiler's kernels and syncs): its counts are
compared only with counts taken the same way.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

from regressbisect.probe.contract import WORK_PREFIX, WORK_UNITS, WORK_WAYS

NAMED = (("lm_head_calls", "lm_head-width matmul calls"), ("create_block_mask_calls", "create_block_mask calls"),
         ("host_syncs", "host syncs"), ("kernel_launches", "kernel launches"))
"""The counts a reading names by their meaning, in this order (today's counters and the kernels)."""
PROFILED_SYNCS = "host syncs seen by the profiler"
"""The graph+profiler way's `syncs` (in compiled code too), named where they moved otherwise than
the shim's host_syncs."""
NOT_COUNTED = {WORK_WAYS[0]: "shapes torch's formulas do not cover", WORK_WAYS[1]: "higher-order ops: no FLOP formula"}
"""Why a side's `flops_uncounted_by_op` has no FLOPs, by way."""
NOT_MORE = 0.01
"""FLOPs within 1% of the parent's are 'not more compute' (counts are exact: this is only what
is too small to matter against a step of --min-effect)."""
MOST, PART = 2 / 3, 1 / 4
"""Shares of the throughput step the FLOPs change could explain: 'most' from 2/3, 'part' from 1/4."""
TOP = 10
"""Rows of the table of a culprit (the JSON keeps TOP_CHANGES)."""
TOP_CHANGES = 20
OP_ENTRIES = 3
"""Op entries of a reading: the ops that appear (one entry), those that go away (one), then the
ops whose calls changed most."""
OPS_LISTED = 8
"""Ops one entry of a reading lists by name (an op switch: the new kernel in, the hand-written
ops it replaced out); past it, 'and N more'."""


def split_counts(counts: Mapping[str, float] | None) -> tuple[dict[str, float], dict[str, float]]:
    """Sample counters -> (today's counters, the counting arm's `work.` counts without the prefix)."""
    plain, work = {}, {}
    for name, value in (counts or {}).items():
        if name.startswith(WORK_PREFIX):
            work[name[len(WORK_PREFIX):]] = value
        else:
            plain[name] = value
    return plain, work


def side_json(counts: Mapping[str, float] | None) -> dict[str, Any]:
    """One side (a commit) of the work table from the counting arm's counts; {} without them."""
    _, work = split_counts(counts)
    if not work:
        return {}
    unit_index = int(work.get("unit", len(WORK_UNITS) - 1))
    way_index = int(work.get("way", 0))   # counts from before the ways: a dispatch mode's
    arm_ms = work.get("arm_ms")
    cbm_ms = work.get("create_block_mask_ms", 0.0)

    def by_op(prefix: str) -> dict[str, float]:
        ops = {k[len(prefix):]: v for k, v in work.items() if k.startswith(prefix) and v}
        return dict(sorted(ops.items(), key=lambda kv: (-kv[1], kv[0])))

    return {
        "unit": WORK_UNITS[unit_index] if 0 <= unit_index < len(WORK_UNITS) else WORK_UNITS[-1],
        "way": WORK_WAYS[way_index] if 0 <= way_index < len(WORK_WAYS) else WORK_WAYS[0],
        "rows": int(work.get("rows", 0)),
        "flops": work.get("flops", 0.0),
        "flops_by_op": by_op("flops:"),
        "flops_uncounted_by_op": by_op("uncounted:"),   # calls whose shapes torch's formulas do not cover
        "aten_calls": work.get("calls", 0.0),
        "calls_by_op": by_op("calls:"),
        "matmul_calls_by_width": by_op("width:"),
        "lm_head_calls": work.get("lm_head_calls", 0.0),
        "create_block_mask_calls": work.get("create_block_mask_calls", 0.0),
        "host_syncs": work.get("host_syncs", 0.0),
        "kernel_launches": work.get("kernels"),   # None: not CUDA
        "kernels_by_family": by_op("kernels:"),
        "graph_calls": work.get("graphs", 0.0),
        "graphs_by_function": by_op("graphs:"),
        "graph_breaks": work.get("graph_breaks", 0.0),   # the process's, not per step
        "graph_breaks_by_reason": by_op("break:"),
        # None: the dispatch way, which does not profile the CPU
        "profiled_syncs": work.get("syncs", 0.0) if way_index == 1 else work.get("syncs"),
        "cpu_ops_by_op": by_op("cpu_ops:"),
        "create_block_mask_share": (cbm_ms / arm_ms) if arm_ms else None,
        "arm_ms": arm_ms,
    }


def top_changes(before: Mapping[str, Any], after: Mapping[str, Any], limit: int = TOP_CHANGES) -> list[dict[str, Any]]:
    """Counts that differ, biggest first: relative change |a-b| / max(a, b) (an op that appears
    or goes away is 1), then the absolute change. Named counters, calls per op, FLOPs per op,
    matmul calls per output width."""
    if not before or not after:
        return []
    entries = []
    for name in [n for n, _ in NAMED] + ["graph_breaks", "profiled_syncs"]:
        entries.append((name, "counter", before.get(name), after.get(name)))
    for what, key in (("calls", "calls_by_op"), ("flops", "flops_by_op"), ("width", "matmul_calls_by_width"),
                      ("graphs", "graphs_by_function"), ("kernels", "kernels_by_family"), ("cpu_ops", "cpu_ops_by_op")):
        b_ops, a_ops = before.get(key) or {}, after.get(key) or {}
        entries += [(op, what, b_ops.get(op, 0.0), a_ops.get(op, 0.0)) for op in set(b_ops) | set(a_ops)]
    changes = []
    for name, what, b, a in entries:
        if not (_finite(b) and _finite(a)) or a == b:
            continue
        changes.append({"name": name, "what": what, "before": b, "after": a, "change": a - b})
    # ties: the named counters, then calls per op (the op diff; an op's FLOPs and matmul widths
    # detail it and would crowd it out), then an op that appears (news), then the larger change
    changes.sort(key=lambda c: (-abs(c["change"]) / max(abs(c["before"]), abs(c["after"])),
                                c["what"] != "counter", c["what"] != "calls", c["before"] != 0,
                                -abs(c["change"]), c["name"]))
    return changes[:limit]


def reading(before: Mapping[str, Any], after: Mapping[str, Any], step_pct: float | None,
            unit: str = "tok/s") -> str:
    """One line: the work per step against the throughput step, then the counts that moved.

    e.g. 'work per step +0.0% (FLOPs), tok/s -33%: not more compute; +42 lm_head-width matmul
    calls per step'. '' without counts on both sides."""
    if not before or not after:
        return ""
    per = before.get("unit") or "step"
    if after.get("unit") != per:
        return (f"the counts cover a {per} before and a {after.get('unit')} after: not compared "
                f"(the program changed how it steps)")
    way = before.get("way") or WORK_WAYS[0]
    if (after.get("way") or WORK_WAYS[0]) != way:
        moved = _moved_counters(before, after, per)
        return (f"counted by {way} before and by {after.get('way')} after: not compared (the commit changed "
                f"whether the step is compiled or runs higher-order ops)" + (f"; {', '.join(moved)}" if moved else ""))
    flops_b, flops_a = before.get("flops") or 0.0, after.get("flops") or 0.0
    moved = _moved(before, after, per)
    step = step_pct / 100 if _finite(step_pct) else None
    if flops_b > 0:
        work = flops_a / flops_b - 1
        head = f"work per {per} {_signed(100 * work)} (FLOPs)"
    elif flops_a > 0:
        work = math.inf
        head = f"work per {per} from no counted FLOPs to {_amount(flops_a)}"
    else:
        work = None
        head = f"no FLOPs counted per {per} (no matmul, attention or convolution)"
    uncounted = sorted(set(before.get("flops_uncounted_by_op") or {}) | set(after.get("flops_uncounted_by_op") or {}))
    if uncounted:
        # FLOPs of those calls are missing on one side or both: no claim about compute
        head += f" without the FLOPs of {', '.join(uncounted)} ({NOT_COUNTED.get(way, NOT_COUNTED[WORK_WAYS[0]])})"
    if step is not None:
        head += f", {unit} {_signed(100 * step)}"
    verdict = "" if uncounted else _compute_verdict(work, step)
    if not moved and work is not None and abs(work) < 1e-12:
        return (f"{head}: the same work and the same calls per {per}; the counts do not show why "
                f"(look beyond compute: memory, threads, data, the machine)")
    text = head + (f": {verdict}" if verdict else "")
    return text + (f"; {', '.join(moved)}" if moved else "")


def _compute_verdict(work: float | None, step: float | None) -> str:
    """What the FLOPs change can say about the throughput step, and nothing more."""
    if work is None or step is None or step == 0:
        return ""
    slower = step < 0
    if slower and work <= NOT_MORE:
        return "not more compute"
    if not slower and work >= -NOT_MORE:
        return "not less compute"
    # Were time proportional to FLOPs, throughput would change by 1/(1+work) - 1
    expected = -1.0 if math.isinf(work) else 1 / (1 + work) - 1
    explained = expected / step
    more = "extra" if slower else "lower"
    if explained >= MOST:
        return f"the {more} compute explains most of it"
    if explained >= PART:
        return f"the {more} compute explains about {min(explained, 1):.0%} of it"
    return f"the {more} compute explains little of it"


def _moved(before: Mapping[str, Any], after: Mapping[str, Any], per: str) -> list[str]:
    """Named counts that changed, then the ops whose calls changed most (with their widths)."""
    lines = _moved_counters(before, after, per)
    ops = [c for c in top_changes(before, after, limit=10 ** 6) if c["what"] == "calls"]
    entries = [entry for entry in (_switch_line([c for c in ops if not c["before"]], after, per, "appear"),
                                   _switch_line([c for c in ops if not c["after"]], before, per, "go away"))
               if entry]
    changed = [c for c in ops if c["before"] and c["after"]]
    entries += [_op_line(c, before, after, per) for c in changed[:max(0, OP_ENTRIES - len(entries))]]
    return lines + entries


def _moved_counters(before: Mapping[str, Any], after: Mapping[str, Any], per: str) -> list[str]:
    """Graphs per compiled function, the named counters, the profiler's syncs and the graph
    breaks that changed: '+1 create_block_mask graph per step', '+2 host syncs per step',
    '+1 graph break (<reason>)'."""
    lines = []
    graphs_b, graphs_a = before.get("graphs_by_function") or {}, after.get("graphs_by_function") or {}
    for function in sorted(set(graphs_b) | set(graphs_a)):
        change = graphs_a.get(function, 0) - graphs_b.get(function, 0)
        if change:
            lines.append(f"{_signed_count(change)} {function} graph{'' if abs(change) == 1 else 's'} per {per}")
    for name, label in NAMED:
        b, a = before.get(name), after.get(name)
        if _finite(b) and _finite(a) and a != b:
            line = f"{_signed_count(a - b)} {label} per {per}"
            if name == "create_block_mask_calls":
                shares = before.get("create_block_mask_share"), after.get("create_block_mask_share")
                if all(_finite(s) for s in shares):
                    line += f" (host time {shares[0]:.0%} -> {shares[1]:.0%} of a counted {per})"
            lines.append(line)
    syncs = _change(before, after, "profiled_syncs")
    if syncs and syncs != _change(before, after, "host_syncs"):   # the same syncs are named once
        lines.append(f"{_signed_count(syncs)} {PROFILED_SYNCS} per {per}")
    breaks = _change(before, after, "graph_breaks")
    if breaks:
        reasons_b, reasons_a = before.get("graph_breaks_by_reason") or {}, after.get("graph_breaks_by_reason") or {}
        moved = [r for r in sorted(set(reasons_b) | set(reasons_a))
                 if (reasons_a.get(r, 0) - reasons_b.get(r, 0)) * breaks > 0]
        lines.append(f"{_signed_count(breaks)} graph break{'' if abs(breaks) == 1 else 's'}"
                     + (f" ({'; '.join(moved)})" if moved else ""))
    return lines


def _change(before: Mapping[str, Any], after: Mapping[str, Any], name: str) -> float:
    b, a = before.get(name), after.get(name)
    return a - b if _finite(b) and _finite(a) else 0.0


def _switch_line(ops: list[dict[str, Any]], side: Mapping[str, Any], per: str, verb: str) -> str:
    """The ops that appear (or go away), named together: those that carry FLOPs first (the new
    kernel, the matmuls it replaced), then by calls; '' without any."""
    if not ops:
        return ""
    flops = side.get("flops_by_op") or {}
    calls = {c["name"]: c["after"] or c["before"] for c in ops}
    names = sorted(calls, key=lambda name: (not flops.get(name), -calls[name], name))
    if len(names) == 1:
        [name] = names
        return (f"{name} appears ({_count(calls[name])} calls per {per})" if verb == "appear"
                else f"{name} goes away ({_count(calls[name])} calls per {per} before)")
    listed = ", ".join(f"{name} ({_count(calls[name])})" for name in names[:OPS_LISTED])
    more = f" and {len(names) - OPS_LISTED} more" if len(names) > OPS_LISTED else ""
    return f"{listed}{more} {verb} (calls per {per}{'' if verb == 'appear' else ' before'})"


def _op_line(change: Mapping[str, Any], before: Mapping[str, Any], after: Mapping[str, Any], per: str) -> str:
    name, b, a = change["name"], change["before"], change["after"]
    if not b:
        return f"{name} appears ({_count(a)} calls per {per})"
    if not a:
        return f"{name} goes away ({_count(b)} calls per {per} before)"
    text = f"{name} {_signed_count(a - b)} calls per {per}"
    widths_b, widths_a = before.get("matmul_calls_by_width") or {}, after.get("matmul_calls_by_width") or {}
    moved = sorted(((widths_a.get(k, 0) - widths_b.get(k, 0), k) for k in set(widths_b) | set(widths_a)
                    if k.startswith(name + "@")), key=lambda d: -abs(d[0]))
    if moved and moved[0][0]:
        text += f" ({_signed_count(moved[0][0])} of width {_amount(float(moved[0][1].split('@')[1]))})"
    return text


def culprit_work(before_counts: Mapping[str, float] | None, after_counts: Mapping[str, float] | None,
                 step_pct: float | None, unit: str = "tok/s") -> dict[str, Any] | None:
    """`culprits[].work` of the JSON report; None without the counting arm's counts on both sides."""
    before, after = side_json(before_counts), side_json(after_counts)
    if not before or not after:
        return None
    return {"before": before, "after": after, "top_changes": top_changes(before, after),
            "reading": reading(before, after, step_pct, unit)}


def table_rows(work: Mapping[str, Any], limit: int = TOP) -> list[list[str]]:
    """The small table of a culprit's work: totals, then the biggest changes. Columns: count,
    before, after, change."""
    before, after = work.get("before") or {}, work.get("after") or {}
    ways = before.get("way") or WORK_WAYS[0], after.get("way") or WORK_WAYS[0]
    calls = {(WORK_WAYS[0],) * 2: "aten calls", (WORK_WAYS[1],) * 2: "graph op calls"}.get(ways, "op calls")
    rows = [["FLOPs", _amount(before.get("flops")), _amount(after.get("flops")), _pct_change(before.get("flops"), after.get("flops"))],
            [calls, _amount(before.get("aten_calls")), _amount(after.get("aten_calls")),
             _signed_count((after.get("aten_calls") or 0) - (before.get("aten_calls") or 0))],
            ["counted by", ways[0], ways[1], ""]]
    if before.get("kernel_launches") is None and after.get("kernel_launches") is None:
        rows.append(["kernel launches", "none (CPU)", "none (CPU)", ""])
    for change in (work.get("top_changes") or [])[:limit]:
        label = {"counter": "", "calls": " calls", "flops": " FLOPs", "width": " calls (matmul width)",
                 "graphs": " graphs", "kernels": " kernels", "cpu_ops": " CPU ops"}.get(change["what"], "")
        delta = (_pct_change(change["before"], change["after"]) if change["what"] == "flops"
                 else _signed_count(change["change"]))
        rows.append([f"{change['name']}{label}", _amount(change["before"]), _amount(change["after"]), delta])
    share_b, share_a = before.get("create_block_mask_share"), after.get("create_block_mask_share")
    if _finite(share_b) and _finite(share_a) and (before.get("create_block_mask_calls") or after.get("create_block_mask_calls")):
        rows.append(["create_block_mask host share (counting arm)", f"{share_b:.0%}", f"{share_a:.0%}", ""])
    return rows



def table_headers(work: Mapping[str, Any]) -> tuple[str, ...]:
    per = (work.get("before") or {}).get("unit") or "step"
    return (f"per {per}", "before", "after", "change")


def _signed(pct: float) -> str:
    return f"{pct:+.1f}%" if abs(pct) < 10 else f"{pct:+.0f}%"


def _pct_change(b: Any, a: Any) -> str:
    if not (_finite(b) and _finite(a)):
        return ""
    if b == 0:
        return "new" if a else ""
    return _signed(100 * (a / b - 1))


def _count(value: float) -> str:
    return f"{value:g}" if value == int(value) else f"{value:.1f}"


def _signed_count(value: float) -> str:
    return ("+" if value > 0 else "") + _count(value)


def _amount(value: Any) -> str:
    """1234567 -> '1.23M'; small counts as they are; '-' when missing."""
    if not _finite(value):
        return "-"
    for size, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return _count(value)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
