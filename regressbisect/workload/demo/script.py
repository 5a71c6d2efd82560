"""The demo repository's script, as data: its commits (harmless ones and real regressions, each
an exact string edit of the reference trainer's sources), the uncommitted diff, the pyproject and
README it starts with, and the multi-rank branch. `build.py` turns this into a git repository."""
from __future__ import annotations

from dataclasses import dataclass

PACKAGE = "trainer"
FIRST_DATE = 1_735_725_600  # 2025-01-01 10:00 UTC
HOURS = 3600
DEFAULT_TOKENS = 960  # 20 tiny steps: about 1 s measured after ~4 s of start-up on one CPU core;
# the run-to-run noise of a shared CPU is per process (~12%), so longer probes buy little
# h200: 5 steps of 7680 supervised tokens (~1 s); a single step's time varies by several percent
DEFAULT_TOKENS_BY_PRESET = {"tiny": DEFAULT_TOKENS, "h200": 38400}


# ---------------------------------------------------------------------------------------------
# Value types


@dataclass(frozen=True)
class Edit:
    """One exact string replacement in one file of the demo repository."""

    path: str
    """File relative to the repository root."""
    old: str
    """Text that must occur exactly `count` times (empty with `create=True`)."""
    new: str
    """Replacement text (the whole file with `create=True`)."""
    count: int = 1
    """Expected occurrences of `old`: a mismatch is an error, not a silent no-op."""
    create: bool = False
    """Write `new` as the whole file (which must not exist yet)."""


@dataclass(frozen=True)
class ScriptedCommit:
    """A commit of the scripted history and what it is expected to do to the workload."""

    subject: str
    """First line of the commit message."""
    edits: tuple[Edit, ...]
    """Edits applied on top of the previous commit."""
    kind: str = "harmless"
    """'harmless', 'culprit', 'more-lm-head-not-slower' or 'counters-only'."""
    effect: str = "none"
    """Expected effect on the CPU tiny preset (tok/s and counters per iteration)."""


# ---------------------------------------------------------------------------------------------
# The scripted history


def _t(name: str) -> str:
    return f"{PACKAGE}/{name}"


README_MD = """\
# dflash-trainer

A DFlash-style drafter trainer: a frozen target model produces hidden states of a few layers,
a small block-diffusion drafter learns to predict the next `bs - 1` tokens after sampled anchors.

Run it:

    python -m trainer --preset tiny --tokens 960           # one process, CPU
    python -m trainer --preset tiny --tokens 960 --nproc 2  # 1 target + 1 drafter rank (gloo)

It prints one line `@regressbisect {"tokens": ..., "seconds": ..., "tok_s": ...}` after warm-up.
"""

GITIGNORE = "__pycache__/\n*.pyc\n.regressbisect/\nruns/\n"


OVERLAP_BY_PRESET = {"h200": 3}
"""Probes run at once per slot (`overlap`) in the demo's pyproject: three h200 probes (about 38 GB
each) fit on one H200 together, four do not (docs/cost.md, section 5)."""


def pyproject_toml(preset: str, tokens: int, version: str = "0.1.0") -> str:
    overlap = OVERLAP_BY_PRESET.get(preset)
    overlap_line = f"overlap = {overlap}\n" if overlap else ""
    return f"""\
[project]
name = "dflash-trainer"
version = "{version}"
description = "DFlash-style drafter training (demo repository for regressbisect)"
requires-python = ">=3.10"
dependencies = ["torch>=2.5"]

[tool.regressbisect]
cmd = "python -m {PACKAGE} --preset {preset} --tokens {{tokens}}"
tokens = {tokens}
timeout = 300
overhead_pairs = 4
{overlap_line}"""


