"""Typed, frozen configuration of a hunt, merged from three layers.

defaults  <-  `[tool.regressbisect]` in the target repository's pyproject.toml  <-  command-line flags

Only the probe part (what is run, how its output becomes numbers, and the company it runs in:
slots and overlap) enters the config hash that keys stored samples; search settings (min effect,
direction, max samples, ...) can change between runs without invalidating them.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from regressbisect.errors import UserError
from regressbisect.metric import DEFAULT_METRIC_REGEX, HASHED_DEFAULT_METRIC_REGEX, compile_metric_regex, metric_unit
from regressbisect.enums import WordEnum


# -- the defaults of every setting that more than one module reads: the config's dataclasses,
# the search's and the change-point detector's settings and the CLI take them from here --------
class Direction(WordEnum):
    """The changes a hunt looks for (--direction). A member is its value wherever it is written
    (the report's settings, the resume key, the flags of `run_flags`)."""

    SLOWER = "slower"
    """Drops in tok/s (regressions)."""
    FASTER = "faster"
    """Rises."""
    BOTH = "both"
    """Either."""


DIRECTIONS: tuple[str, ...] = tuple(d.value for d in Direction)
DIRECTION = Direction.SLOWER
MIN_EFFECT = 0.02
MAX_SAMPLES = 96
STALL_SHARE = 0.3
NIGHTLY_BRANCH = "main"
NIGHTLY_SAMPLES_PER_COMMIT = 5
NIGHTLY_MAX_NEW = 5
NIGHTLY_LOOKBACK = 200
CHANGE_MIN_MAGNITUDE = 0.02
CHANGE_ALPHA = 0.01
INSTRUMENT_MODES = ("auto", "off", "separate")
PRELOAD = "auto"
OVERLAP = 1


class Executor(WordEnum):
    """Where probes run (--executor). A member is its value wherever it is written."""

    LOCAL = "local"
    """Processes on this machine."""
    SLURM = "slurm"
    """One Slurm job each."""


EXECUTORS: tuple[str, ...] = tuple(e.value for e in Executor)
MAX_WAIT_SHARE = 0.10
"""Share of a hunt's wall time it may spend waiting for a quiet machine (machine/contention.py)."""


# -- one definition per setting: the config field's `knob(...)` holds its default, its pyproject
# key and type, its flag, help and help panel; the key tables below, the hunt commands' flags
# (cli/options.py) and docs/configuration.md's key table (tests/test_config.py) are generated from it -------
PANELS = ("What to measure", "How it decides", "Setup and isolation", "Busy machine", "Cost", "Slurm")
MEASURE, DECIDE, SETUP, BUSY, COST, SLURM = PANELS
HUNT_COMMANDS = ("run", "hunks", "nightly")


@dataclass(frozen=True)
class Knob:
    """What a config field is to the user. `help` (None: a pyproject key without a flag) may say
    `{default}`, which becomes the field's default."""

    panel: str
    help: str | None = None
    key: str | None = None
    """Key in [tool.regressbisect] (in its slurm table for SlurmConfig); default: the field's name."""
    kind: type | None = None
    """Type of the pyproject value; default: the type of the field's default."""
    flag: str | None = None
    """Default: --key-with-dashes (--slurm-key-with-dashes for the slurm table)."""
    commands: tuple[str, ...] = HUNT_COMMANDS
    """Hunt commands that have the flag."""
    search: str | None = None
    """The `SearchSettings` field (search/settings.py) this setting is: the hunt of each command in
    `commands` hands it to its search (`SearchSettings.of`) and resumes a stored hunt only if it
    had the same value (`HuntConfig.search_key`)."""
    keyed_when_set: bool = False
    """A search setting added after hunts were stored: in their resume key only where it is not at
    its default, so that a hunt stored before it existed resumes (`HuntConfig.search_key`)."""
    shown_default: str | None = None
    """The default as the key table (docs/configuration.md) writes it, when the field's default is not it."""
    # -- validation of the value alone (rules between settings stay in the dataclass) --
    choices: tuple[str, ...] | None = None
    minimum: float | None = None
    """Smallest value allowed (None, an unset optional value, is never checked)."""
    above: bool = False
    """The value must be greater than `minimum`, not equal to it."""
    must: str | None = None
    """How the error states the rule; default: 'be positive' or 'be at least <minimum>'."""


def knob(default: Any = dataclasses.MISSING, *, default_factory: Any = dataclasses.MISSING, **what: Any) -> Any:
    """A config field that is a user setting (see Knob)."""
    return field(default=default, default_factory=default_factory, metadata={"knob": Knob(**what)})


@dataclass(frozen=True)
class Setting:
    """One user setting, resolved from its field and knob."""

    part: str      # 'probe', 'hunt' or 'slurm': the dataclass it configures
    field: str
    key: str
    kind: type
    default: Any
    knob: Knob

    @property
    def flag(self) -> str | None:
        if self.knob.help is None:
            return None
        prefix = "--slurm-" if self.part == "slurm" else "--"
        return self.knob.flag or prefix + self.key.replace("_", "-")

    @property
    def help(self) -> str:
        default = self.default
        if isinstance(default, float):
            default = f"{default:g}"
        return (self.knob.help or "").replace("{default}", str(default))


def _check_settings(config: object, part: str) -> None:
    """The rules of each setting's value alone (a finite number, Knob.choices, .minimum), one line naming its flag."""
    for setting in SETTINGS:
        value = getattr(config, setting.field) if setting.part == part else None
        if value is None:
            continue
        what = setting.knob
        # as in pyproject's slurm table; a key without a flag by its pyproject name
        label = f"slurm {setting.key}" if part == "slurm" else setting.flag or f"{setting.key} in [tool.regressbisect]"
        if isinstance(value, float) and not math.isfinite(value):  # nan passes every comparison
            raise UserError(f"{label} must be a finite number, got {value}")
        if what.choices is not None and value not in what.choices:
            raise UserError(f"{label} must be one of {', '.join(what.choices)}, got {value!r}")
        if what.minimum is not None and (value <= what.minimum if what.above else value < what.minimum):
            rule = what.must or ("be positive" if what.above and what.minimum == 0 else f"be at least {what.minimum:g}")
            raise UserError(f"{label} must {rule}, got {value}")


def _settings_of(part: str, cls: type) -> tuple[Setting, ...]:
    found = []
    for f in dataclasses.fields(cls):
        what = f.metadata.get("knob")
        if what is None:
            continue
        factory = f.default_factory
        if factory is not dataclasses.MISSING:  # a table of its own (slurm) is made when needed
            default = None if dataclasses.is_dataclass(factory) else factory()  # type: ignore[operator]
        else:
            default = None if f.default is dataclasses.MISSING else f.default
        kind = what.kind or {tuple: list}.get(type(default), type(default))
        if kind is type(None):
            raise TypeError(f"{cls.__name__}.{f.name}: a knob whose default is None needs kind=")
        found.append(Setting(part, f.name, what.key or f.name, kind, default, what))
    return tuple(found)


INPUT_HASH_MAX_BYTES = 64 << 20
"""A command's input file up to this size is hashed by content; a larger one (a data set) by
its size and modification time, so that making the config never reads gigabytes."""


def command_inputs(*commands: str | None) -> tuple[tuple[str, str], ...]:
    """The existing files outside the worktree that shell `commands` name, sorted, each with a
    digest of its content: the tokens (shlex; also the value of a `NAME=/path` or `--opt=/path`
    token) that are absolute paths, `~` expanded, of regular files. A relative path names a file
    of the worktree the command runs in, the commit's own, which the sample key holds already;
    a redirection's target (`> /tmp/build.log`) and `tee`'s files are the command's output, not
    inputs."""
    import os
    import shlex

    found: dict[str, str] = {}
    for command in commands:
        if not command:
            continue
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            tokens = list(lexer)
        except ValueError:   # unbalanced quotes: the shell refuses it, the probe fails
            continue
        writing = False   # within the arguments of `tee`, which writes into its files
        for previous, token in zip([""] + tokens, tokens):
            if not token.strip(";&|()<>"):   # an operator: a new command, or a redirection
                writing = False
                continue
            writing = writing or os.path.basename(token) == "tee"
            if writing or (">" in previous and not previous.strip(">&|0123456789")):
                continue   # a file the command writes: the target of >, >>, 2>, &>, >|, or tee's
            for word in (token, token.partition("=")[2]):
                path = os.path.expanduser(word)
                if os.path.isabs(path) and path not in found and os.path.isfile(path):
                    found[path] = _file_digest(Path(path))
    return tuple(sorted(found.items()))


def file_digests(paths) -> tuple[tuple[str, str], ...]:
    """(path, digest) of each of `paths`, sorted: a missing or unreadable file by that fact."""
    return tuple(sorted((str(path), _file_digest(Path(path))) for path in set(paths)))


def _file_digest(path: Path) -> str:
    try:
        stat = path.stat()
    except OSError as error:   # gone since: the probe that imports it now fails, or finds another
        return f"unreadable: {error.strerror}"
    if stat.st_size > INPUT_HASH_MAX_BYTES:
        return f"size {stat.st_size} mtime_ns {stat.st_mtime_ns}"
    try:
        return hashlib.sha1(path.read_bytes()).hexdigest()[:16]
    except OSError as error:   # unreadable: the command meets the same error
        return f"unreadable: {error.strerror}"


@dataclass(frozen=True)
class ProbeConfig:
    """How one sample is taken. Everything here changes what a sample means, so it is hashed."""

    cmd: str = knob(
        panel=MEASURE, kind=str,
        help=("Probe command run in each candidate's worktree; {tokens} is replaced by the budget. "
              "Default: cmd in [tool.regressbisect] of pyproject.toml."))
    """Shell command run in the candidate's worktree; `{tokens}` is replaced by the budget."""
    tokens: int = knob(
        4096, minimum=0, above=True, panel=MEASURE, shown_default='"auto"',
        help=("Token budget of one measured run (also REGRESSBISECT_TOKENS), or 'auto'. Default: auto "
              "(run picks it from pilot probes of GOOD, starting at {default}; docs/cost.md)."))
    """Token budget of the measured stage, also exported as REGRESSBISECT_TOKENS."""
    env: Mapping[str, str] = knob(
        default_factory=dict, panel=MEASURE, kind=dict,
        help=("KEY=VALUE added to the probe's environment (repeatable)."))
    """Extra environment variables for the probe (e.g. OMP_NUM_THREADS)."""
    timeout_s: float = knob(
        600.0, minimum=0, above=True, panel=MEASURE, key="timeout",
        help=("Seconds before a probe's process group is killed and the run is skipped. Default "
              "{default}."))
    """Seconds after which a probe's whole process group is killed and the run is skipped."""
    metric_regex: str = knob(
        DEFAULT_METRIC_REGEX, panel=MEASURE, shown_default='"<number> tok/s"',
        help=("Regex whose group 1 is the metric (higher is better), for probes that print no "
              "'@regressbisect {...}' line."))
    """Fallback when the probe prints no `@regressbisect {...}` line: group 1 is tok/s."""
    # -- per-candidate setup step and slot virtualenvs (docs/setup.md) --
    setup: str | None = knob(
        None, panel=SETUP, kind=str,
        help=("Command run in each candidate's worktree after checkout, before its first probe (e.g. "
              "'python setup.py build_ext --inplace'); a failure skips the candidate. Default: setup in"
              " [tool.regressbisect]. See docs/setup.md."))
    """Shell command run in a candidate's worktree after its checkout and before its first probe
    there (e.g. `python setup.py build_ext --inplace`); a failure skips the candidate."""
    venv: bool = knob(
        False, panel=SETUP,
        help=("One virtualenv per slot (your packages visible), activated for setup and probe: installs"
              " never leak. Default off."))
    """Give each slot its own virtualenv (the user's packages visible), activated for setup and
    probe, so what the setup installs never leaks into another slot or the user's environment."""
    setup_timeout_s: float = knob(
        1800.0, minimum=0, above=True, panel=SETUP, key="setup_timeout",
        help=("Seconds before a setup command is killed and the candidate skipped. Default {default}."))
    """Seconds after which a setup command's process group is killed (the candidate is skipped)."""
    isolation_check: bool = knob(
        True, panel=SETUP,
        help=("Stop when a probe imports the project from anywhere but its worktree (default on; off "
              "for probes that are not Python, or isolation_check = false in [tool.regressbisect]). See"
              " docs/isolation.md."))
    """Check that every probe imported the project from its own worktree (docs/isolation.md);
    off for probes that are not Python. Hashed: unchecked samples never serve a checked hunt."""
    lm_head_min_out: int | None = knob(None, panel=MEASURE, kind=int)
    """Output width from which an F.linear call counts as an lm_head call; None leaves it to the
    probe (REGRESSBISECT_LMHEAD_MIN_OUT, else the shim's default 32768). Hashed: it changes the
    counters stored with an instrumented sample."""
    concurrency: tuple[int, int] = (1, 1)
    """(slots, overlap) of the hunt taking the samples: how many of its probes run beside one.
    Set by HuntConfig from its own settings; a hunt that measures one candidate at a time (hunks,
    nightly's series) keys its samples with `alone()`. Hashed: probes of one hunt compete for the
    machine like any other job, so samples taken with others beside them never serve a hunt that
    takes them alone, or with other company (docs/contention.md, "The hunt's own probes")."""
    inputs: tuple[tuple[str, str], ...] | None = None
    """The files outside the worktree that the probe and setup commands name, each with its
    digest (`command_inputs`), read once when the config is made (None: read them then; a copy
    made by dataclasses.replace keeps them). Hashed: a build script or probe script outside the
    repository edited between two runs makes other samples (docs/setup.md)."""

    imported: tuple[tuple[str, str], ...] = ()
    """The files outside the worktree that the probe's processes imported (the shim's record:
    modules and the script run, not the interpreter's or the tool's), each with its digest, read
    when they were first recorded or when the hunt started (their paths are in the store, under
    `imports_key`: hunts/skeleton.py). Hashed: a helper module outside the repository edited
    between two runs makes other samples (docs/design.md, "Contracts")."""

    def __post_init__(self) -> None:
        if not self.cmd or not self.cmd.strip():
            raise UserError("no probe command: pass --cmd 'python bench.py --tokens {tokens}' "
                            "or set cmd in [tool.regressbisect] of pyproject.toml")
        _check_settings(self, "probe")
        object.__setattr__(self, "env", {str(k): str(v) for k, v in dict(self.env).items()})
        if self.setup is not None and not self.setup.strip():
            object.__setattr__(self, "setup", None)
        object.__setattr__(self, "concurrency", tuple(int(n) for n in self.concurrency))
        if self.inputs is None:
            object.__setattr__(self, "inputs", command_inputs(self.cmd, self.setup))
        object.__setattr__(self, "inputs", tuple(tuple(pair) for pair in self.inputs))
        object.__setattr__(self, "imported", tuple(tuple(pair) for pair in self.imported))
        try:  # here, not at the first probe: a bad regex must not wait for worktrees and probes
            compile_metric_regex(self.metric_regex)
        except ValueError as error:
            raise UserError(f"{error} (e.g. --metric-regex '([0-9.]+) tok/s', or metric_regex in "
                            "[tool.regressbisect] of pyproject.toml)") from None

    def config_hash(self) -> str:
        """Stable hash of everything a stored value depends on: what runs (cmd, tokens, env, setup,
        venv, isolation check, the files outside the worktree it names or imports), and how its output becomes the stored numbers (metric_regex: the
        value stored is the number it parsed, so another regex must not reuse it; lm_head_min_out:
        the counters). Not hashed: timeout_s and setup_timeout_s (a run that finished within them
        is the same run); the unit, which only labels the number. A new field goes in here unless
        it cannot change a stored value (tests/test_config.py checks every field)."""
        payload = {"cmd": self.cmd, "tokens": self.tokens, "env": sorted(self.env.items()),
                   # Samples taken before import roots went first may have measured another copy.
                   "imports": "worktree-first",
                   "metric_regex": (HASHED_DEFAULT_METRIC_REGEX if self.metric_regex == DEFAULT_METRIC_REGEX
                                    else self.metric_regex)}
        if self.lm_head_min_out is not None:
            payload["lm_head_min_out"] = self.lm_head_min_out
        # (slots, overlap), not the number of lanes: 3 slots measure 3 probes at once, 1 slot with
        # 3 lanes one window at a time with the others stopped (docs/contention.md).
        payload["concurrency"] = list(self.concurrency)
        if not self.isolation_check:
            payload["isolation_check"] = False
        # A build step or venv changes what is measured; added only when set.
        if self.setup is not None:
            payload["setup"] = self.setup
        if self.venv:
            payload["venv"] = True
        if self.inputs:   # added only when a command names such files: other hashes stay as they were
            payload["inputs"] = [list(pair) for pair in self.inputs]
        if self.imported:   # the same, for probes that import such files
            payload["imported"] = [list(pair) for pair in self.imported]
        return hashlib.sha1(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]

    def imports_key(self) -> str:
        """What the paths of `imported` are stored under: this config's hash without them, alone
        and at one budget (what a probe imports depends on neither its company nor its budget)."""
        return dataclasses.replace(self, imported=(), concurrency=(1, 1), tokens=1).config_hash()

    def alone(self) -> "ProbeConfig":
        """This probe config as taken by a hunt that runs one probe at a time."""
        return dataclasses.replace(self, concurrency=(1, 1))


@dataclass(frozen=True)
class SlurmConfig:
    """How a probe is submitted as a Slurm job (`--executor slurm`, docs/cluster.md).

    None leaves a setting to the cluster's defaults (the partition's, the account's)."""

    partition: str | None = knob(None, panel=SLURM, help='Slurm partition of the probe jobs.', kind=str)
    account: str | None = knob(None, panel=SLURM, help='Slurm account charged for the probe jobs.', kind=str)
    qos: str | None = knob(None, panel=SLURM, help='Slurm QOS of the probe jobs.', kind=str)
    gpus_per_probe: int = knob(
        0, minimum=0, must="be 0 or more", panel=SLURM, flag="--slurm-gpus",
        help=("GPUs per probe job (one node); Slurm pins them. Default {default}."))
    """GPUs of one node allocated to each probe (--gpus-per-node); Slurm sets CUDA_VISIBLE_DEVICES."""
    cpus_per_probe: int = knob(
        1, minimum=1, panel=SLURM, flag="--slurm-cpus",
        help=("CPUs per probe job. Default {default}."))
    """CPUs allocated to each probe (--cpus-per-task)."""
    mem: str | None = knob(
        None, panel=SLURM, kind=str,
        help=("Memory per probe job, sbatch syntax (e.g. 64G)."))
    """Memory per probe job in sbatch's syntax (e.g. '64G'); None: the partition's default."""
    time_limit_min: int | None = knob(
        None, minimum=1, must="be at least 1 (minutes)", panel=SLURM, kind=int, flag="--slurm-time",
        help=("Time limit of a probe job in minutes. Default: --timeout + 5 min."))
    """Job time limit in minutes; None: the probe timeout plus SLURM_TIME_MARGIN_MIN."""
    constraint: str | None = knob(
        None, panel=SLURM, kind=str,
        help=("Node features every probe job needs (pins one node type)."))
    """Node features every probe job must have (--constraint), to pin one node type."""
    sbatch_args: tuple[str, ...] = knob(
        (), panel=SLURM, flag="--slurm-sbatch-arg",
        help=("Extra sbatch argument, '--name=value' or '--flag' (repeatable)."))
    """Extra sbatch arguments, each '--name=value' or '--flag' (e.g. '--reservation=perf')."""
    shared_dir: str | None = knob(
        None, panel=SLURM, kind=str,
        help=("Directory the nodes share, for worktrees and job files. Default: inside the git dir."))
    """Directory the nodes share where worktrees and job files go; None: inside the git dir."""
    poll_s: float = knob(5.0, minimum=0, above=True, panel=SLURM)
    """Seconds between two looks at the queue (squeue/scontrol) while jobs are pending or running."""

    def __post_init__(self) -> None:
        _check_settings(self, "slurm")
        args = tuple(str(a) for a in self.sbatch_args)
        for arg in args:
            if not arg.startswith("--") or arg == "--" or " " in arg.split("=", 1)[0]:
                raise UserError(f"slurm sbatch argument {arg!r} must look like '--name=value' or '--flag'")
        object.__setattr__(self, "sbatch_args", args)

    def time_limit(self, probe_timeout_s: float) -> int:
        """Minutes: the configured limit, else the probe's timeout plus a margin for start-up."""
        if self.time_limit_min is not None:
            return self.time_limit_min
        return int(-(-probe_timeout_s // 60)) + SLURM_TIME_MARGIN_MIN


SLURM_TIME_MARGIN_MIN = 5
"""Minutes added to the probe timeout for a job's time limit: interpreter start, imports, the
checkout's files coming over the shared filesystem."""


@dataclass(frozen=True)
class HuntConfig:
    """A whole hunt: the probe plus how the search spends probes."""

    probe: ProbeConfig
    """How one sample is taken."""
    min_effect: float = knob(
        MIN_EFFECT, panel=DECIDE, search="min_effect",
        help=("Relative step below which a change is not a culprit (0.02 = 2%). Default {default}."))
    """Relative tok/s change below which a step is not a culprit (0.02 = 2%): below run-to-run
    noise of a training job, localising a step costs many samples (search/bisect.py)."""
    direction: Direction = knob(
        DIRECTION, kind=str, choices=DIRECTIONS, panel=DECIDE, search="direction",
        help=("Culprits of: 'slower' (default), 'faster', or 'both'."))
    """Which changes are culprits: 'slower' (regressions), 'faster', or 'both'."""
    max_samples: int = knob(
        MAX_SAMPLES, minimum=3, panel=DECIDE, commands=("run", "hunks"), search="max_samples",
        help=("Cap of samples per candidate; undecided at the cap = UNSURE. Default {default}."))
    """Cap of samples per candidate; it bounds the cost of an undecidable case (then UNSURE)."""
    interference: bool = knob(
        True, panel=DECIDE, commands=("run", "hunks"), search="read_interference",
        help=("Read runs far off their commit's level (a busy neighbour, a straggler, a pulsing "
              "pipeline) as interfered and leave them out of every test; the report lists them. "
              "Default on."))
    """Set runs far off their candidate's level apart from every test (SearchSettings.read_interference,
    search/interference.py): a quarter of the runs 30% slow otherwise inflate every test's noise."""
    stall_share: float = knob(
        STALL_SHARE, minimum=0, panel=DECIDE, commands=("run", "hunks"), search="stall_share", keyed_when_set=True,
        help=("'No regression' only once the pairs rule out a stall in this share of BAD's runs "
              "(0.3: 15 pairs at the least). 0: rule out on the runs seen. Default {default}."))
    """SearchSettings.stall_share: a change of shape can hide in the runs not yet taken (search/control.py)."""
    side_resolution: float | None = knob(
        None, panel=DECIDE, commands=("run",), kind=float, search="side_resolution",
        help=("Smallest further step a side check beside a culprit must rule out (0.02 = 2%), however "
              "many probes it takes. Default: a side stops at the resolution its pairs reached once "
              "it has cost as much as the search before it, and the report says which."))
    """SearchSettings.side_resolution: None lets a side check stop at its price (docs/search.md,
    section 4); a fraction insists on ruling out that step."""
    noise_prior: bool = knob(
        True, panel=DECIDE, commands=("run",),
        help=("Use the spread of earlier hunts' samples on this machine with this probe config as a "
              "prior on the noise (never their levels). Default on."))
    """Start the noise estimate from the within-commit spread of samples earlier hunts stored on
    the same machine fingerprint and probe config (at most NOISE_PRIOR_DF degrees of freedom of
    it; dropped when this hunt's own spread is larger): a remembered noise scale, never a
    remembered level (docs/search.md, section 1)."""
    drill: bool = knob(
        False, panel=DECIDE, commands=("run",),
        help=("After the commit hunt, hunt the hunks of every culprit whose diff has more than one "
              "(against its first parent), reusing the hunt's samples; the report names them. "
              "Default off."))
    """`run --drill`: each named culprit's diff hunted hunk by hunk (hunts/hunks.py with
    `commit`, docs/hunks.md "Drill"), in the same report."""
    footprint: bool = knob(
        True, panel=COST, commands=("run",),
        help=("Measure only the commits that touch what the probe reads: the files its Python processes "
              "import or open and the directories they list, recorded at GOOD, BAD and each commit "
              "measured; the others share their neighbours' verdict. Not with --setup (every file is "
              "the build's input) or PATHS; a probe that is not Python measures every commit. Default on."))
    """`run`: the probe's footprint (probe/footprint.py, hunts/footprints.py): the commits touching
    none of what GOOD, BAD and every candidate measured read are set aside as `run GOOD BAD --
    PATHS` sets aside those touching none of PATHS (docs/design.md, "The probe's footprint")."""
    slots: int = knob(
        1, minimum=1, panel=COST, commands=("run", "hunks"),
        help=("Candidates measured at once, each in its own worktree and GPUs; their probes must not "
              "share a file outside their worktrees (a fixed scratch path). Default {default}."))
    """Candidates measured at once, each in its own worktree (and its own GPUs). Probes running side
    by side must not share a file outside their worktrees: one that reads back a fixed scratch path
    may read another's (a hunt that sees two of them write one warns, probe/isolation.py)."""
    slot_devices: tuple[str, ...] = knob(
        (), panel=COST, commands=("run", "hunks"),
        help=("CUDA_VISIBLE_DEVICES for one slot (repeat once per slot). Default: split visible GPUs "
              "evenly."))
    """CUDA_VISIBLE_DEVICES value per slot; empty = split the visible GPUs evenly, or none."""
    instrument: str = knob(
        "auto", choices=INSTRUMENT_MODES, panel=MEASURE,
        help=("'auto' (measure the counters shim's overhead first), 'separate' (counters always in "
              "separate runs), 'off' (no counters and no counting arm of the work per step)."))
    """'auto': measure the counters shim's overhead and keep tok/s unshimmed if it is over
    `overhead_limit`; 'separate': always take counters in separate runs; 'off': no counters, and
    no counting arm (the work per step at the culprits, docs/design.md)."""
    overhead_limit: float = knob(0.01, panel=MEASURE)
    """Shim overhead above which tok/s must come from unshimmed runs (docs/design.md, "Counters": 1%)."""
    overhead_pairs: int = knob(6, panel=MEASURE)
    """Most interleaved shimmed/unshimmed pairs of the shim's overhead arm on GOOD; it stops as
    soon as its anytime-valid interval decides (docs/cost.md), and is 'not proven' at the cap."""
    build_check: bool = knob(
        True, panel=SETUP,
        help=("Stop before the first probe when the project declares compiled extension modules "
              "(setup.py ext_modules, a compiling build backend) and no --setup builds them. Default "
              "on; off measures the candidates as they are. See docs/setup.md."))
    """Stop before the first probe when a candidate declares compiled extension modules and no
    setup step builds them (probe/extensions.py, docs/setup.md); off: measure it as it is."""
    # -- busy-machine guard (docs/contention.md) --
    busy_check: bool = knob(
        True, panel=BUSY,
        help=("Measure other processes' CPU/GPU load during every sample; re-take samples taken under "
              "contention. Default on."))
    """Measure the CPU (and GPU) used by processes outside the hunt during every sample; a
    sample taken under contention is stored apart and re-taken when the machine is quiet."""
    busy_cpus: float = knob(
        0.5, panel=BUSY,
        help=("The quiet floor in CPUs (also at least --busy-share of the cores): a steady load changing "
              "by more than half of it within a pair is contention. Default {default}. See docs/contention.md."))
    """Other load (in CPUs) below which a sample is never contended: kernel threads, shells and
    monitoring agents use a few tenths of a core on any machine."""
    busy_share: float = knob(
        0.10, panel=BUSY,
        help=("Share of the machine's cores other processes may use during a sample. Default 0.10."))
    """Share of the machine's cores other processes may use before a sample is contended, when
    that is more than busy_cpus (128 cores: 12.8 CPUs; 2 cores: the 0.5 floor). Independently,
    more than busy_cpus of other load while other + hunt load exceeds the cores (oversubscribed,
    so the probe lost CPU time) is contention on any machine size."""
    busy_gpu: float = knob(0.10, panel=BUSY)
    """Share of our GPUs' utilisation by foreign processes above which a sample is contended."""
    max_wait_s: float = knob(
        600.0, minimum=0, must="be >= 0 seconds", panel=BUSY, key="max_wait",
        help=("Seconds one wait for quiet may last, and a changing load may keep changing before "
              "exit 8. Default {default}."))
    """Seconds one wait for a quiet machine may last (all waits together: --max-wait-share of the
    wall), and a load may keep changing within pairs before the hunt stops with exit 8."""
    max_wait_share: float = knob(
        MAX_WAIT_SHARE, minimum=0, must="be >= 0 (a share of the hunt's wall time)", panel=BUSY,
        help=("Share of the hunt's wall time it may spend waiting for a quiet machine; past it, samples "
              "are taken under the load as it is, each pair under one load. Default {default}."))
    """Share of the hunt's wall time (so far) that waits for a quiet machine may add up to: a sample
    taken on cores oversubscribed by a steady load is used as it is once the wait would pass it
    (0: never wait; docs/contention.md)."""
    unit: str | None = knob(
        None, panel=MEASURE, kind=str,
        help=("Unit of the metric in reports. Default: tok/s, or for --metric-regex the unit written "
              "after its number ('([0-9.]+) req/s' -> req/s), else units/s."))
    """Unit of the metric in reports and progress (display only: the JSON keeps `tok_s` field
    names). None derives it from the probe: 'tok/s' for the protocol line and the default regex,
    for another metric_regex the unit written after its number ('([0-9.]+) req/s' -> 'req/s'),
    else 'units/s'."""
    executor: Executor = knob(
        Executor.LOCAL, kind=str, choices=EXECUTORS, panel=SLURM,
        help=("Where probes run: 'local' (this machine, default) or 'slurm' (one Slurm job per probe; "
              "settings in [tool.regressbisect.slurm], docs/cluster.md)."))
    """Where probes run: 'local' (processes on this machine) or 'slurm' (one Slurm job each)."""
    slurm: SlurmConfig = knob(default_factory=SlurmConfig, panel=SLURM, kind=dict)
    """Job settings of the slurm executor."""
    tokens_auto: bool = False
    """True when no budget was given (or `tokens = "auto"`): a commit hunt picks the budget from
    pilot probes of GOOD, starting from `probe.tokens` (docs/cost.md). A given budget is kept."""
    shared_caches: bool = knob(
        True, panel=COST,
        help=("Point the inductor/triton/torch-extensions cache variables the user has not set at one "
              "directory beside the store, shared by all slots. Default on."))
    """Point the probe stack's on-disk caches the user has not set (inductor, triton, torch
    extensions) at one directory beside the store, shared by every slot (docs/cost.md)."""
    compile_workers: bool = knob(
        False, panel=COST,
        help=("Let torch.compile start its pool of compile worker processes in every probe. Default "
              "off: TORCHINDUCTOR_COMPILE_THREADS=1 unless set (a warm cache leaves the pool little to "
              "do; docs/cost.md)."))
    """Let torch.compile start its pool of compile worker processes in every probe. Default:
    TORCHINDUCTOR_COMPILE_THREADS=1 unless the user set it (hunts/cost.py SERIAL_COMPILE: the pool
    costs start-up and, with a warm cache, compiles little; docs/cost.md)."""
    preload: str = knob(
        PRELOAD, panel=COST,
        help=("'auto' (default): fork plain Python probes from a per-slot server that imported torch "
              "once; 'off': a fresh process per probe; or modules to preload, comma-separated "
              "(docs/cost.md)."))
    """'auto': a plain Python probe command (`python -m mod`, `python script.py`) is forked from a
    per-slot server that imported the third-party stack the hunt's first probe imported (torch),
    so that import is paid once; 'off': every probe a fresh process; or comma-separated modules to
    preload. Never with a setup step or Slurm (docs/cost.md, probe/preload.py)."""
    overlap: int = knob(
        OVERLAP, minimum=1, must="be at least 1 (1 = one probe at a time)", panel=COST,
        help=("Probes of a slot run at once: start-ups side by side, measured windows one at a time "
              "with the others stopped; for probes that open their window through REGRESSBISECT_WINDOW "
              "(docs/cost.md). Default {default} (off)."))
    """Probes of a slot run at once, each in its own worktree: their start-ups (imports, set-up,
    compile) run side by side and their measured windows one at a time, every other probe of the
    hunt stopped meanwhile. For probes that open their window through REGRESSBISECT_WINDOW (the
    probe contract); until a slot's probe has, its probes run one at a time. 1 = off. `run` and
    `nightly` on the local executor (docs/cost.md, probe/windows.py)."""

    def __post_init__(self) -> None:
        _check_settings(self, "hunt")
        object.__setattr__(self, "direction", Direction(self.direction))  # a flag's or pyproject's text
        object.__setattr__(self, "executor", Executor(self.executor))
        if not 0 < self.min_effect < 1:
            raise UserError(f"--min-effect must be a fraction between 0 and 1 (e.g. 0.01), got {self.min_effect}")
        if self.side_resolution is not None and not 0 < self.side_resolution < 1:
            raise UserError(f"--side-resolution must be a fraction between 0 and 1 (e.g. 0.02), got {self.side_resolution}")
        if self.slot_devices and len(self.slot_devices) != self.slots:
            raise UserError(f"--slot-devices names {len(self.slot_devices)} device sets for "
                            f"{self.slots} slots; give one per slot (e.g. --slot-devices 0,1 --slot-devices 2,3)")
        if self.executor == Executor.SLURM and self.slot_devices:
            raise UserError("--slot-devices does not go with --executor slurm: Slurm pins each job's GPUs; "
                            "set gpus_per_probe in [tool.regressbisect.slurm] (or --slurm-gpus)")
        object.__setattr__(self, "slot_devices", tuple(self.slot_devices))
        if self.busy_cpus < 0 or not 0 < self.busy_share <= 1 or not 0 < self.busy_gpu <= 1:
            raise UserError("--busy-cpus must be >= 0, busy_share and busy_gpu fractions in (0, 1] "
                            f"(got {self.busy_cpus}, {self.busy_share}, {self.busy_gpu})")
        if self.unit is not None and not self.unit.strip():
            raise UserError("--unit must not be empty (e.g. --unit req/s)")
        object.__setattr__(self, "unit", self.unit or metric_unit(self.probe.metric_regex))
        if self.overlap > 1 and not sys.platform.startswith("linux"):
            raise UserError("--overlap needs Linux (the window gate stops and continues probes by process "
                            "group and names them by SO_PEERCRED); use --overlap 1 (overlap = 1 in "
                            "[tool.regressbisect])")
        if self.overlap > 1 and self.executor != Executor.LOCAL:
            raise UserError("--overlap needs the local executor: a Slurm job holds its GPUs only while "
                            "its probe runs; use --slots for parallel jobs, and --overlap 1 (overlap = 1 in "
                            "[tool.regressbisect])")
        # The probe's samples are keyed by the company they are taken in (ProbeConfig.concurrency).
        object.__setattr__(self, "probe", dataclasses.replace(self.probe, concurrency=(self.slots, self.overlap)))
        if not self.preload.strip() or not all(_MODULE_NAME.match(m.strip()) for m in self.preload.split(",")):
            raise UserError(f"--preload must be 'auto', 'off' or comma-separated module names (e.g. torch), "
                            f"got {self.preload!r}")

    @property
    def lanes(self) -> int:
        """Probes that run at once: `overlap` per slot."""
        return self.slots * self.overlap

    def search_values(self, command: str) -> dict[str, Any]:
        """What `command`'s hunt hands its search, by `SearchSettings` field (`SearchSettings.of`)."""
        return {s.knob.search: getattr(self, s.field) for s in search_knobs(command)}

    def search_key(self, command: str) -> dict[str, Any]:
        """The same values by their config names: the part of a hunt's stored settings (its resume
        key) and of its report that the search decides by."""
        return {s.field: getattr(self, s.field) for s in search_knobs(command)
                if not (s.knob.keyed_when_set and getattr(self, s.field) == s.default)}

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


SETTINGS: tuple[Setting, ...] = (_settings_of("probe", ProbeConfig) + _settings_of("hunt", HuntConfig)
                                  + _settings_of("slurm", SlurmConfig))
"""Every user setting, in the order of its dataclass's fields."""
_PYPROJECT_KEYS = {s.key: (s.part, s.kind) for s in SETTINGS if s.part != "slurm"}
_SLURM_KEYS = {s.key: s.kind for s in SETTINGS if s.part == "slurm"}
_RENAMES = {s.key: s.field for s in SETTINGS if s.key != s.field}


def search_knobs(command: str) -> tuple[Setting, ...]:
    """The settings the search of `command`'s hunt reads (`Knob.search`), in field order."""
    return tuple(s for s in SETTINGS if s.knob.search is not None and command in s.knob.commands)


def run_flags(config: HuntConfig) -> list[str]:
    """The `run` flags that give another hunt this hunt's settings: --cmd, and every setting `run`
    takes a flag for whose value is not what it would be without it (a pyproject value comes out
    as its flag too: the same value). A budget chosen automatically stays automatic."""
    plain = HuntConfig(probe=ProbeConfig(cmd=config.probe.cmd))
    flags: list[str] = []
    for setting in SETTINGS:
        if not setting.flag or "run" not in setting.knob.commands or setting.kind is dict and setting.key != "env":
            continue
        of = {"probe": lambda c: c.probe, "hunt": lambda c: c, "slurm": lambda c: c.slurm}[setting.part]
        value, default = getattr(of(config), setting.field), getattr(of(plain), setting.field)
        if setting.key == "cmd":
            flags += [setting.flag, value]
        elif value == default or setting.key == "tokens" and config.tokens_auto:
            continue
        elif isinstance(value, bool):
            flags.append(setting.flag if value else f"--no-{setting.flag[2:]}")
        elif isinstance(value, Mapping):
            flags += [word for k, v in value.items() for word in (setting.flag, f"{k}={v}")]
        elif isinstance(value, (tuple, list)):
            flags += [word for item in value for word in (setting.flag, str(item))]
        else:
            flags += [setting.flag, f"{value:g}" if isinstance(value, float) else str(value)]
    return flags


def settings_markdown() -> str:
    """The README's table of the [tool.regressbisect] keys (tests/test_config.py keeps it equal)."""
    def shown(setting: Setting) -> str:
        if setting.knob.shown_default is not None:
            return setting.knob.shown_default
        value = setting.default
        if setting.kind is dict:
            return "table" if setting.key == "slurm" else "{}"
        if value is None or value == "":
            return "-"
        return json.dumps(list(value) if isinstance(value, tuple) else value)

    rows = ["| key | flag | default |", "|---|---|---|"]
    for setting in SETTINGS:
        key = f"slurm.{setting.key}" if setting.part == "slurm" else setting.key
        if key == "slurm":
            continue  # its keys have rows of their own
        rows.append(f"| `{key}` | {f'`{setting.flag}`' if setting.flag else '-'} | `{shown(setting)}` |")
    return "\n".join(rows)


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
        if key != "slurm" and value is not None and value != ():
            merged[key] = value
    probe_kwargs: dict[str, Any] = {}
    hunt_kwargs: dict[str, Any] = {}
    for key, value in merged.items():
        part = _PYPROJECT_KEYS.get(key, ("hunt", object))[0]
        name = _RENAMES.get(key, key)
        (probe_kwargs if part == "probe" else hunt_kwargs)[name] = value
    probe_kwargs.setdefault("cmd", "")
    slurm_table = dict(hunt_kwargs.pop("slurm", {}))
    for key, value in dict(flags.get("slurm") or {}).items():  # flags win, key by key
        if value is not None and value != ():
            slurm_table[key] = value
    hunt_kwargs["slurm"] = _slurm_config(slurm_table, source)
    if "slot_devices" in hunt_kwargs:
        hunt_kwargs["slot_devices"] = tuple(str(d) for d in hunt_kwargs["slot_devices"])
    return HuntConfig(probe=ProbeConfig(**probe_kwargs), tokens_auto=tokens_auto, **hunt_kwargs)


AUTO = "auto"
_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


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


def _slurm_config(table: Mapping[str, Any], source: str) -> SlurmConfig:
    for key, value in table.items():
        if key not in _SLURM_KEYS:
            known = ", ".join(sorted(_SLURM_KEYS))
            raise UserError(f"unknown key '{key}' in [tool.regressbisect.slurm] of {source}; known keys: {known}")
        expected = _SLURM_KEYS[key]
        if expected in (list, tuple) and isinstance(value, tuple):
            continue
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            continue
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise UserError(f"[tool.regressbisect.slurm] {key} in {source} must be a {expected.__name__}, got {value!r}")
    values = dict(table)
    if "sbatch_args" in values:
        values["sbatch_args"] = tuple(values["sbatch_args"])
    if "poll_s" in values:
        values["poll_s"] = float(values["poll_s"])
    return SlurmConfig(**values)


def default_store_path(common_dir: Path) -> Path:
    """Samples live beside the worktree pool, inside the git dir: never in the user's tree."""
    return common_dir / "regressbisect" / "store.sqlite"
