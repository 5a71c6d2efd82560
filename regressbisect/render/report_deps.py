"""The report of `regressbisect deps`: its JSON (`deps_report`) and the summary it prints
(`deps_summary`), one row per level: the package (its change against GOOD), the release (its
step in the bisection of the package's releases) and, with the package's repository, the commit
(its step in the bisection of the commits between the two releases' tags) and the hunk (the
culprit commit's hunks against its parent, hunted as `run --drill` hunts them).

JSON: `culprits[]`, one per package of a culprit, with `package`, `good_version`, `bad_version`,
`version` (the first release with the change, null when it could not be told), `step_pct` and
`interval` (the culprit's change against GOOD, percent, its 95% interval), `with` (the packages
it is named with, and how each joined: e.g. 'needed to run'), and `releases` (the bisection: each release step, the
releases skipped and why; `axis`: "date" where nightlies were ordered by upload time, and
`uploaded`: each release's upload time where the index gave one, also on each step); with the
package's repository, `commits` (each culprit commit: `sha`,
`subject`, `after`, `step_pct`, `interval`, and `hunks`: the culprit hunks of its drill, each with
`file`, `lines`, `function`, `excerpt` and its culprit group's `step_pct` and `interval`, beside
`hunk_search`: the hunks tested, the verdict, and why none were named) and `commit_search` (the
commits tested, skipped and why, or why none were). `probes` counts the probes this run took, `cached` the samples stored
before it that it reused (a resumed hunt's), `hunt_id` the store's hunt.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from regressbisect.search.bisect import SearchResult
from regressbisect.search.hunkdecide import HunkDecision
from regressbisect.search.sides import SideOutcome

SCHEMA = 1


@dataclass(frozen=True)
class ReleaseHunt:
    """The releases of one culprit package between its two versions, and what their bisection found."""

    package: str
    display: str
    good: str | None
    bad: str | None
    group: tuple[str, ...] = ()
    """The other packages of its culprit, made as in BAD at every release."""
    versions: tuple[str, ...] = ()
    """GOOD's version, the releases between, BAD's version, in that order (empty: not listed)."""
    result: SearchResult | None = None
    """The commit search over `versions` (None: none ran)."""
    version: str | None = None
    """The first release with the change (None: not told)."""
    skipped: tuple[tuple[str, str], ...] = ()
    """(release, why) of the releases that did not install or run."""
    reason: str = ""
    after: str | None = None
    """The last release without the change, before `version` (None: not told)."""
    commits: "CommitLevel | None" = None
    """The commits between `after` and `version` searched (None: no repository given)."""
    axis: str = "version"
    """How `versions` is ordered: "date" (nightlies, by upload time) or "version"."""
    uploaded: tuple[tuple[str, str], ...] = ()
    """(release, upload time) where the index gave one."""


@dataclass(frozen=True)
class CommitLevel:
    """The commits of a culprit package's repository between the tags of its two releases,
    each built from source into the culprit's environment, and what their bisection found."""

    repo: str
    commits: tuple = ()
    """CommitInfo of the tag of `after`, the commits between, the tag of `version`, in order."""
    result: SearchResult | None = None
    skipped: tuple[tuple[str, str], ...] = ()
    """(sha, why) of the commits that did not build or run."""
    reason: str = ""
    drills: tuple["HunkLevel", ...] = ()
    """The drill into each culprit commit of `result`, in its order."""


@dataclass(frozen=True)
class HunkLevel:
    """The hunks of one culprit commit against its parent, each subset built from source into
    the culprit's environment, and what the hunk search over them found."""

    sha: str
    hunks: tuple = ()
    """The commit's hunks (git/hunks.py Hunk), in the diff's order (empty: none collected)."""
    decision: HunkDecision | None = None
    """The hunk search (None: none ran: one hunk, none, or an end that did not build or run)."""
    probes: int = 0
    reason: str = ""


def _pct(x: float) -> float | None:
    return round(100 * x, 2) if math.isfinite(x) else None