def scripted_history(preset: str, tokens: int) -> list[ScriptedCommit]:
    """Commits after the initial import, oldest first."""
    t = _t
    return [
        ScriptedCommit("Add a README with how to run the trainer", (
            Edit("README.md", "", README_MD, create=True),)),
        ScriptedCommit("Ignore caches and run outputs", (
            Edit(".gitignore", "", GITIGNORE, create=True),)),
        ScriptedCommit("Explain the anchor sampling in comments", (
            Edit(t("masks.py"), "    valid = loss_mask[:-1].bool() & loss_mask[1:].bool()  # positions 0..S-2\n",
                 "    # An anchor needs a supervised successor: the block predicts tokens after it.\n"
                 "    valid = loss_mask[:-1].bool() & loss_mask[1:].bool()  # positions 0..S-2\n"
                 "    # Random scores, invalid positions pushed last: argsort keeps N valid ones first.\n"),)),
        ScriptedCommit("Factor the rotary lookup of the step into a helper", (
            Edit(t("train.py"),
                 "        q_pos = targets.positions.flatten()\n"
                 "        rope_q = (self.cos[q_pos], self.sin[q_pos])\n"
                 "        rope_ctx = (self.cos[:p.seq_len], self.sin[:p.seq_len])\n",
                 "        rope_q, rope_ctx = self._rope(targets.positions.flatten())\n"),
            Edit(t("train.py"), "    def step(self, seq: PackedSequence",
                 "    def _rope(self, q_pos: torch.Tensor) -> tuple[tuple[torch.Tensor, torch.Tensor], "
                 "tuple[torch.Tensor, torch.Tensor]]:\n"
                 "        \"\"\"cos/sin of the block queries and of the context keys.\"\"\"\n"
                 "        s = self.preset.seq_len\n"
                 "        return (self.cos[q_pos], self.sin[q_pos]), (self.cos[:s], self.sin[:s])\n\n"
                 "    def step(self, seq: PackedSequence"))),
        ScriptedCommit("Log the run configuration at start-up", (
            Edit(t("train.py"), "    warmup = settings.preset.warmup_steps\n",
                 "    warmup = settings.preset.warmup_steps\n"
                 "    if layout.rank == 0:\n"
                 "        print(f\"[dflash] preset {settings.preset.name}, world {layout.world}, \"\n"
                 "              f\"{measured} measured steps after {warmup} warm-up\", file=sys.stderr)\n"),)),
        ScriptedCommit("Name the mask token id", (
            Edit(t("presets.py"), "PRESETS: dict[str, Preset]",
                 "def mask_token_id(preset: Preset) -> int:\n"
                 "    \"\"\"The last vocabulary id marks the bs-1 positions the drafter fills in.\"\"\"\n"
                 "    return preset.vocab - 1\n\n\n"
                 "PRESETS: dict[str, Preset]"),
            Edit(t("batch.py"), "from .presets import Preset\n", "from .presets import Preset, mask_token_id\n"),
            Edit(t("batch.py"), "    input_ids = torch.full_like(labels, preset.vocab - 1)\n",
                 "    input_ids = torch.full_like(labels, mask_token_id(preset))\n"))),
        ScriptedCommit("Build the attention mask in the drafter layer loop", (
            Edit(t("train.py"),
                 "        masks = build_step_masks(mask_inputs, p.sliding_window, self.dense_masks)\n", ""),
            Edit(t("train.py"), "block_embeds, rope_q, rope_ctx, masks)[0]",
                 "block_embeds, rope_q, rope_ctx, mask_inputs)[0]"),
            Edit(t("drafter.py"), "from .masks import StepMasks\n", "from .masks import MaskInputs, build_mask\n"),
            Edit(t("drafter.py"), "                masks: StepMasks) -> torch.Tensor:\n",
                 "                mask_inputs: MaskInputs) -> torch.Tensor:\n"),
            Edit(t("drafter.py"),
                 "        for i, layer in enumerate(self.layers):\n"
                 "            windowed = layer_is_windowed(self.preset, i)\n"
                 "            x = layer(x, context, rope_q, rope_ctx, masks.windowed if windowed else masks.full)\n",
                 "        dense = block_embeds.device.type != \"cuda\"\n"
                 "        for i, layer in enumerate(self.layers):\n"
                 "            # Each layer builds the mask it attends with (windowed or not).\n"
                 "            window = self.preset.sliding_window if layer_is_windowed(self.preset, i) else 0\n"
                 "            x = layer(x, context, rope_q, rope_ctx, build_mask(mask_inputs, window, dense))\n")),
            kind="culprit",
            effect="create_block_mask calls/iter 1 -> 2 (one per layer); tok/s about -25% (measured -24 to -26%)"),
        ScriptedCommit("Add type hints to the transport queues", (
            Edit(t("transport.py"), "        self.posted: collections.deque = collections.deque()\n",
                 "        self.posted: collections.deque[tuple[torch.Tensor, torch.Tensor, list[dist.Work]]] = (\n"
                 "            collections.deque())\n"),)),
        ScriptedCommit("Document which tokens the throughput counts", (
            Edit("README.md", "after warm-up.\n",
                 "after warm-up.\n\n"
                 "Tokens counted are supervised drafter tokens: N anchors * (bs - 1) per drafter step\n"
                 "and drafter rank (slot 0 of each block is the anchor itself and is not trained on).\n"),)),
        ScriptedCommit("Count valid anchors and documents for the summary line", (
            Edit(t("train.py"), "        self.last_loss: torch.Tensor | None = None\n",
                 "        self.last_loss: torch.Tensor | None = None\n"
                 "        self.anchors_seen = 0\n"
                 "        self.documents_seen = 0\n"),
            Edit(t("train.py"), "        anchors, anchor_valid = sample_anchors(seq.loss_mask, p.anchors)\n",
                 "        anchors, anchor_valid = sample_anchors(seq.loss_mask, p.anchors)\n"
                 "        self.anchors_seen += int(anchor_valid.sum().item())\n"
                 "        self.documents_seen += sum(1 for n in seq.lengths.tolist() if n > 0)\n")),
            kind="counters-only",
            effect="host_syncs/iter +2 (.item, .tolist in the step); no CPU slowdown (a GPU would stall)"),
        ScriptedCommit("Rename the chunk bounds in the loss", (
            Edit(t("loss.py"),
                 "    for start in range(0, n_blocks, chunk_blocks):\n"
                 "        stop = start + chunk_blocks\n"
                 "        total = total + checkpoint(\n"
                 "            _chunk_loss, blocks[start:stop].flatten(0, 1), lm_head_weight,\n"
                 "            labels[start:stop].flatten(), weights[start:stop].flatten(), use_reentrant=False)\n",
                 "    for first in range(0, n_blocks, chunk_blocks):\n"
                 "        chunk = slice(first, first + chunk_blocks)\n"
                 "        total = total + checkpoint(\n"
                 "            _chunk_loss, blocks[chunk].flatten(0, 1), lm_head_weight,\n"
                 "            labels[chunk].flatten(), weights[chunk].flatten(), use_reentrant=False)\n"),)),
        ScriptedCommit("Report recall every step, with topk instead of a full sort", (
            Edit(t("loss.py"), "        top = torch.argsort(logits, dim=-1, descending=True)[:, :k]\n",
                 "        top = logits.topk(k, dim=-1).indices\n"),
            Edit(t("presets.py"), "metrics_every=4,", "metrics_every=1,")),
            kind="more-lm-head-not-slower",
            effect="lm_head calls/iter 4 (6 on every 4th step) -> 6 on every step (a metrics pass "
                   "every step), but the full-vocabulary sort it drops cost as much; tok/s not lower "
                   "(measured +0.5 to +6%)"),
        ScriptedCommit("Comment the DDP set-up", (
            Edit(t("train.py"), "            drafter = Drafter(preset)\n",
                 "            drafter = Drafter(preset)\n"
                 "        # DDP only among drafter ranks: targets hold no trainable weights.\n"),)),
        ScriptedCommit("Split the document layout out of synthetic_sequence", (
            Edit(t("batch.py"),
                 "    most_docs = min(p.max_docs, p.seq_len // p.min_doc_len)\n"
                 "    n_docs = rng.randint(1, most_docs)\n"
                 "    # n_docs - 1 cut points in the slack keep every document >= min_doc_len long.\n"
                 "    slack = p.seq_len - n_docs * p.min_doc_len\n"
                 "    edges = [0, *sorted(rng.randint(0, slack) for _ in range(n_docs - 1)), slack]\n"
                 "    doc_lengths = [hi - lo + p.min_doc_len for lo, hi in zip(edges, edges[1:])]\n",
                 "    doc_lengths = _document_lengths(p, rng)\n"
                 "    n_docs = len(doc_lengths)\n"),
            Edit(t("batch.py"), "def synthetic_sequence(",
                 "def _document_lengths(p: Preset, rng: random.Random) -> list[int]:\n"
                 "    \"\"\"Random document lengths >= min_doc_len that sum to S.\"\"\"\n"
                 "    most_docs = min(p.max_docs, p.seq_len // p.min_doc_len)\n"
                 "    n_docs = rng.randint(1, most_docs)\n"
                 "    # n_docs - 1 cut points in the slack keep every document >= min_doc_len long.\n"
                 "    slack = p.seq_len - n_docs * p.min_doc_len\n"
                 "    edges = [0, *sorted(rng.randint(0, slack) for _ in range(n_docs - 1)), slack]\n"
                 "    return [hi - lo + p.min_doc_len for lo, hi in zip(edges, edges[1:])]\n\n\n"
                 "def synthetic_sequence("))),
        ScriptedCommit("Lower the lm_head chunk 8x to cut peak logits memory", (
            Edit(t("presets.py"), "lm_head_chunk=8,", "lm_head_chunk=1,"),
            Edit(t("presets.py"), "lm_head_chunk=64,", "lm_head_chunk=8,")),
            kind="culprit",
            effect="lm_head calls/iter 6 -> 48 (8x more, 8x smaller GEMMs, 16 checkpointed chunks); "
                   "tok/s about -33% on the tiny preset (measured -30 to -36%)"),
        ScriptedCommit("Show the number of metric passes in the summary", (
            Edit(t("train.py"), "recall {recall:.4f}\",",
                 "recall {recall:.4f} over {len(trainer.recalls)} metric passes\","),)),
        ScriptedCommit("README: the presets", (
            Edit("README.md", "It prints one line",
                 "Presets: `tiny` (CPU, CI: hidden 64, vocab 2048, S 256, N 16, bs 4) and `h200`\n"
                 "(hidden 4096, vocab 151936, S 3072, N 512, bs 16, bf16, flex_attention).\n\n"
                 "It prints one line"),)),
        ScriptedCommit("Describe the payload layout of pack()", (
            Edit(t("transport.py"), "def pack(seq: PackedSequence) -> torch.Tensor:\n",
                 "def pack(seq: PackedSequence) -> torch.Tensor:\n"
                 "    \"\"\"One int64 message: [ids (S) | loss_mask (S) | lengths (max_docs)].\"\"\"\n"),)),
        ScriptedCommit("Drop an unused import", (
            Edit(t("train.py"), "from .masks import MaskInputsBuffer, build_step_masks, document_ids,",
                 "from .masks import MaskInputsBuffer, document_ids,"),)),
        ScriptedCommit("Docstring for Receiver.receive", (
            Edit(t("transport.py"), "    def receive(self) -> tuple[PackedSequence, torch.Tensor]:\n",
                 "    def receive(self) -> tuple[PackedSequence, torch.Tensor]:\n"
                 "        \"\"\"Wait for this step's batch, then post the receive of the next one.\"\"\"\n"),)),
        ScriptedCommit("Name the epsilon of the loss normalisation", (
            Edit(t("loss.py"), "    return total / weights.sum().clamp_min(1e-6)\n",
                 "    return total / weights.sum().clamp_min(WEIGHT_SUM_EPS)\n"),
            Edit(t("loss.py"), "from torch.utils.checkpoint import checkpoint\n",
                 "from torch.utils.checkpoint import checkpoint\n\n"
                 "WEIGHT_SUM_EPS = 1e-6  # a step whose anchors are all invalid has zero total weight\n"))),
        ScriptedCommit("README: mention the sliding-window option", (
            Edit("README.md", "It prints one line",
                 "`--sliding-window W` makes every other drafter layer attend to the last W context\n"
                 "tokens only (a second block mask).\n\n"
                 "It prints one line"),)),
        ScriptedCommit("Release 0.2.0", (
            Edit("pyproject.toml", 'version = "0.1.0"', 'version = "0.2.0"'),)),
    ]


