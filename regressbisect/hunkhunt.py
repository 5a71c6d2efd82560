"""Orchestration of a hunk hunt: which uncommitted hunks made tok/s drop.

    hunks of `git diff BASE` (+ untracked) -> control arm: BASE vs BASE + everything ->
    hierarchical ddmin over hunks (search/ddmin.py), each subset placed between the two levels by
    sequential sampling (search/levels.py) -> attribution per culprit (alone, left out) ->
    counters before/after -> JSON report

A candidate is BASE plus a set of hunk ids (model.Candidate), checked out in a pooled worktree
with the subset's patch applied: the user's work tree, index and untracked files are only read.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from regressbisect import stats
from regressbisect.config import HuntConfig, default_store_path
from regressbisect.errors import UserError
from regressbisect.git.history import History
from regressbisect.git.hunks import Hunk, build_patch, collect_hunks, group_hunks
from regressbisect.git.worktrees import WorktreePool
from regressbisect.hunt import (probe_spec, VERDICT_EXIT, HuntOutcome, count_gpus,
                                measurement_parts, slot_environments)
from regressbisect.model import Candidate, ProbeOutcome, SampleKey
from regressbisect.oracle import Request, SampleSource, median_counters
from regressbisect.jsonreport import isolation_json
from regressbisect.probe.executors import ProbeExecutor, make_executor, work_root
from regressbisect.probe.isolation import isolation_for_hunt
from regressbisect.probe.runner import run_probe
from regressbisect.progress import HuntProgress
from regressbisect.search.bisect import CommitSearch, SearchSettings
from regressbisect.search.ddmin import UNRESOLVED, HunkSearch
from regressbisect.search.levels import LevelRule, subset_verdict
from regressbisect.stats import log_threshold
from regressbisect.store import Store
from regressbisect.jsonreport import report_header

ATTRIBUTION_SAMPLES = 5
"""Samples of each attribution arm (culprit alone, culprit left out)."""


@dataclass(frozen=True)
class _Levels:
    base: float
    full: float
    rule: LevelRule
    """The verdict zones, scaled to this gap and this machine's noise."""


