"""A JSON report read back into its typed report (`load_report`): what `regressbisect report`, the
renderers and the nightly's report files read.

An old report is migrated once, on load, one schema at a time (`update_to_2`, `update_to_3`, as
asv's `update_to_N`); then each part is built from its JSON object by its dataclass's field types
(`report_parts.from_json`: a field a report lacks takes its empty value). The renderers then read
fields, never a `.get` chain.
"""
from __future__ import annotations

from typing import Any, Mapping

from regressbisect.render.report_hunks import HunkReport
from regressbisect.render.report_json import SCHEMA, CommitReport, NightlyReport, Report
from regressbisect.render.report_parts import from_json
from regressbisect.search.verdicts import Verdict

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
        report["verdict"] = Verdict.NOT_LOCALISED.value
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