# The demo's starting point differs from the packaged workload in one place: its metrics pass
# sorts the whole vocabulary. A later commit replaces that by topk and runs it every step.
INITIAL_EDITS = (
    Edit(_t("loss.py"), "        top = logits.topk(k, dim=-1).indices\n",
         "        top = torch.argsort(logits, dim=-1, descending=True)[:, :k]\n"),
)


UNCOMMITTED = (
    # Harmless: a description and validation helper for presets.
    Edit(_t("presets.py"), "    def replace(self, **changes: object) -> \"Preset\":\n"
                           "        return dataclasses.replace(self, **changes)\n",
         "    def replace(self, **changes: object) -> \"Preset\":\n"
         "        \"\"\"A copy with some fields changed (command-line overrides).\"\"\"\n"
         "        return dataclasses.replace(self, **changes)\n\n"
         "    def describe(self) -> str:\n"
         "        \"\"\"One line per size, for logs and --help texts.\"\"\"\n"
         "        lines = [f\"preset {self.name}\"]\n"
         "        lines.append(f\"  hidden {self.hidden}, ffn {self.ffn}, drafter layers {self.drafter_layers}\")\n"
         "        lines.append(f\"  heads {self.heads}/{self.kv_heads} x {self.head_dim}\")\n"
         "        lines.append(f\"  vocab {self.vocab}, target layers {self.target_layers} \"\n"
         "                     f\"(kept {self.target_layers_kept})\")\n"
         "        lines.append(f\"  S {self.seq_len}, N {self.anchors}, bs {self.block_size}\")\n"
         "        lines.append(f\"  lm_head chunk {self.lm_head_chunk} blocks, metrics every \"\n"
         "                     f\"{self.metrics_every} steps (top-{self.metrics_topk})\")\n"
         "        if self.sliding_window:\n"
         "            lines.append(f\"  sliding window {self.sliding_window} on every \"\n"
         "                         f\"{self.sliding_window_every}th layer\")\n"
         "        lines.append(f\"  supervised tokens per step {self.supervised_tokens_per_step}\")\n"
         "        return \"\\n\".join(lines)\n\n\n"
         "def validate(preset: Preset) -> list[str]:\n"
         "    \"\"\"Problems of a preset, empty when it is usable.\n\n"
         "    The checks are cheap and catch the mistakes that otherwise show up as a shape error\n"
         "    deep inside the first step.\n"
         "    \"\"\"\n"
         "    problems: list[str] = []\n"
         "    if preset.heads % preset.kv_heads:\n"
         "        problems.append(\"heads must be a multiple of kv_heads (grouped-query attention)\")\n"
         "    if preset.head_dim % 2:\n"
         "        problems.append(\"head_dim must be even (rotary embeddings rotate pairs)\")\n"
         "    if preset.block_size < 2:\n"
         "        problems.append(\"block_size must be >= 2: slot 0 is the anchor, not a target\")\n"
         "    if preset.anchors >= preset.seq_len:\n"
         "        problems.append(\"more anchors than positions\")\n"
         "    if preset.min_doc_len * 1 > preset.seq_len:\n"
         "        problems.append(\"min_doc_len longer than the sequence\")\n"
         "    if preset.target_layers_kept > preset.target_layers:\n"
         "        problems.append(\"cannot keep more target layers than the target has\")\n"
         "    if preset.lm_head_chunk < 1:\n"
         "        problems.append(\"lm_head_chunk must be >= 1\")\n"
         "    if preset.metrics_every < 1:\n"
         "        problems.append(\"metrics_every must be >= 1\")\n"
         "    if not 0.0 <= preset.prompt_fraction < 1.0:\n"
         "        problems.append(\"prompt_fraction must be in [0, 1)\")\n"
         "    return problems\n"),
    # Harmless: docstrings and comments in the batch helpers.
    Edit(_t("batch.py"), "    \"\"\"Labels and weights of every block slot; all on device, no host sync.\"\"\"\n",
         "    \"\"\"Labels and weights of every block slot; all on device, no host sync.\n\n"
         "    Slot k of the block anchored at a predicts ids[a + k]. A slot is supervised when\n"
         "    a + k is inside the sequence, is an answer token (loss_mask), belongs to the anchor's\n"
         "    document and the anchor itself was valid; its weight decays with k so that the first\n"
         "    tokens after the anchor, the ones speculative decoding accepts most, weigh most.\n"
         "    \"\"\"\n"),
    Edit(_t("batch.py"), "@dataclass(frozen=True)\nclass BlockTargets:",
         "def describe_sequence(seq: PackedSequence) -> str:\n"
         "    \"\"\"A short human description of a packed sequence (for debugging data issues).\"\"\"\n"
         "    lengths = [n for n in seq.lengths.tolist() if n > 0]\n"
         "    supervised = int(seq.loss_mask.sum())\n"
         "    return (f\"{len(lengths)} documents (shortest {min(lengths)}, longest {max(lengths)}), \"\n"
         "            f\"{supervised}/{seq.ids.numel()} supervised tokens\")\n\n\n"
         "def supervised_share(seq: PackedSequence) -> float:\n"
         "    \"\"\"Share of positions whose token is trained on.\"\"\"\n"
         "    return float(seq.loss_mask.float().mean())\n\n\n"
         "@dataclass(frozen=True)\nclass BlockTargets:"),
    # Regressing (GPU-visible, small on CPU): document ids from a [max_docs, S] comparison matrix.
    Edit(_t("masks.py"),
         "    docs = torch.arange(lengths.numel(), device=lengths.device)\n"
         "    return torch.repeat_interleave(docs, lengths, output_size=seq_len)\n",
         "    # A position belongs to the last document that starts at or before it.\n"
         "    starts = torch.cumsum(lengths, 0) - lengths\n"
         "    positions = torch.arange(seq_len, device=lengths.device)\n"
         "    started = (positions[None, :] >= starts[:, None]) & (lengths[:, None] > 0)\n"
         "    return started.long().sum(0) - 1\n"),
    # Regressing, by far the largest: autograd anomaly mode left on while chasing a NaN (every
    # op records its stack; backward checks every gradient). No counter moves: only tok/s shows it.
    Edit(_t("train.py"),
         "    torch.manual_seed(settings.seed + layout.rank)\n",
         "    torch.manual_seed(settings.seed + layout.rank)\n"
         "    # Find the op that produced the NaN loss seen at step ~1200 (remove once fixed).\n"
         "    torch.autograd.set_detect_anomaly(True)\n"),
    # Regressing (clearly, on CPU too): activation checkpointing of every drafter layer.
    Edit(_t("drafter.py"),
         "            x = layer(x, context, rope_q, rope_ctx, build_mask(mask_inputs, window, dense))\n",
         "            mask = build_mask(mask_inputs, window, dense)\n"
         "            # Recompute each layer in backward: saves activation memory on long contexts.\n"
         "            x = torch.utils.checkpoint.checkpoint(layer, x, context, rope_q, rope_ctx, mask,\n"
         "                                                  use_reentrant=False)\n"),
    # Harmless: docstrings in the drafter and the loss.
    Edit(_t("drafter.py"), "class DrafterLayer(nn.Module):\n",
         "class DrafterLayer(nn.Module):\n"
         "    \"\"\"One drafter layer.\n\n"
         "    Queries come from the block tokens only; keys and values are the projected target\n"
         "    context followed by the block tokens, so the drafter reads the target's hidden states\n"
         "    at every layer (as DFlash does) instead of only at the input.\n"
         "    \"\"\"\n\n"),
    Edit(_t("loss.py"), "def _chunk_loss(",
         "def _chunk_loss_doc() -> str:\n"
         "    \"\"\"Why chunks: [N * bs, vocab] logits in fp32 are 622 MB on the GPU preset per 64 blocks;\n"
         "    all 512 blocks at once would need 5 GB for the logits and as much for their gradient.\n"
         "    Checkpointing recomputes each chunk's logits in backward instead of keeping them.\n"
         "    \"\"\"\n"
         "    return _chunk_loss_doc.__doc__ or \"\"\n\n\n"
         "def _chunk_loss("),
    # Harmless: README design notes.
    Edit("README.md", "It prints one line",
         "## Design notes\n\n"
         "- The target is frozen and runs without autograd; only the drafter and its `fc` train.\n"
         "- Hidden states of L evenly spaced target layers are concatenated: `[B, S, L*H]`.\n"
         "- Anchors are sampled where the token and its successor are supervised.\n"
         "- Every block is the anchor token followed by bs-1 mask tokens; the drafter predicts\n"
         "  the bs-1 tokens after the anchor in parallel (block diffusion, one step).\n"
         "- The attention mask lets a block see the context before its anchor, in the same\n"
         "  document, and the tokens of its own block.\n"
         "- The loss goes through the frozen lm_head in chunks under activation checkpointing.\n"
         "- Metrics (top-K recall) take one more lm_head pass without gradients.\n\n"
         "## Multi-process layout\n\n"
         "Target ranks run the frozen model and send `(ids, loss_mask, lengths, hidden)` to drafter\n"
         "ranks with isend/irecv; drafters train with DDP in their own process group. A single\n"
         "process does both.\n\n"
         "It prints one line"),
)

