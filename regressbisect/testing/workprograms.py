"""Small PyTorch programs of the counting arm's tests and scripts/work_examples.py: a training
loop, an inference loop without an optimizer, a probe without torch, karpathy/nanoGPT's
causal self-attention before and after its switch to F.scaled_dot_product_attention (written for
a tiny CPU GPT; the repository's own code is not fetched), and a torch.compile'd step calling
flex_attention with two commits on top: a second mask build, then an `.item()` sync."""
from __future__ import annotations

from pathlib import Path

from regressbisect.testing.gitrepo import make_repo

TRAIN = """
    import torch
    from torch import nn
    head = nn.Linear(8, 3000, bias=False)          # an lm_head at REGRESSBISECT_LMHEAD_MIN_OUT=2048
    opt = torch.optim.SGD(head.parameters(), lr=0.1)
    x = torch.randn(2, 8)
    for step in range(6):
        head(x).sum().backward()
        opt.step()
        opt.zero_grad()
    print("@regressbisect " + '{"tokens": 12, "seconds": 1.0}')
"""

INFERENCE = """
    import time
    import torch
    from torch import nn
    import regressbisect
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 64))
    x = torch.randn(4, 16)
    with torch.no_grad():
        for _ in range(3):                  # warm-up: not in the window
            model(x)
        started = time.perf_counter()
        for _ in range(5):
            model(x)
        regressbisect.report(tokens=20, seconds=time.perf_counter() - started)
"""

NO_TORCH = """
    import sys
    print("@regressbisect " + '{"tokens": 1, "seconds": 1.0}')
    print("torch imported:", "torch" in sys.modules)
"""


MODEL_HANDWRITTEN = '''
import math
import torch
import torch.nn.functional as F
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head, self.n_embd = n_head, n_embd
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)
'''
MODEL_SDPA = MODEL_HANDWRITTEN.replace(
    '''        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
''', '''        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0, is_causal=True)
''')

GPT_BENCH = '''
import json
import time
import torch
from torch import nn
from model import CausalSelfAttention


class Block(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


torch.manual_seed(0)
vocab, n_embd, block_size = 256, 32, 16
model = nn.Sequential(nn.Embedding(vocab, n_embd), Block(n_embd, 2, block_size), Block(n_embd, 2, block_size),
                      nn.LayerNorm(n_embd), nn.Linear(n_embd, vocab, bias=False))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
idx = torch.randint(0, vocab, (4, block_size))
started = time.perf_counter()
for step in range(5):
    logits = model(idx)
    loss = nn.functional.cross_entropy(logits.view(-1, vocab), idx.view(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
seconds = time.perf_counter() - started
print("@regressbisect " + json.dumps({"tokens": 5 * idx.numel(), "seconds": seconds}))
'''


def make_nanogpt_repo(path: Path) -> list[str]:
    """Two commits: the hand-written attention, then SDPA; returns their shas."""
    return make_repo(path, [{"model.py": MODEL_HANDWRITTEN, "bench.py": GPT_BENCH}, {"model.py": MODEL_SDPA}],
                     ["hand-written causal attention", "use Flash Attention: F.scaled_dot_product_attention"])


COMPILED_FLEX = '''
import json
import time
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention


def causal(b, h, q, kv):
    return q >= kv


build_mask = torch.compile(create_block_mask)
head = torch.nn.Linear(16, 16)
opt = torch.optim.SGD(head.parameters(), lr=0.1)


@torch.compile
def step(x, mask):
    y = flex_attention(x, x, x, block_mask=mask)   # forward only: CPU has no flex_attention backward
    return head(y).sum()


torch.manual_seed(0)
x = torch.randn(1, 2, 128, 16)
started = time.perf_counter()
for _ in range(5):
    mask = build_mask(causal, 1, 1, 128, 128, device="cpu")
    loss = step(x, mask)
    loss.backward()
    opt.step()
    opt.zero_grad()
print("@regressbisect " + json.dumps({"tokens": 5 * 128, "seconds": time.perf_counter() - started}))
'''
SECOND_MASK = COMPILED_FLEX.replace(
    '''    mask = build_mask(causal, 1, 1, 128, 128, device="cpu")
''', '''    mask = build_mask(causal, 1, 1, 128, 128, device="cpu")
    mask = build_mask(causal, 1, 1, 128, 128, device="cpu")   # rebuilt: the same mask twice
''')
ITEM_SYNC = SECOND_MASK.replace(
    '''    return head(y).sum()
''', '''    scale = y.abs().max().item()   # a host sync, and a graph break
    return head(y / scale).sum()
''')


def make_compiled_flex_repo(path: Path) -> list[str]:
    """Three commits of a compiled flex_attention step: as is, a second mask build per step, then
    an `.item()` in the step; returns their shas."""
    return make_repo(path, [{"train.py": COMPILED_FLEX}, {"train.py": SECOND_MASK}, {"train.py": ITEM_SYNC}],
                     ["compiled flex_attention step", "build the block mask twice", "scale by the max"])
