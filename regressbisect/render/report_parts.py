"""The nested parts of the JSON reports (docs/report-schema.md), one small frozen dataclass each,
and how a report dataclass is written as JSON (`fields_json`).

A report is built once, from the hunt's results, out of these parts; `to_json` writes each part's
fields in their order, so the dataclass is the definition of its JSON object. A field whose JSON
key is no Python name (`from`) says its key (`json_key`); a report's shared tail (`HuntFacts`) is
written among the report's own fields (`flat`), in the order its kind lists them (`JSON_ORDER`).
"""
from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any, Literal, Mapping

from regressbisect.errors import UserError
from regressbisect.git.hunks import HunkKind
from regressbisect.search.overhead import OverheadDecision
from regressbisect.search.sides import SideOutcome
from regressbisect.search.verdicts import CandidateCall, Verdict
from regressbisect.enums import WordEnum


class Absent:
    """The value of a report field whose key a report leaves out (`null` is a value)."""

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:    # read as no value: `drill.culprits or ()`
        return False


ABSENT = Absent()


def json_key(name: str, **kwargs) -> Any:
    """A field written under another key than its name (`from`, a Python keyword)."""
    return field(metadata={"json_key": name}, **kwargs)


def flat(**kwargs) -> Any:
    """A field whose own fields are written among its report's (the shared tail, `HuntFacts`)."""
    return field(metadata={"flat": True}, **kwargs)


def key_of(f) -> str:
    """The JSON key of a dataclass field."""
    return f.metadata.get("json_key", f.name)


def json_fields(definition) -> list[tuple[str, Any]]:
    """(JSON key, type) of each key a report dataclass (class or instance) writes, a `flat`
    field's own in its place, in the JSON's order (JSON_ORDER, when the class has one)."""
    cls = definition if isinstance(definition, type) else type(definition)
    hints = typing.get_type_hints(cls)
    out: list[tuple[str, Any]] = []
    for f in fields(cls):
        if f.metadata.get("flat"):
            out += json_fields(hints[f.name])
        else:
            out.append((key_of(f), hints[f.name]))
    order = getattr(cls, "JSON_ORDER", ())
    return sorted(out, key=lambda kf: order.index(kf[0]) if kf[0] in order else len(order))


def fields_json(definition) -> dict[str, Any]:
    """A report dataclass's fields as JSON, in their order: nested report objects through their
    own `to_json`, a field that is ABSENT left out, a `flat` field's fields in its place; then in
    the order of the class's JSON_ORDER when it has one."""
    out: dict[str, Any] = {}
    for f in fields(definition):
        value = getattr(definition, f.name)
        if f.metadata.get("flat"):
            out.update(fields_json(value))
        elif value is not ABSENT:
            out[key_of(f)] = as_json(value)
    order = getattr(definition, "JSON_ORDER", ())
    return {**{key: out[key] for key in order if key in out}, **{k: v for k, v in out.items() if k not in order}}


def as_json(value: Any) -> Any:
    """A field's value as JSON: a part through its `to_json`, an enum member as its value."""
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, list):
        return [as_json(v) for v in value]
    if isinstance(value, dict):
        return {k: as_json(v) for k, v in value.items()}
    return value


class Part:
    """A nested object of a report: written as its fields (`fields_json`)."""

    def to_json(self) -> dict[str, Any]:
        return fields_json(self)


# ------------------------------------------------------------------ JSON -> parts (reading a report back)

def from_json(cls: type, value: Mapping[str, Any]) -> Any:
    """The dataclass `cls` from its JSON object: each field from its key through the field's type
    (`_value`), a `flat` field from the same object. A key the object lacks (a field added within
    its schema after it was written, a report cut short) takes the field's empty value: None where
    the type allows it, ABSENT where the key may be left out, else an empty list, object or
    string, 0, false or NaN."""
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        hint = hints[f.name]
        if f.metadata.get("flat"):
            kwargs[f.name] = from_json(hint, value)
        elif key_of(f) in value:
            kwargs[f.name] = _value(value[key_of(f)], hint)
        elif f.default is not dataclasses.MISSING:
            kwargs[f.name] = f.default
        else:
            kwargs[f.name] = _empty(hint)
    return cls(**kwargs)