class HunkHunt:
    """One `regressbisect hunks`: BASE vs BASE + the work tree's changes."""

    def __init__(self, history: History, config: HuntConfig, *, base: str = "HEAD",
                 include_untracked: bool = False, store_path: Path | None = None,
                 progress: HuntProgress | None = None,
                 probe_runner: Callable[..., ProbeOutcome] = run_probe,
                 rule: LevelRule = LevelRule(), executor: ProbeExecutor | None = None):
        self.history = history
        self.config = config
        self.base = history.resolve(base)
        self.hunks: list[Hunk] = collect_hunks(history.root, self.base, include_untracked=include_untracked)
        self.by_id = {h.id: h for h in self.hunks}
        self.store_path = store_path or default_store_path(history.common_dir)
        self.progress = progress or HuntProgress(quiet=True)
        self.probe_runner = probe_runner
        self.rule = rule
        self.executor = executor or make_executor(config, history, progress=self.progress,
                                                  probe_runner=probe_runner)
        self.env_fingerprint, self.env_facts = self.executor.fingerprint()
        self._config_hash = config.probe.config_hash()
        self._tree = history.tree_of(self.base)
        self.progress.set_labels(["base", "base+all"])

    def candidate(self, ids) -> Candidate:
        return Candidate(self.base, tuple(sorted(ids)))

    def key_for(self, candidate: Candidate) -> SampleKey:
        # The patch hash is over hunk ids, which hash each hunk's file and text: stable while the
        # change is the same, so a re-run reuses the samples.
        return SampleKey(tree=self._tree, patch_hash=candidate.patch_hash,
                         config_hash=self._config_hash, env_fingerprint=self.env_fingerprint)

    def patch_for(self, candidate: Candidate) -> str | None:
        if not candidate.patch:
            return None
        return build_patch([self.by_id[i] for i in candidate.patch])

    def run(self) -> HuntOutcome:
        cfg = self.config
        spec = probe_spec(cfg)
        everything = self.candidate(self.by_id)
        with Store(self.store_path) as store, WorktreePool(self.history, cfg.slots,
                                                                root=work_root(cfg, self.history)) as pool:
            hunt_id = store.start_hunt(kind="hunks", good=self.base, bad=everything.patch_hash or "",
                                       config_hash=self._config_hash, env_fingerprint=self.env_fingerprint,
                                       settings={"min_effect": cfg.min_effect, "direction": cfg.direction,
                                                 "max_samples": cfg.max_samples})
            source = SampleSource(store=store, pool=pool, spec=spec, env_fingerprint=self.env_fingerprint,
                                  hunt_id=hunt_id, key_for=self.key_for, patch_for=self.patch_for,
                                  slot_env=slot_environments(cfg, count_gpus())[:1],
                                  executor=self.executor,
                                  **measurement_parts(cfg, self.history, store, hunt_id, self.progress),
                                  isolation=isolation_for_hunt(self.history, cfg.probe.isolation_check, spec.env,
                                                               records_root=work_root(cfg, self.history)))
            control = self._control_arm(source, everything)
            report: dict[str, Any]
            if control.verdict != "culprits":
                report = self._report(control, None, [], source, hunt_id, {})
            else:
                base, full = control.endpoints[0].median, control.endpoints[1].median
                gap = abs(math.log(base / full))
                noise = max((e.cv for e in control.endpoints if math.isfinite(e.cv)), default=0.0)
                rule = self.rule.scaled_to(gap, log_threshold(cfg.min_effect), math.log1p(noise)) if gap > 0 else self.rule
                levels = _Levels(base, full, rule)
                search = self._ddmin(source, levels)
                result = search.result()
                attributions = [self._attribute(source, culprit, everything, levels) for culprit in result.culprits]
                counters = self._counters(source, result.culprits) if cfg.instrument != "off" else {}
                report = self._report(control, result, attributions, source, hunt_id, counters)
            report["measurement"] = source.measurement_json()
            store.finish_hunt(hunt_id, report)
        verdict = report["verdict"]
        return HuntOutcome(report=report, exit_code=VERDICT_EXIT[verdict], hunt_id=hunt_id)

    # -- phases ----------------------------------------------------------------------------------

    def _draw(self, source: SampleSource, candidate: Candidate, *, namespace: str,
              instrumented: bool = False, note: str = ""):
        (draw,) = source.draw_many([Request(candidate, instrumented=instrumented, namespace=namespace)])
        label = "base" if not candidate.patch else f"base+{len(candidate.patch)}h"
        self.progress.sample(label, draw.value, draw.skip_reason, draw.cached, probes=source.probes_run,
                             cached_total=source.cached_used, note=note)
        return draw

    def _control_arm(self, source: SampleSource, everything: Candidate):
        """BASE vs BASE + all hunks, interleaved, with the commit search's control arm (n = 2)."""
        cfg = self.config
        self.progress.phase(f"control arm: {self.base[:10]} vs + all {len(self.hunks)} hunks, interleaved")
        search = CommitSearch(2, SearchSettings(min_effect=cfg.min_effect, direction=cfg.direction,
                                                max_samples=cfg.max_samples))
        endpoints = [self.candidate(()), everything]
        while batch := search.next_batch(1):
            for measure in batch:
                draw = self._draw(source, endpoints[measure.index], namespace="control", note="control arm")
                if draw.sample is None:
                    which = "BASE" if measure.index == 0 else "BASE + all hunks"
                    raise UserError(f"the probe cannot be measured at {which}: {draw.skip_reason} "
                                    "(check --cmd, or run it by hand)")
                search.record(measure.index, draw.value)
        return search.result()

    def _verdict(self, source: SampleSource, subset, levels: _Levels, confirming: bool) -> str:
        """Sample a subset until its level is decided (search/levels.py); unresolved if it fails."""
        candidate = self.candidate(subset)
        namespace = "confirm" if confirming else "ddmin"
        values: list[float] = []
        while True:
            draw = self._draw(source, candidate, namespace=namespace,
                              note=f"subset of {len(subset)} hunk(s)" + (" (confirm)" if confirming else ""))
            if draw.sample is None:
                return UNRESOLVED  # does not apply, does not import, crashes: neither fast nor slow
            values.append(draw.value)
            verdict = subset_verdict(values, levels.base, levels.full, levels.rule)
            if verdict is not None:
                return verdict

    def _ddmin(self, source: SampleSource, levels: _Levels) -> HunkSearch:
        self.progress.phase(f"delta debugging over {len(self.hunks)} hunks (files, functions, hunks)")
        search = HunkSearch([h.id for h in self.hunks], group_hunks(self.hunks))
        while (subset := search.next_subset()) is not None:
            search.record(subset, self._verdict(source, subset, levels, search.confirming))
        return search

    def _attribute(self, source: SampleSource, culprit, everything: Candidate, levels: _Levels) -> dict[str, Any]:
        """The culprit alone on BASE, and all hunks but the culprit: slowdown of each."""
        alone = self.candidate(culprit)
        left_out = self.candidate(set(everything.patch) - set(culprit))
        self.progress.phase(f"attribution of {len(culprit)} hunk(s): alone and left out")
        values: dict[str, list[float]] = {"alone": [], "left_out": []}
        for _ in range(ATTRIBUTION_SAMPLES):
            for name, cand in (("alone", alone), ("left_out", left_out)):
                draw = self._draw(source, cand, namespace="attribution", note=f"culprit {name}")
                if draw.sample is not None:
                    values[name].append(draw.value)
        base_tok_s, full_tok_s = levels.base, levels.full
        out: dict[str, Any] = {}
        gap = full_tok_s / base_tok_s - 1
        for name, vals in values.items():
            if len(vals) < 2:
                out[name] = None
                continue
            summary = stats.summarize(vals)
            if name == "alone":  # slowdown the culprit causes on its own, relative to BASE
                change = summary.median / base_tok_s - 1
                ci = (summary.ci95[0] / base_tok_s - 1, summary.ci95[1] / base_tok_s - 1)
            else:  # speed recovered when only the culprit is removed, relative to BASE + all
                change = summary.median / full_tok_s - 1
                ci = (summary.ci95[0] / full_tok_s - 1, summary.ci95[1] / full_tok_s - 1)
            out[name] = {"change_pct": round(100 * change, 3), "ci95_pct": [round(100 * ci[0], 3), round(100 * ci[1], 3)],
                         "median_tok_s": summary.median, "n": summary.n}
        alone_change = (out["alone"] or {}).get("change_pct")
        out["share_of_gap"] = round((alone_change / 100) / gap, 4) if alone_change is not None and gap else None
        return out

    def _counters(self, source: SampleSource, culprits: Sequence[frozenset[str]]) -> dict[str, dict[str, float]]:
        """One shimmed run at BASE and at BASE + each culprit (counts survive instrumentation)."""
        self.progress.phase("counters: shimmed runs at BASE and BASE + each culprit")
        out: dict[str, dict[str, float]] = {}
        for ids in [frozenset()] + list(culprits):
            draw = self._draw(source, self.candidate(ids), namespace="counters", instrumented=True,
                              note="counters (shim)")
            out[",".join(sorted(ids))] = median_counters([draw.sample]) if draw.sample is not None else {}
        return out

    # -- report ----------------------------------------------------------------------------------

    def _report(self, control, result, attributions, source: SampleSource, hunt_id: int,
                counters: dict[str, dict[str, float]]) -> dict[str, Any]:
        good, bad = control.endpoints
        endpoints = {side: (None if s is None else {"median_tok_s": s.median, "ci95": list(s.ci95), "n": s.n})
                     for side, s in (("good", good), ("bad", bad))}
        if control.verdict != "culprits":
            verdict = control.verdict
        else:
            verdict = "culprits" if result.culprits else "none"
        culprits = []
        for culprit, attribution in zip(result.culprits if result else (), attributions):
            hunks = sorted((self.by_id[i] for i in culprit), key=self.hunks.index)
            alone = attribution.get("alone") or {}
            culprits.append({
                "commit": self.base, "parent": self.base,
                "subject": f"{len(hunks)} uncommitted hunk(s) in {', '.join(sorted({h.file for h in hunks}))}",
                "cluster": len(hunks) > 1,
                "hunks": [{"id": h.id, "file": h.file, "lines": list(h.lines), "function": h.function,
                           "kind": h.kind, "excerpt": h.excerpt} for h in hunks],
                "step_pct": alone.get("change_pct"), "ci95_pct": alone.get("ci95_pct"),
                "share_of_gap": attribution.get("share_of_gap"),
                "alone": attribution.get("alone"), "left_out": attribution.get("left_out"),
                "counters_before": counters.get("", {}),
                "counters_after": counters.get(",".join(sorted(culprit)), {}),
            })
        shares = [c["share_of_gap"] for c in culprits if c["share_of_gap"] is not None]
        return {
            **report_header("hunks", self.config.unit),
            "good": self.base, "bad": self.base, "base": self.base,
            "verdict": verdict,
            "endpoints": endpoints,
            "gap_pct": round(100 * control.gap, 3) if control.gap is not None else None,
            "hunk_count": len(self.hunks),
            "files": sorted({h.file for h in self.hunks}),
            "culprits": culprits,
            "unexplained_share": round(1 - sum(shares), 4) if shares else None,
            "interactions": [sorted(s) for s in (result.interactions if result else ())],
            "unresolved_subsets": len(result.unresolved) if result else 0,
            "subsets_tested": result.tests if result else 0,
            "search_complete": result.complete if result else True,
            "candidates": [],
            "probes": source.probes_run,
            "cached_samples": source.cached_used,
            "instrumentation_overhead_pct": None,
            "isolation": isolation_json(source.isolation),
            "instrumentation": {"mode": self.config.instrument,
                                "note": f"counters from separate shimmed runs; {self.config.unit} from unshimmed runs"},
            "hunt_id": hunt_id,
            "environment": dict(self.env_facts),
        }