# More harmless hunks (logging helpers, docstrings, docs), so the regressing ones hide in a
# realistic amount of work in progress.
_RUN_LOG = '''class RunLog:
    """Structured progress lines on stderr (never stdout: stdout carries the metrics line).

    Only rank 0 writes; every line starts with `[dflash +seconds]` so log scrapers find them.
    """

    def __init__(self, rank: int, every: int = 0):
        self.rank = rank
        self.every = every
        self.started = time.perf_counter()
        self.lines = 0

    def enabled(self) -> bool:
        """Whether this rank writes."""
        return self.rank == 0

    def write(self, message: str) -> None:
        """One line with the elapsed wall time."""
        if not self.enabled():
            return
        elapsed = time.perf_counter() - self.started
        print(f"[dflash +{elapsed:7.2f}s] {message}", file=sys.stderr, flush=True)
        self.lines += 1

    def step(self, index: int, total: int) -> None:
        """A progress line every `every` steps (0: never)."""
        if self.every and index % self.every == 0:
            self.write(f"step {index}/{total}")

    def section(self, title: str) -> None:
        """A visual separator between the phases of a run."""
        self.write("-" * 8 + f" {title} " + "-" * 8)


class DrafterTrainer:
'''

_LAYOUT_HELPERS = '''def describe_layout(layout: Layout) -> str:
    """`2 target rank(s) -> 1 drafter rank(s)`, or `shared` when one process does both."""
    if layout.shared:
        return "shared (one process runs the target and the drafter)"
    return (f"{len(layout.target_ranks)} target rank(s) {list(layout.target_ranks)} -> "
            f"{len(layout.drafter_ranks)} drafter rank(s) {list(layout.drafter_ranks)}")


def sequences_of(layout: Layout, rank: int, total_steps: int) -> list[int]:
    """Global sequence ids produced (target rank) or consumed (drafter rank) by `rank`.

    Useful to check by hand that every sequence has exactly one producer and one consumer.
    """
    n_sequences = total_steps * len(layout.drafter_ranks)
    if rank in layout.target_ranks:
        return [g for g in range(n_sequences) if layout.producer_of(g) == rank]
    return [g for g in range(n_sequences) if layout.consumer_of(g) == rank]


def bytes_per_sequence(preset: Preset, hidden_bytes: int) -> int:
    """Size of one target -> drafter message: the int64 payload plus the hidden states."""
    ints = (2 * preset.seq_len + preset.max_docs) * 8
    return ints + preset.seq_len * preset.target_layers_kept * preset.hidden * hidden_bytes


class Sender:
'''

