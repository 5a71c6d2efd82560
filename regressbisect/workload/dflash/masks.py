"""Anchor sampling, document ids and the drafter's attention mask (one per step, not per layer).

Query q belongs to block q // bs, anchored at position a. It may see:
- context keys kv < S with kv < a, in the anchor's document (and within the window, if any);
- draft keys S <= kv in its own block only (bidirectional inside the block).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
# Called through the module attribute (not `from ... import create_block_mask`) so that a
# wrapper installed later by the counters shim is the function that runs.
from torch.nn.attention import flex_attention as flex_attention_module

MaskMod = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def document_ids(lengths: torch.Tensor, seq_len: int) -> torch.Tensor:
    """Document index of every position of a packed sequence, [S] long.

    `lengths` is padded with zeros to a fixed count; output_size avoids a host sync.
    """
    docs = torch.arange(lengths.numel(), device=lengths.device)
    return torch.repeat_interleave(docs, lengths, output_size=seq_len)


def sample_anchors(loss_mask: torch.Tensor, n_anchors: int,
                   generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Up to N anchor positions p with loss_mask[p] and loss_mask[p+1], sorted ascending.

    Returns (anchors [N] long, valid [N] bool); when fewer than N positions are valid the
    remaining anchors are invalid positions and must get zero loss weight.
    """
    seq_len = loss_mask.shape[-1]
    valid = loss_mask[:-1].bool() & loss_mask[1:].bool()  # positions 0..S-2
    scores = torch.rand(seq_len - 1, device=loss_mask.device, generator=generator)
    scores = torch.where(valid, scores, torch.full_like(scores, 2.0))
    keep = torch.argsort(scores)[:n_anchors]
    anchors = torch.sort(keep).values
    return anchors, valid[anchors]


@dataclass(frozen=True)
class MaskInputs:
    """Tensors the mask_mod closes over (all on the compute device)."""

    anchors: torch.Tensor
    """[N] anchor positions."""
    doc_of_key: torch.Tensor
    """[S + N*bs] document of each key; -1 for draft keys (never compared)."""
    seq_len: int
    """S: number of context keys."""
    block_size: int
    """bs: queries per block."""
    mask_mods: dict[int, MaskMod] = field(default_factory=dict, compare=False, repr=False)
    """The mask_mod of each window, made once per MaskInputs (see MaskInputsBuffer)."""


def make_mask_inputs(anchors: torch.Tensor, doc_ids: torch.Tensor, block_size: int) -> MaskInputs:
    pad = torch.full((anchors.numel() * block_size,), -1, dtype=doc_ids.dtype, device=doc_ids.device)
    return MaskInputs(anchors=anchors, doc_of_key=torch.cat([doc_ids, pad]),
                      seq_len=doc_ids.numel(), block_size=block_size)


class MaskInputsBuffer:
    """Mask inputs kept for the whole run and refilled in place every step.

    torch.compile guards on the mask_mod a BlockMask carries; refilling the same tensors keeps
    one mask_mod object per window for the whole run, so a new closure per step can never cause
    a recompilation of flex_attention.
    """

    def __init__(self) -> None:
        self.inputs: MaskInputs | None = None

    def fill(self, anchors: torch.Tensor, doc_ids: torch.Tensor, block_size: int) -> MaskInputs:
        fresh = make_mask_inputs(anchors, doc_ids, block_size)
        held = self.inputs
        if (held is None or held.anchors.shape != fresh.anchors.shape
                or held.doc_of_key.shape != fresh.doc_of_key.shape or held.block_size != block_size):
            self.inputs = fresh
            return fresh
        held.anchors.copy_(fresh.anchors)
        held.doc_of_key.copy_(fresh.doc_of_key)
        return held


def make_mask_mod(inputs: MaskInputs, window: int = 0) -> MaskMod:
    """mask_mod(b, h, q, kv) -> bool of the DFlash drafter attention (see module docstring).

    The same function object is returned for the same (inputs, window).
    """
    cached = inputs.mask_mods.get(window)
    if cached is not None:
        return cached
    anchors, doc_of_key = inputs.anchors, inputs.doc_of_key
    seq_len, block_size = inputs.seq_len, inputs.block_size

    def mask_mod(b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
        block = q // block_size
        anchor = anchors[block]
        is_context = kv < seq_len
        context_ok = is_context & (kv < anchor) & (doc_of_key[kv] == doc_of_key[anchor])
        if window > 0:
            context_ok = context_ok & (anchor - kv <= window)
        draft_ok = (~is_context) & ((kv - seq_len) // block_size == block)
        return context_ok | draft_ok

    inputs.mask_mods[window] = mask_mod
    return mask_mod


@dataclass(frozen=True)
class StepMasks:
    """The masks of one step: the full mask and, if some layer is windowed, the windowed one."""

    full: object
    """BlockMask on CUDA (flex_attention); dense [1, 1, Q, KV] bool on CPU (SDPA)."""
    windowed: object | None
    """Same for the sliding-window layers, or None when no layer is windowed."""


def dense_mask(mask_mod: MaskMod, q_len: int, kv_len: int, device: torch.device) -> torch.Tensor:
    """[1, 1, Q, KV] bool: the same mask_mod evaluated on broadcast index grids.

    Equal to flex_attention's create_mask (tested), which vmaps the mask_mod and is ~100x
    slower on CPU: it would dwarf the tiny preset's step and no GPU step pays it.
    """
    zero = torch.zeros((), dtype=torch.long, device=device)
    q = torch.arange(q_len, device=device)[:, None]
    kv = torch.arange(kv_len, device=device)[None, :]
    return mask_mod(zero, zero, q, kv)[None, None]


def build_mask(inputs: MaskInputs, window: int, dense: bool) -> object:
    """One mask: create_block_mask always runs (it is the step's real host cost on GPU, counted
    and timed by the shim); on CPU, where flex_attention has no backward, the dense mask of the
    same mask_mod is returned for scaled_dot_product_attention."""
    mask_mod = make_mask_mod(inputs, window)
    q_len = inputs.anchors.numel() * inputs.block_size
    kv_len = inputs.seq_len + q_len
    device = inputs.anchors.device
    block_mask = flex_attention_module.create_block_mask(mask_mod, 1, None, q_len, kv_len, device=device)
    if not dense:
        return block_mask
    return dense_mask(mask_mod, q_len, kv_len, device)


def build_step_masks(inputs: MaskInputs, window: int, dense: bool) -> StepMasks:
    """Built once per step and shared by every layer."""
    full = build_mask(inputs, 0, dense)
    windowed = build_mask(inputs, window, dense) if window > 0 else None
    return StepMasks(full=full, windowed=windowed)
