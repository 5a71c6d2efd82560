"""What a report says, as display-ready strings: shared by the text, Markdown and HTML renderers so
that all three tell the same story. Reads the typed report (render/report_load.load_report: an old
schema is migrated on load, a field a report lacks is there, empty). The parts still kept as JSON
objects (`settings`, `cost`, `measurement`, a night's `machine`, a culprit's `work`) are read as
such.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from regressbisect.config import Direction
from regressbisect.metric import DEFAULT_UNIT  # also the unit of reports that name none
from regressbisect.render import work as work_table
from regressbisect.render.report_hunks import HunkReport
from regressbisect.render.report_json import CommitCulprit, CommitReport, NightlyReport
from regressbisect.render.report_load import TypedReport
from regressbisect.render.report_parts import (Candidate, ChangePoint, Cost, DrillReport, Measurement, Overlap, Preload, Established, HunkCulprit, HunkEntry,
                                               HunkGroup, Merge)
from regressbisect.search.sides import SideOutcome
from regressbisect.search.verdicts import Verdict

_HUNTED_CHANGE: dict[Direction, str] = {Direction.SLOWER: "slowdown", Direction.FASTER: "speed-up"}
"""What a hunt looking for that direction (`settings.direction`) calls a step; 'step' for 'both'."""


@dataclass(frozen=True)
class CulpritFacts:
    """One culprit, formatted."""

    title: str
    """'abc1234567 subject' (commits) or 'uncommitted hunk(s) in a.py' (hunks)."""
    step: str
    """'-5.1% tok/s (95% CI -6.0% .. -4.2%)', in the report's unit."""
    share: str | None
    """'62% of the gap', when known."""
    counters: tuple[str, ...]
    """Counters that moved, 'lm head calls/iter 8 -> 10'."""
    hunks: tuple[ShownHunk, ...]
    """The culprit's hunks (file, lines, function, excerpt); empty for a commit."""
    possible_commits: tuple[str, ...]
    """Short shas the culprit may be any of (skipped commits in between)."""
    merge: tuple[str, ...] = ()
    """For a merge: that it is one, the hunt of the branch it merged, and what that hunt's answer
    means (report_json.merge_part); empty for a commit with one parent."""
    work_reading: str | None = None
    """The counts against throughput, one line (render/work.py); None without the counting arm."""
    work_headers: tuple[str, ...] = ()
    work_rows: tuple[tuple[str, ...], ...] = ()
    """The small table of the work per step before and after, biggest changes first."""
    drill: str | None = None
    """`run --drill`: '1 of its 32 hunks named' (`hunks` then lists them), or why none was."""
    drill_groups: tuple[DrillGroup, ...] = ()
    """`run --drill`: each hunk group it named, with its own step."""
    drill_remainder: str | None = None
    """`run --drill` that named hunks: the share of the commit's step they leave, with its interval
    (and the hunks the rest is spread over, when a prefix search found it spread)."""
    drill_suspects: tuple[DrillGroup, ...] = ()
    """`run --drill`: the groups it proposed and did not name, and why."""


@dataclass(frozen=True)
class ShownHunk:
    """A hunk as shown: the hunk, and how it joined a group of several ('' otherwise)."""

    hunk: HunkEntry
    joined: str = ""


@dataclass(frozen=True)
class DrillGroup:
    """A hunk group of a drill, formatted."""

    step: str
    """'-2.0% tok/s (95% CI -3.9% .. -0.2%), 15% of the commit's step'."""
    hunks: tuple[ShownHunk, ...]
    why: str | None = None
    """A suspect: why it was not named."""

    @property
    def line(self) -> str:
        """'hunk a.py:3-4 in f: -2.0% tok/s (...)' for one hunk, 'hunks together: ...' for more."""
        head = f"hunk {hunk_location(self.hunks[0])}" if len(self.hunks) == 1 else f"{len(self.hunks)} hunks together"
        return f"{head}: {self.step}" + (f" ({self.why})" if self.why else "")


def drill_lines(c: CulpritFacts) -> list[str]:
    """A drill under its commit culprit, as plain lines: what it named (each group's own step, and
    each hunk of a group of several), the share of the commit's step the named hunks leave, and what
    it suspected without naming."""
    lines = [c.drill] if c.drill else []
    for group in c.drill_groups:
        lines.append(group.line)
        if len(group.hunks) > 1:
            lines += [f"  hunk {hunk_location(h)}{joined_note(h)}" for h in group.hunks]
    if c.drill_remainder:
        lines.append(c.drill_remainder)
    for group in c.drill_suspects:
        lines.append(f"drill suspect: {group.line}")
        if len(group.hunks) > 1:
            lines += [f"  hunk {hunk_location(h)}{joined_note(h)}" for h in group.hunks]
    return lines


def unit(report: TypedReport) -> str:
    """The metric's unit ('tok/s', 'req/s', ...): the JSON fields keep their tok_s names."""
    return report.unit or DEFAULT_UNIT


