"""The work per step (render/work.py): the reading rule, pure, over its cases; the table, the JSON
entry and how text, Markdown and HTML show them."""
from __future__ import annotations

import itertools

import pytest

from regressbisect.render import work
from regressbisect.render.html import render_html
from regressbisect.render.markdown import render_markdown
from regressbisect.render.text import render_summary


def side(flops=1e9, calls=None, unit="step", lm_head=6, cbm=1, syncs=2, kernels=None, widths=None,
         cbm_share=None, flops_by_op=None):
    calls = {"aten.mm": 40, "aten.add": 100} if calls is None else calls
    return {"unit": unit, "rows": 3, "flops": flops, "flops_by_op": flops_by_op or ({"aten.mm": flops} if flops else {}),
            "aten_calls": sum(calls.values()), "calls_by_op": calls, "matmul_calls_by_width": widths or {},
            "lm_head_calls": lm_head, "create_block_mask_calls": cbm, "host_syncs": syncs,
            "kernel_launches": kernels, "create_block_mask_share": cbm_share, "arm_ms": 100.0}


# -- the reading rule ------------------------------------------------------------------------------

def test_same_flops_more_lm_head_calls_is_not_more_compute():
    before = side(lm_head=6, calls={"aten.mm": 40}, widths={"aten.mm@2048": 12})
    after = side(lm_head=48, calls={"aten.mm": 124}, widths={"aten.mm@2048": 96})
    text = work.reading(before, after, -33.0)
    assert text.startswith("work per step +0.0% (FLOPs), tok/s -33%: not more compute; ")
    assert "+42 lm_head-width matmul calls per step" in text
    assert "aten.mm +84 calls per step (+84 of width 2.05K)" in text
    assert "explains" not in text


def test_more_mask_calls_with_their_share_of_the_counting_arm():
    text = work.reading(side(cbm=1, cbm_share=0.10), side(cbm=2, cbm_share=0.25), -25.0)
    assert text.startswith("work per step +0.0% (FLOPs), tok/s -25%: not more compute; ")
    assert "+1 create_block_mask calls per step (host time 10% -> 25% of a counted step)" in text


def test_less_flops_slower_names_only_what_moved():
    text = work.reading(side(flops=1e9, cbm=1, syncs=2), side(flops=0.92e9, cbm=5, syncs=18), -22.0)
    assert text == ("work per step -8.0% (FLOPs), tok/s -22%: not more compute; +4 create_block_mask calls "
                    "per step, +16 host syncs per step")


@pytest.mark.parametrize("flops_after, step, phrase", [
    (1.41e9, -19.0, "the extra compute explains most of it"),       # 1/1.41 - 1 = -29% >= -19%
    (1.10e9, -30.0, "the extra compute explains about 30% of it"),   # -9.1% of -30%
    (1.03e9, -30.0, "the extra compute explains little of it"),      # -2.9% of -30%
    (1.005e9, -30.0, "not more compute"),                            # within 1%
    (0.70e9, +30.0, "the lower compute explains most of it"),        # a speed-up: +43% >= +30%
    (1.00e9, +12.0, "not less compute"),
])
def test_the_compute_verdict(flops_after, step, phrase):
    text = work.reading(side(), side(flops=flops_after, syncs=3), step)
    assert text.split(": ", 1)[1].startswith(phrase), text


def test_the_example_of_the_issue_explains_most():
    before = side(flops=1e9, calls={"aten.mm": 100}, widths={"aten.mm@248320": 8})
    after = side(flops=1.41e9, calls={"aten.mm": 164}, widths={"aten.mm@248320": 72})
    text = work.reading(before, after, -19.0)
    assert text.startswith("work per step +41% (FLOPs), tok/s -19%: the extra compute explains most of it; ")
    assert "aten.mm +64 calls per step (+64 of width 248K)" in text


def test_nothing_moved_says_the_counts_do_not_show_why():
    text = work.reading(side(), side(), -15.0)
    assert "the same work and the same calls per step; the counts do not show why" in text
    assert "compute explains" not in text


def test_no_flops_on_either_side_claims_nothing_about_compute():
    text = work.reading(side(flops=0, calls={"aten.add": 10}), side(flops=0, calls={"aten.add": 30}), -40.0)
    assert text.startswith("no FLOPs counted per step (no matmul, attention or convolution), tok/s -40%; ")
    assert "aten.add +20 calls per step" in text and "compute" not in text.split(";")[1]


