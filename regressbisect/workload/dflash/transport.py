"""Rank roles and the target -> drafter transfer of (ids, loss_mask, lengths, hidden).

Global sequence g = step * D + drafter_index is produced by target g % T and consumed by
drafter g % D at step g // D; each (target, drafter) pair sends in increasing g, so plain
per-pair message order matches sends to receives.
"""
from __future__ import annotations

import collections
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from .batch import PackedSequence
from .presets import Preset


def default_target_ranks(world: int) -> int:
    """World 1 -> 0 (one process does both), 2 -> 1, 8 -> 5: about 5/8 of the ranks."""
    if world <= 1:
        return 0
    return min(world - 1, max(1, round(world * 5 / 8)))


@dataclass(frozen=True)
class Layout:
    """Who does what in this job."""

    rank: int
    """Global rank of this process."""
    world: int
    """Processes in the job."""
    local_rank: int
    """Rank on this host (CUDA device index)."""
    target_ranks: tuple[int, ...]
    """Global ranks producing hidden states (empty when world is 1)."""
    drafter_ranks: tuple[int, ...]
    """Global ranks training the drafter (DDP among themselves)."""

    @property
    def shared(self) -> bool:
        """One process runs the target and the drafter."""
        return not self.target_ranks

    @property
    def is_target(self) -> bool:
        return self.rank in self.target_ranks

    @property
    def drafter_index(self) -> int:
        return self.drafter_ranks.index(self.rank)

    def producer_of(self, global_seq: int) -> int:
        return self.target_ranks[global_seq % len(self.target_ranks)]

    def consumer_of(self, global_seq: int) -> int:
        return self.drafter_ranks[global_seq % len(self.drafter_ranks)]


def layout_from_env(target_ranks: int | None) -> Layout:
    """Read torchrun's RANK / WORLD_SIZE / LOCAL_RANK (absent: a single process)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    n_targets = default_target_ranks(world) if target_ranks is None else target_ranks
    if world > 1 and not 1 <= n_targets <= world - 1:
        raise ValueError(f"--target-ranks must be between 1 and {world - 1} with {world} processes")
    if world == 1:
        n_targets = 0
    return Layout(rank=rank, world=world, local_rank=local_rank,
                  target_ranks=tuple(range(n_targets)), drafter_ranks=tuple(range(n_targets, world)))


def _int_payload_len(preset: Preset) -> int:
    return 2 * preset.seq_len + preset.max_docs


def pack(seq: PackedSequence) -> torch.Tensor:
    return torch.cat([seq.ids, seq.loss_mask, seq.lengths])


def unpack(ints: torch.Tensor, preset: Preset) -> PackedSequence:
    s = preset.seq_len
    return PackedSequence(ids=ints[:s], loss_mask=ints[s:2 * s], lengths=ints[2 * s:])


class Sender:
    """Target side: isend with at most `max_in_flight` batches not yet completed."""

    def __init__(self, max_in_flight: int):
        self.max_in_flight = max_in_flight
        self.pending: collections.deque[tuple[list[dist.Work], tuple[torch.Tensor, ...]]] = (
            collections.deque())

    def send(self, ints: torch.Tensor, hidden: torch.Tensor, dst: int) -> None:
        works = [dist.isend(ints, dst), dist.isend(hidden, dst)]
        self.pending.append((works, (ints, hidden)))  # the tensors live until the sends complete
        while len(self.pending) > self.max_in_flight:
            self._complete_oldest()

    def drain(self) -> None:
        while self.pending:
            self._complete_oldest()

    def _complete_oldest(self) -> None:
        works, _tensors = self.pending.popleft()
        for work in works:
            work.wait()


class Receiver:
    """Drafter side: the receive of step j+1 is posted before step j is trained (prefetch)."""

    def __init__(self, layout: Layout, preset: Preset, hidden_dtype: torch.dtype,
                 device: torch.device, total_steps: int):
        self.layout, self.preset = layout, preset
        self.hidden_dtype, self.device = hidden_dtype, device
        self.total_steps = total_steps
        self.next_step = 0
        self.posted: collections.deque = collections.deque()
        self._post()

    def _post(self) -> None:
        if self.next_step >= self.total_steps:
            return
        g = self.next_step * len(self.layout.drafter_ranks) + self.layout.drafter_index
        src = self.layout.producer_of(g)
        p = self.preset
        ints = torch.empty(_int_payload_len(p), dtype=torch.long, device=self.device)
        hidden = torch.empty(p.seq_len, p.target_layers_kept * p.hidden, dtype=self.hidden_dtype,
                             device=self.device)
        works = [dist.irecv(ints, src), dist.irecv(hidden, src)]
        self.posted.append((ints, hidden, works))
        self.next_step += 1

    def receive(self) -> tuple[PackedSequence, torch.Tensor]:
        ints, hidden, works = self.posted.popleft()
        for work in works:
            work.wait()
        self._post()
        return unpack(ints, self.preset), hidden