def candidate_headers(report: TypedReport) -> tuple[str, ...]:
    return ("commit", "subject", "n", f"median {unit(report)}", "95% CI", "verdict", "cached")


def series_headers(report: NightlyReport) -> tuple[str, ...]:
    return ("#", "commit", "date", "subject", "n", f"median {unit(report)}", "95% CI", "note")


def short(sha: Any) -> str:
    return str(sha)[:10] if sha else "?"


def local_time(moment: Any) -> str:
    """A moment (unix seconds, or a datetime with its zone) as this machine's local time to the
    minute: '2026-12-01 23:40'; '-' when unknown."""
    import datetime

    try:
        seconds = moment.timestamp() if hasattr(moment, "timestamp") else float(moment)
    except (TypeError, ValueError):
        return "-"
    if not _finite(seconds):
        return "-"
    return datetime.datetime.fromtimestamp(seconds).strftime("%Y-%m-%d %H:%M")


def number(value: Any, digits: int = 4) -> str:
    """A metric value with `digits` significant digits, '-' when missing."""
    if not _finite(value):
        return "-"
    return f"{value:.{digits}g}" if abs(value) < 10 ** digits else f"{value:,.0f}"


def interval(ci: Any) -> str:
    if not ci or len(ci) != 2 or not all(_finite(v) for v in ci):
        return "-"
    return f"{number(ci[0])} .. {number(ci[1])}"


def pct(value: Any, signed: bool = True) -> str:
    """A value already in percent: -5.123 -> '-5.1%'."""
    if not _finite(value):
        return "?"
    return f"{value:+.1f}%" if signed else f"{value:.1f}%"


def step_text(step_pct: Any, ci95_pct: Any, unit_text: str = DEFAULT_UNIT) -> str:
    text = f"{pct(step_pct)} {unit_text}"
    if ci95_pct and len(ci95_pct) == 2 and all(_finite(v) for v in ci95_pct):
        text += f" (95% CI {pct(ci95_pct[0])} .. {pct(ci95_pct[1])})"
    return text


def is_hunk_group(culprit: CommitCulprit | HunkGroup) -> bool:
    """A hunk report's culprit (with its hunks), not a commit culprit."""
    return isinstance(culprit, HunkGroup) and bool(culprit.hunks)


def drill_of(culprit: CommitCulprit | HunkGroup) -> DrillReport | None:
    """A commit culprit's --drill (None: not drilled, or a hunk group)."""
    return culprit.hunks if isinstance(culprit, CommitCulprit) and isinstance(culprit.hunks, DrillReport) else None


def drill_text(drill: DrillReport | None) -> str | None:
    """A commit culprit's --drill in a few words (with why it stopped, when a cap stopped it)."""
    if drill is None:
        return None
    named = sum(len(c.hunks) for c in drill.culprits or ())
    if named:
        return f"{named} of its {drill.hunk_count} hunks named (drill)" + (f": {drill.reason}" if drill.reason else "")
    return f"no hunk of its {drill.hunk_count} named (drill): {drill.reason or drill.verdict}"


_SUSPECT_WHY = {Verdict.UNDECIDED: "not named: its test ran out of pairs",
                Verdict.NOT_REPRODUCED: "not named: it did not reproduce the slowdown on fresh pairs",
                Verdict.REPRODUCED: "not named: whether it needs each of its hunks stayed open, or the shares did not add up"}


def drill_group(group: HunkGroup, unit_text: str, suspect: bool = False) -> DrillGroup:
    """A named (or suspected) hunk group of a drill: its own step, its share of the commit's step."""
    step = step_text(group.step_pct, group.ci95_pct, unit_text)
    if _finite(group.share_of_gap):
        step += f", {group.share_of_gap:.0%} of the commit's step"
    verdict = str(group.alone.verdict or "")
    why = _SUSPECT_WHY.get(verdict, f"not named: {verdict}" if verdict else "not named") if suspect else None
    return DrillGroup(step=step, hunks=with_joined(group) or (NO_HUNK,), why=why)


def drill_remainder_text(drill: DrillReport) -> str | None:
    """'drill remainder: 60% of the commit's step (95% CI 44% .. 69%) not in its named hunks', and
    what the rest is spread over; None where no hunk was named (the reason says why)."""
    share = drill.unexplained_share
    if not drill.culprits or not _finite(share):
        return None
    text = f"drill remainder: {share:.0%} of the commit's step not in its named hunks"
    interval = drill.unexplained_share_ci95 or ()
    if len(interval) == 2 and all(_finite(x) for x in interval):
        text += f" (95% CI {interval[0]:.0%} .. {interval[1]:.0%}" + (
            ", which includes none)" if interval[0] <= 0 <= interval[1] else ")")
    if drill.spread and drill.spread.text:
        text += f"; the rest is {drill.spread.text}"
    return text


