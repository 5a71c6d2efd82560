"""The training job: roles, warm-up, the measured token budget and the protocol line."""
from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import sys
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from . import counters
from .batch import PackedSequence, block_targets, synthetic_sequence
from .drafter import Drafter
from .layers import rope_tables
from .loss import chunked_loss, topk_recall
from .masks import MaskInputsBuffer, build_step_masks, document_ids, sample_anchors
from .presets import Preset
from .target import FrozenVocab, TargetModel
from .transport import Layout, Receiver, Sender, layout_from_env, pack, unpack
from .window import measured_window


@dataclass(frozen=True)
class RunSettings:
    """One run of the workload, after the command line and the environment were read."""

    preset: Preset
    """Sizes and schedule (overrides already applied)."""
    tokens: int
    """Token budget of the measured stage: supervised drafter tokens summed over drafter ranks."""
    seed: int
    """Seed of the data (per sequence) and of the weights."""
    target_ranks: int | None
    """Target ranks under torchrun; None = default split (about 5/8 of the world)."""
    device: str
    """'auto' (CUDA when available), 'cpu' or 'cuda'."""


def _device(layout: Layout, requested: str) -> torch.device:
    if requested == "cuda" or (requested == "auto" and torch.cuda.is_available()):
        torch.cuda.set_device(layout.local_rank)
        return torch.device("cuda", layout.local_rank)
    return torch.device("cpu")


def _compute_dtype(preset: Preset, device: torch.device) -> torch.dtype:
    if device.type == "cuda" and preset.dtype == "bfloat16":
        return torch.bfloat16
    return torch.float32


