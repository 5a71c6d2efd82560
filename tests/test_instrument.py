"""The counters shim, loaded the way the runner loads it: PYTHONPATH=<shim dir> in a subprocess
running a user script that never imports regressbisect."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import regressbisect.probe

SHIM_DIR = Path(regressbisect.probe.__file__).parent / "shim"
PACKAGE_ROOT = Path(regressbisect.__file__).parent.parent  # as if regressbisect were installed
PREFIX = "@regressbisect-counters "


def _run(script: str, tmp_path: Path, extra_path: list[Path] = (), **env: str) -> subprocess.CompletedProcess:
    path = tmp_path / "user_script.py"
    path.write_text(textwrap.dedent(script))
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("REGRESSBISECT_")}
    full_env.pop("RANK", None)
    full_env["PYTHONPATH"] = os.pathsep.join([str(SHIM_DIR), *map(str, extra_path)])
    full_env["REGRESSBISECT_INSTRUMENT"] = "1"
    full_env.update(env)
    # cwd outside the repo, so regressbisect itself is not importable by accident.
    return subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=full_env,
                          capture_output=True, text=True, timeout=120)


def _counter_lines(stdout: str) -> list[dict]:
    return [json.loads(line[len(PREFIX):]) for line in stdout.splitlines() if line.startswith(PREFIX)]


COUNTED_SCRIPT = """
    import sys
    import torch
    from torch import nn
    import torch.nn.functional as F
    from torch.nn.attention.flex_attention import create_block_mask

    head = nn.Linear(8, 3000, bias=False)    # >= REGRESSBISECT_LMHEAD_MIN_OUT (2048): lm_head
    wide = nn.Linear(8, 1000, bias=False)    # below the threshold: not counted
    opt = torch.optim.SGD([*head.parameters(), *wide.parameters()], lr=0.1)
    x = torch.randn(2, 8)
    for step in range(3):
        loss = head(x).sum() + F.linear(x, head.weight).sum() + wide(x).sum()
        loss.backward()                       # backward does not call F.linear
        loss.item(); loss.item(); x.tolist()  # 3 host syncs per step
        if step == 1:
            create_block_mask(lambda b, h, q, kv: q >= kv, 1, None, 128, 128, device="cpu")
        opt.step()
        opt.zero_grad()
    head(x)                                   # after the last step: not a row
"""

CHECK_INSTANCE = """
    from regressbisect.probe import instrument   # the shim's instance, not a second copy
    assert instrument is sys.modules["regressbisect.probe.instrument"] and instrument.active()
    print("snapshot", instrument.snapshot()["lm_head_calls"])
"""


def test_user_script_is_counted_exactly(tmp_path: Path) -> None:
    proc = _run(COUNTED_SCRIPT + CHECK_INSTANCE, tmp_path, extra_path=[PACKAGE_ROOT],
                REGRESSBISECT_LMHEAD_MIN_OUT="2048", RANK="3")
    assert proc.returncode == 0, proc.stderr
    lines = _counter_lines(proc.stdout)
    assert len(lines) == 1
    record = lines[0]
    assert record["rank"] == 3 and isinstance(record["pid"], int)
    rows = record["iters"]
    assert [r["lm_head_calls"] for r in rows] == [2, 2, 2]
    assert [r["host_syncs"] for r in rows] == [3, 3, 3]
    assert [r["create_block_mask_calls"] for r in rows] == [0, 1, 0]
    assert rows[1]["create_block_mask_ms"] > 0 and rows[0]["create_block_mask_ms"] == 0
    # The 7th lm_head call happened after the last optimizer step: in the snapshot, not a row.
    assert "snapshot 7" in proc.stdout


def test_no_torch_no_counters_and_chains_other_sitecustomize(tmp_path: Path) -> None:
    other = tmp_path / "other_site"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import os\nos.environ['OTHER_SITECUSTOMIZE'] = 'ran'\n")
    script = """
        import os, sys
        print("torch" in sys.modules, os.environ.get("OTHER_SITECUSTOMIZE"))
    """
    proc = _run(script, tmp_path, extra_path=[other])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["False ran"]
    assert _counter_lines(proc.stdout) == []


def test_disabled_and_idle_processes_print_nothing(tmp_path: Path) -> None:
    # Imports torch but counts nothing (a torchrun launcher): silent. Then disabled by env.
    script = """
        import torch
        torch.ones(2) + 1
    """
    (tmp_path / "idle").mkdir()
    (tmp_path / "disabled").mkdir()
    with ThreadPoolExecutor(2) as pool:  # two independent processes: run them side by side
        idle_run = pool.submit(_run, script, tmp_path / "idle")
        disabled_run = pool.submit(_run, COUNTED_SCRIPT, tmp_path / "disabled", REGRESSBISECT_INSTRUMENT="0")
        idle, disabled = idle_run.result(), disabled_run.result()
    assert idle.returncode == 0, idle.stderr
    assert _counter_lines(idle.stdout) == []
    assert disabled.returncode == 0, disabled.stderr
    assert _counter_lines(disabled.stdout) == []


def test_default_lm_head_threshold_is_32768(tmp_path: Path) -> None:
    script = """
        import torch
        torch.nn.functional.linear(torch.randn(1, 4), torch.randn(3000, 4))    # not an lm_head
        torch.nn.functional.linear(torch.randn(1, 4), torch.randn(40000, 4))   # an lm_head
        torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1).step()
    """
    proc = _run(script, tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = _counter_lines(proc.stdout)
    assert len(lines) == 1 and lines[0]["iters"] == [
        {"lm_head_calls": 1, "create_block_mask_calls": 0, "create_block_mask_ms": 0.0, "host_syncs": 0}]
