"""The frozen target: a random-init decoder whose evenly spaced hidden states feed the drafter."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .layers import SwiGLU, apply_rope, merge_heads, rope_tables, split_heads
from .presets import Preset


def kept_layer_ids(depth: int, kept: int) -> list[int]:
    """Evenly spaced layer indices (outputs after those layers), from layer 1 to the last."""
    if kept >= depth:
        return list(range(depth))
    if kept == 1:
        return [depth // 2]
    return [round(1 + i * (depth - 2) / (kept - 1)) for i in range(kept)]


class FrozenVocab(nn.Module):
    """The target's token embedding and vocabulary projection (lm_head), both frozen.

    Built from a fixed seed, so drafter ranks hold the same weights as the target ranks
    without a transfer.
    """

    def __init__(self, preset: Preset, seed: int = 1234):
        super().__init__()
        self.embed = nn.Embedding(preset.vocab, preset.hidden)
        self.lm_head = nn.Linear(preset.hidden, preset.vocab, bias=False)
        # Initialised where the module is built (`with torch.device(...)`): a CPU init of the GPU
        # preset's 2 x 151936 x 4096 weights would add seconds to every probe's start-up.
        gen = torch.Generator(device=self.embed.weight.device).manual_seed(seed)
        with torch.no_grad():
            self.embed.weight.normal_(0.0, 0.02, generator=gen)
            self.lm_head.weight.normal_(0.0, 0.02, generator=gen)
        self.requires_grad_(False)


class TargetLayer(nn.Module):
    def __init__(self, preset: Preset):
        super().__init__()
        p = preset
        self.p = p
        self.attn_norm = nn.RMSNorm(p.hidden)
        self.q = nn.Linear(p.hidden, p.heads * p.head_dim, bias=False)
        self.k = nn.Linear(p.hidden, p.kv_heads * p.head_dim, bias=False)
        self.v = nn.Linear(p.hidden, p.kv_heads * p.head_dim, bias=False)
        self.o = nn.Linear(p.heads * p.head_dim, p.hidden, bias=False)
        self.mlp_norm = nn.RMSNorm(p.hidden)
        self.mlp = SwiGLU(p.hidden, p.ffn)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        p = self.p
        h = self.attn_norm(x)
        q = apply_rope(split_heads(self.q(h), p.heads, p.head_dim), cos, sin)
        k = apply_rope(split_heads(self.k(h), p.kv_heads, p.head_dim), cos, sin)
        v = split_heads(self.v(h), p.kv_heads, p.head_dim)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o(merge_heads(att))
        return x + self.mlp(self.mlp_norm(x))


class TargetModel(nn.Module):
    """Frozen decoder; forward returns the kept hidden states concatenated: [B, S, L*H]."""

    def __init__(self, preset: Preset, vocab: FrozenVocab):
        super().__init__()
        self.vocab = vocab
        self.layers = nn.ModuleList(TargetLayer(preset) for _ in range(preset.target_layers))
        self.kept = kept_layer_ids(preset.target_layers, preset.target_layers_kept)
        self.head_dim = preset.head_dim
        self.requires_grad_(False)

    @torch.no_grad()
    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        cos, sin = rope_tables(ids.shape[-1], self.head_dim, ids.device)
        x = self.vocab.embed(ids)
        kept: list[torch.Tensor] = []
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin)
            if i in self.kept:
                kept.append(x)
        return torch.cat(kept, dim=-1)
