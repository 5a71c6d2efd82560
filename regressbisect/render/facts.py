"""What a report says, as display-ready strings: shared by the text, Markdown and HTML renderers so
that all three tell the same story. Reads the JSON report dict defensively: every optional field
may be missing or None (a minimal report, an old schema, a hunt that stopped early).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from regressbisect.metric import DEFAULT_UNIT  # also the unit of reports that name none
from regressbisect.render import work as work_table
from regressbisect.search.verdicts import Verdict

_HUNTED_CHANGE = {"slower": "slowdown", "faster": "speed-up"}


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
    hunks: tuple[Mapping[str, Any], ...]
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
class DrillGroup:
    """A hunk group of a drill, formatted."""

    step: str
    """'-2.0% tok/s (95% CI -3.9% .. -0.2%), 15% of the commit's step'."""
    hunks: tuple[Mapping[str, Any], ...]
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


def unit(report: Mapping[str, Any]) -> str:
    """The metric's unit ('tok/s', 'req/s', ...): the JSON fields keep their tok_s names."""
    return str(report.get("unit") or DEFAULT_UNIT)


def candidate_headers(report: Mapping[str, Any]) -> tuple[str, ...]:
    return ("commit", "subject", "n", f"median {unit(report)}", "95% CI", "verdict", "cached")


def series_headers(report: Mapping[str, Any]) -> tuple[str, ...]:
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


def is_hunk_group(culprit: Mapping[str, Any]) -> bool:
    """A hunk report's culprit (a commit culprit's `hunks` is its --drill, a mapping)."""
    return bool(culprit.get("hunks")) and not isinstance(culprit.get("hunks"), Mapping)


def drill_text(drill: Mapping[str, Any] | None) -> str | None:
    """A commit culprit's --drill in a few words (with why it stopped, when a cap stopped it)."""
    if drill is None:
        return None
    named = sum(len(c.get("hunks") or ()) for c in drill.get("culprits") or ())
    if named:
        return f"{named} of its {drill.get('hunk_count')} hunks named (drill)" + (
            f": {drill['reason']}" if drill.get("reason") else "")
    return f"no hunk of its {drill.get('hunk_count')} named (drill): {drill.get('reason') or drill.get('verdict')}"


_SUSPECT_WHY = {"undecided": "not named: its test ran out of pairs",
                "not-reproduced": "not named: it did not reproduce the slowdown on fresh pairs",
                "reproduced": "not named: whether it needs each of its hunks stayed open, or the shares did not add up"}


def drill_group(group: Mapping[str, Any], unit_text: str, suspect: bool = False) -> DrillGroup:
    """A named (or suspected) hunk group of a drill: its own step, its share of the commit's step."""
    share = group.get("share_of_gap")
    step = step_text(group.get("step_pct"), group.get("ci95_pct"), unit_text)
    if _finite(share):
        step += f", {share:.0%} of the commit's step"
    verdict = str((group.get("alone") or {}).get("verdict") or "")
    why = _SUSPECT_WHY.get(verdict, f"not named: {verdict}" if verdict else "not named") if suspect else None
    return DrillGroup(step=step, hunks=with_joined(group) or ({},), why=why)


def drill_remainder_text(drill: Mapping[str, Any]) -> str | None:
    """'drill remainder: 60% of the commit's step (95% CI 44% .. 69%) not in its named hunks', and
    what the rest is spread over; None where no hunk was named (the reason says why)."""
    share = drill.get("unexplained_share")
    if not drill.get("culprits") or not _finite(share):
        return None
    text = f"drill remainder: {share:.0%} of the commit's step not in its named hunks"
    interval = drill.get("unexplained_share_ci95") or ()
    if len(interval) == 2 and all(_finite(x) for x in interval):
        text += f" (95% CI {interval[0]:.0%} .. {interval[1]:.0%}" + (
            ", which includes none)" if interval[0] <= 0 <= interval[1] else ")")
    spread = (drill.get("spread") or {}).get("text")
    if spread:
        text += f"; the rest is {spread}"
    return text