def test_flops_from_none_to_some_can_explain():
    text = work.reading(side(flops=0), side(flops=5e6), -30.0)
    assert text.startswith("work per step from no counted FLOPs to 5M, tok/s -30%: the extra compute explains most")


def test_ops_that_appear_and_go_away_are_named():
    before = side(calls={"aten.bmm": 8, "aten.add": 100})
    after = side(calls={"aten._scaled_dot_product_flash_attention_for_cpu": 2, "aten.add": 100})
    text = work.reading(before, after, -5.0)
    assert "aten._scaled_dot_product_flash_attention_for_cpu appears (2 calls per step)" in text
    assert "aten.bmm goes away (8 calls per step before)" in text
    assert text.index("appears") < text.index("aten.bmm")   # what is new first, among equals


# karpathy/nanoGPT ae06d0b ("add flash attention support"), calls per step of a 2-layer GPT on CPU
# as the counting arm read them at the commit and its parent (docs/results/work-nanogpt.md), less
# the ops whose calls did not change
NANOGPT_SAME = {"aten.mm": 19, "aten.addmm": 8, "aten.add_": 56, "aten.t": 45, "aten.native_layer_norm": 5}
NANOGPT_BEFORE = {**NANOGPT_SAME, "aten.view": 70, "aten.transpose": 28, "aten.mul": 26, "aten._unsafe_view": 17,
                  "aten.clone": 14, "aten.bmm": 12, "aten.expand": 8, "aten.masked_fill": 4, "aten._softmax": 2,
                  "aten._softmax_backward_data": 2, "aten.alias": 2, "aten.eq": 2}
NANOGPT_AFTER = {**NANOGPT_SAME, "aten.view": 62, "aten.transpose": 16, "aten.mul": 22, "aten._unsafe_view": 1,
                 "aten._scaled_dot_product_flash_attention_for_cpu": 2,
                 "aten._scaled_dot_product_flash_attention_for_cpu_backward": 2}
SDPA = "aten._scaled_dot_product_flash_attention_for_cpu"


def _nanogpt_counts(calls, flops):
    return {"work.unit": 0.0, "work.rows": 3.0, "work.flops": sum(flops.values()), "work.calls": sum(calls.values()),
            **{f"work.calls:{op}": float(n) for op, n in calls.items()},
            **{f"work.flops:{op}": float(n) for op, n in flops.items()}}


def test_an_op_switch_names_every_op_it_brings_in_and_every_op_it_takes_out():
    """The reading and the table show the whole switch: SDPA in, the hand-written attention's
    matmuls, causal mask and softmax out, not only the op with the biggest count (a layout copy)."""
    before = _nanogpt_counts(NANOGPT_BEFORE, {"aten.mm": 6.04e8, "aten.addmm": 2.01e8, "aten.bmm": 4.03e8})
    after = _nanogpt_counts(NANOGPT_AFTER, {"aten.mm": 6.04e8, "aten.addmm": 2.01e8, SDPA: 1.34e8,
                                            SDPA + "_backward": 3.36e8})
    entry = work.culprit_work(before, after, +50.0)
    text = entry["reading"]
    assert (f"{SDPA} (2), {SDPA}_backward (2) appear (calls per step)") in text, text
    assert ("aten.bmm (12), aten.clone (14), aten.expand (8), aten.masked_fill (4), aten._softmax (2), "
            "aten._softmax_backward_data (2), aten.alias (2), aten.eq (2) go away (calls per step before)") in text, text
    assert text.index("appear") < text.index("go away") < text.index("aten._unsafe_view -16 calls per step")
    shown = {row[0] for row in work.table_rows(entry)}
    for op in (SDPA, SDPA + "_backward", "aten.bmm", "aten.masked_fill", "aten._softmax", "aten._softmax_backward_data"):
        assert f"{op} calls" in shown, op


def test_a_long_switch_lists_the_first_ops_and_counts_the_rest():
    before = side(calls={f"aten.op{i:02d}": 1 for i in range(work.OPS_LISTED + 3)})
    text = work.reading(before, side(calls={"aten.mm": 40}), -5.0)
    assert f"aten.op{work.OPS_LISTED - 1:02d} (1) and 3 more go away (calls per step before)" in text, text


def test_windows_and_kernels():
    text = work.reading(side(unit="window", kernels=100), side(unit="window", kernels=160), -10.0)
    assert text.startswith("work per window +0.0% (FLOPs), tok/s -10%")
    assert "+60 kernel launches per window" in text