class StepClock:
    """Per-step milliseconds: CUDA events (no host sync per step) or the host clock on CPU."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.marks: list = []

    def mark(self) -> None:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter())

    def step_ms(self) -> list[float]:
        """Call after the final synchronize."""
        if self.cuda:
            return [a.elapsed_time(b) for a, b in zip(self.marks, self.marks[1:])]
        return [(b - a) * 1e3 for a, b in zip(self.marks, self.marks[1:])]


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class DrafterTrainer:
    """Owns the drafter, its optimizer and the frozen vocab; `step` is one training step."""

    def __init__(self, preset: Preset, device: torch.device, group: object | None):
        self.preset, self.device = preset, device
        self.dtype = _compute_dtype(preset, device)
        with device:  # parameters are created (and initialised) on the compute device
            self.vocab = FrozenVocab(preset).to(dtype=self.dtype)
            drafter = Drafter(preset)
        self.model = (DistributedDataParallel(drafter, process_group=group)
                      if group is not None else drafter)
        self.optimizer = torch.optim.AdamW(drafter.parameters(), lr=preset.lr,
                                           fused=device.type == "cuda")
        self.cos, self.sin = rope_tables(preset.seq_len + preset.block_size, preset.head_dim, device)
        self.dense_masks = device.type != "cuda"
        self.mask_buffer = MaskInputsBuffer()
        self.recalls: list[torch.Tensor] = []
        self.last_loss: torch.Tensor | None = None

    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.device.type == "cuda" and self.dtype != torch.float32:
            return torch.autocast("cuda", dtype=self.dtype)
        return contextlib.nullcontext()

    def step(self, seq: PackedSequence, hidden: torch.Tensor, step_index: int) -> None:
        p = self.preset
        doc_ids = document_ids(seq.lengths, p.seq_len)
        anchors, anchor_valid = sample_anchors(seq.loss_mask, p.anchors)
        mask_inputs = self.mask_buffer.fill(anchors, doc_ids, p.block_size)
        masks = build_step_masks(mask_inputs, p.sliding_window, self.dense_masks)
        targets = block_targets(seq.ids, seq.loss_mask, doc_ids, anchors, anchor_valid, p)
        q_pos = targets.positions.flatten()
        rope_q = (self.cos[q_pos], self.sin[q_pos])
        rope_ctx = (self.cos[:p.seq_len], self.sin[:p.seq_len])
        block_embeds = self.vocab.embed(targets.input_ids.flatten())[None]
        with self._autocast():
            out = self.model(hidden[None], block_embeds, rope_q, rope_ctx, masks)[0]
            loss = chunked_loss(out, self.vocab.lm_head.weight, targets.labels, targets.weights,
                                p.lm_head_chunk)
            if (step_index + 1) % p.metrics_every == 0:
                self.recalls.append(topk_recall(out, self.vocab.lm_head.weight, targets.labels,
                                                targets.weights, p.lm_head_chunk, p.metrics_topk))
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.last_loss = loss.detach()


class LocalSource:
    """World size 1: this process also runs the frozen target."""

    def __init__(self, preset: Preset, device: torch.device, seed: int):
        self.preset, self.device, self.seed = preset, device, seed
        dtype = _compute_dtype(preset, device)
        with device:
            self.target = TargetModel(preset, FrozenVocab(preset)).to(dtype=dtype)
        self.index = 0

    def receive(self) -> tuple[PackedSequence, torch.Tensor]:
        seq = synthetic_sequence(self.preset, self.index, self.seed)
        self.index += 1
        ints = pack(seq).to(self.device, non_blocking=True)
        seq = unpack(ints, self.preset)
        return seq, self.target(seq.ids[None])[0]


def run_target(settings: RunSettings, layout: Layout, device: torch.device, total_steps: int) -> None:
    """Produce every sequence this target rank owns and send it to its drafter rank."""
    p = settings.preset
    dtype = _compute_dtype(p, device)
    with device:
        target = TargetModel(p, FrozenVocab(p)).to(dtype=dtype)
    sender = Sender(p.max_in_flight)
    n_sequences = total_steps * len(layout.drafter_ranks)
    for g in range(n_sequences):
        if layout.producer_of(g) != layout.rank:
            continue
        ints = pack(synthetic_sequence(p, g, settings.seed)).to(device)
        hidden = target(ints[None, :p.seq_len])[0].to(dtype).contiguous()
        sender.send(ints, hidden, layout.consumer_of(g))
    sender.drain()


def run_drafter(settings: RunSettings, layout: Layout, device: torch.device, group: object | None,
                warmup: int, measured: int) -> dict | None:
    """Warm-up, then the measured steps with GC off; returns the protocol record on drafter 0."""
    p = settings.preset
    trainer = DrafterTrainer(p, device, group)
    total = warmup + measured
    if layout.shared:
        source: LocalSource | Receiver = LocalSource(p, device, settings.seed)
    else:
        source = Receiver(layout, p, _compute_dtype(p, device), device, total)
    for step in range(warmup):
        trainer.step(*source.receive(), step)

    tokens_per_step = p.supervised_tokens_per_step * len(layout.drafter_ranks)
    clock = StepClock(device)
    _synchronize(device)
    # Alone from here on when the tool overlaps probes (window.py); a no-op otherwise.
    with measured_window():
        snapshots = [counters.snapshot()]
        gc.collect()
        gc.disable()
        try:
            _synchronize(device)
            started = time.perf_counter()
            clock.mark()
            for step in range(warmup, total):
                trainer.step(*source.receive(), step)
                clock.mark()
                snapshots.append(counters.snapshot())
            _synchronize(device)
            seconds = time.perf_counter() - started
        finally:
            gc.enable()

    if group is not None and len(layout.drafter_ranks) > 1:
        # The job is as slow as its slowest drafter rank.
        slowest = torch.tensor([seconds], dtype=torch.float64, device=device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=group)
        seconds = float(slowest[0])
    _report_training(trainer)
    if layout.drafter_index != 0:
        return None
    rows = []
    for ms, before, after in zip(clock.step_ms(), snapshots, snapshots[1:]):
        rows.append({"ms": round(ms, 3), "tokens": tokens_per_step, **counters.delta(before, after)})
    tokens = tokens_per_step * measured
    return {"tokens": tokens, "seconds": round(seconds, 6), "tok_s": round(tokens / seconds, 3),
            "iters": rows, "preset": p.name, "world": layout.world,
            "target_ranks": len(layout.target_ranks), "drafter_ranks": len(layout.drafter_ranks),
            "warmup_steps": warmup}


def _report_training(trainer: DrafterTrainer) -> None:
    """After the measured stage (these reads sync the device): a human line on stderr."""
    loss = float(trainer.last_loss) if trainer.last_loss is not None else float("nan")
    recall = float(torch.stack(trainer.recalls).mean()) if trainer.recalls else float("nan")
    print(f"[dflash] last loss {loss:.4f}, top-{trainer.preset.metrics_topk} recall {recall:.4f}",
          file=sys.stderr)


def run(settings: RunSettings) -> None:
    layout = layout_from_env(settings.target_ranks)
    device = _device(layout, settings.device)
    torch.manual_seed(settings.seed + layout.rank)
    if device.type == "cpu" and "OMP_NUM_THREADS" not in os.environ:
        # The tiny preset's ops do not scale with threads; one per rank keeps timings steady.
        torch.set_num_threads(1)
    group = None
    if layout.world > 1:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
        # Every rank must take part in creating the drafters' group.
        group = dist.new_group(list(layout.drafter_ranks))
    tokens_per_step = settings.preset.supervised_tokens_per_step * len(layout.drafter_ranks)
    measured = max(1, math.ceil(settings.tokens / tokens_per_step))
    warmup = settings.preset.warmup_steps
    try:
        if layout.is_target:
            run_target(settings, layout, device, warmup + measured)
        else:
            record = run_drafter(settings, layout, device, group, warmup, measured)
            if record is not None:
                print("@regressbisect " + json.dumps(record, separators=(",", ":")), flush=True)
        if layout.world > 1:
            dist.barrier()
    finally:
        if layout.world > 1:
            dist.destroy_process_group()
