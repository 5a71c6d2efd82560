"""Typed, frozen configuration of a hunt, merged from three layers.

defaults  <-  `[tool.regressbisect]` in the target repository's pyproject.toml  <-  command-line flags

Only the probe part (what is run and how it is measured) enters the config hash that keys stored
samples; search settings (min effect, slots, ...) can change between runs without invalidating them.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from regressbisect.errors import UserError
from regressbisect.probe.protocol import DEFAULT_METRIC_REGEX


DIRECTIONS = ("slower", "faster", "both")
INSTRUMENT_MODES = ("auto", "off", "separate")


@dataclass(frozen=True)
class ProbeConfig:
    """How one sample is taken. Everything here changes what a sample means, so it is hashed."""

    cmd: str
    """Shell command run in the candidate's worktree; `{tokens}` is replaced by the budget."""
    tokens: int = 4096
    """Token budget of the measured stage, also exported as REGRESSBISECT_TOKENS."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment variables for the probe (e.g. OMP_NUM_THREADS)."""
    timeout_s: float = 600.0
    """Seconds after which a probe's whole process group is killed and the run is skipped."""
    metric_regex: str = DEFAULT_METRIC_REGEX
    """Fallback when the probe prints no `@regressbisect {...}` line: group 1 is tok/s."""

    def __post_init__(self) -> None:
        if not self.cmd or not self.cmd.strip():
            raise UserError("no probe command: pass --cmd 'python bench.py --tokens {tokens}' "
                            "or set cmd in [tool.regressbisect] of pyproject.toml")
        if self.tokens <= 0:
            raise UserError(f"--tokens must be positive, got {self.tokens}")
        if self.timeout_s <= 0:
            raise UserError(f"--timeout must be positive, got {self.timeout_s}")
        object.__setattr__(self, "env", {str(k): str(v) for k, v in dict(self.env).items()})

    def config_hash(self) -> str:
        """Stable hash of what a sample depends on (timeout and regex do not change a value)."""
        payload = {"cmd": self.cmd, "tokens": self.tokens, "env": sorted(self.env.items())}
        return hashlib.sha1(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class HuntConfig:
    """A whole hunt: the probe plus how the search spends probes."""

    probe: ProbeConfig
    """How one sample is taken."""
    min_effect: float = 0.02
    """Relative tok/s change below which a step is not a culprit (0.02 = 2%): below run-to-run
    noise of a training job, localising a step costs many samples (search/bisect.py)."""
    direction: str = "slower"
    """Which changes are culprits: 'slower' (regressions), 'faster', or 'both'."""
    max_samples: int = 96
    """Cap of samples per candidate; it bounds the cost of an undecidable case (then UNSURE)."""
    slots: int = 1
    """Candidates measured at once, each in its own worktree (and its own GPUs)."""
    slot_devices: tuple[str, ...] = ()
    """CUDA_VISIBLE_DEVICES value per slot; empty = split the visible GPUs evenly, or none."""
    instrument: str = "auto"
    """'auto': measure the counters shim's overhead and keep tok/s unshimmed if it is over
    `overhead_limit`; 'separate': always take counters in separate runs; 'off': no counters."""
    overhead_limit: float = 0.01
    """Shim overhead above which tok/s must come from unshimmed runs (DESIGN.md: 1%)."""
    overhead_pairs: int = 6
    """Most interleaved shimmed/unshimmed pairs of the shim's overhead arm on GOOD; it stops as
    soon as its anytime-valid interval decides (docs/cost.md), and is 'not proven' at the cap."""
    lm_head_min_out: int | None = None
    """Output width from which an F.linear call counts as an lm_head call; None leaves it to the
    probe (REGRESSBISECT_LMHEAD_MIN_OUT, else the shim's default 32768)."""
    tokens_auto: bool = False
    """True when no budget was given (or `tokens = "auto"`): a commit hunt picks the budget from
    pilot probes of GOOD, starting from `probe.tokens` (docs/cost.md). A given budget is kept."""
    shared_caches: bool = True
    """Point the probe stack's on-disk caches the user has not set (inductor, triton, torch
    extensions) at one directory beside the store, shared by every slot (docs/cost.md)."""

    def __post_init__(self) -> None:
        if not 0 < self.min_effect < 1:
            raise UserError(f"--min-effect must be a fraction between 0 and 1 (e.g. 0.01), got {self.min_effect}")
        if self.direction not in DIRECTIONS:
            raise UserError(f"--direction must be one of {', '.join(DIRECTIONS)}, got {self.direction!r}")
        if self.max_samples < 3:
            raise UserError(f"--max-samples must be at least 3, got {self.max_samples}")
        if self.slots < 1:
            raise UserError(f"--slots must be at least 1, got {self.slots}")
        if self.slot_devices and len(self.slot_devices) != self.slots:
            raise UserError(f"--slot-devices names {len(self.slot_devices)} device sets for "
                            f"{self.slots} slots; give one per slot (e.g. --slot-devices 0,1 --slot-devices 2,3)")
        if self.instrument not in INSTRUMENT_MODES:
            raise UserError(f"--instrument must be one of {', '.join(INSTRUMENT_MODES)}, got {self.instrument!r}")
        object.__setattr__(self, "slot_devices", tuple(self.slot_devices))

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_PYPROJECT_KEYS = {
    "cmd": ("probe", str), "tokens": ("probe", int), "env": ("probe", dict),
    "timeout": ("probe", float), "metric_regex": ("probe", str),
    "min_effect": ("hunt", float), "direction": ("hunt", str), "max_samples": ("hunt", int),
    "slots": ("hunt", int), "slot_devices": ("hunt", list), "instrument": ("hunt", str),
    "overhead_limit": ("hunt", float), "overhead_pairs": ("hunt", int),
    "lm_head_min_out": ("hunt", int), "shared_caches": ("hunt", bool),
}
_RENAMES = {"timeout": "timeout_s"}


def build_config(pyproject_table: Mapping[str, Any], flags: Mapping[str, Any],
                 source: str = "pyproject.toml") -> HuntConfig:
    """Merge defaults <- `[tool.regressbisect]` <- flags (a flag of None means 'not given')."""
    merged: dict[str, Any] = {}
    pyproject_table, flags, tokens_auto = _split_auto_tokens(pyproject_table, flags, source)
    for key, value in pyproject_table.items():
        if key not in _PYPROJECT_KEYS:
            known = ", ".join(sorted(_PYPROJECT_KEYS))
            raise UserError(f"unknown key '{key}' in [tool.regressbisect] of {source}; known keys: {known}")
        expected = _PYPROJECT_KEYS[key][1]
        if expected is float and isinstance(value, int):
            value = float(value)
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise UserError(f"[tool.regressbisect] {key} in {source} must be a {expected.__name__}, got {value!r}")
        merged[key] = value
    for key, value in flags.items():
        if value is not None and value != ():
            merged[key] = value
    probe_kwargs: dict[str, Any] = {}
    hunt_kwargs: dict[str, Any] = {}
    for key, value in merged.items():
        part = _PYPROJECT_KEYS.get(key, ("hunt", object))[0]
        name = _RENAMES.get(key, key)
        (probe_kwargs if part == "probe" else hunt_kwargs)[name] = value
    probe_kwargs.setdefault("cmd", "")
    if "slot_devices" in hunt_kwargs:
        hunt_kwargs["slot_devices"] = tuple(str(d) for d in hunt_kwargs["slot_devices"])
    return HuntConfig(probe=ProbeConfig(**probe_kwargs), tokens_auto=tokens_auto, **hunt_kwargs)


AUTO = "auto"


def _split_auto_tokens(pyproject_table: Mapping[str, Any], flags: Mapping[str, Any],
                       source: str) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """Read the budget of both layers: a number is the user's budget (never changed); 'auto',
    or no budget in either layer, lets a commit hunt choose it (docs/cost.md). Returns the
    layers with 'tokens' a number or absent, and whether the budget is automatic."""
    table, given = dict(pyproject_table), dict(flags)
    flag = given.get("tokens")
    if flag is not None:
        table.pop("tokens", None)  # the flag wins over pyproject, number or 'auto'
    if isinstance(flag, str):
        if flag.strip().lower() == AUTO:
            given.pop("tokens")
            return table, given, True
        try:
            given["tokens"] = int(flag)
        except ValueError:
            raise UserError(f"--tokens must be a positive integer or 'auto', got {flag!r}") from None
        return table, given, False
    if flag is not None:
        return table, given, False
    value = table.get("tokens")
    if isinstance(value, str):
        if value.strip().lower() != AUTO:
            raise UserError(f"[tool.regressbisect] tokens in {source} must be an int or \"auto\", "
                            f"got {value!r}")
        table.pop("tokens")
        return table, given, True
    return table, given, value is None


def default_store_path(common_dir: Path) -> Path:
    """Samples live beside the worktree pool, inside the git dir: never in the user's tree."""
    return common_dir / "regressbisect" / "store.sqlite"
