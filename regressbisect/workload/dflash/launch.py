"""Command line of the workload (stdlib only until the job starts: `workload_command` is called
by the regressbisect CLI, which never imports torch)."""
from __future__ import annotations

import argparse
import os
import sys

from .presets import PRESETS, get_preset

# Copies of the probe contract's (the trainer runs without the package; tests/test_contract.py)
TOKENS_ENV = "REGRESSBISECT_TOKENS"
LMHEAD_ENV = "REGRESSBISECT_LMHEAD_MIN_OUT"
_PACKAGE = __package__ or "regressbisect.workload.dflash"


def workload_command(preset: str, nproc: int, tokens: int | None) -> list[str]:
    """argv that runs the workload: one process, or `torch.distributed.run` with nproc ranks.

    Without `tokens` the job reads REGRESSBISECT_TOKENS (else the preset's default budget).
    """
    get_preset(preset)  # fail early on a bad name
    if nproc < 1:
        raise ValueError("nproc must be >= 1")
    args = ["-m", _PACKAGE, "--preset", preset]
    if tokens is not None:
        args += ["--tokens", str(int(tokens))]
    if nproc == 1:
        return [sys.executable, *args]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            "--nproc-per-node", str(nproc), *args]


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=f"python -m {_PACKAGE}",
                                 description="DFlash-style drafter training step (reference workload).")
    ap.add_argument("--preset", default="tiny", choices=sorted(PRESETS))
    ap.add_argument("--tokens", type=int, default=None,
                    help=f"measured budget of supervised drafter tokens (default: ${TOKENS_ENV}, "
                         "else the preset's)")
    ap.add_argument("--nproc", type=int, default=1,
                    help="processes; > 1 re-launches under torch.distributed.run")
    ap.add_argument("--target-ranks", type=int, default=None,
                    help="ranks producing hidden states (default: about 5/8 of the world)")
    ap.add_argument("--warmup", type=int, default=None, help="warm-up steps excluded from timing")
    ap.add_argument("--sliding-window", type=int, default=None,
                    help="window of the sliding-window layers (0: none)")
    ap.add_argument("--lm-head-chunk", type=int, default=None, help="blocks per lm_head chunk")
    ap.add_argument("--metrics-every", type=int, default=None, help="metrics pass every M steps")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    return ap


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = _parser().parse_args(argv)
    preset = get_preset(args.preset)
    overrides = {"warmup_steps": args.warmup, "sliding_window": args.sliding_window,
                 "lm_head_chunk": args.lm_head_chunk, "metrics_every": args.metrics_every}
    preset = preset.replace(**{k: v for k, v in overrides.items() if v is not None})
    if args.nproc > 1 and "WORLD_SIZE" not in os.environ:
        rest = [a for a in _strip_nproc(argv)]
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc-per-node", str(args.nproc), "-m", _PACKAGE, *rest]
        os.execv(sys.executable, cmd)
    tokens = args.tokens
    if tokens is None:
        tokens = int(os.environ.get(TOKENS_ENV, preset.default_tokens))
    if tokens < 1:
        raise SystemExit("--tokens must be >= 1")
    # Before torch is imported: the counters shim reads its lm_head threshold when torch loads.
    os.environ.setdefault(LMHEAD_ENV, str(preset.lm_head_min_out))
    from .train import RunSettings, run  # torch is imported here

    run(RunSettings(preset=preset, tokens=tokens, seed=args.seed,
                    target_ranks=args.target_ranks, device=args.device))


def _strip_nproc(argv: list[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for a in argv:
        if skip:
            skip = False
            continue
        if a == "--nproc":
            skip = True
            continue
        if a.startswith("--nproc="):
            continue
        out.append(a)
    return out
