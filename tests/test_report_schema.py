"""docs/report-schema.md against the reports' definitions (render/report_json.py,
render/report_hunks.py): every top-level key of each kind, and every key of a culprit, is in its
table, and every key a table names is in the definition."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from regressbisect.render.report_hunks import DrillReport, HunkCulprit, HunkReport
from regressbisect.render.report_json import CommitCulprit, CommitReport, NightlyReport, report_header

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
    return {f.name for f in dataclasses.fields(definition)}


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