def culprit_facts(culprit: CommitCulprit | HunkGroup, unit_text: str = DEFAULT_UNIT) -> CulpritFacts:
    drill = drill_of(culprit)
    hunks = (tuple(ShownHunk(h) for c in drill.culprits or () for h in c.hunks) if drill is not None
             else with_joined(culprit) if isinstance(culprit, HunkGroup) else ())
    title = culprit.subject if is_hunk_group(culprit) else f"{short(culprit.commit)} {culprit.subject}".strip()
    share = culprit.share_of_gap
    commit = isinstance(culprit, CommitCulprit)
    return CulpritFacts(
        title=title,
        step=step_text(culprit.step_pct, culprit.ci95_pct, unit_text),
        share=f"{share:.0%} of the gap" if _finite(share) else None,
        counters=tuple(counter_changes(*_counters_shown(culprit))),
        hunks=hunks,
        possible_commits=tuple(short(s) for s in culprit.possible_commits or ()) if commit else (),
        merge=merge_text(culprit.merge) if commit else (),
        **work_facts(getattr(culprit, "work", None)),
        drill=drill_text(drill),
        drill_groups=tuple(drill_group(g, unit_text) for g in (drill.culprits or () if drill else ())),
        drill_remainder=drill_remainder_text(drill) if drill is not None else None,
        drill_suspects=tuple(drill_group(g, unit_text, suspect=True) for g in (drill.suspects or () if drill else ())),
    )


def _counters_shown(culprit: CommitCulprit | HunkGroup) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """Counters before and after; with the work per step, without host ms: those were taken under
    the counting arm's instrumentation and are shown as its share (the work table) instead."""
    if not isinstance(culprit, (CommitCulprit, HunkCulprit)):    # a drill's group: no counters
        return {}, {}
    before, after = culprit.counters_before, culprit.counters_after
    if not culprit.work:
        return before, after
    return ({k: v for k, v in before.items() if not k.endswith("_ms")},
            {k: v for k, v in after.items() if not k.endswith("_ms")})


def work_facts(work: Any) -> dict[str, Any]:
    """CulpritFacts' work fields from `culprits[].work` (none for an old report, or without it)."""
    if not isinstance(work, Mapping) or not work.get("before") or not work.get("after"):
        return {}
    return {"work_reading": work.get("reading") or None,
            "work_headers": work_table.table_headers(work),
            "work_rows": tuple(tuple(row) for row in work_table.table_rows(work))}


def merge_text(merge: Merge | None) -> tuple[str, ...]:
    """Lines saying the culprit is a merge, with the follow-up hunt(s) of the merged branch(es)."""
    if merge is None or not merge.follow_up:
        return ()
    parents = merge.parents or [None]
    return (f"is a merge of {', '.join(short(p) for p in parents[1:])} into {short(parents[0])}: the search "
            f"follows first parents, so the merge is one step",
            *(f"its branch's own commits, with this hunt's options: {command}" for command in merge.follow_up),
            "if that does not reproduce the step, the branch is slow only together with what the first "
            "parent brought, and the merge is the answer")


def counter_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """Counters that moved, per iteration: 'create_block_mask calls/iter 1 -> 2',
    'create_block_mask host ms/iter 12.0 -> 50.0 (+38.0)'. Unchanged counters are left out: they
    explain nothing (but the counters plot shows them when nothing moved)."""
    lines = []
    for name in sorted(set(before) & set(after)):
        a, b = before[name], after[name]
        if not (_finite(a) and _finite(b)) or abs(b - a) < 1e-9:
            continue
        if name.endswith("_ms"):
            lines.append(f"{name[:-3]} host ms/iter {a:.1f} -> {b:.1f} ({b - a:+.1f})")
        elif name.endswith("_calls"):
            lines.append(f"{name[:-6]} calls/iter {a:g} -> {b:g}")
        else:
            lines.append(f"{name}/iter {a:g} -> {b:g}")
    return lines


def with_joined(group: HunkGroup) -> tuple[ShownHunk, ...]:
    """A hunk group's hunks, each of a group of several with how it joined the group (its
    `joined`, for `joined_note`)."""
    if len(group.hunks) < 2:
        return tuple(ShownHunk(h) for h in group.hunks)
    return tuple(ShownHunk(h, group.joined.get(h.id, "")) for h in group.hunks)


NO_HUNK = ShownHunk(HunkEntry(id="", file="?", lines=[], function=None, kind="", excerpt=""))
"""What a group that names no hunk shows."""


def joined_note(hunk: ShownHunk) -> str:
    """' (needed to run)': how a hunk of a group of several joined it; '' where unknown."""
    return f" ({hunk.joined})" if hunk.joined else ""


