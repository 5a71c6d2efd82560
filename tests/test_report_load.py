"""render/report_load.py: a JSON report read back into its typed report, old schemas migrated."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from regressbisect.errors import UserError
from regressbisect.jsonio import strict_json
from regressbisect.render.report_hunks import HunkReport
from regressbisect.render.report_json import SCHEMA, CommitCulprit, CommitReport, NightlyReport
from regressbisect.render.report_load import UPDATES, load_report, migrate
from regressbisect.render.report_parts import ABSENT, Candidate, Endpoints, Summary
from regressbisect.search.verdicts import CandidateCall, Verdict

REPO = Path(__file__).resolve().parents[1]
SAVED = sorted((REPO / "tests" / "reports").glob("*.json"))
STORED = [p for p in sorted((REPO / "docs").rglob("*.json"))
          if isinstance(doc := json.loads(p.read_text()), dict) and doc.get("kind") in ("commits", "hunks", "nightly")]


@pytest.mark.parametrize("path", SAVED, ids=lambda p: p.stem)
def test_a_report_of_todays_schema_loads_and_writes_back_the_same_json(path):
    report = json.loads(path.read_text())
    written = strict_json(load_report(report).to_json())
    for header in ("tool_version", "tool_commit"):    # the header names the code that writes it: this one
        written[header] = report[header]
    assert json.dumps(written) == json.dumps(report)    # the same keys, in the same order, the same values


def test_there_is_one_migration_per_schema_since_the_first():
    assert sorted(UPDATES) == list(range(2, SCHEMA + 1))


@pytest.mark.parametrize("path", STORED, ids=lambda p: p.stem)
def test_every_stored_report_of_an_older_schema_loads_typed(path):
    report = load_report(json.loads(path.read_text()))
    assert isinstance(report, (CommitReport, HunkReport, NightlyReport))
    if isinstance(report, CommitReport):
        assert isinstance(report.endpoints, Endpoints) and isinstance(report.endpoints.good, Summary)
        assert all(isinstance(c, Candidate) and isinstance(c.verdict, CandidateCall) for c in report.candidates)
        assert all(isinstance(c, CommitCulprit) for c in report.culprits)


def test_a_schema_1_none_is_read_as_not_localised_and_a_nightlys_none_stays():
    old = {"schema": 1, "kind": "commits", "verdict": "none", "culprits": []}
    assert load_report(old).verdict == Verdict.NOT_LOCALISED
    assert old["verdict"] == "none"     # the document read is not changed
    assert load_report({"schema": 1, "kind": "nightly", "verdict": "none"}).verdict == "none"
    assert migrate(old)["schema"] == SCHEMA


def test_a_field_a_report_lacks_is_there_empty():
    report = load_report({"kind": "commits", "verdict": "culprits", "culprits": [{"commit": "a" * 40}]})
    culprit = report.culprits[0]
    assert culprit.commit == "a" * 40 and math.isnan(culprit.step_pct) and culprit.merge is None
    assert culprit.hunks is ABSENT and culprit.counters_before == {} and culprit.possible_commits is ABSENT
    assert report.endpoints == Endpoints(good=None, bad=None) and report.established is None
    assert report.facts.probes == 0 and report.facts.isolation is None and report.sides == []


def test_a_word_no_member_of_its_enum_has_fails_loudly_naming_the_words():
    """Read as a plain string an unknown verdict would equal no member and be taken for none of
    them (a culprits report read as not having culprits): loading it is an error instead."""
    with pytest.raises(UserError, match="Verdict is 'culprit', which is none of: culprits, not-reproduced, "):
        load_report({"kind": "commits", "verdict": "culprit", "culprits": []})
    saved = json.loads((REPO / "tests" / "reports" / "commits-undecided.json").read_text())
    saved["candidates"][0]["verdict"] = "fine"
    with pytest.raises(UserError, match="CandidateCall is 'fine', which is none of: good, bad, level, skip, unsure"):
        load_report(saved)
    saved["candidates"][0]["verdict"] = "good"
    assert load_report(saved).candidates[0].verdict is CandidateCall.GOOD
