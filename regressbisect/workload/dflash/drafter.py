"""The trained drafter: fc(concat of target hidden states) -> H, then a few layers whose queries
are the N blocks and whose keys/values are [context S | N*bs block tokens]."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import flex_attention as flex_attention_module

from .layers import SwiGLU, apply_rope, merge_heads, split_heads
from .masks import StepMasks
from .presets import Preset

_compiled_flex = None


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: object) -> torch.Tensor:
    """Masked attention: compiled flex_attention with a BlockMask on CUDA; on CPU (flex has no
    backward there) SDPA with the dense mask of the same mask_mod."""
    global _compiled_flex
    if isinstance(mask, torch.Tensor):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    if _compiled_flex is None:
        _compiled_flex = torch.compile(flex_attention_module.flex_attention, dynamic=False)
    return _compiled_flex(q, k, v, block_mask=mask, enable_gqa=True)


def layer_is_windowed(preset: Preset, layer: int) -> bool:
    return preset.sliding_window > 0 and layer % preset.sliding_window_every == 0


class DrafterLayer(nn.Module):
    def __init__(self, preset: Preset):
        super().__init__()
        p = preset
        self.p = p
        self.attn_norm = nn.RMSNorm(p.hidden)
        self.context_norm = nn.RMSNorm(p.hidden)
        self.q = nn.Linear(p.hidden, p.heads * p.head_dim, bias=False)
        self.k = nn.Linear(p.hidden, p.kv_heads * p.head_dim, bias=False)
        self.v = nn.Linear(p.hidden, p.kv_heads * p.head_dim, bias=False)
        self.o = nn.Linear(p.heads * p.head_dim, p.hidden, bias=False)
        self.mlp_norm = nn.RMSNorm(p.hidden)
        self.mlp = SwiGLU(p.hidden, p.ffn)

    def forward(self, x: torch.Tensor, context: torch.Tensor, rope_q: tuple[torch.Tensor, torch.Tensor],
                rope_ctx: tuple[torch.Tensor, torch.Tensor], mask: object) -> torch.Tensor:
        p = self.p
        h = self.attn_norm(x)
        c = self.context_norm(context)
        q = apply_rope(split_heads(self.q(h), p.heads, p.head_dim), *rope_q)
        k_ctx = apply_rope(split_heads(self.k(c), p.kv_heads, p.head_dim), *rope_ctx)
        k_blk = apply_rope(split_heads(self.k(h), p.kv_heads, p.head_dim), *rope_q)
        v_ctx = split_heads(self.v(c), p.kv_heads, p.head_dim)
        v_blk = split_heads(self.v(h), p.kv_heads, p.head_dim)
        k = torch.cat([k_ctx, k_blk], dim=2)
        v = torch.cat([v_ctx, v_blk], dim=2)
        x = x + self.o(merge_heads(attend(q, k, v, mask)))
        return x + self.mlp(self.mlp_norm(x))


class Drafter(nn.Module):
    """forward(context_hidden [1,S,L*H], block_embeds [1,N*bs,H], ropes, masks) -> [1,N*bs,H]."""

    def __init__(self, preset: Preset):
        super().__init__()
        self.preset = preset
        self.fc = nn.Linear(preset.target_layers_kept * preset.hidden, preset.hidden, bias=False)
        self.layers = nn.ModuleList(DrafterLayer(preset) for _ in range(preset.drafter_layers))
        self.norm = nn.RMSNorm(preset.hidden)

    def forward(self, context_hidden: torch.Tensor, block_embeds: torch.Tensor,
                rope_q: tuple[torch.Tensor, torch.Tensor], rope_ctx: tuple[torch.Tensor, torch.Tensor],
                masks: StepMasks) -> torch.Tensor:
        context = self.fc(context_hidden)
        x = block_embeds
        for i, layer in enumerate(self.layers):
            windowed = layer_is_windowed(self.preset, i)
            x = layer(x, context, rope_q, rope_ctx, masks.windowed if windowed else masks.full)
        return self.norm(x)
