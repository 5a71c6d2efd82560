"""docs/report-schema.md against the reports' definitions (render/report_json.py,
render/report_hunks.py, render/report_parts.py): every top-level key of each kind, and every key of
a culprit, is in its table, and every key a table names is in the definition; and a saved report
of each kind (tests/reports/) has, at every depth, the keys, order and types its definition gives."""
from __future__ import annotations

import dataclasses
import enum
import json
import re
import types
import typing
from pathlib import Path
from typing import Any

import pytest

from regressbisect.render.report_hunks import DrillReport, HunkCulprit, HunkReport
from regressbisect.render.report_json import CommitCulprit, CommitReport, NightlyReport, report_header
from regressbisect.render.report_parts import Absent, json_fields

SCHEMA_DOC = Path(__file__).resolve().parents[1] / "docs" / "report-schema.md"


def documented_fields(heading: str) -> set[str]:
    """The keys the first table after the line starting with `heading` names in its first column:
    each `name` there, less a `[]` or `.part` suffix (`culprits[]`, `endpoints.good`)."""
    lines = SCHEMA_DOC.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    names: set[str] = set()
    rows = 0
    for line in lines[start + 1:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        rows += 1
        cell = line.split("|")[1].strip()
        if cell == "field" or set(cell) <= {"-"}:
            continue
        names |= {re.sub(r"(\[\]|\.\w+)$", "", name) for name in re.findall(r"`([^`]+)`", cell)}
    assert names, f"no table after {heading!r} in {SCHEMA_DOC.name}"
    return names


def defined_fields(definition) -> set[str]:
    return {key for key, _ in json_fields(definition)}


HEADER = "## Header (every report)"


@pytest.mark.parametrize("kind, definition, heading", [
    ("commits", CommitReport, '## `kind: "commits"`'),
    ("hunks", HunkReport, '## `kind: "hunks"`'),
    ("nightly", NightlyReport, '## `kind: "nightly"`'),
])
def test_each_kinds_documented_top_level_keys_are_its_definitions(kind, definition, heading):
    documented = documented_fields(HEADER) | documented_fields(heading)
    defined = set(report_header(kind, "tok/s")) | defined_fields(definition)
    assert documented - defined == set(), f"{SCHEMA_DOC.name} documents keys a {kind} report does not have"
    assert defined - documented == set(), f"a {kind} report has keys {SCHEMA_DOC.name} does not document"


@pytest.mark.parametrize("definition, heading", [
    (CommitCulprit, "A culprit:"),
    (HunkCulprit, "A hunk culprit"),
    (DrillReport, "A culprit's `hunks`"),
])
def test_a_culprits_documented_keys_and_a_drills_are_their_definitions(definition, heading):
    assert documented_fields(heading) == defined_fields(definition)


# ------------------------------------------------------------------ types and nesting

REPORTS = Path(__file__).resolve().parent / "reports"
"""Reports the hunts wrote (tests' hunts, environment and paths scrubbed): one or more per kind."""
KINDS = {"commits": CommitReport, "hunks": HunkReport, "nightly": NightlyReport}


def mismatches(value: Any, annotation: Any, where: str) -> list[str]:
    """Where `value` (JSON) is not of `annotation` (a report dataclass's field type), recursively:
    a part is an object with its fields' keys (an ABSENT-able one may be missing), a list holds
    its items' type, an enum or a Literal one of its values. A float may be null (NaN is written
    null: docs/report-schema.md)."""
    if annotation is Any:
        return []
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not Absent]
        found = [mismatches(value, a, where) for a in options]
        return [] if any(not f for f in found) else min(found, key=len)
    if annotation is type(None) or annotation is None:
        return [] if value is None else [f"{where}: {value!r:.60} is not null"]
    if dataclasses.is_dataclass(annotation):
        if not isinstance(value, dict):
            return [f"{where}: {value!r:.60} is not an object ({annotation.__name__})"]
        keys = dict(json_fields(annotation))
        out = [f"{where}.{k}: not a field of {annotation.__name__}" for k in value if k not in keys]
        for key, hint in keys.items():
            if key in value:
                out += mismatches(value[key], hint, f"{where}.{key}")
            elif Absent not in typing.get_args(hint):
                out.append(f"{where}.{key}: missing ({annotation.__name__})")
        return out
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return [] if value in {m.value for m in annotation} else [f"{where}: {value!r} not one of {annotation.__name__}"]
    if origin is typing.Literal:
        return [] if value in args else [f"{where}: {value!r} not one of {args}"]
    if origin is list or annotation is list:
        if not isinstance(value, list):
            return [f"{where}: {value!r:.60} is not a list"]
        return [m for i, v in enumerate(value) for m in mismatches(v, args[0] if args else Any, f"{where}[{i}]")]
    if origin is dict or annotation is dict:
        if not isinstance(value, dict):
            return [f"{where}: {value!r:.60} is not an object"]
        return [m for k, v in value.items() for m in mismatches(v, args[1] if args else Any, f"{where}.{k}")]
    if annotation is float:
        ok = value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))
    elif annotation is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, annotation)
    return [] if ok else [f"{where}: {value!r:.60} is not {annotation.__name__}"]


def saved_reports():
    return sorted(REPORTS.glob("*.json"))


def test_a_saved_report_of_each_kind_is_there():
    assert {json.loads(p.read_text())["kind"] for p in saved_reports()} == set(KINDS)


@pytest.mark.parametrize("path", saved_reports(), ids=lambda p: p.stem)
def test_a_saved_reports_types_and_nesting_are_its_definitions(path):
    report = json.loads(path.read_text())
    definition = KINDS[report["kind"]]
    header = report_header(report["kind"], report["unit"])
    assert list(report)[:len(header)] == list(header), "the header comes first"
    body = {k: v for k, v in report.items() if k not in header}
    assert list(body) == [key for key, _ in json_fields(definition) if key != "unit"], "keys in the written order"
    assert mismatches({**body, "unit": report["unit"]}, definition, report["kind"]) == []
    for number, hunt in enumerate(report.get("hunts") or ()):    # a night's hunts are commit reports
        hunt = {k: v for k, v in hunt.items() if k not in header and k != "first_reported"}
        assert mismatches({**hunt, "unit": report["unit"]}, CommitReport, f"hunts[{number}]") == []


def test_the_checker_sees_a_wrong_type_a_missing_key_and_an_unknown_one():
    report = json.loads((REPORTS / "commits-undecided.json").read_text())
    body = {k: v for k, v in report.items() if k not in ("schema", "kind", "tool_version", "tool_commit")}
    body["endpoints"]["good"]["n"] = "5"
    del body["established"]["bracket"]
    body["sides"] = [{"from": "a", "to": "b", "outcome": "gone", "ruled_out_pct": 1.0, "priced": False, "x": 1}]
    found = mismatches(body, CommitReport, "commits")
    assert found == ["commits.endpoints.good.n: '5' is not int", "commits.established.bracket: missing (Established)",
                     "commits.sides[0].x: not a field of Side", "commits.sides[0].outcome: 'gone' not one of SideOutcome"]
