"""The DFlash mask, anchors and loss against explicit references (in process, CPU, fast)."""
from __future__ import annotations

import math
import random

import pytest
import torch
import torch.nn.functional as F

from regressbisect.workload.dflash import masks
from regressbisect.workload.dflash.batch import synthetic_sequence
from regressbisect.workload.dflash.loss import chunked_loss
from regressbisect.workload.dflash.presets import TINY
from regressbisect.workload.dflash.transport import default_target_ranks
from regressbisect.workload.dflash import workload_command


def reference_mask(lengths: list[int], anchors: list[int], bs: int, window: int) -> torch.Tensor:
    """The mask semantics of docs/workload.md written as plain loops."""
    doc = []
    for d, length in enumerate(lengths):
        doc += [d] * length
    seq_len, q_len = len(doc), len(anchors) * bs
    out = torch.zeros(q_len, seq_len + q_len, dtype=torch.bool)
    for q in range(q_len):
        block = q // bs
        a = anchors[block]
        for kv in range(seq_len + q_len):
            if kv < seq_len:
                ok = kv < a and doc[kv] == doc[a] and (window == 0 or a - kv <= window)
            else:
                ok = (kv - seq_len) // bs == block
            out[q, kv] = ok
    return out


def random_case(seed: int, seq_len: int = 96, n_anchors: int = 6, bs: int = 4):
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, seq_len), rng.randint(0, 5)))
    lengths = [b - a for a, b in zip([0, *cuts], [*cuts, seq_len])]
    anchors = sorted(rng.sample(range(seq_len - 1), n_anchors))
    return lengths, anchors, bs


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("window", [0, 9])
def test_masks_match_loop_reference(seed: int, window: int) -> None:
    lengths, anchors, bs = random_case(seed)
    seq_len = sum(lengths)
    padded = torch.tensor(lengths + [0] * 3)
    doc_ids = masks.document_ids(padded, seq_len)
    inputs = masks.make_mask_inputs(torch.tensor(anchors), doc_ids, bs)
    expected = reference_mask(lengths, anchors, bs, window)
    q_len, kv_len = expected.shape

    step = masks.build_step_masks(inputs, window, dense=True)
    dense = step.windowed if window else step.full
    assert torch.equal(dense[0, 0], expected)
    mod = masks.make_mask_mod(inputs, window)
    vmapped = masks.flex_attention_module.create_mask(mod, 1, None, q_len, kv_len, device="cpu")
    assert torch.equal(vmapped[0, 0], expected)
    # The BlockMask: a block is non-empty exactly where the reference has a True in it.
    block = 8
    block_mask = masks.flex_attention_module.create_block_mask(mod, 1, None, q_len, kv_len,
                                                               device="cpu", BLOCK_SIZE=block)
    dense_blocks = block_mask.to_dense()[0, 0].bool()
    ref_blocks = torch.nn.functional.pad(expected, (0, -kv_len % block, 0, -q_len % block))
    ref_blocks = ref_blocks.view(math.ceil(q_len / block), block, -1, block).any(dim=(1, 3))
    assert torch.equal(dense_blocks[:ref_blocks.shape[0], :ref_blocks.shape[1]], ref_blocks)


def test_anchor_sampling_keeps_only_valid_positions_sorted() -> None:
    seq = synthetic_sequence(TINY, index=5, seed=0)
    torch.manual_seed(0)
    anchors, valid = masks.sample_anchors(seq.loss_mask, TINY.anchors)
    lm = seq.loss_mask.tolist()
    valid_positions = [p for p in range(len(lm) - 1) if lm[p] and lm[p + 1]]
    assert anchors.numel() == TINY.anchors and len(valid_positions) >= TINY.anchors
    assert anchors.tolist() == sorted(anchors.tolist())
    assert valid.all() and set(anchors.tolist()) <= set(valid_positions)
    # Too few valid positions: the remainder is flagged invalid.
    sparse = torch.zeros(20, dtype=torch.long)
    sparse[3:6] = 1
    anchors, valid = masks.sample_anchors(sparse, 5)
    assert sorted(anchors[valid].tolist()) == [3, 4] and int(valid.sum()) == 2


def test_synthetic_lengths_sum_to_sequence() -> None:
    for index in range(5):
        seq = synthetic_sequence(TINY, index, seed=1)
        assert int(seq.lengths.sum()) == TINY.seq_len
        assert seq.ids.max() < TINY.vocab - 1  # the mask token never appears in the data


def test_chunked_loss_equals_unchunked_weighted_ce() -> None:
    torch.manual_seed(0)
    n, bs, h, vocab = 5, 4, 8, 50
    out = torch.randn(n * bs, h, requires_grad=True)
    weight = torch.randn(vocab, h)
    labels = torch.randint(0, vocab, (n, bs))
    weights = torch.rand(n, bs)
    loss = chunked_loss(out, weight, labels, weights, chunk_blocks=2)
    ce = F.cross_entropy(out @ weight.T, labels.flatten(), reduction="none")
    expected = (ce * weights.flatten()).sum() / weights.sum()
    assert torch.allclose(loss, expected, atol=1e-5)
    loss.backward()
    assert out.grad is not None and out.grad.abs().sum() > 0


def test_rank_split_and_command() -> None:
    assert [default_target_ranks(w) for w in (1, 2, 4, 8)] == [0, 1, 2, 5]
    one = workload_command("tiny", 1, 4096)
    assert one[1:] == ["-m", "regressbisect.workload.dflash", "--preset", "tiny", "--tokens", "4096"]
    two = workload_command("h200", 2, None)
    assert two[1:7] == ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m"]
    assert "--tokens" not in two
    with pytest.raises(ValueError):
        workload_command("nope", 1, None)


def test_mask_buffer_keeps_one_mask_mod_and_refills_in_place() -> None:
    buffer = masks.MaskInputsBuffer()
    results = []
    for seed in (1, 2):
        lengths, anchors, bs = random_case(seed)
        doc_ids = masks.document_ids(torch.tensor(lengths + [0] * 3), sum(lengths))
        inputs = buffer.fill(torch.tensor(anchors), doc_ids, bs)
        step = masks.build_step_masks(inputs, 0, dense=True)
        assert torch.equal(step.full[0, 0], reference_mask(lengths, anchors, bs, 0))
        results.append((inputs, masks.make_mask_mod(inputs, 0)))
    (first, first_mod), (second, second_mod) = results
    # Same tensors and the same function object: torch.compile sees one mask_mod for the run.
    assert first is second and first_mod is second_mod
