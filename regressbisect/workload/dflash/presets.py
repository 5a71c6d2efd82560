"""Sizes of the reference DFlash-style training step (stdlib only: the launcher reads them
without importing torch)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class Preset:
    """Every size and schedule knob of one workload configuration."""

    name: str
    """Preset name, as given to --preset."""
    hidden: int
    """Hidden width H of the target and of the drafter."""
    ffn: int
    """Intermediate width of the SwiGLU MLPs."""
    drafter_layers: int
    """Number of drafter transformer layers (trained)."""
    heads: int
    """Query heads of every attention layer."""
    kv_heads: int
    """Key/value heads (grouped-query attention)."""
    head_dim: int
    """Width of one head; heads * head_dim need not equal hidden."""
    vocab: int
    """Vocabulary of the frozen target: the lm_head output width."""
    target_layers: int
    """Depth of the frozen target (random init; a shallow target is fine)."""
    target_layers_kept: int
    """L: hidden states of this many evenly spaced target layers feed the drafter -> [B, S, L*H]."""
    seq_len: int
    """S: packed tokens per sequence (batch size is 1: one packed sequence per drafter step)."""
    anchors: int
    """N: anchors (blocks) sampled per step."""
    block_size: int
    """bs: tokens per block (the anchor + bs-1 mask tokens); bs-1 of them are supervised."""
    lm_head_chunk: int
    """Blocks per lm_head chunk of the loss; lm_head calls per step = 2 * ceil(N / chunk)."""
    loss_gamma: float
    """Decay of the per-slot loss weight exp(-(k-1)/gamma), slot k >= 1."""
    metrics_every: int
    """M: top-K recall metrics (one more lm_head pass, no grad) on every M-th step."""
    metrics_topk: int
    """K of the top-K recall metric."""
    sliding_window: int
    """Window of the sliding-window layers in tokens; 0 = no sliding-window layer."""
    sliding_window_every: int
    """With a window, every this-many-th drafter layer (0, every, 2*every, ...) is windowed."""
    min_doc_len: int
    """Shortest packed document, tokens."""
    max_docs: int
    """Most documents in one packed sequence (lengths are sent padded to this count)."""
    prompt_fraction: float
    """Share of each document that is prompt (loss_mask 0) before the supervised answer."""
    dtype: str
    """Compute dtype on CUDA: 'bfloat16' (autocast; frozen weights stored in it) or 'float32'."""
    warmup_steps: int
    """Drafter steps run and excluded before the measured token budget starts."""
    default_tokens: int
    """Token budget when neither --tokens nor REGRESSBISECT_TOKENS is given."""
    lm_head_min_out: int
    """Counter threshold: a linear with this output width or more is an lm_head (shim env)."""
    lr: float
    """AdamW learning rate of the drafter."""
    max_in_flight: int
    """Batches a target rank may have sent but not yet completed (bounded isend queue)."""

    @property
    def supervised_tokens_per_step(self) -> int:
        """Tokens one drafter rank trains on per step: N * (bs - 1) (slot 0 is the anchor)."""
        return self.anchors * (self.block_size - 1)

    def replace(self, **changes: object) -> "Preset":
        return dataclasses.replace(self, **changes)


TINY = Preset(
    name="tiny", hidden=64, ffn=128, drafter_layers=2, heads=4, kv_heads=2, head_dim=16,
    vocab=2048, target_layers=4, target_layers_kept=2, seq_len=256, anchors=16, block_size=4,
    lm_head_chunk=8, loss_gamma=7.0, metrics_every=4, metrics_topk=4, sliding_window=0,
    sliding_window_every=2, min_doc_len=16, max_docs=16, prompt_fraction=0.25, dtype="float32",
    warmup_steps=3, default_tokens=4096, lm_head_min_out=2048, lr=3e-4, max_in_flight=2,
)

H200 = Preset(
    name="h200", hidden=4096, ffn=12288, drafter_layers=5, heads=32, kv_heads=8, head_dim=128,
    vocab=151936, target_layers=6, target_layers_kept=5, seq_len=3072, anchors=512, block_size=16,
    lm_head_chunk=64, loss_gamma=7.0, metrics_every=10, metrics_topk=4, sliding_window=0,
    sliding_window_every=2, min_doc_len=128, max_docs=32, prompt_fraction=0.25, dtype="bfloat16",
    warmup_steps=5, default_tokens=153600, lm_head_min_out=32768, lr=1e-4, max_in_flight=2,
)

PRESETS: dict[str, Preset] = {p.name: p for p in (TINY, H200)}


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}") from None
