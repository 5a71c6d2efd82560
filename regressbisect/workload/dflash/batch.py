"""Synthetic packed batches (what a target rank reads) and the per-step block targets."""
from __future__ import annotations

import math
import random
from dataclasses import dataclass

import torch

from .presets import Preset


@dataclass(frozen=True)
class PackedSequence:
    """One packed sequence of documents, as a target rank sends it to a drafter rank."""

    ids: torch.Tensor
    """[S] token ids."""
    loss_mask: torch.Tensor
    """[S] long, 1 where the token is supervised (answer), 0 for prompt tokens."""
    lengths: torch.Tensor
    """[max_docs] long document lengths, zero-padded; they sum to S."""


def synthetic_sequence(preset: Preset, index: int, seed: int) -> PackedSequence:
    """Deterministic in (seed, index), so the data never depends on the rank layout."""
    p = preset
    # Python's RNG for the layout: Tensor.item/.tolist would count as host syncs under the shim.
    rng = random.Random(seed * 1_000_003 + index)
    most_docs = min(p.max_docs, p.seq_len // p.min_doc_len)
    n_docs = rng.randint(1, most_docs)
    # n_docs - 1 cut points in the slack keep every document >= min_doc_len long.
    slack = p.seq_len - n_docs * p.min_doc_len
    edges = [0, *sorted(rng.randint(0, slack) for _ in range(n_docs - 1)), slack]
    doc_lengths = [hi - lo + p.min_doc_len for lo, hi in zip(edges, edges[1:])]
    lengths = torch.zeros(p.max_docs, dtype=torch.long)
    lengths[:n_docs] = torch.tensor(doc_lengths)
    mask_values: list[int] = []
    for length in doc_lengths:
        prompt = math.ceil(length * p.prompt_fraction)
        mask_values += [0] * prompt + [1] * (length - prompt)
    loss_mask = torch.tensor(mask_values, dtype=torch.long)
    gen = torch.Generator().manual_seed(seed * 1_000_003 + index)
    ids = torch.randint(0, p.vocab - 1, (p.seq_len,), generator=gen)  # vocab-1 is the mask token
    return PackedSequence(ids=ids, loss_mask=loss_mask, lengths=lengths)


@dataclass(frozen=True)
class BlockTargets:
    """What the drafter is fed and scored on for N blocks of bs tokens."""

    input_ids: torch.Tensor
    """[N, bs] the anchor token then bs-1 mask tokens."""
    positions: torch.Tensor
    """[N, bs] absolute positions a + k (for rotary embeddings)."""
    labels: torch.Tensor
    """[N, bs] token ids[a + k] (clamped inside the sequence)."""
    weights: torch.Tensor
    """[N, bs] float loss weights: exp(-(k-1)/gamma) for k >= 1, 0 for slot 0 and invalid slots."""


def block_targets(ids: torch.Tensor, loss_mask: torch.Tensor, doc_ids: torch.Tensor,
                  anchors: torch.Tensor, anchor_valid: torch.Tensor, preset: Preset) -> BlockTargets:
    """Labels and weights of every block slot; all on device, no host sync."""
    bs, seq_len = preset.block_size, ids.shape[-1]
    slots = torch.arange(bs, device=ids.device)
    positions = anchors[:, None] + slots[None, :]
    inside = positions < seq_len
    clamped = positions.clamp(max=seq_len - 1)
    labels = ids[clamped]
    valid = (inside & loss_mask[clamped].bool() & (doc_ids[clamped] == doc_ids[anchors][:, None])
             & anchor_valid[:, None])
    decay = torch.exp(-(slots.float() - 1.0) / preset.loss_gamma)
    decay[0] = 0.0  # slot 0 is the anchor itself: known, not supervised
    weights = valid.float() * decay[None, :]
    input_ids = torch.full_like(labels, preset.vocab - 1)
    input_ids[:, 0] = ids[anchors]
    return BlockTargets(input_ids=input_ids, positions=positions, labels=labels, weights=weights)
