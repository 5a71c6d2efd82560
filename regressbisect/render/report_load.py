"""A JSON report read back into its typed report (`load_report`): what `regressbisect report`, the
renderers and the nightly's report files read.

An old report is migrated once, on load, one schema at a time (`update_to_2`, `update_to_3`, as
asv's `update_to_N`); then each part is built from its JSON object by its dataclass's field types
(`from_json`). A field a report lacks (written before the field was added within its schema, or a
report cut short) takes its empty value: None where the type allows it, ABSENT where the key may
be left out, else an empty list, object, string, 0, false or NaN. The renderers then read fields,
never a `.get` chain.
"""
from __future__ import annotations

import dataclasses
import enum
import math
import types
import typing
from typing import Any, Mapping

from regressbisect.render.report_hunks import HunkReport
from regressbisect.render.report_json import SCHEMA, CommitReport, NightlyReport, Report
from regressbisect.render.report_parts import ABSENT, Absent, key_of

TypedReport = CommitReport | HunkReport | NightlyReport
KINDS: dict[str, type] = {"commits": CommitReport, "hunks": HunkReport, "nightly": NightlyReport}


def load_report(report: Mapping[str, Any] | Report) -> TypedReport:
    """The typed report of a JSON report of any schema (a typed report is returned as it is)."""
    if isinstance(report, Report):
        return report
    document = migrate(report)
    return from_json(KINDS[document.get("kind") or "commits"], document)


# ------------------------------------------------------------------ migrations, one per schema

def update_to_2(report: dict[str, Any]) -> dict[str, Any]:
    """Schema 1 -> 2: a commit or hunk hunt's `verdict: "none"` became `not-localised` (reproduced,
    no single step explains it; the only reading a schema-1 report with endpoints has) and each
    has an `exit_code`; a nightly keeps its own `none`."""
    if report.get("kind") != "nightly" and report.get("verdict") == "none":
        report["verdict"] = "not-localised"
    return report


def update_to_3(report: dict[str, Any]) -> dict[str, Any]:
    """Schema 2 -> 3: counters come from the counting arm. A schema-2 report has no `work` and no
    `endpoint_work`: they load empty (no counting arm), which is what they were."""
    return report


UPDATES = {2: update_to_2, 3: update_to_3}
"""Schema N: the migration from N - 1 to N."""


def migrate(report: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `report` in today's schema (SCHEMA); the night's hunts too."""
    document = {**report}
    version = document.get("schema") or 1
    for target in range(version + 1, SCHEMA + 1):
        document = UPDATES[target](document)
    document["schema"] = max(version, SCHEMA)
    return document


# ------------------------------------------------------------------ JSON -> parts

def from_json(cls: type, value: Mapping[str, Any]) -> Any:
    """The dataclass `cls` from its JSON object: each field from its key through the field's type
    (`_value`), a `flat` field from the same object, a missing key as the field's empty value."""
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
    member; a value that fits no option (an old report's word) is kept as it is."""
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
        return value
    if dataclasses.is_dataclass(hint):
        return from_json(hint, value) if isinstance(value, Mapping) else value
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(value)
        except ValueError:
            return value
    if (origin is list or hint is list) and isinstance(value, list):
        item = args[0] if args else Any
        return [_value(v, item) for v in value]
    if (origin is dict or hint is dict) and isinstance(value, Mapping):
        item = args[1] if args else Any
        return {k: _value(v, item) for k, v in value.items()}
    if hint is float and value is None:
        return math.nan     # NaN is written null
    return value


def _fits(value: Any, hint: Any) -> bool:
    """Whether a JSON value can be of the type `hint` (to pick the option of a union)."""
    origin = typing.get_origin(hint) or hint
    if dataclasses.is_dataclass(hint) or origin is dict:
        return isinstance(value, Mapping)
    if origin is list:
        return isinstance(value, list)
    if origin is typing.Literal:
        return value in typing.get_args(hint)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
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
        if type(None) in args:
            return None
        if Absent in args:
            return ABSENT
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
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return ""
    return {bool: False, int: 0, float: math.nan, str: ""}.get(hint)
