"""The counting arm on real programs (probe/work.py through the shim, real subprocesses on CPU),
and what a hunt pays for it (a fake executor)."""
from __future__ import annotations

import math
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from regressbisect.config import build_config
from regressbisect.git.history import History
from regressbisect.hunts.commits import CommitHunt
from regressbisect.probe.contract import WORK_STEPS
from regressbisect.probe.protocol import parse_output
from regressbisect.probe.runner import ProbeSpec, run_probe
from regressbisect.render.work import culprit_work, side_json
from regressbisect.samples import ProbeOutcome, Sample
from regressbisect.testing.benchrepo import make_bench_repo
from regressbisect.testing.workprograms import INFERENCE, NO_TORCH, TRAIN, make_nanogpt_repo

from tests.test_instrument import PACKAGE_ROOT, _counter_lines, _run

@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The three programs under the counting arm, side by side."""
    scripts = {"train": TRAIN, "inference": INFERENCE, "no_torch": NO_TORCH}
    dirs = {name: tmp_path_factory.mktemp(name) for name in scripts}
    with ThreadPoolExecutor(3) as pool:
        futures = {name: pool.submit(_run, script, dirs[name], [PACKAGE_ROOT], REGRESSBISECT_WORK="1",
                                     REGRESSBISECT_LMHEAD_MIN_OUT="2048")
                   for name, script in scripts.items()}
        return {name: future.result() for name, future in futures.items()}


def test_training_steps_are_counted_exactly(runs):
    proc = runs["train"]
    assert proc.returncode == 0, proc.stderr
    [record] = _counter_lines(proc.stdout)
    assert record["work_unit"] == "step" and len(record["work"]) == WORK_STEPS   # the first step skipped
    for row in record["work"]:
        # forward x[2,8] @ W^T[8,3000], backward grad W = grad^T[3000,2] @ x[2,8]: 2*2*8*3000 each
        assert row["flops:aten.mm"] == row["flops"] == 2 * (2 * 2 * 8 * 3000)
        assert row["calls:aten.mm"] == 2 and row["width:aten.mm@3000"] == 1
        assert row["lm_head_calls"] == 1 and "kernels" not in row   # CPU: no kernels counted
        assert not any(k.startswith("calls:profiler.") for k in row)
    [sample] = parse_output(proc.stdout, instrumented=True)
    side = side_json(sample.counters)
    assert side["unit"] == "step" and side["rows"] == WORK_STEPS and side["flops"] == 192000
    assert side["kernel_launches"] is None and sample.counters["lm_head_calls"] == 1


def test_a_program_without_an_optimizer_is_counted_per_measured_window(runs):
    proc = runs["inference"]
    assert proc.returncode == 0, proc.stderr
    [record] = _counter_lines(proc.stdout)
    assert record["work_unit"] == "window"
    [window] = record["work"]
    assert window["calls:aten.addmm"] == 10                      # 5 forwards x 2 layers, no warm-up
    assert window["flops"] == 5 * (2 * 4 * 16 * 32 + 2 * 4 * 32 * 64)
    assert record["iters"]                                       # the four counters: one row, the run
    side = side_json(parse_output(proc.stdout, instrumented=True)[0].counters)
    assert side["unit"] == "window" and side["calls_by_op"]["aten.addmm"] == 10


def test_a_probe_that_never_imports_torch_pays_nothing(runs):
    proc = runs["no_torch"]
    assert proc.returncode == 0, proc.stderr
    assert "torch imported: False" in proc.stdout and _counter_lines(proc.stdout) == []
    assert parse_output(proc.stdout, instrumented=True)[0].counters == {}


# -- karpathy/nanoGPT: hand-written attention -> F.scaled_dot_product_attention ---------------------

def test_nanogpt_switch_to_sdpa_shows_in_the_op_diff(tmp_path):
    repo = tmp_path / "nanogpt"
    shas = make_nanogpt_repo(repo)
    trees = []
    for name, sha in zip(("before", "after"), shas):
        trees.append(tmp_path / name)
        subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", str(trees[-1]), sha],
                       check=True, capture_output=True)
    spec = ProbeSpec(command="python bench.py", tokens=320, timeout_s=300, instrument=True, work=True)
    with ThreadPoolExecutor(2) as pool:
        before, after = pool.map(lambda tree: run_probe(spec, tree), trees)
    assert before.sample is not None and after.sample is not None, (before.skip_reason, after.skip_reason)
    work = culprit_work(before.sample.counters, after.sample.counters, -10.0)
    calls_before, calls_after = work["before"]["calls_by_op"], work["after"]["calls_by_op"]
    sdpa = "aten._scaled_dot_product_flash_attention_for_cpu"
    assert sdpa not in calls_before and calls_after[sdpa] == 2                      # 2 layers
    for gone in ("aten._softmax", "aten.masked_fill", "aten.bmm"):
        assert calls_before[gone] >= 2 and gone not in calls_after, gone
    changes = {(c["name"], c["what"]): c for c in work["top_changes"]}
    assert changes[(sdpa, "calls")]["before"] == 0
    appear, go_away = work["reading"].split(" appear (")[0], work["reading"].split(" go away (")[0]
    assert sdpa + " (2), " in appear and sdpa + "_backward (2)" in appear, work["reading"]
    for gone in ("aten.bmm", "aten.masked_fill", "aten._softmax"):   # named, whatever their place
        assert f"{gone} (" in go_away.split(" appear (")[1], work["reading"]
    # the attention's FLOPs stay counted: flash attention has PyTorch's own sdpa formula
    assert work["after"]["flops_by_op"][sdpa] > 0
    assert math.isclose(work["after"]["flops"], work["before"]["flops"], rel_tol=0.05)


# -- what a hunt pays (fake executor) ---------------------------------------------------------------

class WorkProbe:
    """tok/s from speed.py; shimmed runs count (`counts`: a torch program), counting-arm runs
    also report the work, FLOPs fixed, lm_head calls up where speed is low."""

    def __init__(self, counts: bool = True, zero_counters: bool = False):
        self.counts = counts
        self.zero_counters = zero_counters
        """A torch program none of whose four counters fires (all rows zero)."""
        self.specs: list[ProbeSpec] = []

    def __call__(self, spec: ProbeSpec, worktree: Path, extra_env=None) -> ProbeOutcome:
        self.specs.append(spec)
        speed = float((worktree / "speed.py").read_text().split("=")[1])
        counters: dict[str, float] = {}
        if spec.instrument and self.counts:
            lm_head = 0.0 if self.zero_counters else 6.0 if speed > 950 else 48.0
            counters = {"lm_head_calls": lm_head, "host_syncs": 0.0}
            if spec.work:
                counters.update({"work.unit": 0.0, "work.rows": 3.0, "work.flops": 1e9, "work.calls": 100.0,
                                 "work.calls:aten.mm": 10.0 + lm_head, "work.lm_head_calls": lm_head})
        sample = Sample(tok_s=speed, tokens=1000, seconds=1000 / speed, counters=counters, instrumented=spec.instrument)
        return ProbeOutcome(sample=sample, skip_reason=None, exit_code=0, wall_seconds=1.0)


def _hunt(repo: Path, probe: WorkProbe, **flags) -> dict:
    config = build_config({"cmd": "python bench.py"}, {"tokens": 1000, **flags})
    shas = subprocess.run(["git", "-C", str(repo), "log", "--format=%H", "--reverse"], capture_output=True,
                          text=True, check=True).stdout.split()
    return CommitHunt(History.open(repo), shas[0], shas[-1], config, probe_runner=probe).run().report


@pytest.fixture
def step_repo(tmp_path):
    make_bench_repo(tmp_path / "repo", [1000.0] * 4 + [900.0] * 4)
    return tmp_path / "repo"


def test_the_counting_arm_runs_at_the_culprit_its_parent_and_the_ends_only(step_repo):
    probe = WorkProbe()
    report = _hunt(step_repo, probe)
    assert report["verdict"] == "culprits"
    [culprit] = report["culprits"]
    counting = [s for s in probe.specs if s.work]
    assert len(counting) == 4 == report["cost"]["counting_arm"]["probes"]      # GOOD, BAD, culprit, parent
    assert report["cost"]["counting_arm"]["commits"] == 4
    assert all(s.instrument for s in counting)
    assert culprit["work"]["reading"].startswith("work per step +0.0% (FLOPs), tok/s -10%: not more compute; "
                                                 "+42 lm_head-width matmul calls per step")
    assert culprit["counters_after"] == {"lm_head_calls": 48.0, "host_syncs": 0.0}   # no work. keys
    assert report["endpoint_work"]["good"]["flops"] == 1e9


def test_a_counting_probe_that_fails_is_named_in_the_cost_line_with_its_reason(step_repo):
    """torch's dispatch modes reject some higher-order operators (flex_attention run eagerly on the
    h200 demo): the counting probe exits 1, the hunt goes on, and the report says why no work is shown."""
    class FailingCount(WorkProbe):
        def __call__(self, spec, worktree, extra_env=None):
            if spec.work:
                self.specs.append(spec)
                return ProbeOutcome(sample=None, skip_reason="exit 1: NotImplementedError: flex_attention",
                                    exit_code=1, wall_seconds=1.0)
            return super().__call__(spec, worktree, extra_env)

    report = _hunt(step_repo, FailingCount())
    assert report["verdict"] == "culprits" and report["culprits"][0].get("work") is None
    failed = report["cost"]["counting_arm"]["failed"]
    assert len(failed) == 4 and set(failed.values()) == {"exit 1: NotImplementedError: flex_attention"}
    from regressbisect.render.facts import cost_line
    from regressbisect.render.report_load import load_report
    assert "It failed at 4 commit(s), so no work per step is shown there (exit 1: NotImplementedError: " \
           "flex_attention); --instrument off skips it." in cost_line(load_report(report))


def test_a_probe_without_torch_gets_no_counting_arm(step_repo):
    probe = WorkProbe(counts=False)
    report = _hunt(step_repo, probe)
    assert [s for s in probe.specs if s.work] == []
    assert len([s for s in probe.specs if s.instrument]) == 1      # the overhead arm's one, as before
    assert report["cost"]["counting_arm"]["probes"] == 0
    assert report["culprits"][0]["work"] is None


def test_a_torch_program_none_of_whose_four_counters_fires_still_gets_the_work(step_repo):
    probe = WorkProbe(zero_counters=True)
    report = _hunt(step_repo, probe)
    assert report["instrumentation"]["counters_available"] is False    # the overhead arm stopped at once
    assert len([s for s in probe.specs if s.work]) == 4
    assert report["culprits"][0]["work"]["reading"].startswith("work per step +0.0% (FLOPs), tok/s -10%: ")


def test_instrument_off_skips_the_counting_arm(step_repo):
    probe = WorkProbe()
    report = _hunt(step_repo, probe, instrument="off")
    assert [s for s in probe.specs if s.instrument] == []
    assert report["cost"]["counting_arm"]["probes"] == 0 and report["culprits"][0]["work"] is None


def test_a_hunk_culprit_gets_the_work_at_base_and_base_plus_the_hunk(tmp_path):
    from regressbisect.hunts.hunks import HunkHunt
    from tests.test_hunkhunt import FakeProbe, make_dirty_repo

    class CountingProbe(FakeProbe):
        """The hunk costs 12% of tok/s and does 20% more FLOPs."""

        def __call__(self, spec, worktree, extra_env=None):
            outcome = super().__call__(spec, worktree, extra_env)
            self.specs = getattr(self, "specs", []) + [spec]
            if not spec.work or outcome.sample is None:
                return outcome
            slow = "return 100120" in "".join(p.read_text() for p in (worktree / "pkg").glob("*.py"))
            counters = {"lm_head_calls": 6.0, "work.unit": 0.0, "work.rows": 3.0, "work.calls": 100.0,
                        "work.flops": 1.2e9 if slow else 1e9, "work.calls:aten.mm": 12.0 if slow else 10.0}
            sample = Sample(tok_s=outcome.sample.tok_s, tokens=1000, seconds=outcome.sample.seconds,
                            counters=counters, instrumented=True)
            return ProbeOutcome(sample=sample, skip_reason=None, exit_code=0, wall_seconds=0.01)

    repo = tmp_path / "repo"
    make_dirty_repo(repo, 10, {7: 0.12}, dependent=False)
    probe = CountingProbe(seed=10)
    config = build_config({}, {"cmd": "fake", "instrument": "separate"})
    report = HunkHunt(History.open(repo), config, store_path=tmp_path / "store.sqlite", probe_runner=probe).run().report
    [culprit] = report["culprits"]
    assert len([s for s in probe.specs if s.work]) == 2                  # BASE and BASE + the culprit
    assert culprit["work"]["reading"].startswith("work per step +20% (FLOPs), tok/s -1")
    assert "the extra compute explains most of it; aten.mm +2 calls per step" in culprit["work"]["reading"]
    assert culprit["counters_before"] == {"lm_head_calls": 6.0}


def test_a_flop_formula_that_rejects_the_shapes_counts_the_call_uncounted_and_the_program_runs_on(monkeypatch):
    """torch's sdpa formula asserts that query and key/value have the same heads: grouped-query
    attention on CUDA failed every counting probe of the h200 demo with that AssertionError."""
    import torch
    from torch.utils import flop_counter

    from regressbisect.probe.work import WorkCounter

    def rejects(*args, **kwargs):
        raise AssertionError("sdpa_flop_count: query/key/value shapes are incompatible")

    monkeypatch.setitem(flop_counter.flop_registry, torch.ops.aten.mm, rejects)
    counter = WorkCounter(torch, dict, lambda: False)
    counter.start()
    try:
        out = torch.randn(2, 8) @ torch.randn(8, 3)
        torch.randn(2, 8) @ torch.randn(8, 3)
    finally:
        counter.stop()
    assert out.shape == (2, 3)
    counts = counter.cumulative()
    assert counts["uncounted:aten.mm"] == 2 and counts["calls:aten.mm"] == 2 and counts["flops"] == 0
    side = side_json({f"work.{k}": v for k, v in counts.items()} | {"work.unit": 0})
    assert side["flops_uncounted_by_op"] == {"aten.mm": 2}
