"""The work per step of docs/results/work-counting.md (2026-12-06): karpathy/nanoGPT's switch to
F.scaled_dot_product_attention counted at both commits (a tiny CPU GPT in a temporary repository),
and an inference loop counted per measured window. Run: python scripts/work_examples.py"""
from pathlib import Path
import statistics
import subprocess
import sys
import tempfile
import textwrap

import _common  # noqa: E402,F401  (puts the repository on sys.path)
from regressbisect.testing.workprograms import INFERENCE, make_nanogpt_repo
from regressbisect.probe.runner import ProbeSpec, run_probe
from regressbisect.render.work import culprit_work, table_rows, side_json
from regressbisect.probe.protocol import parse_output

tmp = Path(tempfile.mkdtemp())
shas = make_nanogpt_repo(tmp / "nanogpt")
trees = []
for name, sha in zip(("before", "after"), shas):
    trees.append(tmp / name)
    subprocess.run(["git", "-C", str(tmp / "nanogpt"), "worktree", "add", "--detach", str(trees[-1]), sha], check=True, capture_output=True)
counting = ProbeSpec(command="python bench.py", tokens=320, timeout_s=300, instrument=True, work=True)
plain = ProbeSpec(command="python bench.py", tokens=320, timeout_s=300)
b, a = (run_probe(counting, t) for t in trees)
tok = [[run_probe(plain, t).sample.tok_s for _ in range(3)] for t in trees]

step = 100 * (statistics.median(tok[1]) / statistics.median(tok[0]) - 1)
w = culprit_work(b.sample.counters, a.sample.counters, step)
print("nanoGPT unprofiled tok/s medians:", [round(statistics.median(x)) for x in tok], f"step {step:+.1f}%")
print("reading:", w["reading"])
for row in table_rows(w): print("  ", row)

(tmp / "infer.py").write_text(textwrap.dedent(INFERENCE))
env = {"PYTHONPATH": f"{_common.REPO_ROOT}/regressbisect/probe/shim:{_common.REPO_ROOT}",
       "REGRESSBISECT_INSTRUMENT": "1", "REGRESSBISECT_WORK": "1", "PATH": "/usr/bin:/bin"}
out = subprocess.run([sys.executable, "infer.py"], cwd=tmp, env=env, capture_output=True, text=True).stdout
side = side_json(parse_output(out, instrumented=True)[0].counters)
print("inference loop:", {k: side[k] for k in ("unit", "rows", "flops", "aten_calls", "calls_by_op")})
for op in ("aten._scaled_dot_product_flash_attention_for_cpu", "aten._scaled_dot_product_flash_attention_for_cpu_backward", "aten.bmm", "aten._softmax", "aten._softmax_backward_data", "aten.masked_fill"):
    print(f"  {op}: {w['before']['calls_by_op'].get(op, 0):g} -> {w['after']['calls_by_op'].get(op, 0):g} calls per step")