def hunk_location(hunk: HunkEntry | ShownHunk) -> str:
    """'src/model.py:120-134 in forward'; a submodule's move as its excerpt says it ('the
    submodule vendor/lib moved 1a2b3c4d5e..6f7a8b9c0d': it has no lines)."""
    if isinstance(hunk, ShownHunk):
        hunk = hunk.hunk
    if hunk.kind == "submodule" and hunk.excerpt:
        return str(hunk.excerpt)
    where = hunk.file
    if len(hunk.lines) == 2:
        where += f":{hunk.lines[0]}-{hunk.lines[1]}"
    if hunk.function:
        where += f" in {hunk.function}"
    return where


def has_endpoints(report: CommitReport | HunkReport) -> bool:
    return report.endpoints.good is not None or report.endpoints.bad is not None


def endpoint_text(report: CommitReport | HunkReport) -> str:
    """'good abc123 1234 tok/s (1200 .. 1250, n=5) -> bad def456 1150 tok/s (...)'."""
    unit_text = unit(report)
    parts = []
    for side, end, summary in (("good", report.good, report.endpoints.good), ("bad", report.bad, report.endpoints.bad)):
        median = summary.median_tok_s if summary else None
        parts.append(f"{side} {short(end)} {number(median)} {unit_text}"
                     + (f" ({interval(summary.ci95)}, n={summary.n})" if summary and summary.n else ""))
    return " -> ".join(parts)


def verdict_line(report: CommitReport | HunkReport) -> str:
    """The one-sentence answer of a commits or hunks report."""
    verdict = report.verdict
    culprits = report.culprits
    gap = report.gap_pct
    gap_text = f" ({unit(report)} {pct(gap)} from good to bad)" if _finite(gap) else ""
    what = "hunk group" if isinstance(report, HunkReport) else "commit"
    if verdict == Verdict.CULPRITS:
        return f"{len(culprits)} culprit {what}(s) found{gap_text}."
    reason = report.verdict_reason
    because = f" ({reason})" if reason else ""
    if verdict == Verdict.NOT_LOCALISED:   # a schema-1 report's 'none' too (report_load.update_to_2)
        return f"The slowdown reproduced{gap_text}, but no single {what} step explains it{because}."
    if verdict == Verdict.UNDECIDED:
        return f"Could not decide within the budget{gap_text}: no {what} named{because}."
    if verdict == Verdict.NOT_REPRODUCED:
        return f"No regression reproduced between good and bad{gap_text}: nothing to hunt{because}."
    if verdict == Verdict.AMBIGUOUS:
        return (f"A step was found{gap_text}, but commits inside it could not be measured: no single "
                f"{what} named (it is any of those listed below).")
    if verdict == Verdict.ALL_SKIPPED:
        return "Every candidate was skipped: the regression lies somewhere in the range (see skip reasons)."
    return f"Verdict: {verdict or 'unknown'}{gap_text}."


def established_lines(report: CommitReport | HunkReport) -> list[str]:
    """An undecided hunt: what it had established (the leading step of a commit hunt, or a hunk
    hunt's `text`); the report's `continue_command` follows it, after CONTINUE_LEAD."""
    step = report.established
    if isinstance(step, Established) and step.first_bad:
        p = step.probability
        odds = f", p={p:.2f}" if _finite(p) else ""
        state = "confirmed by its pairs, not named" if step.confirmed_by_pairs else "not yet confirmed"
        before, after = step.before, step.after
        return [f"Established so far: the step is at {short(step.last_good)}..{short(step.first_bad)} "
                f"(#{step.last_good_index}..#{step.first_bad_index}{odds}), {state}: "
                f"{number(before.median_tok_s if before else None)} vs {number(after.median_tok_s if after else None)} "
                f"{unit(report)} (n={before.n if before else None}, {after.n if after else None})."]
    if step is not None and not isinstance(step, Established) and step.text:
        return [f"Established so far: {step.text}."]
    return []


CONTINUE_LEAD = "To go further (the stored samples are reused):"
"""What precedes an undecided hunt's continue command (`continue_command` of the report)."""


def ambiguous_lines(report: CommitReport | HunkReport) -> list[str]:
    """Each ambiguous step: its two measured ends, its size, and every commit it may be, with why
    (the skip reason of each unmeasurable commit between, e.g. its exit code or timeout)."""
    lines = []
    for number, step in enumerate(report.ambiguous_steps if isinstance(report, CommitReport) else (), 1):
        share = step.share_of_gap
        lines.append(f"ambiguous step {number}: after {short(step.last_good)} (last good), "
                     f"by {short(step.first_bad)} (first measured bad); no single commit named")
        lines.append(f"  step {step_text(step.step_pct, step.ci95_pct, unit(report))}"
                     + (f", {share:.0%} of the gap" if _finite(share) else ""))
        lines.append("  could be any of:")
        for commit in step.possible_commits:
            lines.append(f"    {short(commit.commit)} {_clip(commit.subject, 48)}: {commit.why}")
    return lines