_TROUBLESHOOTING = """
## Troubleshooting

**The first step is slow.** The first `create_block_mask` call traces the mask function
(about a second on CPU) and, on GPU, `flex_attention` compiles. Both happen during the
warm-up steps, which are excluded from the measured budget.

**`FlexAttention does not support backward on CPU`.** The CPU path does not call
flex_attention: it builds the same mask densely and uses `scaled_dot_product_attention`.
If you see this error, a layer received a BlockMask on CPU: check the `dense` flag.

**Throughput differs between runs.** On a shared machine other processes steal the core.
Compare runs interleaved (A, B, A, B, ...) and look at medians, not single runs.

**`--nproc 2` hangs.** Every target rank must produce exactly the sequences its drafter
ranks expect; `sequences_of()` in `transport.py` lists them per rank.

**Out of memory on the GPU preset.** Lower `lm_head_chunk` (blocks per lm_head call of the
loss): peak logits memory scales with it, the number of lm_head calls with its inverse.

## Reading the metrics line

| field | meaning |
|---|---|
| `tokens` | supervised drafter tokens in the measured stage, all drafter ranks |
| `seconds` | wall time of the measured stage (the slowest drafter rank) |
| `tok_s` | `tokens / seconds` |
| `iters` | one row per measured step: `ms`, `tokens`, and counters when a probe adds them |
"""

