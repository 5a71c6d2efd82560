"""A real hunt on karpathy/nanoGPT's public history, on CPU: the commit that switched attention to
F.scaled_dot_product_attention (ae06d0b, "add flash attention support") and what the counting arm
reads at it (docs/results/work-nanogpt.md).

The probe is written outside the clone (one file for every commit): it imports the checked-out
model.py, builds one fixed tiny GPT (2 layers, 4 heads, 64 wide, block 256, vocab 512, dropout 0,
the commit's other defaults), trains it on random tokens with AdamW, one thread, no data and no
torch.compile, and reports tok/s of the token budget after 2 warm-up steps. On CPU the switch
makes this model faster, so the hunt runs with --direction faster.

    git clone https://github.com/karpathy/nanoGPT /tmp/nanogpt
    python scripts/hunt_nanogpt.py --repo /tmp/nanogpt --json /tmp/nanogpt-hunt.json

Prints the culprits, each one's reading, its table of biggest changes, and the attention ops'
calls per step at the parent and the culprit."""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import _common
from regressbisect.render.work import TOP_CHANGES, table_headers, table_rows

PROBE = '''
    """A fixed tiny GPT of the checked-out nanoGPT's model.py, trained on random tokens on CPU."""
    import dataclasses
    import json
    import os
    import time

    import torch
    from model import GPT, GPTConfig          # the candidate's: its worktree is first on PYTHONPATH

    torch.manual_seed(0)
    torch.set_num_threads(1)
    wanted = dict(n_layer=2, n_head=4, n_embd=64, block_size=256, vocab_size=512, dropout=0.0)
    fields = {f.name for f in dataclasses.fields(GPTConfig)}
    model = GPT(GPTConfig(**{k: v for k, v in wanted.items() if k in fields}))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    idx = torch.randint(0, wanted["vocab_size"], (4, wanted["block_size"] + 1))
    x, y = idx[:, :-1].contiguous(), idx[:, 1:].contiguous()


    def step():
        _, loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


    for _ in range(2):                         # warm-up: not measured
        step()
    steps = max(1, -(-int(os.environ.get("REGRESSBISECT_TOKENS", "4096")) // x.numel()))
    started = time.perf_counter()
    for _ in range(steps):
        step()
    seconds = time.perf_counter() - started
    print("@regressbisect " + json.dumps({"tokens": steps * x.numel(), "seconds": seconds}))
'''

ATTENTION_OPS = ("aten._scaled_dot_product_flash_attention_for_cpu",
                 "aten._scaled_dot_product_flash_attention_for_cpu_backward",
                 "aten.bmm", "aten._softmax", "aten._softmax_backward_data", "aten.masked_fill")
"""The ops of the switch: CPU flash attention (forward, backward) in, the hand-written attention's
two matmuls (bmm), softmax and causal mask out."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True, help="a clone of karpathy/nanoGPT")
    parser.add_argument("--good", default="e808a671", help="the older end (default: 4 commits before the switch)")
    parser.add_argument("--bad", default="d995c221", help="the newer end (default: 5 commits after it)")
    parser.add_argument("--direction", default="faster")
    parser.add_argument("--json", type=Path, default=None, help="the hunt's JSON report (default: a temporary file)")
    args, rest = parser.parse_known_args()   # the rest goes to `regressbisect run`

    probe_dir = Path(tempfile.mkdtemp(prefix="nanogpt-probe-"))
    probe = probe_dir / "probe.py"
    probe.write_text(textwrap.dedent(PROBE))
    report_path = args.json or probe_dir / "report.json"
    command = [sys.executable, "-m", "regressbisect", "run", args.good, args.bad, "-C", str(args.repo),
               "--cmd", f"python {probe}", "--direction", args.direction, "--json", str(report_path), *rest]
    print("$", shlex.join(command), flush=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(_common.REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    code = subprocess.run(command, env=env).returncode
    if not report_path.exists():
        return code
    report = json.loads(report_path.read_text())
    print(f"\nexit {code}, verdict {report.get('verdict')}")
    for culprit in report.get("culprits") or []:
        print(f"\nculprit {culprit['commit'][:8]} ({culprit.get('subject', '')[:60]}), "
              f"step {culprit.get('step_pct', 0):+.1f}%, parent {culprit.get('parent', '')[:8]}")
        work = culprit.get("work")
        if not work:
            print("no work counts")
            continue
        print(f"reading: {work['reading']}\n")
        _common.print_table(table_headers(work), table_rows(work, limit=TOP_CHANGES))
        print()
        before, after = work["before"]["calls_by_op"], work["after"]["calls_by_op"]
        _common.print_table(("attention op", "calls per step at the parent", "at the culprit"),
                            ([op, f"{before.get(op, 0):g}", f"{after.get(op, 0):g}"] for op in ATTENTION_OPS))
    return code


if __name__ == "__main__":
    sys.exit(main())