def _interval(ci: Sequence[float]) -> list[float | None]:
    return [_pct(ci[0]), _pct(ci[1])]


def _releases_json(hunt: ReleaseHunt) -> dict[str, Any]:
    result = hunt.result
    uploaded = dict(hunt.uploaded)
    out: dict[str, Any] = {"tested": list(hunt.versions), "axis": hunt.axis, "uploaded": uploaded,
                           "verdict": str(result.verdict) if result else None,
                           "reason": hunt.reason, "probes": result.probes if result else 0,
                           "steps": [], "skipped": [{"version": v, "reason": r} for v, r in hunt.skipped]}
    if result is not None:
        out["steps"] = [{"version": hunt.versions[c.first_bad], "after": hunt.versions[c.last_good],
                         "uploaded": uploaded.get(hunt.versions[c.first_bad]),
                         "after_uploaded": uploaded.get(hunt.versions[c.last_good]),
                         "step_pct": _pct(c.step), "interval": _interval(c.step_ci95),
                         "share_of_gap": round(c.share_of_gap, 3)} for c in result.culprits]
        # a step with releases between that did not install: it is any of them or its first_bad
        out["ambiguous"] = [{"any_of": list(hunt.versions[c.last_good + 1:c.first_bad + 1]),
                             "after": hunt.versions[c.last_good], "step_pct": _pct(c.step),
                             "interval": _interval(c.step_ci95)} for c in result.ambiguous]
        # what became of the releases beside each step, as a commit report's sides: a step there
        # searched for, ruled out down to a size, or left open
        out["sides"] = [{"from": hunt.versions[side.lo], "to": hunt.versions[side.hi], "outcome": str(side.outcome),
                         "ruled_out_pct": _pct(side.ruled_out)} for side in result.sides]
    return out


def _commits_json(level: CommitLevel) -> list[dict[str, Any]]:
    """The culprit commits: each step of the commit search, as the release steps, with its drill."""
    if level.result is None:
        return []
    drills = {d.sha: d for d in level.drills}
    out = []
    for c in level.result.culprits:
        commit = level.commits[c.first_bad]
        entry = {"sha": commit.sha, "subject": commit.subject, "after": level.commits[c.last_good].sha,
                 "step_pct": _pct(c.step), "interval": _interval(c.step_ci95), "share_of_gap": round(c.share_of_gap, 3)}
        if commit.sha in drills:
            entry.update(_hunks_json(drills[commit.sha], entry))
        out.append(entry)
    return out


def _hunk_entry(hunk, step_pct: float | None, interval: list[float | None]) -> dict[str, Any]:
    return {"file": hunk.file, "lines": list(hunk.lines), "function": hunk.function, "excerpt": hunk.excerpt,
            "step_pct": step_pct, "interval": interval}


def _hunks_json(drill: HunkLevel, commit: Mapping[str, Any]) -> dict[str, Any]:
    """A culprit commit's `hunks` (each culprit group's hunks, with the group's step; a commit of
    one hunk: that hunk, with the commit's) and `hunk_search`."""
    decision = drill.decision
    if decision is not None:
        by_id = {h.id: h for h in drill.hunks}
        hunks = [_hunk_entry(by_id[i], _pct(c.change), _interval(c.reported_ci95))
                 for c in decision.culprits for i in sorted(c.hunks, key=list(by_id).index)]
    else:
        hunks = ([_hunk_entry(drill.hunks[0], commit["step_pct"], commit["interval"])]
                 if len(drill.hunks) == 1 else [])
    return {"hunks": hunks, "hunk_search": {"tested": len(drill.hunks), "probes": drill.probes,
                                            "verdict": str(decision.verdict) if decision else None,
                                            "reason": drill.reason}}


def _commit_search_json(level: CommitLevel) -> dict[str, Any]:
    result = level.result
    return {"repo": level.repo, "tested": [c.sha for c in level.commits],
            "verdict": str(result.verdict) if result else None, "reason": level.reason,
            "probes": result.probes if result else 0,
            "skipped": [{"sha": sha, "reason": why} for sha, why in level.skipped]}