def test_no_counts_and_different_units():
    assert work.reading({}, side(), -10.0) == ""
    assert work.reading(side(), {}, -10.0) == ""
    assert "not compared" in work.reading(side(unit="step"), side(unit="run"), -10.0)
    assert work.culprit_work(None, {"work.flops": 1.0}, -10.0) is None


def test_never_claims_compute_the_flops_do_not_show():
    """Over a grid of cases: 'explains' only when the FLOPs moved in the step's direction by more
    than 1%, and a count is named only when it changed."""
    for flops_after, step, syncs_after in itertools.product((0.5e9, 0.99e9, 1e9, 1.009e9, 1.2e9, 3e9),
                                                            (-40.0, -5.0, 5.0, 40.0), (2, 10)):
        text = work.reading(side(), side(flops=flops_after, syncs=syncs_after), step)
        change = flops_after / 1e9 - 1
        claims = "compute explains" in text
        assert claims == ((step < 0 and change > work.NOT_MORE) or (step > 0 and change < -work.NOT_MORE)), text
        assert ("host syncs" in text) == (syncs_after != 2), text


# -- the JSON entry and the table ------------------------------------------------------------------

COUNTS_BEFORE = {"lm_head_calls": 6.0, "host_syncs": 2.0, "work.unit": 0.0, "work.rows": 3.0, "work.flops": 1e9,
                 "work.flops:aten.mm": 1e9, "work.calls": 140.0, "work.calls:aten.mm": 40.0,
                 "work.calls:aten.add": 100.0, "work.width:aten.mm@2048": 12.0, "work.lm_head_calls": 6.0,
                 "work.create_block_mask_calls": 1.0, "work.create_block_mask_ms": 10.0, "work.host_syncs": 2.0,
                 "work.arm_ms": 100.0}
COUNTS_AFTER = {**COUNTS_BEFORE, "lm_head_calls": 48.0, "work.lm_head_calls": 48.0, "work.calls:aten.mm": 124.0,
                "work.calls": 224.0, "work.width:aten.mm@2048": 96.0}


def test_culprit_work_json_and_biggest_changes_first():
    entry = work.culprit_work(COUNTS_BEFORE, COUNTS_AFTER, -33.0)
    assert set(entry) == {"before", "after", "top_changes", "reading"}
    assert entry["before"]["unit"] == "step" and entry["before"]["kernel_launches"] is None
    assert entry["before"]["create_block_mask_share"] == pytest.approx(0.1)
    assert [(c["name"], c["what"], c["change"]) for c in entry["top_changes"]] == [
        ("lm_head_calls", "counter", 42.0), ("aten.mm@2048", "width", 84.0), ("aten.mm", "calls", 84.0)]
    assert work.split_counts(COUNTS_BEFORE)[0] == {"lm_head_calls": 6.0, "host_syncs": 2.0}
    rows = work.table_rows(entry)
    assert rows[0] == ["FLOPs", "1G", "1G", "+0.0%"] and rows[1] == ["aten calls", "140", "224", "+84"]
    assert ["kernel launches", "none (CPU)", "none (CPU)", ""] in rows


def _report():
    return {"schema": 3, "kind": "commits", "verdict": "culprits", "unit": "tok/s", "good": "a" * 40, "bad": "b" * 40,
            "culprits": [{"commit": "c" * 40, "parent": "d" * 40, "subject": "Lower the lm_head chunk 8x",
                          "step_pct": -33.0, "ci95_pct": [-36.0, -30.0], "share_of_gap": 0.6,
                          "counters_before": {"lm_head_calls": 6.0, "create_block_mask_ms": 27.6},
                          "counters_after": {"lm_head_calls": 48.0, "create_block_mask_ms": 28.7},
                          "work": work.culprit_work(COUNTS_BEFORE, COUNTS_AFTER, -33.0)}],
            "candidates": [], "probes": 20, "cached_samples": 0,
            "cost": {"probe_wall_s": 100.0, "gpu_s": 0, "counting_arm": {"probes": 4, "seconds": 31.0, "commits": 4}}}


def test_text_markdown_and_html_show_the_reading_and_the_table(tmp_path):
    reading = _report()["culprits"][0]["work"]["reading"]
    text = render_summary(_report())
    assert f"  reading: {reading}" in text.splitlines()
    assert any(line.split() == ["lm_head_calls", "6", "48", "+42"] for line in text.splitlines())
    assert "Counting arm (work per step; never tok/s): 4 probe(s), 31 s, at 4 commit(s)." in text
    assert "host ms/iter" not in text        # a time under the counting arm: only its share is shown
    markdown = render_markdown(_report())
    assert f"   - reading: {reading}" in markdown
    assert "| per step" in markdown and "| lm_head_calls " in markdown
    page = render_html(_report(), tmp_path).read_text()
    assert "<b>Reading:</b>" in page and "<th>per step</th>" in page and "<td>lm_head_calls</td>" in page


