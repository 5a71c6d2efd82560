"""The JSON report of a hunk hunt (`regressbisect hunks`; docs/report-schema.md, `kind: "hunks"`)
and a culprit commit's `hunks` in a `run --drill` report: built from the hunt's decision
(search/hunkdecide.py) and its hunks, once, never patched afterwards."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Sequence

from regressbisect.git.hunks import Hunk
from regressbisect.render.report_json import NOT_MEASURED_REASON, Report
from regressbisect.render.report_parts import (AloneTest, Candidate, DrillReport, DrillVerdict, Endpoints, HuntFacts, HunkCulprit,
                                               HunkEntry, HunkGroup, HunksEstablished, Instrumentation, NotMeasuredHunk,
                                               Spread, Summary, flat, hunt_facts)
from regressbisect.render.work import culprit_work, split_counts
from regressbisect.search.ddmin import SubsetVerdict
from regressbisect.search.hunkdecide import HunkDecision, TestedSubset
from regressbisect.search.verdicts import Verdict


@dataclass(frozen=True)
class HuntedHunks:
    """The hunks a hunk hunt searched and what they are compared against: what every view of its
    answer names them by."""

    hunks: Sequence[Hunk]
    """In the diff's order."""
    base: str
    commit: str | None
    """`hunks --commit REV` and a drill: REV (BASE is its first parent); None for the work tree."""
    paths: Sequence[str] = ()
    """`hunks -- PATHS`: the pathspecs the searched hunks are under; () without them."""
    not_measured: Sequence[Hunk] = ()
    """With PATHS, the hunks touching none of them: in every candidate, never searched."""

    @property
    def by_id(self) -> dict[str, Hunk]:
        return {h.id: h for h in self.hunks}

    @property
    def whose(self) -> str:
        return f"{self.commit[:10]}'s" if self.commit else "uncommitted"

    def group(self, tested: TestedSubset) -> HunkGroup:
        """A named hunk group: its hunks (file, lines, function, excerpt), its step alone against
        BASE with the 95% interval (valid at the stop of the test that named it:
        `TestedSubset.reported_ci95`), its share of the gap, how each of its hunks joined it."""
        by_id = self.by_id
        hunks = sorted((by_id[i] for i in tested.hunks), key=list(self.hunks).index)
        lo, hi = tested.reported_ci95
        how = tested.how_joined()
        alone = AloneTest(change_pct=round(100 * tested.change, 3),
                          ci95_pct=[round(100 * lo, 3), round(100 * hi, 3)],
                          pairs=tested.pairs, verdict=tested.verdict)
        return HunkGroup(
            commit=self.commit or self.base, parent=self.base,
            subject=f"{len(hunks)} {self.whose} hunk(s) in {', '.join(sorted({h.file for h in hunks}))}",
            cluster=len(hunks) > 1,
            hunks=[hunk_entry(h) for h in hunks],
            step_pct=alone.change_pct, ci95_pct=alone.ci95_pct,
            share_of_gap=round(tested.share_of_gap, 4) if math.isfinite(tested.share_of_gap) else None,
            alone=alone,
            joined={h.id: how[h.id].value for h in hunks})

    def established(self, decision: HunkDecision, prefixes: Sequence[frozenset]) -> HunksEstablished | None:
        """An undecided hunt's `established`: the hunks the prefix search put its step(s) on,
        when it got that far (its named steps, else the leading step of a bracket it gave up),
        and their files; None when it had none. `prefixes`: the prefix search's candidates."""
        prefix = decision.prefix
        if prefix is None or not prefixes:
            return None
        steps = [(c.last_good, c.first_bad) for c in prefix.culprits + prefix.ambiguous]
        lead = prefix.established
        if not steps and lead is not None:
            steps = [(lead.last_good, lead.first_bad)]
        if not steps:
            return None
        by_id = self.by_id
        hunks = sorted(set().union(*(prefixes[b] - prefixes[a] for a, b in steps)))
        files = sorted({by_id[h].file for h in hunks if h in by_id})
        odds = (f", p={lead.mass:.2f}" if lead is not None and not prefix.culprits and math.isfinite(lead.mass)
                else "")
        if len(hunks) == 1 and hunks[0] in by_id:
            one = by_id[hunks[0]]
            text = f"the slowdown is at the hunk {one.file}:{one.lines[0]} (prefix search{odds}), not yet confirmed"
        else:
            text = (f"the slowdown is in {len(hunks)} hunks of {', '.join(files)} (prefix search{odds}); "
                    "not yet narrowed to hunks")
        return HunksEstablished(hunks=hunks, files=files, probability=round(lead.mass, 4) if odds else None,
                                text=text)


    def spread(self, decision: HunkDecision) -> Spread | None:
        """`spread`: the hunks the slowdown, or what the culprits leave of it, is spread over (a
        prefix search reproduced it and refuted every single step it proposed), in the diff's
        order, and the note ('spread over 10 hunks, none alone >= 2%'); None otherwise."""
        if not decision.spread_over:
            return None
        order = [h.id for h in self.hunks]
        hunks = sorted(decision.spread_over, key=lambda i: order.index(i) if i in order else len(order))
        return Spread(hunks=hunks, text=decision.spread_note)