def culprit_facts(culprit: Mapping[str, Any], unit_text: str = DEFAULT_UNIT) -> CulpritFacts:
    drill = culprit["hunks"] if isinstance(culprit.get("hunks"), Mapping) else None
    hunks = (tuple(h for c in drill.get("culprits") or () for h in c.get("hunks") or ()) if drill is not None
             else with_joined(culprit))
    subject = culprit.get("subject") or ""
    title = subject if is_hunk_group(culprit) else f"{short(culprit.get('commit'))} {subject}".strip()
    share = culprit.get("share_of_gap")
    return CulpritFacts(
        title=title,
        step=step_text(culprit.get("step_pct"), culprit.get("ci95_pct"), unit_text),
        share=f"{share:.0%} of the gap" if _finite(share) else None,
        counters=tuple(counter_changes(*_counters_shown(culprit))),
        hunks=hunks,
        possible_commits=tuple(short(s) for s in culprit.get("possible_commits") or ()),
        merge=merge_text(culprit.get("merge")),
        **work_facts(culprit.get("work")),
        drill=drill_text(drill),
        drill_groups=tuple(drill_group(g, unit_text) for g in (drill or {}).get("culprits") or ()),
        drill_remainder=drill_remainder_text(drill) if drill is not None else None,
        drill_suspects=tuple(drill_group(g, unit_text, suspect=True) for g in (drill or {}).get("suspects") or ()),
    )