def _value(value: Any, hint: Any) -> Any:
    """A JSON value as the type `hint` says: a part from its object, a list of them, an enum
    member; a value that fits no option of a union is kept as it is, except a word no member of an
    enum has where only enums may stand (`_member`)."""
    if hint is Any:
        return value
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a not in (type(None), Absent)]
        for option in options:
            if _fits(value, option):
                return _value(value, option)
        if options and all(isinstance(o, type) and issubclass(o, Enum) for o in options):
            return _member(options[0], value)
        return value
    if dataclasses.is_dataclass(hint):
        return from_json(hint, value) if isinstance(value, Mapping) else value
    if isinstance(hint, type) and issubclass(hint, Enum):
        return _member(hint, value)
    if (origin is list or hint is list) and isinstance(value, list):
        item = args[0] if args else Any
        return [_value(v, item) for v in value]
    if (origin is dict or hint is dict) and isinstance(value, Mapping):
        item = args[1] if args else Any
        return {k: _value(v, item) for k, v in value.items()}
    if hint is float and value is None:
        return math.nan     # NaN is written null
    return value


def _member(cls: type[Enum], value: Any) -> Enum:
    """The member of `cls` whose value `value` is. A word no member has (a report edited by hand,
    or written by a later version) fails loudly, naming the words it may be: read as a plain
    string it would compare unequal to every member and be taken for none of them. An old
    schema's words are rewritten by their migration (report_load.py) before this."""
    try:
        return cls(value)
    except ValueError:
        words = ", ".join(m.value for m in cls)
        raise UserError(f"a report's {cls.__name__} is {value!r}, which is none of: {words}") from None


def _fits(value: Any, hint: Any) -> bool:
    """Whether a JSON value can be of the type `hint` (to pick the option of a union)."""
    origin = typing.get_origin(hint) or hint
    if dataclasses.is_dataclass(hint) or origin is dict:
        return isinstance(value, Mapping)
    if origin is list:
        return isinstance(value, list)
    if origin is typing.Literal:
        return value in typing.get_args(hint)
    if isinstance(hint, type) and issubclass(hint, Enum):
        return value in {m.value for m in hint}
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is Any:
        return True
    return isinstance(hint, type) and isinstance(value, hint)


def _empty(hint: Any) -> Any:
    """A missing field's value: None where the type allows it, ABSENT where the key may be left
    out, else the type's empty value."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if Absent in args:
            return ABSENT
        if type(None) in args:
            return None
        return _empty(args[0])
    if hint is type(None) or hint is None or hint is Any:
        return None
    if dataclasses.is_dataclass(hint):
        return from_json(hint, {})
    if origin is list or hint is list:
        return []
    if origin is dict or hint is dict:
        return {}
    if origin is typing.Literal:
        return args[0]
    if isinstance(hint, type) and issubclass(hint, Enum):
        return ""
    return {bool: False, int: 0, float: math.nan, str: ""}.get(hint)


# ------------------------------------------------------------------ value sets

class DrillVerdict(WordEnum):
    """A culprit commit's drill (`culprits[].hunks.verdict`): its hunk hunt's verdict, or why
    there was no hunt."""

    CULPRITS = Verdict.CULPRITS.value
    NOT_REPRODUCED = Verdict.NOT_REPRODUCED.value
    UNDECIDED = Verdict.UNDECIDED.value
    NOT_LOCALISED = Verdict.NOT_LOCALISED.value
    ALL_SKIPPED = Verdict.ALL_SKIPPED.value
    ONE_HUNK = "one-hunk"
    """The diff is one hunk: no hunt, the commit names it."""
    NO_HUNKS = "no-hunks"
    """An empty commit, or one that adds or removes a submodule."""


class NightlyVerdict(WordEnum):
    """A night's verdict: a hunt tonight or earlier named a culprit, or none did (schema 1's word)."""

    CULPRITS = "culprits"
    NONE = "none"


class OverheadVerdict(WordEnum):
    """The counters shim's overhead against `overhead_limit` (`instrumentation_overhead_pct.verdict`)."""

    WITHIN = OverheadDecision.WITHIN.value
    BEYOND = OverheadDecision.BEYOND.value
    UNDECIDABLE = OverheadDecision.UNDECIDABLE.value