def hunk_entry(hunk: Hunk) -> HunkEntry:
    return HunkEntry(**_hunk_fields(hunk))


def _hunk_fields(hunk: Hunk) -> dict[str, Any]:
    return {"id": hunk.id, "file": hunk.file, "lines": list(hunk.lines), "function": hunk.function,
            "kind": hunk.kind, "excerpt": hunk.excerpt}


def not_measured_hunks(hunted: HuntedHunks) -> list[NotMeasuredHunk]:
    """A hunk report's `not_measured`: the hunks outside PATHS, each with the reason (the commit
    report's); each was in every candidate, BASE's side included."""
    return [NotMeasuredHunk(**_hunk_fields(h), reason=NOT_MEASURED_REASON) for h in hunted.not_measured]


@dataclass(frozen=True)
class HunkReport(Report):
    """The report of `regressbisect hunks` (docs/report-schema.md, `kind: "hunks"`)."""

    KIND: ClassVar[str] = "hunks"
    JSON_ORDER: ClassVar[tuple[str, ...]] = (
        "good", "bad", "base", "commit", "verdict", "verdict_reason", "exit_code", "reproduced", "endpoints",
        "gap_pct", "hunk_count", "files", "culprits", "suspects", "undecided_subsets", "established",
        "hunks_in_fast_subsets", "unexplained_share", "unexplained_share_ci95", "spread", "interactions",
        "unresolved_subsets", "subsets_tested", "search_complete", "candidates", "paths", "not_measured", "probes",
        "cached_samples", "from_store_only", "instrumentation_overhead_pct", "isolation", "instrumentation",
        "hunt_id", "environment", "measurement", "cost", "continue_command")
    """The order of its JSON keys (HuntFacts' among its own), as every report of this kind was written."""
    good: str
    bad: str
    base: str
    commit: str | None
    verdict: Verdict
    verdict_reason: str
    exit_code: int
    reproduced: bool
    endpoints: Endpoints
    gap_pct: float | None
    hunk_count: int
    files: list[str]
    culprits: list[HunkCulprit]
    suspects: list[HunkCulprit]
    undecided_subsets: int
    established: HunksEstablished | None
    hunks_in_fast_subsets: list[str]
    unexplained_share: float | None
    unexplained_share_ci95: list[float] | None
    spread: Spread | None
    interactions: list[list[str]]
    unresolved_subsets: int
    subsets_tested: int
    search_complete: bool
    candidates: list[Candidate]
    """Always empty: subsets are not listed."""
    paths: list[str]
    not_measured: list[NotMeasuredHunk]
    facts: HuntFacts = flat()