def _counters_shown(culprit: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """Counters before and after; with the work per step, without host ms: those were taken under
    the counting arm's instrumentation and are shown as its share (the work table) instead."""
    before, after = culprit.get("counters_before") or {}, culprit.get("counters_after") or {}
    if not culprit.get("work"):
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


def merge_text(merge: Any) -> tuple[str, ...]:
    """Lines saying the culprit is a merge, with the follow-up hunt(s) of the merged branch(es)."""
    if not isinstance(merge, Mapping) or not merge.get("follow_up"):
        return ()
    parents = merge.get("parents") or [None]
    return (f"is a merge of {', '.join(short(p) for p in parents[1:])} into {short(parents[0])}: the search "
            f"follows first parents, so the merge is one step",
            *(f"its branch's own commits, with this hunt's options: {command}" for command in merge["follow_up"]),
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


def with_joined(group: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...]:
    """A hunk group's hunks, each of a group of several with how it joined the group (its
    `joined`, for `joined_note`)."""
    hunks = tuple(group.get("hunks") or ())
    joined = group.get("joined")
    if len(hunks) < 2 or not isinstance(joined, Mapping):
        return hunks
    return tuple({**h, "joined": joined[h["id"]]} if isinstance(h, Mapping) and h.get("id") in joined else h
                 for h in hunks)


def joined_note(hunk: Mapping[str, Any]) -> str:
    """' (needed to run)': how a hunk of a group of several joined it; '' where unknown."""
    return f" ({hunk['joined']})" if hunk.get("joined") else ""


def hunk_location(hunk: Mapping[str, Any]) -> str:
    """'src/model.py:120-134 in forward'; a submodule's move as its excerpt says it ('the
    submodule vendor/lib moved 1a2b3c4d5e..6f7a8b9c0d': it has no lines)."""
    if hunk.get("kind") == "submodule" and hunk.get("excerpt"):
        return str(hunk["excerpt"])
    lines = hunk.get("lines") or ()
    where = f"{hunk.get('file', '?')}"
    if len(lines) == 2:
        where += f":{lines[0]}-{lines[1]}"
    if hunk.get("function"):
        where += f" in {hunk['function']}"
    return where


def endpoint_text(report: Mapping[str, Any]) -> str:
    """'good abc123 1234 tok/s (1200 .. 1250, n=5) -> bad def456 1150 tok/s (...)'."""
    unit_text = unit(report)
    endpoints = report.get("endpoints") or {}
    parts = []
    for side in ("good", "bad"):
        e = endpoints.get(side) or {}
        parts.append(f"{side} {short(report.get(side))} {number(e.get('median_tok_s'))} {unit_text}"
                     + (f" ({interval(e.get('ci95'))}, n={e.get('n')})" if e.get("n") else ""))
    return " -> ".join(parts)


def verdict_line(report: Mapping[str, Any]) -> str:
    """The one-sentence answer of a commits or hunks report."""
    verdict = report.get("verdict")
    culprits = report.get("culprits") or []
    gap = report.get("gap_pct")
    gap_text = f" ({unit(report)} {pct(gap)} from good to bad)" if _finite(gap) else ""
    what = "hunk group" if report.get("kind") == "hunks" else "commit"
    if verdict == Verdict.CULPRITS:
        return f"{len(culprits)} culprit {what}(s) found{gap_text}."
    reason = report.get("verdict_reason")
    because = f" ({reason})" if reason else ""
    if verdict in ("none", Verdict.NOT_LOCALISED):   # 'none': a schema-1 report's
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


def established_lines(report: Mapping[str, Any]) -> list[str]:
    """An undecided hunt: what it had established (the leading step of a commit hunt, or a hunk
    hunt's `text`); the report's `continue_command` follows it, after CONTINUE_LEAD."""
    lines = []
    step = report.get("established") or {}
    if step.get("first_bad"):
        before, after = step.get("before") or {}, step.get("after") or {}
        p = step.get("probability")
        odds = f", p={p:.2f}" if isinstance(p, (int, float)) else ""
        state = "confirmed by its pairs, not named" if step.get("confirmed_by_pairs") else "not yet confirmed"
        lines.append(f"Established so far: the step is at {short(step.get('last_good'))}..{short(step.get('first_bad'))} "
                     f"(#{step.get('last_good_index')}..#{step.get('first_bad_index')}{odds}), {state}: "
                     f"{number(before.get('median_tok_s'))} vs {number(after.get('median_tok_s'))} {unit(report)} "
                     f"(n={before.get('n')}, {after.get('n')}).")
    elif step.get("text"):
        lines.append(f"Established so far: {step['text']}.")
    return lines


CONTINUE_LEAD = "To go further (the stored samples are reused):"
"""What precedes an undecided hunt's continue command (`continue_command` of the report)."""


def ambiguous_lines(report: Mapping[str, Any]) -> list[str]:
    """Each ambiguous step: its two measured ends, its size, and every commit it may be, with why
    (the skip reason of each unmeasurable commit between, e.g. its exit code or timeout)."""
    lines = []
    for number, step in enumerate(report.get("ambiguous_steps") or (), 1):
        share = step.get("share_of_gap")
        lines.append(f"ambiguous step {number}: after {short(step.get('last_good'))} (last good), "
                     f"by {short(step.get('first_bad'))} (first measured bad); no single commit named")
        lines.append(f"  step {step_text(step.get('step_pct'), step.get('ci95_pct'), unit(report))}"
                     + (f", {share:.0%} of the gap" if _finite(share) else ""))
        lines.append("  could be any of:")
        for commit in step.get("possible_commits") or ():
            lines.append(f"    {short(commit.get('commit'))} {_clip(commit.get('subject') or '', 48)}: "
                         f"{commit.get('why')}")
    return lines


def not_measured_line(report: Mapping[str, Any]) -> str | None:
    """The commits of a hunt limited to PATHS (`run GOOD BAD -- PATHS`) that touch none of them:
    not measured, each with the verdict of the candidate before it, never blamed; of a hunk hunt
    (`hunks -- PATHS`), the hunks outside PATHS, in every candidate and never searched."""
    skipped = report.get("not_measured") or ()
    if not skipped or (report.get("footprint") or {}).get("used"):   # set aside by the footprint: footprint_line
        return None
    paths = " ".join(report.get("paths") or ())
    if report.get("kind") == "hunks":    # `hunks -- PATHS`: in every candidate, never searched
        shown = "; ".join(hunk_location(h) for h in skipped[:6]) + (" ..." if len(skipped) > 6 else "")
        return (f"{len(skipped)} hunk{'s' if len(skipped) != 1 else ''} not measured (in every candidate): "
                f"{'they touch' if len(skipped) != 1 else 'it touches'} none of PATHS ({paths}): {shown}")
    shown = ", ".join(short(c.get("commit")) for c in skipped[:6]) + (" ..." if len(skipped) > 6 else "")
    return (f"{len(skipped)} commit{'s' if len(skipped) != 1 else ''} not measured: "
            f"{'they touch' if len(skipped) != 1 else 'it touches'} none of PATHS ({paths}): {shown}")


def footprint_line(report: Mapping[str, Any]) -> str | None:
    """The commits a hunt set aside because they touch none of what the probe reads (its
    footprint, recorded by the shim), or, where the footprint could not be read (a probe that is
    not Python), that every commit was a candidate and why."""
    footprint = report.get("footprint") or {}
    skipped = report.get("not_measured") or ()
    if footprint.get("used") and skipped:
        shown = ", ".join(short(c.get("commit")) for c in skipped[:6]) + (" ..." if len(skipped) > 6 else "")
        return (f"{len(skipped)} commit{'s' if len(skipped) != 1 else ''} not measured: "
                f"{'they touch' if len(skipped) != 1 else 'it touches'} none of the files the probe reads "
                f"({_plural(footprint.get('files'), 'file')}, {_plural(footprint.get('dirs'), 'directory', 'directories')} "
                f"listed, recorded at {_plural(footprint.get('recorded'), 'commit')}): {shown}")
    if footprint.get("fallback"):
        return f"The probe's footprint was {footprint.get('note')}"
    return None


def _plural(n: Any, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def remainder_line(report: Mapping[str, Any]) -> str | None:
    """How much of the gap the culprits leave unexplained (several small steps compound)."""
    share = report.get("unexplained_share")
    if not report.get("culprits") or not _finite(share):
        return None
    amount = report.get("unexplained_pct")
    parts = [f"{pct(amount)} {unit(report)}"] if _finite(amount) else []
    interval = report.get("unexplained_share_ci95") or ()
    if len(interval) == 2 and all(_finite(x) for x in interval):
        # the culprits' sizes come from their own pairs: with few of them the remainder is wide
        parts.append(f"95% CI {interval[0]:.0%} .. {interval[1]:.0%} of the gap"
                     + (", which includes none" if interval[0] <= 0 <= interval[1] else ""))
    amount_text = f" ({'; '.join(parts)})" if parts else ""
    # with a drill under a culprit, say whose remainder this is: the drill's is printed under it
    whose = (" (commits; a drill's is under its culprit)" if any(isinstance(c.get("hunks"), Mapping)
                                                                for c in report.get("culprits") or ()) else "")
    text = f"Unexplained remainder{whose}: {share:.0%} of the gap{amount_text}."
    cleared = [s for s in report.get("sides") or () if s.get("outcome") == "cleared" and _finite(s.get("ruled_out_pct"))]
    if cleared:
        # the sides of each culprit were checked down to a size, not to zero: say which size
        worst = max(s["ruled_out_pct"] for s in cleared)
        change = _HUNTED_CHANGE.get((report.get("settings") or {}).get("direction"), "step")
        text += (f" Each side beside the culprits was checked down to a size: in any one side, a further "
                 f"{change} of {worst:.1f}% or more has under 10% probability (its ends compared).")
        priced = [s for s in cleared if s.get("priced")]
        if priced:
            # a side that had cost as much as the search before it stopped at what it had bought
            floor = max(s["ruled_out_pct"] for s in priced)
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
    searched = [s for s in report.get("sides") or () if s.get("outcome") == "remainder" and s.get("from") and s.get("to")]
    for side in searched:   # the search looked there itself (search/bisect.py, _search_remainder)
        text += (f" The remainder's 95% interval lay beyond what the cleared sides ruled out, so the hunt searched the side "
                 f"{side['from'][:10]}..{side['to'][:10]}, whose ends differed most, for it.")
    return text


def _resolution_hint(report: Mapping[str, Any]) -> str:
    """The --side-resolution that would rule out down to the hunt's min_effect."""
    effect = (report.get("settings") or {}).get("min_effect")
    return f"{effect:.0%}" if _finite(effect) else "0.02"


def overhead_line(report: Mapping[str, Any]) -> str | None:
    """The counters shim's measured cost, and where the metric came from."""
    overhead = report.get("instrumentation_overhead_pct")
    note = (report.get("instrumentation") or {}).get("note")
    parts = []
    if isinstance(overhead, Mapping) and _finite(overhead.get("value")):
        ci = overhead.get("ci95") or ()
        ci_text = (f" (95% CI {pct(ci[0])} .. {pct(ci[1])})"
                   if len(ci) == 2 and all(_finite(v) for v in ci) else "")
        parts.append(f"Instrumentation overhead: {pct(overhead['value'])}{ci_text}, "
                     "measured against an unprofiled arm")
    if note:
        parts.append(str(note))
    return "; ".join(parts) + "." if parts else None


def isolation_line(report: Mapping[str, Any]) -> str | None:
    """Where the probe imported the project from (probe/isolation.py), or that it was not checked."""
    isolation = report.get("isolation")
    if not isolation:
        return None
    return f"imports: {isolation.get('note')}"


def store_only_line(report: Mapping[str, Any]) -> str | None:
    """A hunt that ran nothing (`from_store_only`): its first line says so, since every number in
    it was measured before (with the same key: same commands and inputs, docs/setup.md). Another
    store file measures again; no flag re-measures into the same one."""
    if not report.get("from_store_only"):
        return None
    return (f"every sample from the store ({report.get('cached_samples', '?')}): nothing was run; "
            f"--store NEW_FILE to measure again")


def cost_line(report: Mapping[str, Any]) -> str | None:
    probes, cached = report.get("probes"), report.get("cached_samples")
    if probes is None and cached is None:
        return None
    cost = report.get("cost")
    crashed = cost.get("crashed_probes") if isinstance(cost, Mapping) else None
    crashed_text = f" ({crashed} crashed, {cost.get('crashed_wall_s') or 0:,.0f} s)" if crashed else ""
    line = f"Probes run: {probes if probes is not None else '?'}{crashed_text}, cached samples reused: {cached or 0}."
    if isinstance(cost, Mapping):
        line += " " + cost_detail(cost, torch_used=torch_used(report))
        arm = cost.get("counting_arm")
        if isinstance(arm, Mapping) and arm.get("commits"):
            line += (f" Counting arm (work per step; never {unit(report)}): {arm.get('probes', 0)} probe(s), "
                     f"{arm.get('seconds', 0):.0f} s, at {arm['commits']} commit(s).")
            failed = arm.get("failed")
            if isinstance(failed, Mapping) and failed:
                first = next(iter(failed.values()))
                line += (f" It failed at {len(failed)} commit(s), so no work per step is shown there "
                         f"({first}); --instrument off skips it.")
    return line


def torch_used(report: Mapping[str, Any]) -> bool:
    """False only when the probes' imports were recorded and none imported torch (preload's
    learning probes, `measurement.preload`): its caches and torch.compile settings then did nothing."""
    preload = (report.get("measurement") or {}).get("preload")
    if not isinstance(preload, Mapping) or not preload.get("watched_checked"):
        return True   # not recorded: the settings may have mattered
    return "torch" in (preload.get("watched_imported") or ())


def cost_detail(cost: Mapping[str, Any], torch_used: bool = True) -> str:
    """Probe wall, measured share, GPU-seconds, the budget and why, the shared caches, compile
    workers (the last two only when the probe may have imported torch)."""
    share = cost.get("measured_share")
    share_text = f" ({share:.0%} of it in measured windows)" if _finite(share) else ""
    parts = [f"Probe wall {cost.get('probe_wall_s', 0):,.0f}s{share_text}, "
             f"{cost.get('gpu_s', 0):,.0f} GPU-seconds."]
    if cost.get("builds") is not None:   # the setup step (docs/setup.md)
        parts.append(f"{cost['builds']} builds, {cost.get('build_reuses', 0)} probes on a tree "
                     f"already built.")
    budget = cost.get("budget")
    if isinstance(budget, Mapping):
        parts.append(f"Token budget {budget.get('tokens')}: {budget.get('reason')}.")
    caches = cost.get("caches")
    if not torch_used:
        return " ".join(parts)
    if isinstance(caches, Mapping):
        if caches.get("shared"):
            parts.append(f"Shared caches ({', '.join(caches['shared'])}) in {caches.get('directory')}.")
        else:
            parts.append("No shared caches (--no-shared-caches).")
        if caches.get("user_set"):
            parts.append(f"Left as the user set them: {', '.join(caches['user_set'])}.")
    compile_ = cost.get("compile")
    if isinstance(compile_, Mapping):
        if compile_.get("set"):
            settings = ", ".join(f"{k}={v}" for k, v in compile_["set"].items())
            parts.append(f"torch.compile in each probe's own process ({settings}; --compile-workers for its worker pool).")
        elif compile_.get("user_set"):
            parts.append(f"Compile workers as the user set them: {', '.join(compile_['user_set'])}.")
    return " ".join(parts)


def preload_text(preload: Mapping[str, Any]) -> str:
    """How many probes were forked from a preload server, and why the others were not."""
    forked, fresh = preload.get("probes_forked", 0), preload.get("probes_fresh", 0)
    if preload.get("mode") == "off":
        text = "Every probe a fresh process (--preload off)."
    elif forked:
        text = (f"{forked} probes forked from a server that imported {', '.join(preload.get('modules') or [])} "
                f"once ({preload.get('servers', 0)} server(s), {preload.get('server_start_s', 0):.1f}s to start), "
                f"{fresh} fresh.")
    else:
        text = "Every probe a fresh process (nothing to preload, or the command is not a plain `python` one)."
    notes = preload.get("notes") or []
    return text + ("" if not notes else " " + " ".join(f"{n}." for n in notes))


def overlap_text(overlap: Mapping[str, Any]) -> str:
    """Probes run side by side, windows alone (probe/windows.py)."""
    text = (f"Up to {overlap.get('lanes_per_slot')} probes per slot at once, each measured window alone: "
            f"{overlap.get('windows', 0)} windows through the gate, {overlap.get('probes_alone', 0)} probe(s) "
            f"run alone, probes stopped {overlap.get('stopped_s', 0):.0f} s in all")
    if overlap.get("reruns"):
        text += f", {overlap['reruns']} re-run alone (measured beside others without opening a window)"
    if not overlap.get("windows"):
        text += " (the probe opens no window through REGRESSBISECT_WINDOW, so its probes ran one at a time)"
    notes = overlap.get("notes") or []
    return text + "." + ("" if not notes else " " + " ".join(f"{n}." for n in notes))


def measurement_lines(report: Mapping[str, Any]) -> list[str]:
    """Preloaded start-up, setup step (apart from probe time), slot venvs, samples re-taken
    under contention, processes probes left running."""
    measurement = report.get("measurement") or {}
    lines = []
    setup = measurement.get("setup")
    if setup:
        reuses = sum(c.get("reuses", 0) for c in (setup.get("per_candidate") or {}).values())
        lines.append(f"Setup `{setup['command']}`: {setup['runs']} run(s) in {setup['seconds']:.1f} s "
                     f"(not in tok/s), {reuses} sample(s) on an already built tree, "
                     f"{setup['failures']} failed, {setup['remembered_failures']} stored failure(s) reused.")
        restored = setup.get("tracked_files_restored")
        if restored:
            lines.append(f"  tracked files a probe modified in its worktree ({', '.join(restored['files'])}) "
                         f"were restored before {restored['probes']} probe(s)")
        for failure in setup.get("failed") or ():
            lines.append(f"  {failure['candidate']}: {failure['reason']}")
            lines += [f"    | {line}" for line in failure["tail"].splitlines()[-8:]]
    preload = measurement.get("preload")
    if isinstance(preload, Mapping) and (preload.get("probes_forked") or preload.get("notes")):
        lines.append(preload_text(preload))
    overlap = measurement.get("overlap")
    if isinstance(overlap, Mapping):
        lines.append(overlap_text(overlap))
    venvs = measurement.get("venvs")
    if venvs:
        lines.append(f"Per-slot virtualenvs on {venvs['base_python']}: {', '.join(venvs['paths'])}")
    contention = measurement.get("contention")
    if contention is None and "contention" in measurement:
        lines.append("Busy-machine check off (--no-busy-check): samples may include other load.")
    elif contention and contention.get("retaken"):
        reasons = sorted({r["reason"] for r in contention["retakes"]})
        lines.append(f"Samples re-taken under contention: {contention['retaken']} (stored apart, not "
                     f"evidence), waited {contention['waited_s']:.0f} s; why: {'; '.join(reasons[:3])}"
                     + (" ..." if len(reasons) > 3 else ""))
    interfered = interference_line(report)
    if interfered:
        lines.append(interfered)
    leftovers = measurement.get("leftovers")
    if leftovers and leftovers.get("probes"):
        first = leftovers.get("first") or []
        lines.append(f"Processes left running by {leftovers['probes']} probe(s), killed as each ended: "
                     f"{leftovers['killed']}" + (f" (first: {'; '.join(first[:3])})" if first else "") + ".")
    return lines


def shape_line(report: Mapping[str, Any]) -> str | None:
    """GOOD and BAD differed in shape, not only in level (docs/search.md, "A change of shape"):
    the share of each end's runs far off its level, their factor, and the mean of every run,
    which the hunt then read."""
    shape = report.get("shape_change")
    if not shape:
        return None
    where = "slow" if shape.get("side") == "below" else "fast"
    factor = f" at {shape['factor']:.2f}x" if _finite(shape.get("factor")) else ""
    return (f"Run times changed shape: {pct(shape.get('bad_share', 0.0) * 100, signed=False)} of BAD's runs "
            f"{where}{factor} (GOOD: {pct(shape.get('good_share', 0.0) * 100, signed=False)}); the mean of every "
            f"run {pct(shape.get('mean_change_pct'))}, which a long run's time follows: every run was read "
            "from then on, none set apart as interference.")


def interference_line(report: Mapping[str, Any]) -> str | None:
    """The runs read as interfered (far off their candidate's level, left out of every test:
    docs/search.md, "Runs far off their level"), by candidate; every figure of the report is
    of the other runs."""
    off = [(c, c.get("interfered_tok_s") or []) for c in report.get("candidates") or ()]
    off = [(c, runs) for c, runs in off if runs]
    if not off:
        return None
    total = sum(len(runs) for _, runs in off)
    runs_in_all = total + sum(c.get("n") or 0 for c in report.get("candidates") or ())
    where = ", ".join(f"{short(c.get('commit')) if c.get('commit') else c.get('label', '?')} "
                      f"({', '.join(number(v) for v in runs[:3])}{' ...' if len(runs) > 3 else ''})"
                      for c, runs in off[:4])
    return (f"Runs read as interfered (far off their candidate's level; left out of every test and "
            f"figure): {total} of {runs_in_all}, at {where}{' ...' if len(off) > 4 else ''}.")


def culprit_commits(report: Mapping[str, Any]) -> set[str]:
    return {c.get("commit") for c in report.get("culprits") or () if not is_hunk_group(c)}


def ambiguous_commits(report: Mapping[str, Any]) -> set[str]:
    """Commits an ambiguous step may be (none of them is a culprit)."""
    return {p.get("commit") for step in report.get("ambiguous_steps") or ()
            for p in step.get("possible_commits") or ()}


def candidate_rows(report: Mapping[str, Any], subject_width: int = 48) -> list[list[str]]:
    culprits, possible = culprit_commits(report), ambiguous_commits(report)
    rows = []
    for c in sorted(report.get("candidates") or (), key=lambda c: c.get("index", 0)):
        verdict = str(c.get("verdict") or "-")
        if c.get("commit") in culprits:
            verdict += " (culprit)"
        elif c.get("commit") in possible:
            verdict += " (ambiguous step)"
        commit = short(c.get("commit")) + ("+patch" if c.get("patch") else "")
        rows.append([commit, _clip(c.get("subject") or "", subject_width), str(c.get("n", "-")),
                     number(c.get("median_tok_s")), interval(c.get("ci95")), verdict,
                     str(c.get("cached", "-"))])
    return rows


def series_rows(report: Mapping[str, Any], subject_width: int = 40) -> list[list[str]]:
    points = {p.get("index"): p for p in report.get("change_points") or ()}
    rows = []
    for i, s in enumerate(report.get("series") or ()):
        notes = []
        if i in points:
            notes.append(f"change point {pct(_change_pct(points[i]))}")
        if s.get("flagged"):
            notes.append("machine flagged")
        rows.append([str(i), short(s.get("commit")), str(s.get("date") or "")[:10],
                     _clip(s.get("subject") or "", subject_width), str(s.get("n", "-")),
                     number(s.get("median_tok_s")), interval(s.get("ci95")), ", ".join(notes)])
    return rows


def machine_lines(report: Mapping[str, Any]) -> tuple[str, list[str]]:
    """('Machine: ok', reasons) for a nightly report."""
    machine = report.get("machine") or {}
    status = machine.get("status") or "unknown"
    check = machine.get("check") or {}
    device = f" ({check['device']})" if check.get("device") else ""
    return f"Machine{device}: {status}", [str(r) for r in machine.get("reasons") or ()]


def change_point_lines(report: Mapping[str, Any]) -> list[str]:
    series = report.get("series") or []
    lines = []
    for p in report.get("change_points") or ():
        index = p.get("index")
        subject = series[index].get("subject", "") if isinstance(index, int) and index < len(series) else ""
        p_value = p.get("p_value")
        p_text = f", p={p_value:.3g}" if _finite(p_value) else ""
        lines.append(f"{pct(_change_pct(p))} at {short(p.get('commit'))} {subject}".rstrip()
                     + f" (night #{index}{p_text})"
                     + (f": not hunted, {p['not_hunted']}" if p.get("not_hunted") else ""))
    return lines


def nightly_verdict_line(report: Mapping[str, Any]) -> str:
    night = report.get("night") or {}
    points = report.get("change_points") or []
    culprits = report.get("culprits") or []
    tip = short(night.get("tip") or report.get("bad"))
    if not points:
        return f"Nightly at {tip}: no change point in {len(report.get('series') or [])} measured commits."
    found = f", {len(culprits)} culprit(s) bisected" if culprits else ""
    return f"Nightly at {tip}: {len(points)} change point(s){found}."


def _change_pct(point: Mapping[str, Any]) -> float | None:
    if _finite(point.get("change_pct")):
        return point["change_pct"]
    return 100 * point["change"] if _finite(point.get("change")) else None


def _clip(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