def not_measured_line(report: CommitReport | HunkReport) -> str | None:
    """The commits of a hunt limited to PATHS (`run GOOD BAD -- PATHS`) that touch none of them:
    not measured, each with the verdict of the candidate before it, never blamed; of a hunk hunt
    (`hunks -- PATHS`), the hunks outside PATHS, in every candidate and never searched."""
    skipped = report.not_measured
    if not skipped or _footprint_used(report):   # set aside by the footprint: footprint_line
        return None
    paths = " ".join(report.paths)
    if isinstance(report, HunkReport):    # `hunks -- PATHS`: in every candidate, never searched
        shown = "; ".join(hunk_location(h) for h in skipped[:6]) + (" ..." if len(skipped) > 6 else "")
        return (f"{len(skipped)} hunk{'s' if len(skipped) != 1 else ''} not measured (in every candidate): "
                f"{'they touch' if len(skipped) != 1 else 'it touches'} none of PATHS ({paths}): {shown}")
    shown = ", ".join(short(c.commit) for c in skipped[:6]) + (" ..." if len(skipped) > 6 else "")
    return (f"{len(skipped)} commit{'s' if len(skipped) != 1 else ''} not measured: "
            f"{'they touch' if len(skipped) != 1 else 'it touches'} none of PATHS ({paths}): {shown}")


def _footprint_used(report: CommitReport | HunkReport) -> bool:
    return isinstance(report, CommitReport) and report.footprint is not None and report.footprint.used


def footprint_line(report: CommitReport | HunkReport) -> str | None:
    """The commits a hunt set aside because they touch none of what the probe reads (its
    footprint, recorded by the shim), or, where the footprint could not be read (a probe that is
    not Python), that every commit was a candidate and why."""
    footprint = report.footprint if isinstance(report, CommitReport) else None
    if footprint is None:
        return None
    skipped = report.not_measured
    if footprint.used and skipped:
        shown = ", ".join(short(c.commit) for c in skipped[:6]) + (" ..." if len(skipped) > 6 else "")
        return (f"{len(skipped)} commit{'s' if len(skipped) != 1 else ''} not measured: "
                f"{'they touch' if len(skipped) != 1 else 'it touches'} none of the files the probe reads "
                f"({_plural(footprint.files, 'file')}, {_plural(footprint.dirs, 'directory', 'directories')} "
                f"listed, recorded at {_plural(footprint.recorded, 'commit')}): {shown}")
    if footprint.fallback:
        return f"The probe's footprint was {footprint.note}"
    return None