# ------------------------------------------------------------------ parts every kind shares

@dataclass(frozen=True)
class Summary(Part):
    """A commit's (an endpoint's) samples: `{"median_tok_s", "ci95", "n", "cv"}`; a hunk report's
    endpoints have no `cv`."""

    median_tok_s: float | None
    ci95: list[float | None]
    n: int
    cv: float | None | Absent = ABSENT


@dataclass(frozen=True)
class Endpoints(Part):
    """GOOD's and BAD's samples (None: a side without samples)."""

    good: Summary | None
    bad: Summary | None


@dataclass(frozen=True)
class BothEnds(Part):
    """`{"good", "bad"}` of a per-end mapping: `endpoint_counters`, `endpoint_work`."""

    good: Any
    bad: Any


@dataclass(frozen=True)
class Isolation(Part):
    """Where the probes imported the project from (`probe/isolation.Isolation.report`)."""

    check: bool
    probes_checked: int
    probes_without_project_imports: int
    processes_per_probe: int
    imported_from: dict[str, str]
    note: str


@dataclass(frozen=True)
class Instrumentation(Part):
    """How counters were taken (`--instrument`); a hunk report has only `mode` and `note`."""

    mode: str
    tok_s_from_shimmed_runs: bool | Absent = ABSENT
    note: str = ""
    overhead_pairs: int | Absent = ABSENT
    counters_available: bool | Absent = ABSENT


@dataclass(frozen=True)
class Overhead(Part):
    """The counters shim's measured slowdown, percent (`instrumentation_overhead_pct`)."""

    value: float
    ci95: list[float]
    verdict: OverheadVerdict


@dataclass(frozen=True)
class ProbeTotals(Part):
    """Probes and what they cost (`hunts/cost.CostTotals`): this process's, or a hunt's over every run."""

    probes: int
    probe_wall_s: float
    measured_s: float
    measured_share: float | None
    gpu_s: float
    crashed_probes: int
    crashed_wall_s: float


@dataclass(frozen=True)
class Caches(Part):
    """The shared cache directory (None: --no-shared-caches), the variables pointed at it, and
    those the user had set."""

    directory: str | None
    shared: list[str]
    user_set: list[str]


@dataclass(frozen=True)
class CompileSettings(Part):
    """The start-up variables the tool set on every probe for torch.compile, and those the user had set."""

    set: dict[str, str]
    user_set: list[str]


@dataclass(frozen=True)
class CountingArm(Part):
    """The counting arm's fresh probes (work per step), their seconds, the commits it counted at."""

    probes: int
    seconds: float
    commits: int
    failed: dict[str, str] | Absent = ABSENT
    """Only when some failed: short commit -> why its counting probe gave no counts."""


@dataclass(frozen=True)
class Cost(ProbeTotals):
    """What a hunt paid and the levers it pulled (`hunts/cost.HuntCost.report`). A part None, or
    a total NaN, is one a report written before it lacks."""

    builds: int | None
    build_reuses: int
    gpus_visible: int
    budget: dict[str, Any] | None
    """`{"tokens", "reason", ...}`: with --tokens auto, the rule's inputs it could compute (docs/cost.md)."""
    caches: Caches | None
    compile: CompileSettings | None
    hunt: ProbeTotals | None
    counting_arm: CountingArm | Absent = ABSENT
    """Commit hunts only."""


@dataclass(frozen=True)
class Preload(Part):
    """Preload servers (`probe/preload.PreloadStats`; docs/cost.md, section 4)."""

    mode: str
    modules: list[str]
    probes_forked: int
    probes_fresh: int
    servers: int
    watched_checked: int
    watched_imported: list[str]
    server_start_s: float
    notes: list[str]