UNCOMMITTED_MORE = (
    Edit(_t("train.py"), "class DrafterTrainer:\n", _RUN_LOG),
    Edit(_t("train.py"),
         "    \"\"\"After the measured stage (these reads sync the device): a human line on stderr.\"\"\"\n",
         "    \"\"\"A human line on stderr, after the measured stage.\n\n"
         "    Reading the loss and the recall values syncs the device, which is why it is not\n"
         "    done inside the step: a host sync per step stalls the GPU queue.\n"
         "    \"\"\"\n"),
    Edit(_t("transport.py"), "class Sender:\n", _LAYOUT_HELPERS),
    Edit(_t("target.py"),
         "    \"\"\"Evenly spaced layer indices (outputs after those layers), from layer 1 to the last.\"\"\"\n",
         "    \"\"\"Evenly spaced layer indices (outputs after those layers), from layer 1 to the last.\n\n"
         "    >>> kept_layer_ids(4, 2)\n"
         "    [1, 3]\n"
         "    >>> kept_layer_ids(6, 5)\n"
         "    [1, 2, 3, 4, 5]\n"
         "    \"\"\"\n"),
    Edit(_t("target.py"), "class TargetLayer(nn.Module):\n",
         "class TargetLayer(nn.Module):\n"
         "    \"\"\"A pre-norm decoder layer: causal grouped-query attention with rotary embeddings,\n"
         "    then a SwiGLU MLP. Random weights: the drafter's cost does not depend on them.\n"
         "    \"\"\"\n\n"),
    Edit(_t("masks.py"),
         "- draft keys S <= kv in its own block only (bidirectional inside the block).\n\"\"\"\n",
         "- draft keys S <= kv in its own block only (bidirectional inside the block).\n\n"
         "Layout of one row of the mask (S = 12, anchor a = 7, its document starting at 3, bs = 3):\n\n"
         "    context keys 0..11      draft keys (block 0 | block 1 | block 2)\n"
         "    . . . x x x x . . . . .   . . . | x x x | . . .\n\n"
         "The context part is a causal, document-local prefix ending before the anchor; the\n"
         "draft part is the query's own block. A windowed layer also drops keys more than W\n"
         "positions before the anchor.\n\"\"\"\n"),
    Edit("README.md", "and drafter rank (slot 0 of each block is the anchor itself and is not trained on).\n",
         "and drafter rank (slot 0 of each block is the anchor itself and is not trained on).\n"
         + _TROUBLESHOOTING),
    Edit(_t("launch.py"), "def _strip_nproc(argv: list[str]) -> list[str]:\n",
         "def environment_summary() -> dict[str, str]:\n"
         "    \"\"\"The environment variables that change what this job does, for bug reports.\"\"\"\n"
         "    keys = (TOKENS_ENV, LMHEAD_ENV, \"WORLD_SIZE\", \"RANK\", \"LOCAL_RANK\", \"OMP_NUM_THREADS\",\n"
         "            \"CUDA_VISIBLE_DEVICES\", \"PYTHONPATH\")\n"
         "    return {key: os.environ[key] for key in keys if key in os.environ}\n\n\n"
         "def _strip_nproc(argv: list[str]) -> list[str]:\n"
         "    \"\"\"argv without --nproc (the re-launched ranks must not re-launch again).\"\"\"\n"),
    Edit(_t("loss.py"), "@torch.no_grad()\ndef topk_recall(",
         "@torch.no_grad()\n"
         "def per_slot_loss(out: torch.Tensor, lm_head_weight: torch.Tensor, labels: torch.Tensor,\n"
         "                  weights: torch.Tensor, chunk_blocks: int) -> torch.Tensor:\n"
         "    \"\"\"Mean CE of every block slot k = 0..bs-1 over the supervised slots ([bs], no grad).\n\n"
         "    A diagnostic: later slots are harder (further from the anchor), and a drafter whose\n"
         "    slot-1 loss does not fall is not learning from the target's hidden states.\n"
         "    \"\"\"\n"
         "    n_blocks, bs = labels.shape\n"
         "    blocks = out.detach().reshape(n_blocks, bs, -1)\n"
         "    sums = out.new_zeros(bs, dtype=torch.float32)\n"
         "    counts = out.new_zeros(bs, dtype=torch.float32)\n"
         "    for start in range(0, n_blocks, chunk_blocks):\n"
         "        part = slice(start, start + chunk_blocks)\n"
         "        logits = F.linear(blocks[part].flatten(0, 1), lm_head_weight).float()\n"
         "        ce = F.cross_entropy(logits, labels[part].flatten(), reduction=\"none\").view(-1, bs)\n"
         "        used = (weights[part] > 0).float()\n"
         "        sums += (ce * used).sum(0)\n"
         "        counts += used.sum(0)\n"
         "    return sums / counts.clamp_min(1.0)\n\n\n"
         "@torch.no_grad()\ndef topk_recall("),
    Edit(_t("drafter.py"), "def layer_is_windowed(",
         "def parameter_count(module: nn.Module) -> dict[str, int]:\n"
         "    \"\"\"Trainable and frozen parameter counts, for the start-up log.\"\"\"\n"
         "    trainable = sum(p.numel() for p in module.parameters() if p.requires_grad)\n"
         "    frozen = sum(p.numel() for p in module.parameters() if not p.requires_grad)\n"
         "    return {\"trainable\": trainable, \"frozen\": frozen, \"total\": trainable + frozen}\n\n\n"
         "def layer_is_windowed("),
    Edit(_t("train.py"), "def _report_training(",
         "def summarize_rows(rows: list[dict]) -> dict[str, float]:\n"
         "    \"\"\"Median and spread of the per-step milliseconds of a run (for the stderr summary).\n\n"
         "    The median is what a step costs; the max shows stalls (a slow receive, a GC pause if\n"
         "    GC were on, a recompilation).\n"
         "    \"\"\"\n"
         "    if not rows:\n"
         "        return {}\n"
         "    ms = sorted(row[\"ms\"] for row in rows)\n"
         "    middle = len(ms) // 2\n"
         "    median = ms[middle] if len(ms) % 2 else (ms[middle - 1] + ms[middle]) / 2\n"
         "    return {\"median_ms\": median, \"min_ms\": ms[0], \"max_ms\": ms[-1], \"steps\": len(ms)}\n\n\n"
         "def _report_training("),
    Edit(_t("presets.py"), "PRESETS: dict[str, Preset]",
         "# Why the tiny preset looks the way it does: its vocabulary (2048) is still 32x the hidden\n"
         "# width, so the lm_head is the largest GEMM of the step as on the GPU preset, and its\n"
         "# 16 anchors with a chunk of 8 blocks keep the loss chunked (2 chunks) as there.\n"
         "PRESET_NOTES: dict[str, str] = {\n"
         "    \"tiny\": \"CPU and CI: seconds per run; the structure of the GPU step, not its sizes.\",\n"
         "    \"h200\": \"One H200: about 170 ms per step, 44K supervised tokens/s in bf16.\",\n"
         "}\n\n"
         "PRESETS: dict[str, Preset]"),
)


