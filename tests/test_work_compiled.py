"""The counting arm's graph+profiler way (probe/work_graphs.py, probe/work_profiler.py): a compiled
step, or one that runs higher-order ops, counted by the graphs dynamo captured and a profiler per
step, on real programs on CPU; and a culprit that adds a mask build, an `.item()` sync or a graph
break, read in those terms."""
from __future__ import annotations

import re
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from regressbisect.probe.contract import WORK_STEPS
from regressbisect.probe.runner import ProbeSpec, run_probe
from regressbisect.render.work import culprit_work
from regressbisect.testing.workprograms import COMPILED_FLEX, make_compiled_flex_repo

from tests.test_instrument import PACKAGE_ROOT, _counter_lines, _run

COMPILE_PATCHED = """
    import torch
    print("torch.compile patched:", hasattr(torch.compile, "__wrapped__"))
"""


@pytest.mark.parametrize("work, patched", [("1", True), ("0", False)])
def test_torch_compile_is_patched_in_the_counting_arm_only(tmp_path, work, patched):
    proc = _run(COMPILE_PATCHED, tmp_path, [PACKAGE_ROOT], REGRESSBISECT_WORK=work)
    assert proc.returncode == 0, proc.stderr
    assert f"torch.compile patched: {patched}" in proc.stdout


def test_the_backend_the_program_asked_for_compiles_the_graph_and_higher_order_ops_count_by_name(monkeypatch):
    """torch.cond under a backend of the program's own: the graph reaches that backend, cond is
    counted by name, and the dispatch modes are left for the graphs' way."""
    import torch

    from regressbisect.probe.work import WorkCounter

    monkeypatch.setattr(torch, "compile", torch.compile)   # the counter patches it: put it back after
    seen = []

    def own_backend(gm, example_inputs):
        seen.append(gm)
        return gm.forward

    def step(x):
        return torch.cond(x.sum() > 0, lambda t: t.sin(), lambda t: t.cos(), (x,))

    counter = WorkCounter(torch, dict, lambda: False)
    counter.start()
    try:
        assert counter.way == "dispatch"
        compiled = torch.compile(step, backend=own_backend, fullgraph=True)
        assert counter.way == "graph+profiler" and not counter._modes
        for _ in range(2):
            compiled(torch.ones(3))
        counts = counter.cumulative()
    finally:
        counter.stop()
        counter.at_exit()
        torch._dynamo.reset()
    assert len(seen) == 1                                   # compiled once, by the program's backend
    assert counts["graphs"] == 2 and counts["graphs:step"] == 2
    assert counts["calls:cond"] == 2 and counts["uncounted:cond"] == 2


@pytest.mark.slow
def test_a_compiled_step_calling_flex_attention_is_counted_by_its_graphs(tmp_path):
    proc = _run(COMPILED_FLEX, tmp_path, [PACKAGE_ROOT], REGRESSBISECT_WORK="1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    [record] = _counter_lines(proc.stdout)
    assert record["work_way"] == "graph+profiler" and record["work_unit"] == "step"
    assert len(record["work"]) == WORK_STEPS
    for row in record["work"]:
        assert row["graphs:step"] == 1 and row["graphs:create_block_mask"] == 1
        assert row["calls:flex_attention"] == 1 == row["uncounted:flex_attention"]   # no FLOP formula
        assert row["calls:torch.linear"] == 1
        assert not row.get("graph_breaks")
        # the linear's forward and backward matmuls, from the profiler: 2*128*16*16 each, per step
        assert row["flops:aten.mm"] == 2 * 2 * 128 * 16 * 16
        assert "kernels" not in row                                                    # CPU: none


@pytest.mark.slow
def test_a_second_mask_build_and_an_item_sync_read_as_such(tmp_path):
    repo = tmp_path / "repo"
    shas = make_compiled_flex_repo(repo)
    trees = []
    for i, sha in enumerate(shas):
        trees.append(tmp_path / f"tree{i}")
        subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", str(trees[-1]), sha],
                       check=True, capture_output=True)
    spec = ProbeSpec(command="python train.py", tokens=640, timeout_s=600, instrument=True, work=True)
    with ThreadPoolExecutor(3) as pool:
        base, masks, item = pool.map(lambda tree: run_probe(spec, tree), trees)
    for outcome in (base, masks, item):
        assert outcome.sample is not None, outcome.skip_reason
    second_mask = culprit_work(base.sample.counters, masks.sample.counters, -10.0)
    assert second_mask["before"]["way"] == second_mask["after"]["way"] == "graph+profiler"
    assert "+1 create_block_mask graph per step" in second_mask["reading"], second_mask["reading"]
    assert "graph break" not in second_mask["reading"]
    sync = culprit_work(masks.sample.counters, item.sample.counters, -10.0)
    text = sync["reading"]
    assert "+1 host syncs seen by the profiler per step" in text, text
    assert re.search(r"\+\d graph breaks? \([^)]*Tensor\.item\(\)", text), text   # the break, named
    assert "+1 step graph per step" in text, text                                 # the step split in two