@dataclass(frozen=True)
class Overlap(Part):
    """Probes side by side, windows alone (`probe/windows.GateStats`; docs/cost.md, section 5)."""

    lanes_per_slot: int
    probes: int
    windows: int
    probes_alone: int
    reruns: int
    stops: int
    stopped_s: float
    gate_wait_s: float
    overrun: int
    unregistered: int
    without_window: int
    notes: list[str]


@dataclass(frozen=True)
class SetupFailure(Part):
    """A failed setup run: its candidate, why, the last output lines."""

    candidate: str
    reason: str
    tail: str


@dataclass(frozen=True)
class RestoredFiles(Part):
    """Tracked files probes had modified in a built worktree, put back before them."""

    probes: int
    files: list[str]


@dataclass(frozen=True)
class SetupStep(Part):
    """The setup step's runs (`probe/setup_step.SetupStep`; docs/setup.md)."""

    command: str
    runs: int
    failures: int
    remembered_failures: int
    seconds: float
    log_dir: str
    worktrees: int
    per_candidate: dict[str, dict[str, float]]
    """Candidate label -> {"runs", "failures", "reuses", "remembered", "seconds"}."""
    failed: list[SetupFailure]
    tracked_files_restored: RestoredFiles | None


@dataclass(frozen=True)
class Venvs(Part):
    """One virtualenv per worktree used (--venv), on `base_python`."""

    base_python: str
    paths: list[str]


@dataclass(frozen=True)
class Retake(Part):
    """A sample taken under contention (stored apart) and re-taken."""

    candidate: str
    reason: str
    tok_s: float | None


@dataclass(frozen=True)
class ContentionRule(Part):
    """The busy-machine rule this hunt ran under (machine/contention.py)."""

    busy_cpus: float
    busy_share: float
    busy_gpu: float | None
    max_wait_s: float
    max_wait_share: float
    change_cpus: float


@dataclass(frozen=True)
class Contention(Part):
    """The busy-machine guard's account (docs/contention.md)."""

    retaken: int
    retakes: list[Retake]
    waited_s: float
    wall_s: float
    steady_other_cpus: float | None
    other_cpus_range: list[float] | None
    level_changes: int
    under_load: int
    rule: ContentionRule


@dataclass(frozen=True)
class Leftovers(Part):
    """Probes that left processes running, how many were killed, the first few."""

    probes: int
    killed: int
    first: list[str]


@dataclass(frozen=True)
class Measurement(Part):
    """How the samples were taken (`hunts/sampling.SampleSource.measurement_json`)."""

    probe_seconds: float
    preload: Preload | None
    overlap: Overlap | None
    setup: SetupStep | None
    venvs: Venvs | None
    contention: Contention | Absent | None
    """None: the busy-machine guard was off; ABSENT: a report written before it."""
    leftovers: Leftovers


@dataclass(frozen=True)
class HuntFacts(Part):
    """The tail a commit report and a hunk report share: what the hunt ran and paid, how it
    measured, whether to go on. Built once (`hunt_facts`), written among the report's own fields."""

    probes: int
    cached_samples: int
    from_store_only: bool
    instrumentation: Instrumentation
    instrumentation_overhead_pct: Overhead | None
    isolation: Isolation | None
    hunt_id: int
    environment: dict[str, Any]
    measurement: Measurement
    cost: Cost | None
    """None only in a report written before `cost` was (schema 2)."""
    continue_command: str | None


def every_sample_stored(*, probes: int, builds: int | None, cached: int) -> bool:
    """The report's `from_store_only`: nothing was run (no probe, no setup step), every sample the
    hunt used was stored before (the summary's first line says so)."""
    return probes == 0 and not builds and cached > 0