REGRESSING_UNCOMMITTED = (
    f"{PACKAGE}/train.py: torch.autograd.set_detect_anomaly(True) left on (tok/s about -65% on "
    "CPU; no counter changes)",
    f"{PACKAGE}/drafter.py: activation checkpointing of every drafter layer (forward recomputed "
    "in backward; tok/s about -14% on CPU)",
    f"{PACKAGE}/masks.py: document ids from a [max_docs, S] comparison matrix instead of "
    "repeat_interleave (a GPU cost; within noise on the CPU tiny preset)",
)


# A regression that exists only with several ranks: Receiver (the drafter's side of the target ->
# drafter transfer) runs only when targets and drafters are separate ranks, and this `.item()`
# makes the host wait for the previous step before it starts the next one's host-side work.
MULTIRANK_HISTORY = (
    ScriptedCommit("Comment the receive queue", (
        Edit(_t("transport.py"), "        self.posted: collections.deque = collections.deque()\n",
             "        # (ints, hidden, works) of the receives posted ahead, oldest first\n"
             "        self.posted: collections.deque = collections.deque()\n"),)),
    ScriptedCommit("Check received hidden states for NaN", (
        Edit(_t("transport.py"),
             "        self._post()\n"
             "        return unpack(ints, self.preset), hidden\n",
             "        self._post()\n"
             "        # A bad target rank once sent NaN hidden states: refuse them here, not as a NaN loss.\n"
             "        if not torch.isfinite(hidden).all().item():\n"
             "            raise FloatingPointError(\"non-finite hidden states received\")\n"
             "        return unpack(ints, self.preset), hidden\n"),),
        kind="culprit", effect="host_syncs/iter +1 in the drafter's receive; slower only with several ranks"),
    ScriptedCommit("README: how to launch on several GPUs", (
        Edit("README.md", "It prints one line",
             "On several GPUs: `python -m trainer --preset h200 --nproc 8` (5 target ranks, 3 drafter ranks).\n\n"
             "It prints one line"),)),
    ScriptedCommit("Name the sequence index in the sender loop", (
        Edit(_t("train.py"), "    for g in range(n_sequences):\n",
             "    for g in range(n_sequences):  # g: global sequence index, step * drafters + drafter\n"),)),
)


