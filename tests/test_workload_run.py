"""The tiny preset run as a probe runs it: torchrun with 2 ranks (1 target + 1 drafter, gloo),
with and without the counters shim."""
from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

import pytest

import regressbisect
from regressbisect.workload.dflash import workload_command
from regressbisect.workload.dflash.presets import TINY

REPO_ROOT = Path(regressbisect.__file__).parent.parent
SHIM_DIR = REPO_ROOT / "regressbisect" / "probe" / "shim"
TOKENS_PER_STEP = TINY.anchors * (TINY.block_size - 1)


def _run(cmd: list[str], shim: bool, **env: str) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("REGRESSBISECT_")}
    paths = ([str(SHIM_DIR)] if shim else []) + [str(REPO_ROOT)]
    full_env["PYTHONPATH"] = os.pathsep.join(paths)
    full_env.update(env)
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=full_env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _lines(stdout: str, prefix: str) -> list[dict]:
    return [json.loads(l[len(prefix):]) for l in stdout.splitlines() if l.startswith(prefix)]


def _lm_head_calls(step_index: int, preset=TINY) -> int:
    per_step = 2 * math.ceil(preset.anchors / preset.lm_head_chunk)
    metric = (step_index + 1) % preset.metrics_every == 0
    return per_step + (math.ceil(preset.anchors / preset.lm_head_chunk) if metric else 0)


@pytest.mark.slow
def test_torchrun_two_ranks_with_shim_counts_the_formula() -> None:
    budget, warmup = 250, 2
    cmd = workload_command("tiny", 2, budget) + ["--warmup", str(warmup), "--sliding-window", "32"]
    proc = _run(cmd, shim=True, REGRESSBISECT_INSTRUMENT="1")
    (record,) = _lines(proc.stdout, "@regressbisect ")
    steps = math.ceil(budget / TOKENS_PER_STEP)
    assert record["tokens"] == steps * TOKENS_PER_STEP
    assert record["tok_s"] > 0 and record["seconds"] > 0
    assert math.isclose(record["tok_s"], record["tokens"] / record["seconds"], rel_tol=1e-3)
    assert (record["target_ranks"], record["drafter_ranks"]) == (1, 1)
    rows = record["iters"]
    assert len(rows) == steps and all(r["tokens"] == TOKENS_PER_STEP and r["ms"] > 0 for r in rows)
    assert [r["lm_head_calls"] for r in rows] == [_lm_head_calls(warmup + i) for i in range(steps)]
    assert all(r["create_block_mask_calls"] == 2 for r in rows)  # full + sliding-window mask

    # The shim's own line from the drafter rank: one row per optimizer step, warm-up included.
    drafter = [c for c in _lines(proc.stdout, "@regressbisect-counters ") if c["rank"] == 1]
    assert len(drafter) == 1
    shim_rows = drafter[0]["iters"]
    assert [r["lm_head_calls"] for r in shim_rows] == [_lm_head_calls(i) for i in range(warmup + steps)]
    assert all(r["create_block_mask_calls"] == 2 for r in shim_rows)


@pytest.mark.slow
def test_single_process_without_shim_reads_budget_from_env() -> None:
    proc = _run(workload_command("tiny", 1, None) + ["--warmup", "1"], shim=False,
                REGRESSBISECT_TOKENS="100")
    (record,) = _lines(proc.stdout, "@regressbisect ")
    assert record["tokens"] == 3 * TOKENS_PER_STEP and len(record["iters"]) == 3
    assert set(record["iters"][0]) == {"ms", "tokens"}  # no counter columns without the shim
    assert _lines(proc.stdout, "@regressbisect-counters ") == []