def deps_report(*, good, bad, changes, needs: Mapping[str, frozenset[str]], decision: HunkDecision,
                releases: Sequence[ReleaseHunt], exit_code: int, unit: str, crashes: Mapping[frozenset, str],
                probes: int, cached: int, hunt_id: int, builds: int, build_seconds: float, wall_seconds: float,
                settings: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON report of a deps hunt (see the module docstring)."""
    control = decision.control
    ends = control.endpoints if control is not None else ()
    by_package = {r.package: r for r in releases}
    culprits = []
    for culprit in decision.culprits:
        joined = culprit.how_joined()
        for name in (n for n in sorted(culprit.hunks) if n in by_package):
            hunt = by_package[name]
            change = next(c for c in changes if c.name == name)
            culprits.append({
                "package": change.display or name, "good_version": change.good, "bad_version": change.bad,
                "version": hunt.version,
                "step_pct": _pct(culprit.change), "interval": _interval(culprit.reported_ci95),
                "share_of_gap": round(culprit.share_of_gap, 3) if math.isfinite(culprit.share_of_gap) else None,
                "with": [{"package": n, "joined": str(joined[n])} for n in sorted(culprit.hunks - {name})],
                "releases": _releases_json(hunt),
                **({"commits": _commits_json(hunt.commits), "commit_search": _commit_search_json(hunt.commits)}
                   if hunt.commits is not None else {}),
            })
    return {
        "kind": "deps", "schema": SCHEMA, "verdict": str(decision.verdict), "reason": decision.reason,
        "exit_code": exit_code, "unit": unit, "good_env": good.source, "bad_env": bad.source,
        "changes": [{"package": c.display or c.name, "kind": c.kind, "good_version": c.good,
                     "bad_version": c.bad} for c in changes],
        "needs": {name: sorted(need) for name, need in sorted(needs.items())},
        "endpoints": [{"median": e.median, "n": e.n} for e in ends],
        "gap_pct": _pct(control.gap) if control is not None else None,
        "culprits": culprits,
        "suspects": [{"packages": sorted(s.hunks), "step_pct": _pct(s.change), "interval": _interval(s.reported_ci95)}
                     for s in decision.suspects],
        "did_not_run": [{"packages": sorted(subset), "reason": reason} for subset, reason in crashes.items()],
        "left_out": {"good": list(good.unsupported), "bad": list(bad.unsupported)},
        "probes": probes, "cached": cached, "hunt_id": hunt_id, "environments_built": builds, "build_seconds": round(build_seconds, 2),
        "wall_seconds": round(wall_seconds, 2), "settings": dict(settings),
    }


def _pct_text(value: float | None) -> str:
    return "?" if value is None else f"{value:+.1f}%"


def _side_text(side: Mapping[str, Any]) -> str:
    """What became of the releases beside a step (`SideOutcome`)."""
    if side["outcome"] in (SideOutcome.CLEARED, SideOutcome.REMAINDER) and side.get("ruled_out_pct") is not None:
        searched = ", then searched for the remainder" if side["outcome"] == SideOutcome.REMAINDER else ""
        return f"no further step of {abs(side['ruled_out_pct']):.1f}% or more{searched}"
    if side["outcome"] == SideOutcome.SEARCHED:
        return "its ends differed: searched"
    return "not told: a further step there is not ruled out"


def _interval_text(interval: Sequence[float | None]) -> str:
    return f"95% interval {_pct_text(interval[0])}..{_pct_text(interval[1])}"


def _dated(version: str, uploaded: Mapping[str, str] | None) -> str:
    """A release with its upload date where the index gave one: '2.6.0.dev20250103, uploaded 2025-01-03'."""
    when = (uploaded or {}).get(version)
    return f"{version}, uploaded {when[:10]}" if when else version


def deps_summary(report: Mapping[str, Any]) -> str:
    """What `deps` prints when it ends."""
    unit = report.get("unit") or "tok/s"
    changes = report["changes"]
    lines = [f"regressbisect deps: {report['good_env']} -> {report['bad_env']}, {len(changes)} package(s) "
             f"changed: {report['verdict']}" + (f" ({report['reason']})" if report.get("reason") else "")]
    ends = report.get("endpoints") or []
    if len(ends) == 2 and ends[0]["n"] and ends[1]["n"]:
        lines.append(f"  GOOD {ends[0]['median']:,.1f} {unit} (n={ends[0]['n']}), BAD {ends[1]['median']:,.1f} "
                     f"{unit} (n={ends[1]['n']}): {_pct_text(report.get('gap_pct'))}")
    for number, culprit in enumerate(report["culprits"], 1):
        joined = "".join(f" (with {w['package']}: {w['joined']})" for w in culprit["with"])
        lines.append(f"culprit {number}: package {culprit['package']} {culprit['good_version'] or '(none)'} -> "
                     f"{culprit['bad_version'] or '(removed)'}{joined}: {_pct_text(culprit['step_pct'])} "
                     f"({_interval_text(culprit['interval'])})")
        releases = culprit.get("releases") or {}
        steps = releases.get("steps") or []
        for step in steps:
            uploaded = releases.get("uploaded")
            lines.append(f"  release {culprit['package']} {_dated(step['version'], uploaded)} "
                         f"(after {_dated(step['after'], uploaded)}): "
                         f"{_pct_text(step['step_pct'])} ({_interval_text(step['interval'])})")
        for step in releases.get("ambiguous") or []:
            lines.append(f"  release {culprit['package']} {' or '.join(step['any_of'])} (after {step['after']}; "
                         f"not told apart: a release between did not run): {_pct_text(step['step_pct'])} "
                         f"({_interval_text(step['interval'])})")
        if not steps and not releases.get("ambiguous"):
            told = f"release {culprit['version']}" if culprit["version"] else "release not told"
            lines.append(f"  {told}" + (f": {releases.get('reason')}" if releases.get("reason") else ""))
        for side in releases.get("sides") or []:
            lines.append(f"  releases {side['from']}..{side['to']}: {_side_text(side)}")
        for skip in releases.get("skipped") or []:
            lines.append(f"  skipped release {skip['version']}: {skip['reason']}")
        for commit in culprit.get("commits") or []:
            lines.append(f"  commit {commit['sha'][:10]} {commit['subject']} (after {commit['after'][:10]}): "
                         f"{_pct_text(commit['step_pct'])} ({_interval_text(commit['interval'])})")
            for hunk in commit.get("hunks") or []:
                first, last = hunk["lines"]
                lines.append(f"  hunk {hunk['file']}:{first}" + (f"-{last}" if last != first else "")
                             + f" (in {commit['sha'][:10]}): {_pct_text(hunk['step_pct'])} "
                             f"({_interval_text(hunk['interval'])})")
            search = commit.get("hunk_search")
            if search is not None and not commit.get("hunks"):
                lines.append(f"  hunk not told: {search['reason'] or search['verdict']}")
        search = culprit.get("commit_search")
        if search is not None and not culprit.get("commits"):
            lines.append(f"  commit not told: {search['reason'] or search['verdict']}")
    for suspect in report.get("suspects") or []:
        lines.append(f"suspect (not named): {', '.join(suspect['packages'])} {_pct_text(suspect['step_pct'])}")
    for crash in report.get("did_not_run") or []:
        lines.append(f"did not run: GOOD + {', '.join(crash['packages'])}: {crash['reason']}")
    cached = f" (+{report['cached']} stored sample(s) reused)" if report.get("cached") else ""
    lines.append(f"{report['probes']} probe(s){cached}, {report['environments_built']} environment(s) built in "
                 f"{report['build_seconds']:.1f} s, {report['wall_seconds']:.1f} s in all")
    return "\n".join(lines)