def _plural(n: Any, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def remainder_line(report: CommitReport | HunkReport) -> str | None:
    """How much of the gap the culprits leave unexplained (several small steps compound)."""
    share = report.unexplained_share
    if not report.culprits or not _finite(share):
        return None
    commits = isinstance(report, CommitReport)
    amount = report.unexplained_pct if commits else None
    parts = [f"{pct(amount)} {unit(report)}"] if _finite(amount) else []
    interval = report.unexplained_share_ci95 or ()
    if len(interval) == 2 and all(_finite(x) for x in interval):
        # the culprits' sizes come from their own pairs: with few of them the remainder is wide
        parts.append(f"95% CI {interval[0]:.0%} .. {interval[1]:.0%} of the gap"
                     + (", which includes none" if interval[0] <= 0 <= interval[1] else ""))
    amount_text = f" ({'; '.join(parts)})" if parts else ""
    # with a drill under a culprit, say whose remainder this is: the drill's is printed under it
    whose = (" (commits; a drill's is under its culprit)" if any(drill_of(c) for c in report.culprits) else "")
    text = f"Unexplained remainder{whose}: {share:.0%} of the gap{amount_text}."
    if not commits:
        return text
    sides = report.sides
    cleared = [s for s in sides if s.outcome == SideOutcome.CLEARED and _finite(s.ruled_out_pct)]
    if cleared:
        # the sides of each culprit were checked down to a size, not to zero: say which size
        worst = max(s.ruled_out_pct for s in cleared)
        change = _HUNTED_CHANGE.get(report.settings.get("direction"), "step")
        text += (f" Each side beside the culprits was checked down to a size: in any one side, a further "
                 f"{change} of {worst:.1f}% or more has under 10% probability (its ends compared).")
        priced = [s for s in cleared if s.priced]
        if priced:
            # a side that had cost as much as the search before it stopped at what it had bought
            floor = max(s.ruled_out_pct for s in priced)
            text += (f" In {len(priced)} side(s) a further {change} of {floor:.1f}% or more is ruled out and smaller "
                     f"ones were not looked for (ruling them out would have cost more than the search itself): "
                     f"--side-resolution {_resolution_hint(report)} to insist.")
        if share > 0 and _finite(amount) and abs(amount) > worst:
            # Both hold at once: the remainder is then not one step in one side, but several smaller
            # ones, the culprits' own sizes being estimates, or a side whose ends read alike by
            # chance. A negative share (the culprits' steps add up to more than the gap) leaves
            # nothing to look for.
            text += (f" The remainder ({pct(amount)}) is more than that, so it is unlikely to be one {change} in "
                     f"one side: rather several smaller ones, the culprits' estimated sizes, or a side whose "
                     f"ends read alike by chance.")
    searched = [s for s in sides if s.outcome == SideOutcome.REMAINDER and s.from_ and s.to]
    for side in searched:   # the search looked there itself (search/commit/remainder.py, search_remainder)
        text += (f" The remainder's 95% interval lay beyond what the cleared sides ruled out, so the hunt searched the side "
                 f"{side.from_[:10]}..{side.to[:10]}, whose ends differed most, for it.")
    return text


def _resolution_hint(report: CommitReport) -> str:
    """The --side-resolution that would rule out down to the hunt's min_effect."""
    effect = report.settings.get("min_effect")
    return f"{effect:.0%}" if _finite(effect) else "0.02"


def overhead_line(report: CommitReport | HunkReport) -> str | None:
    """The counters shim's measured cost, and where the metric came from."""
    overhead = report.facts.instrumentation_overhead_pct
    note = report.facts.instrumentation.note
    parts = []
    if overhead is not None and _finite(overhead.value):
        ci = overhead.ci95 or ()
        ci_text = (f" (95% CI {pct(ci[0])} .. {pct(ci[1])})"
                   if len(ci) == 2 and all(_finite(v) for v in ci) else "")
        parts.append(f"Instrumentation overhead: {pct(overhead.value)}{ci_text}, "
                     "measured against an unprofiled arm")
    if note:
        parts.append(str(note))
    return "; ".join(parts) + "." if parts else None


def isolation_line(report: TypedReport) -> str | None:
    """Where the probe imported the project from (probe/isolation.py), or that it was not checked."""
    isolation = report.isolation if isinstance(report, NightlyReport) else report.facts.isolation
    if isolation is None:
        return None
    return f"imports: {isolation.note}"


def store_only_line(report: CommitReport | HunkReport) -> str | None:
    """A hunt that ran nothing (`from_store_only`): its first line says so, since every number in
    it was measured before (with the same key: same commands and inputs, docs/setup.md). Another
    store file measures again; no flag re-measures into the same one."""
    if not report.facts.from_store_only:
        return None
    return (f"every sample from the store ({report.facts.cached_samples}): nothing was run; "
            f"--store NEW_FILE to measure again")


def cost_line(report: CommitReport | HunkReport) -> str | None:
    probes, cached, cost = report.facts.probes, report.facts.cached_samples, report.facts.cost
    crashed = cost.crashed_probes if cost else 0
    crashed_text = f" ({crashed} crashed, {_or_0(cost.crashed_wall_s):,.0f} s)" if crashed else ""
    line = f"Probes run: {probes}{crashed_text}, cached samples reused: {cached}."
    if cost:
        line += " " + cost_detail(cost, torch_used=torch_used(report))
        arm = cost.counting_arm
        if arm and arm.commits:
            line += (f" Counting arm (work per step; never {unit(report)}): {arm.probes} probe(s), "
                     f"{_or_0(arm.seconds):.0f} s, at {arm.commits} commit(s).")
            if arm.failed:
                first = next(iter(arm.failed.values()))
                line += (f" It failed at {len(arm.failed)} commit(s), so no work per step is shown there "
                         f"({first}); --instrument off skips it.")
    return line


def measurement(report: TypedReport) -> Measurement | None:
    """The report's `measurement` (hunts/sampling.py); None: a night that measured nothing."""
    return report.measurement if isinstance(report, NightlyReport) else report.facts.measurement


def torch_used(report: CommitReport | HunkReport) -> bool:
    """False only when the probes' imports were recorded and none imported torch (preload's
    learning probes, `measurement.preload`): its caches and torch.compile settings then did nothing."""
    preload = report.facts.measurement.preload
    if preload is None or not preload.watched_checked:
        return True   # not recorded: the settings may have mattered
    return "torch" in preload.watched_imported


def cost_detail(cost: Cost, torch_used: bool = True) -> str:
    """Probe wall, measured share, GPU-seconds, the budget and why, the shared caches, compile
    workers (the last two only when the probe may have imported torch)."""
    share = cost.measured_share
    share_text = f" ({share:.0%} of it in measured windows)" if _finite(share) else ""
    parts = [f"Probe wall {_or_0(cost.probe_wall_s):,.0f}s{share_text}, {_or_0(cost.gpu_s):,.0f} GPU-seconds."]
    if cost.builds is not None:   # the setup step (docs/setup.md)
        parts.append(f"{cost.builds} builds, {cost.build_reuses} probes on a tree already built.")
    if cost.budget is not None:
        parts.append(f"Token budget {cost.budget.get('tokens')}: {cost.budget.get('reason')}.")
    if not torch_used:
        return " ".join(parts)
    caches = cost.caches
    if caches is not None:
        if caches.shared:
            parts.append(f"Shared caches ({', '.join(caches.shared)}) in {caches.directory}.")
        else:
            parts.append("No shared caches (--no-shared-caches).")
        if caches.user_set:
            parts.append(f"Left as the user set them: {', '.join(caches.user_set)}.")
    compile_ = cost.compile
    if compile_ is not None:
        if compile_.set:
            settings = ", ".join(f"{k}={v}" for k, v in compile_.set.items())
            parts.append(f"torch.compile in each probe's own process ({settings}; --compile-workers for its worker pool).")
        elif compile_.user_set:
            parts.append(f"Compile workers as the user set them: {', '.join(compile_.user_set)}.")
    return " ".join(parts)


def preload_text(preload: Preload) -> str:
    """How many probes were forked from a preload server, and why the others were not."""
    forked, fresh = preload.probes_forked, preload.probes_fresh
    if preload.mode == "off":
        text = "Every probe a fresh process (--preload off)."
    elif forked:
        text = (f"{forked} probes forked from a server that imported {', '.join(preload.modules)} "
                f"once ({preload.servers} server(s), {_or_0(preload.server_start_s):.1f}s to start), {fresh} fresh.")
    else:
        text = "Every probe a fresh process (nothing to preload, or the command is not a plain `python` one)."
    return text + ("" if not preload.notes else " " + " ".join(f"{n}." for n in preload.notes))


def overlap_text(overlap: Overlap) -> str:
    """Probes run side by side, windows alone (probe/windows.py)."""
    text = (f"Up to {overlap.lanes_per_slot} probes per slot at once, each measured window alone: "
            f"{overlap.windows} windows through the gate, {overlap.probes_alone} probe(s) "
            f"run alone, probes stopped {_or_0(overlap.stopped_s):.0f} s in all")
    if overlap.reruns:
        text += f", {overlap.reruns} re-run alone (measured beside others without opening a window)"
    if not overlap.windows:
        text += " (the probe opens no window through REGRESSBISECT_WINDOW, so its probes ran one at a time)"
    return text + "." + ("" if not overlap.notes else " " + " ".join(f"{n}." for n in overlap.notes))


def measurement_lines(report: TypedReport) -> list[str]:
    """Preloaded start-up, setup step (apart from probe time), slot venvs, samples re-taken
    under contention, processes probes left running."""
    measured = measurement(report)
    if measured is None:
        return []
    lines = []
    setup = measured.setup
    if setup:
        reuses = sum(c.get("reuses", 0) for c in setup.per_candidate.values())
        lines.append(f"Setup `{setup.command}`: {setup.runs} run(s) in {setup.seconds:.1f} s "
                     f"(not in tok/s), {reuses} sample(s) on an already built tree, "
                     f"{setup.failures} failed, {setup.remembered_failures} stored failure(s) reused.")
        restored = setup.tracked_files_restored
        if restored:
            lines.append(f"  tracked files a probe modified in its worktree ({', '.join(restored.files)}) "
                         f"were restored before {restored.probes} probe(s)")
        for failure in setup.failed:
            lines.append(f"  {failure.candidate}: {failure.reason}")
            lines += [f"    | {line}" for line in failure.tail.splitlines()[-8:]]
    preload = measured.preload
    if preload is not None and (preload.probes_forked or preload.notes):
        lines.append(preload_text(preload))
    if measured.overlap is not None:
        lines.append(overlap_text(measured.overlap))
    venvs = measured.venvs
    if venvs:
        lines.append(f"Per-slot virtualenvs on {venvs.base_python}: {', '.join(venvs.paths)}")
    contention = measured.contention
    if contention is None:
        lines.append("Busy-machine check off (--no-busy-check): samples may include other load.")
    elif contention and contention.retaken:
        reasons = sorted({r.reason for r in contention.retakes})
        lines.append(f"Samples re-taken under contention: {contention.retaken} (stored apart, not "
                     f"evidence), waited {contention.waited_s:.0f} s; why: {'; '.join(reasons[:3])}"
                     + (" ..." if len(reasons) > 3 else ""))
    interfered = interference_line(report) if not isinstance(report, NightlyReport) else None
    if interfered:
        lines.append(interfered)
    leftovers = measured.leftovers
    if leftovers.probes:
        first = leftovers.first
        lines.append(f"Processes left running by {leftovers.probes} probe(s), killed as each ended: "
                     f"{leftovers.killed}" + (f" (first: {'; '.join(first[:3])})" if first else "") + ".")
    return lines


def shape_line(report: CommitReport | HunkReport) -> str | None:
    """GOOD and BAD differed in shape, not only in level (docs/search.md, "A change of shape"):
    the share of each end's runs far off its level, their factor, and the mean of every run,
    which the hunt then read."""
    shape = report.shape_change if isinstance(report, CommitReport) else None
    if shape is None:
        return None
    where = "slow" if shape.side == "below" else "fast"
    factor = f" at {shape.factor:.2f}x" if _finite(shape.factor) else ""
    return (f"Run times changed shape: {pct(shape.bad_share * 100, signed=False)} of BAD's runs "
            f"{where}{factor} (GOOD: {pct(shape.good_share * 100, signed=False)}); the mean of every "
            f"run {pct(shape.mean_change_pct)}, which a long run's time follows: every run was read "
            "from then on, none set apart as interference.")


def candidates(report: CommitReport | HunkReport) -> list[Candidate]:
    """The measured commits (a hunk report lists none)."""
    return [c for c in report.candidates if isinstance(c, Candidate)]


def interference_line(report: CommitReport | HunkReport) -> str | None:
    """The runs read as interfered (far off their candidate's level, left out of every test:
    docs/search.md, "Runs far off their level"), by candidate; every figure of the report is
    of the other runs."""
    off = [(c, c.interfered_tok_s) for c in candidates(report) if c.interfered_tok_s]
    if not off:
        return None
    total = sum(len(runs) for _, runs in off)
    runs_in_all = total + sum(c.n for c in candidates(report))
    where = ", ".join(f"{short(c.commit)} ({', '.join(number(v) for v in runs[:3])}{' ...' if len(runs) > 3 else ''})"
                      for c, runs in off[:4])
    return (f"Runs read as interfered (far off their candidate's level; left out of every test and "
            f"figure): {total} of {runs_in_all}, at {where}{' ...' if len(off) > 4 else ''}.")


def culprit_commits(report: CommitReport | HunkReport) -> set[str]:
    return {c.commit for c in report.culprits if not is_hunk_group(c)}


def ambiguous_commits(report: CommitReport | HunkReport) -> set[str]:
    """Commits an ambiguous step may be (none of them is a culprit)."""
    steps = report.ambiguous_steps if isinstance(report, CommitReport) else ()
    return {p.commit for step in steps for p in step.possible_commits}


def candidate_rows(report: CommitReport | HunkReport, subject_width: int = 48) -> list[list[str]]:
    culprits, possible = culprit_commits(report), ambiguous_commits(report)
    rows = []
    for c in sorted(candidates(report), key=lambda c: c.index):
        verdict = str(c.verdict or "-")
        if c.commit in culprits:
            verdict += " (culprit)"
        elif c.commit in possible:
            verdict += " (ambiguous step)"
        commit = short(c.commit) + ("+patch" if c.patch else "")
        rows.append([commit, _clip(c.subject, subject_width), str(c.n), number(c.median_tok_s), interval(c.ci95),
                     verdict, str(c.cached)])
    return rows


def series_rows(report: NightlyReport, subject_width: int = 40) -> list[list[str]]:
    points = {p.index: p for p in report.change_points}
    rows = []
    for i, s in enumerate(report.series):
        notes = []
        if i in points:
            notes.append(f"change point {pct(change_pct(points[i]))}")
        if s.flagged:
            notes.append("machine flagged")
        rows.append([str(i), short(s.commit), str(s.date or "")[:10], _clip(s.subject, subject_width), str(s.n),
                     number(s.median_tok_s), interval(s.ci95), ", ".join(notes)])
    return rows


def machine_lines(report: NightlyReport) -> tuple[str, list[str]]:
    """('Machine: ok', reasons) for a nightly report."""
    machine = report.machine
    status = machine.get("status") or "unknown"
    check = machine.get("check") or {}
    device = f" ({check['device']})" if check.get("device") else ""
    return f"Machine{device}: {status}", [str(r) for r in machine.get("reasons") or ()]


def change_point_lines(report: NightlyReport) -> list[str]:
    series = report.series
    lines = []
    for p in report.change_points:
        index = p.index
        subject = series[index].subject if 0 <= index < len(series) else ""
        p_text = f", p={p.p_value:.3g}" if _finite(p.p_value) else ""
        lines.append(f"{pct(change_pct(p))} at {short(p.commit)} {subject}".rstrip()
                     + f" (night #{index}{p_text})"
                     + (f": not hunted, {p.not_hunted}" if p.not_hunted else ""))
    return lines


def nightly_verdict_line(report: NightlyReport) -> str:
    points = report.change_points
    tip = short(report.night.tip or report.bad)
    if not points:
        return f"Nightly at {tip}: no change point in {len(report.series)} measured commits."
    found = f", {len(report.culprits)} culprit(s) bisected" if report.culprits else ""
    return f"Nightly at {tip}: {len(points)} change point(s){found}."


def change_pct(point: ChangePoint) -> float | None:
    if _finite(point.change_pct):
        return point.change_pct
    return 100 * point.change if _finite(point.change) else None


def _clip(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _or_0(value: float) -> float:
    """A total a report lacks (NaN) is shown as 0, as it always was."""
    return value if _finite(value) else 0


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
