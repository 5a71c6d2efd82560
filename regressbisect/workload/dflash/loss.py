"""Weighted cross-entropy through the frozen lm_head, in chunks of blocks under activation
checkpointing (the [tokens, vocab] logits of all blocks at once would not fit on the GPU preset),
and the top-K recall metric."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


def _chunk_loss(hidden: torch.Tensor, lm_head_weight: torch.Tensor, labels: torch.Tensor,
                weights: torch.Tensor) -> torch.Tensor:
    logits = F.linear(hidden, lm_head_weight)
    ce = F.cross_entropy(logits.float(), labels, reduction="none")
    return (ce * weights).sum()


def chunked_loss(out: torch.Tensor, lm_head_weight: torch.Tensor, labels: torch.Tensor,
                 weights: torch.Tensor, chunk_blocks: int) -> torch.Tensor:
    """Weighted mean CE of `out` [N*bs, H] against labels/weights [N, bs].

    Each chunk is checkpointed (use_reentrant=False), so lm_head runs twice per chunk:
    2 * ceil(N / chunk_blocks) calls per step.
    """
    n_blocks, bs = labels.shape
    blocks = out.reshape(n_blocks, bs, -1)
    total = out.new_zeros((), dtype=torch.float32)
    for start in range(0, n_blocks, chunk_blocks):
        stop = start + chunk_blocks
        total = total + checkpoint(
            _chunk_loss, blocks[start:stop].flatten(0, 1), lm_head_weight,
            labels[start:stop].flatten(), weights[start:stop].flatten(), use_reentrant=False)
    return total / weights.sum().clamp_min(1e-6)


@torch.no_grad()
def topk_recall(out: torch.Tensor, lm_head_weight: torch.Tensor, labels: torch.Tensor,
                weights: torch.Tensor, chunk_blocks: int, k: int) -> torch.Tensor:
    """Share of supervised slots whose label is in the top-k logits (a 0-dim tensor: no sync).

    One more lm_head pass: ceil(N / chunk_blocks) calls.
    """
    n_blocks, bs = labels.shape
    blocks = out.detach().reshape(n_blocks, bs, -1)
    hits = out.new_zeros((), dtype=torch.float32)
    for start in range(0, n_blocks, chunk_blocks):
        stop = start + chunk_blocks
        logits = F.linear(blocks[start:stop].flatten(0, 1), lm_head_weight)
        top = logits.topk(k, dim=-1).indices
        hit = (top == labels[start:stop].flatten()[:, None]).any(dim=-1)
        hits = hits + (hit & (weights[start:stop].flatten() > 0)).float().sum()
    return hits / (weights > 0).float().sum().clamp_min(1.0)