def isolation_part(isolation) -> Isolation | None:
    """The report's `isolation` entry, the same for run, hunks and nightly (probe/isolation.py):
    whether the check was on, and where the project's modules were imported from (worktree-relative)."""
    return None if isolation is None else Isolation(**isolation.report())


def hunt_facts(*, probes: int, builds: int | None, cached: int, instrumentation: Instrumentation,
               overhead: Overhead | None, isolation, hunt_id: int, env_facts: Mapping[str, Any],
               measurement: Mapping[str, Any], cost: Mapping[str, Any], continue_command: str | None) -> HuntFacts:
    """The shared tail, built once; `cost` is `hunts/cost.HuntCost.report`'s (with the counting arm's)."""
    return HuntFacts(probes=probes, cached_samples=cached,
                     from_store_only=every_sample_stored(probes=probes, builds=builds, cached=cached),
                     instrumentation=instrumentation, instrumentation_overhead_pct=overhead,
                     isolation=isolation_part(isolation), hunt_id=hunt_id, environment=dict(env_facts),
                     measurement=from_json(Measurement, measurement), cost=from_json(Cost, cost),
                     continue_command=continue_command)


# ------------------------------------------------------------------ a commit report's parts

@dataclass(frozen=True)
class Range(Part):
    """Two commits, `{"from", "to"}`: a bracket searched, a range given up."""

    from_: str = json_key("from")
    to: str


@dataclass(frozen=True)
class RefutedStep(Part):
    """A step the posterior proposed and the paired test refuted."""

    last_good: str
    first_bad: str


@dataclass(frozen=True)
class Side(Part):
    """What became of one side of a culprit (docs/report-schema.md, `sides[]`)."""

    from_: str = json_key("from")
    to: str
    outcome: SideOutcome
    ruled_out_pct: float | None
    priced: bool


@dataclass(frozen=True)
class PossibleCommit(Part):
    """A commit an ambiguous step may be, and why (its skip reasons)."""

    commit: str
    subject: str
    index: int
    why: str


@dataclass(frozen=True)
class AmbiguousStep(Part):
    """A step that passed the culprit rule with unmeasurable commits between its ends."""

    last_good: str
    first_bad: str
    step_pct: float
    ci95_pct: list[float]
    step_tok_s: float
    share_of_gap: float
    possible_commits: list[PossibleCommit]


@dataclass(frozen=True)
class Suspect(Part):
    """A step the search confirmed but did not name."""

    commit: str
    last_good: str
    step_pct: float
    ci95_pct: list[float]
    step_tok_s: float
    share_of_gap: float


@dataclass(frozen=True)
class Established(Part):
    """An undecided commit hunt's leading step (docs/report-schema.md, `established`)."""

    last_good: str
    first_bad: str
    last_good_index: int
    first_bad_index: int
    bracket: Range
    probability: float | None
    before: Summary | None
    after: Summary | None
    confirmed_by_pairs: bool


@dataclass(frozen=True)
class Candidate(Part):
    """A measured commit (docs/report-schema.md, "A candidate")."""

    index: int
    commit: str
    subject: str
    patch: None
    n: int
    cached: int
    verdict: CandidateCall
    median_tok_s: float | None
    ci95: list[float] | None
    interfered_tok_s: list[float]


@dataclass(frozen=True)
class NotMeasuredCommit(Part):
    """A commit of the range that was no candidate (outside PATHS, or the probe's footprint)."""

    commit: str
    subject: str
    position: int
    reason: str
    same_as: str
    verdict: CandidateCall | None


@dataclass(frozen=True)
class Footprint(Part):
    """What the probe's processes read of its worktree (hunts/footprints.py)."""

    used: bool
    fallback: bool
    note: str
    recorded: int
    files: int | None
    dirs: int | None
    passes: int
    added_back: list[str]


@dataclass(frozen=True)
class ShapeChange(Part):
    """GOOD and BAD differed in shape (`search.control.ShapeChange`)."""

    side: Literal["below", "above"]
    good_share: float
    bad_share: float
    factor: float | None
    mean_change_pct: float