def hunk_report(hunted: HuntedHunks, decision: HunkDecision, *, prefixes: Sequence[frozenset],
                counters: Mapping[str, Mapping[str, float]], unit: str, instrument: str, exit_code: int,
                probes: int, cached: int, isolation, hunt_id: int, env_facts: Mapping[str, Any],
                measurement: dict[str, Any], cost: dict[str, Any], continue_command: str | None) -> HunkReport:
    """The report of a hunk hunt from its decision; `counters`: the counting arm's counts per
    subset (',' joined hunk ids, '' for BASE)."""
    control, result = decision.control, decision.search
    good, bad = control.endpoints
    endpoints = Endpoints(*(None if not s.n else Summary(median_tok_s=s.median, ci95=list(s.ci95), n=s.n)
                            for s in (good, bad)))

    def entry(tested: TestedSubset) -> HunkCulprit:
        after = counters.get(",".join(sorted(tested.hunks)))
        return HunkCulprit(**vars(hunted.group(tested)), left_out=None,
                           counters_before=split_counts(counters.get(""))[0],
                           counters_after=split_counts(after)[0],
                           work=culprit_work(counters.get(""), after, round(100 * tested.change, 3), unit))

    culprits = [entry(c) for c in decision.culprits]
    shares = [c.share_of_gap for c in culprits if c.share_of_gap is not None]
    return HunkReport(
        unit=unit,
        good=hunted.base, bad=hunted.commit or "work-tree", base=hunted.base, commit=hunted.commit,
        verdict=decision.verdict,
        verdict_reason=decision.reason,
        exit_code=exit_code,
        reproduced=decision.control.verdict == Verdict.REPRODUCED,
        endpoints=endpoints,
        gap_pct=round(100 * control.gap, 3) if math.isfinite(control.gap) else None,
        hunk_count=len(hunted.hunks),
        files=sorted({h.file for h in hunted.hunks}),
        culprits=culprits,
        suspects=[entry(c) for c in decision.suspects],
        undecided_subsets=decision.undecided_subsets,
        established=hunted.established(decision, prefixes) if decision.verdict == Verdict.UNDECIDED else None,
        # hunks of prefixes at BASE's level and of subsets measured 'good': what the search ruled out
        hunks_in_fast_subsets=sorted(decision.ruled_out
                                     | {i for s, v in (result.verdicts if result else ()) if v == SubsetVerdict.GOOD for i in s}),
        unexplained_share=round(1 - sum(shares), 4) if shares else None,
        unexplained_share_ci95=[round(x, 4) for x in decision.unexplained_ci95] if shares else None,
        spread=hunted.spread(decision),
        interactions=[sorted(s) for s in (result.interactions if result else ())],
        unresolved_subsets=len(decision.did_not_run | set(result.unresolved if result else ())),
        subsets_tested=result.tests if result else 0,
        search_complete=result.complete if result else True,
        candidates=[],
        paths=list(hunted.paths),
        not_measured=not_measured_hunks(hunted),
        facts=hunt_facts(
            probes=probes, builds=None, cached=cached,
            instrumentation=Instrumentation(mode=instrument,
                                            note=f"counters from separate shimmed runs; {unit} from unshimmed runs"),
            overhead=None, isolation=isolation, hunt_id=hunt_id, env_facts=env_facts, measurement=measurement,
            cost=cost, continue_command=continue_command))


def drill_report(hunted: HuntedHunks, decision: HunkDecision | None, *, probes: int = 0,
                 cached: int = 0, max_probes: int | None = None) -> DrillReport:
    """The drill of a culprit commit's hunks; `decision` None: its diff is one hunk, which the
    commit names already (no hunt). A commit with no hunks at all is DrillReport('no-hunks', why).
    max_probes: the drill's probe cap."""
    if decision is None:
        return DrillReport(verdict=DrillVerdict.ONE_HUNK, reason="its diff is one hunk: the commit names it",
                           base=hunted.base, hunk_count=len(hunted.hunks), culprits=[], suspects=[],
                           hunks=[hunk_entry(h) for h in hunted.hunks], probes=0, cached_samples=0)
    culprits = [hunted.group(c) for c in decision.culprits]
    shares = [c.share_of_gap for c in culprits if c.share_of_gap is not None]
    return DrillReport(verdict=DrillVerdict(decision.verdict), reason=decision.reason, base=hunted.base,
                       hunk_count=len(hunted.hunks),
                       culprits=culprits,
                       suspects=[hunted.group(c) for c in decision.suspects],
                       unexplained_share=round(1 - sum(shares), 4) if shares else None,
                       unexplained_share_ci95=([round(x, 4) for x in decision.unexplained_ci95]
                                               if decision.culprits else None),
                       spread=hunted.spread(decision),
                       probes=probes, cached_samples=cached, max_probes=max_probes)