def test_an_old_report_without_work_renders_as_before():
    report = _report()
    del report["culprits"][0]["work"]
    assert "reading:" not in render_summary(report) and "reading:" not in render_markdown(report)
    assert "create_block_mask host ms/iter 27.6 -> 28.7 (+1.1)" in render_summary(report)


def test_calls_whose_flops_were_not_counted_void_the_compute_verdict():
    before, after = side(flops=1e9), side(flops=1e9)
    after["flops_uncounted_by_op"] = {"aten._scaled_dot_product_efficient_attention": 24}
    text = work.reading(before, after, -20.0)
    assert "without the FLOPs of aten._scaled_dot_product_efficient_attention" in text
    assert "not more compute" not in text and "explains" not in text


# -- the graph+profiler way (a compiled step) -------------------------------------------------------

def graph_side(masks=1, kernels=None, syncs=0, profiled_syncs=None, breaks=None, calls=None, uncounted=None):
    """A side counted the graph+profiler way: graph calls per compiled function, graph breaks by reason."""
    counts = side(flops=1e9, calls=calls or {"flex_attention": 2, "torch.linear": 4}, lm_head=0, cbm=0, syncs=syncs,
                  kernels=kernels)
    counts.update({"way": "graph+profiler", "graphs_by_function": {"step": 1, "create_block_mask": masks},
                   "graph_calls": 1 + masks, "graph_breaks": sum((breaks or {}).values()),
                   "graph_breaks_by_reason": breaks or {}, "profiled_syncs": syncs if profiled_syncs is None else profiled_syncs,
                   "flops_uncounted_by_op": uncounted or {}})
    return counts


def test_a_compiled_step_reads_in_graphs_kernels_syncs_and_graph_breaks():
    before = graph_side(masks=1, kernels=100, syncs=0)
    after = graph_side(masks=2, kernels=164, syncs=2, breaks={"Unsupported Tensor.item() call": 1})
    text = work.reading(before, after, -20.0)
    assert ("+1 create_block_mask graph per step, +2 host syncs per step, +64 kernel launches per step, "
            "+1 graph break (Unsupported Tensor.item() call)") in text, text
    assert "seen by the profiler" not in text        # the same syncs, named once


def test_syncs_only_the_profiler_sees_are_named_as_such():
    """.item() captured into the graph (capture_scalar_outputs) never reaches the shim's Tensor.item."""
    text = work.reading(graph_side(), graph_side(profiled_syncs=3), -10.0)
    assert "+3 host syncs seen by the profiler per step" in text and "+3 host syncs per step" not in text


def test_higher_order_ops_are_listed_as_not_counted():
    text = work.reading(graph_side(uncounted={"flex_attention": 2}), graph_side(uncounted={"flex_attention": 2}), -10.0)
    assert "without the FLOPs of flex_attention (higher-order ops: no FLOP formula)" in text
    assert "explains" not in text and "not more compute" not in text


def test_a_commit_that_compiles_the_step_is_not_compared_op_by_op():
    text = work.reading(side(syncs=2), graph_side(syncs=4), -10.0)
    assert text.startswith("counted by dispatch before and by graph+profiler after: not compared"), text
    assert "+1 create_block_mask graph per step" in text and "+2 host syncs per step" in text
    assert "appear" not in text


def test_the_table_says_how_each_side_was_counted():
    before, after = graph_side(), graph_side(masks=2, breaks={"Unsupported Tensor.item() call": 1})
    entry = {"before": before, "after": after, "top_changes": work.top_changes(before, after)}
    rows = work.table_rows(entry)
    assert ["counted by", "graph+profiler", "graph+profiler", ""] in rows
    assert rows[1][0] == "graph op calls"
    assert ["create_block_mask graphs", "1", "2", "+1"] in rows and ["graph_breaks", "0", "1", "+1"] in rows
    old = work.side_json(COUNTS_BEFORE)   # counts from before the ways: the dispatch way's
    assert old["way"] == "dispatch" and old["graphs_by_function"] == {} and old["profiled_syncs"] is None