@dataclass(frozen=True)
class Merge(Part):
    """A culprit that is a merge: its parents, and the follow-up hunt of each merged branch."""

    parents: list[str]
    follow_up: list[str]


# ------------------------------------------------------------------ a hunk report's parts

@dataclass(frozen=True)
class HunkEntry(Part):
    """One hunk of a diff (`git/hunks.Hunk`)."""

    id: str
    file: str
    lines: list[int]
    function: str | None
    kind: HunkKind
    excerpt: str


@dataclass(frozen=True)
class NotMeasuredHunk(HunkEntry):
    """A hunk outside PATHS: in every candidate, never searched."""

    reason: str = ""


@dataclass(frozen=True)
class AloneTest(Part):
    """The fresh paired test of BASE + a hunk group against BASE."""

    change_pct: float
    ci95_pct: list[float]
    pairs: int
    verdict: Verdict


@dataclass(frozen=True)
class HunksEstablished(Part):
    """An undecided hunk hunt's `established`: where the prefix search put the slowdown."""

    hunks: list[str]
    files: list[str]
    probability: float | None
    text: str


@dataclass(frozen=True)
class Spread(Part):
    """The hunks a slowdown is spread over, each below `--min-effect`."""

    hunks: list[str]
    text: str


@dataclass(frozen=True)
class HunkGroup(Part):
    """A named (or suspected) hunk group, as a drill lists it."""

    commit: str
    parent: str
    subject: str
    cluster: bool
    hunks: list[HunkEntry]
    step_pct: float
    ci95_pct: list[float]
    share_of_gap: float | None
    alone: AloneTest
    joined: dict[str, str]
    """Hunk id -> how it joined the group (`subsets.Joined`): 'proposed', 'needed to run',
    'needed to be slow' or 'kept by leave-one-out'."""


@dataclass(frozen=True)
class HunkCulprit(HunkGroup):
    """A hunk report's culprit (and suspect): the group and its counts before and after."""

    left_out: None
    counters_before: dict[str, float]
    counters_after: dict[str, float]
    work: dict[str, Any] | None


@dataclass(frozen=True)
class DrillReport(Part):
    """A culprit commit's `hunks` in a `run --drill` report (docs/report-schema.md, "A culprit's
    `hunks`"): the verdict of the hunt of its hunks and the slow ones, or why none was named."""

    verdict: DrillVerdict
    reason: str
    base: str | Absent = ABSENT
    hunk_count: int = 0
    culprits: list[HunkGroup] | Absent = ABSENT
    suspects: list[HunkGroup] | Absent = ABSENT
    hunks: list[HunkEntry] | Absent = ABSENT
    """'one-hunk' only: the one hunk."""
    unexplained_share: float | None | Absent = ABSENT
    """1 - the named groups' shares of the commit's step; None without culprits."""
    unexplained_share_ci95: list[float] | None | Absent = ABSENT
    spread: Spread | None | Absent = ABSENT
    """`HuntedHunks.spread`."""
    probes: int | Absent = ABSENT
    cached_samples: int | Absent = ABSENT
    max_probes: int | None | Absent = ABSENT
    """The drill's probe cap (`search.budget.drill_probe_cap`)."""


# ------------------------------------------------------------------ a nightly report's parts

@dataclass(frozen=True)
class Night(Part):
    """Tonight: its tip, when, what it measured, whether the machine check flagged it."""

    tip: str
    date: str
    measured: list[str]
    flagged: bool


@dataclass(frozen=True)
class SeriesRow(Part):
    """A first-parent commit with samples, in the night's series."""

    commit: str
    subject: str
    date: str
    n: int
    median_tok_s: float
    ci95: list[float | None]
    flagged: bool
    """Measured only on flagged nights: shown, never evidence for a change point."""


@dataclass(frozen=True)
class ChangePoint(Part):
    """A change point of the series (`search.changepoints`)."""

    index: int
    """Its row in the series."""
    commit: str
    before_commit: str
    before: float
    after: float
    change: float
    change_pct: float
    p_value: float
    not_hunted: str | None