def test_the_profiler_summary_groups_kernels_by_family_and_counts_each_sync_once():
    """What a CUDA trace holds, without CUDA: kernels by family, an `.item()` (its op and the stream
    synchronize it makes) one sync, an explicit synchronize another, FLOPs of the outermost op."""
    import torch

    from regressbisect.probe.work_profiler import family, summary

    cpu, cuda = torch.autograd.DeviceType.CPU, torch.autograd.DeviceType.CUDA

    class Event:
        def __init__(self, name, device=cpu, parent=None, flops=0):
            self.name, self.device_type, self.cpu_parent, self.flops = name, device, parent, flops

    item = Event("aten::item")
    dense = Event("aten::_local_scalar_dense", parent=item)
    matmul = Event("aten::matmul", flops=100)
    events = [Event("triton_poi_fused_add_0", cuda), Event("triton_poi_fused_mul_1", cuda),
              Event("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >(int)", cuda),
              Event("Memcpy DtoH (Device -> Pageable)", cuda), item, dense,
              Event("cudaStreamSynchronize", parent=dense), Event("cudaDeviceSynchronize"),
              matmul, Event("aten::mm", parent=matmul, flops=100)]
    counts = summary(torch, events)
    assert counts["kernels"] == 4 and counts["kernels:triton_poi"] == 2
    assert counts["kernels:at::native::vectorized_elementwise_kernel"] == 1 and counts["kernels:Memcpy DtoH"] == 1
    assert counts["syncs"] == 2
    assert counts["cpu_ops"] == 2 and counts["cpu_ops:aten.item"] == 1 and "cpu_ops:aten.mm" not in counts
    assert counts["flops"] == 100 == counts["flops:aten.matmul"]
    assert family("triton_red_fused_sum_3") == "triton_red" and family("sm90_xmma_gemm_f16f16_f32") == "sm90_xmma_gemm_f16f16_f32"


@pytest.mark.gpu
@pytest.mark.slow
def test_on_cuda_the_compiled_step_counts_kernel_launches_by_family(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    program = (COMPILED_FLEX.replace('device="cpu"', 'device="cuda"')
               .replace("torch.nn.Linear(16, 16)", "torch.nn.Linear(16, 16).cuda()")
               .replace("torch.randn(1, 2, 128, 16)", 'torch.randn(1, 2, 128, 16, device="cuda")'))
    proc = _run(program, tmp_path, [PACKAGE_ROOT], REGRESSBISECT_WORK="1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    [record] = _counter_lines(proc.stdout)
    assert record["work_way"] == "graph+profiler"
    for row in record["work"]:
        assert row["kernels"] > 0 and any(k.startswith("kernels:triton_") for k in row)
        assert row["calls:flex_attention"] == 1
