"""Orchestration of a commit hunt: control arm, instrumentation check, search, explanation.

    history -> pool + store -> overhead arm on GOOD -> footprints of GOOD and BAD -> CommitSearch
    (control arm first) over the commits touching them (again while the footprint grows) ->
    counters at each culprit -> (--drill: each culprit's hunks, hunts/hunks.py) -> JSON report

Everything measured is stored the moment it exists, so a killed hunt resumes by re-running the
same command: the search is deterministic and is fed the stored samples in the order it asks.
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from regressbisect.config import HuntConfig
from regressbisect.errors import UserError
from regressbisect.git.history import CommitInfo, History
from regressbisect.hunts.common import VERDICT_EXIT, HuntOutcome, continue_command, hunting, key_for
from regressbisect.hunts.footprints import SET_ASIDE_REASON, HuntFootprints
from regressbisect.hunts.sampling import Request, SampleSource, median_counters
from regressbisect.hunts.skeleton import Hunt, Rig
from regressbisect.probe.contract import COUNTER_NAMES
from regressbisect.probe.executors import ProbeExecutor
from regressbisect.probe.runner import run_probe
from regressbisect.render import report_json
from regressbisect.render.progress import HuntProgress
from regressbisect.render.report_hunks import DrillReport
from regressbisect.render.report_parts import DrillVerdict
from regressbisect.samples import Arm, Candidate, ProbeOutcome, SampleKey
from regressbisect.search import stats
from regressbisect.search.bisect import CommitSearch, Measure, SearchSettings
from regressbisect.search.budget import AUTO_PILOTS, BudgetChoice, Pilot, choose_budget, drill_probe_cap
from regressbisect.search.driver import drive
from regressbisect.search.overhead import OverheadArm, OverheadDecision
from regressbisect.search.verdicts import Verdict
from regressbisect.store import Store

NO_COUNTERS_NOTE = ("the shimmed probe of GOOD counted nothing (it imports no torch, or makes none of "
                    "the counted calls): no overhead arm and no counters runs, tok/s from unshimmed runs")


def stored_settings(config: HuntConfig) -> dict[str, Any]:
    """A commit hunt's settings as the store keeps them: a hunt resumes only under the same. Every
    search setting (`HuntConfig.search_key`), and what changes the order or arms of its probes."""
    return {**config.search_key("run"), "slots": config.slots, "overlap": config.overlap,
            "instrument": config.instrument, "tokens_auto": config.tokens_auto, "noise_prior": config.noise_prior}


def touching_paths(commits: Sequence[CommitInfo], touching: set[str], paths: Sequence[str]) -> list[CommitInfo]:
    """The candidates of a hunt limited to `paths`: GOOD (commits[0]), the commits of the range
    whose shas are in `touching`, and BAD (commits[-1]), in range order. UserError when no commit
    after GOOD touches them: there is nothing to hunt."""
    if not any(c.sha in touching for c in commits[1:]):
        raise UserError(f"no commit between GOOD and BAD touches PATHS ({' '.join(paths)}): "
                        "check the paths (git pathspecs, from the top of the repository) or the range")
    return [commits[0], *(c for c in commits[1:-1] if c.sha in touching), commits[-1]]


@dataclass(frozen=True)
class InstrumentationPlan:
    """Whether tok/s may come from shimmed runs, decided by measuring the shim on GOOD."""

    main_instrumented: bool
    """True: one arm gives tok/s and counters. False: tok/s unshimmed, counters in separate runs."""
    overhead: stats.Comparison | None
    """Shimmed vs unshimmed on GOOD (None when not measured)."""
    note: str
    counters_available: bool = True
    """False when a shimmed probe of GOOD counted nothing (no torch, or no counted call): then
    there is no overhead arm and no separate counters runs - they would measure nothing."""
    overhead_pairs: int = 0
    """Interleaved pairs the overhead arm used (it stops as soon as its interval decides)."""
    work_available: bool = True
    """False when the shimmed probe of GOOD printed no counters line at all (it never imported
    torch, or built no model and stepped no optimizer): then no counting arm either, so such a
    probe pays nothing for it. A torch program whose four counters are all zero still has work."""


class CommitHunt(Hunt):
    """One `regressbisect run GOOD BAD`."""

    def __init__(self, history: History, good_ref: str, bad_ref: str, config: HuntConfig, *,
                 store_path: Path | None = None, progress: HuntProgress | None = None,
                 probe_runner: Callable[..., ProbeOutcome] = run_probe,
                 executor: ProbeExecutor | None = None, command_line: Sequence[str] | None = None,
                 paths: Sequence[str] = ()):
        """command_line: the user's command without GOOD and BAD (cli/options.without_revisions), for
        the report's continue command of an undecided hunt, which adds the commits they resolved to.
        paths: `run GOOD BAD -- PATHS`: only the commits between GOOD and BAD that touch them are
        candidates (GOOD and BAD stay the ends); the others are not measured (`not_measured`)."""
        self.command_line = command_line
        self.paths = tuple(paths)
        self.good = history.resolve(good_ref)
        self.bad = history.resolve(bad_ref)
        self.range_commits: list[CommitInfo] = history.first_parent_range(self.good, self.bad)
        """Every commit of the first-parent range, GOOD and BAD included (the report's)."""
        self.commits: list[CommitInfo] = self.range_commits
        """The candidates the search sees: the range, or with PATHS its ends and the commits touching them."""
        if self.paths:
            self.commits = touching_paths(self.range_commits, history.touching(self.good, self.bad, self.paths),
                                          self.paths)
        self.candidates = [Candidate(c.sha) for c in self.commits]
        super().__init__(history, config, store_path=store_path, progress=progress, probe_runner=probe_runner,
                         executor=executor)
        self.progress.set_labels([c.sha[:10] for c in self.commits])
        self._trees = {c.sha: c.tree for c in self.range_commits}
        self.footprints = HuntFootprints(history, self.range_commits, self.config, self.env_fingerprint, self.paths)
        """What the probe reads at each candidate: the commits touching none of it are set aside."""
        self._measured: set[str] = set()
        """Commits a search of this hunt measured (a sample, stored or fresh)."""
        self._noise_prior_facts: dict[str, Any] = {}
        """The remembered noise scale the search got and whether it used it (report: noise_prior)."""
        self._cached_by_index: dict[int, int] = {}
        """Samples the search took from the store rather than a probe, per candidate index."""
        self._search_noise: stats.NoisePool | None = None
        """The noise the search pooled: a drill's starts from it (--drill)."""

    def key_for(self, candidate: Candidate) -> SampleKey:
        return key_for(self.history, candidate, config_hash=self.config_hash,
                       env_fingerprint=self.env_fingerprint, trees=self._trees)

    def run(self) -> HuntOutcome:
        with hunting(self.executor):
            return self._run()

    def _run(self) -> HuntOutcome:
        cfg = self.config

        def start(store: Store) -> int:
            return store.start_hunt(kind="commits", good=self.good, bad=self.bad,
                                    config_hash=self.config_hash,
                                    env_fingerprint=self.env_fingerprint,
                                    settings={**stored_settings(cfg), **({"paths": list(self.paths)} if self.paths else {}),
                                              **({} if cfg.footprint else {"footprint": False})})

        with self.rig(start=start) as rig:
            store, hunt_id, cost = rig.store, rig.hunt_id, rig.cost

            def sample_source() -> SampleSource:  # at the current budget (key_for reads it)
                source = rig.source(self, self.key_for)
                if source.isolation is not None:   # the first probe of each candidate records its footprint
                    source.isolation.footprint_for = self.footprints.wanted
                    source.isolation.on_footprint = self.footprints.recorded
                return source

            self.footprints.recall(store)
            cached_before = 0
            try:
                budget = None
                source = sample_source()
                if cfg.tokens_auto:
                    budget = self._choose_budget(source, store)
                    if budget.tokens != cfg.probe.tokens:  # a new key: a source at the new budget
                        cached_before = source.cached_used
                        source = sample_source()
                    # else the pilots stay in this source: the search reuses them as this hunt's
                    # own samples (not as samples cached from before the hunt)
                plan = self._plan_instrumentation(source)
                result = self._search_footprint(source, plan)
            except UserError as error:
                # An endpoint that cannot be measured ends this hunt; the next run starts a new
                # one, which retries (the user may have fixed the environment meanwhile).
                store.finish_hunt(hunt_id, {"verdict": "error", "error": error.message})
                raise
            counters, counting_arm = self._explain(source, plan, result)
            drills = self._drill(rig, source, plan, result) if cfg.drill else {}
            totals = self.meter.totals
            report = report_json.commit_report(
                commits=self.commits, range_commits=self.range_commits, paths=self.paths, result=result, counters=counters, plan=plan,
                footprint=self.footprints.report(),
                not_measured_reason=SET_ASIDE_REASON if self.footprints.active else None,
                probes=totals.probes, builds=totals.builds, cached=cached_before + source.cached_used,
                config=self.config, env_facts=self.env_facts, store_path=self.store_path,
                hunt_id=hunt_id, cached_by_index=self._cached_by_index, isolation=source.isolation,
                exit_code=int(VERDICT_EXIT[result.verdict]), measurement=source.measurement_json(),
                noise_prior=self._noise_prior_facts,
                continue_command=(continue_command(self.command_line, cfg.max_samples, [self.good, self.bad],
                                                               paths=self.paths)
                                  if result.more_samples_would_tell else None),
                cost={**cost.report(store, hunt_id, tokens=self.config.probe.tokens, budget=budget),
                      "counting_arm": counting_arm},
                drills=drills).to_json()
            store.finish_hunt(hunt_id, report)
        return HuntOutcome(report=report, exit_code=VERDICT_EXIT[result.verdict], hunt_id=hunt_id)

    # -- cost levers (docs/cost.md) -----------------------------------------------------------

    def _choose_budget(self, source: SampleSource, store: Store) -> BudgetChoice:
        """--tokens auto: pilot probes of GOOD at the initial budget, then the hunt's budget.

        The pilots are stored under the initial budget's config hash, so they are evidence only
        if the budget stays the same, and a resumed hunt reads them back and chooses the same."""
        cfg = self.config
        self.progress.phase(f"choosing the token budget: {AUTO_PILOTS} pilot probes of GOOD "
                            f"at {cfg.probe.tokens} tokens")
        good = self.candidates[0]
        # one at a time, even with --overlap: their wall time less their window is the start-up
        # the rule weighs, and a probe stopped beside others would overstate it
        for i in range(AUTO_PILOTS):
            (draw,) = self._draw_checked(source, [Request(good, namespace="budget")], ["pilot"])
            self._progress_sample(source, draw, note=f"budget pilot {i + 1}/{AUTO_PILOTS}")
        key = self.key_for(good)
        pilots = [Pilot(wall_s=w, sample=s) for w, s in
                  zip(store.sample_walls(key, arm=Arm.MAIN), store.samples(key, arm=Arm.MAIN))][:AUTO_PILOTS]
        choice = choose_budget(pilots, initial_tokens=cfg.probe.tokens,
                               min_effect=cfg.min_effect, timeout_s=cfg.probe.timeout_s)
        # from the config as the pilots left it: their probes' imports may have joined its key
        self.config = dataclasses.replace(self.config, probe=dataclasses.replace(self.config.probe,
                                                                                 tokens=choice.tokens))
        self.progress.message(f"token budget {choice.tokens} (from {cfg.probe.tokens}): {choice.reason}")
        return choice

    # -- phases -----------------------------------------------------------------------------

    def _draw_checked(self, source: SampleSource, requests: Sequence[Request], notes: Sequence[str]):
        """Draw samples; an endpoint that cannot be measured ends the hunt with its reason."""
        labels = [r.candidate.short for r in requests]
        self.progress.measuring(", ".join(f"{l} ({n})" for l, n in zip(labels, notes)))
        recording = self.footprints.unknown(r.candidate.commit for r in requests)

        def stored(request: Request, key: SampleKey) -> int:
            return len(source.store.sample_ids(key, instrumented=request.instrumented, arm=request.arm))

        before = [(r, key, stored(r, key)) for r in requests if r.candidate.commit in recording
                  for key in [source.key(r.candidate)]]
        try:
            draws = source.draw_many(requests)
        except BaseException:
            # What came back before the failure (or a stop) is stored: its footprint is kept with
            # it, so the hunt resumed knows it (it probes no commit to learn a footprint).
            measured = {r.candidate.commit for r, key, n in before if stored(r, key) > n}
            self.footprints.settle_measured(source.store, [r.candidate.commit for r, _, _ in before], measured)
            raise
        self.footprints.settle(source.store, draws)
        for request, draw in zip(requests, draws):
            if draw.sample is None and request.candidate.commit in (self.good, self.bad):
                which = "GOOD" if request.candidate.commit == self.good else "BAD"
                raise UserError(f"the probe cannot be measured at {which} {request.candidate.commit[:10]}: "
                                f"{draw.skip_reason} (check --cmd, or run it by hand in that commit)")
        return draws

    def _plan_instrumentation(self, source: SampleSource) -> InstrumentationPlan:
        cfg = self.config
        if cfg.instrument == "off":
            return InstrumentationPlan(False, None, "counters off (--instrument off)")
        if cfg.instrument == "separate":
            return InstrumentationPlan(False, None, f"{cfg.unit} from unshimmed runs; counters from "
                                                    "separate shimmed runs (--instrument separate)")
        self.progress.phase("measuring the counters shim's overhead on GOOD (interleaved, "
                            "until decided)")
        good = self.candidates[0]
        # As many at once as the one slot runs (--overlap), else one by one: never across slots,
        # whose devices differ
        arm = OverheadArm(limit=cfg.overhead_limit, max_pairs=cfg.overhead_pairs,
                          at_once=cfg.overlap if cfg.slots == 1 else 1)
        last_shimmed = None
        while order := arm.next_round():
            requests = [Request(good, instrumented=shimmed, namespace="overhead") for shimmed in order]
            draws = [d for batch in _batches(requests, arm.at_once)
                     for d in self._draw_checked(source, batch, ["shimmed" if r.instrumented else "plain" for r in batch])]
            for request, draw in zip(requests, draws):
                arm.record(request.instrumented, draw.value)
                last_shimmed = draw if request.instrumented else last_shimmed
                self._progress_sample(source, draw, note="overhead arm" + (" (shim)" if request.instrumented else ""))
            if last_shimmed is not None and not any(last_shimmed.sample.counters.values()):
                shim_line = any(name in last_shimmed.sample.counters for name in COUNTER_NAMES)
                return InstrumentationPlan(False, None, NO_COUNTERS_NOTE, counters_available=False,
                                           overhead_pairs=arm.pairs, work_available=shim_line)
        # Only an overhead proven below the limit lets tok/s come from shimmed runs (docs/design.md,
        # counters); the Comparison speaks of shimmed relative to plain
        decision, interval, comparison = arm.decision, arm.interval, arm.comparison()
        interval_text = (f"anytime-valid 95% interval {-comparison.ci95[1]:+.2%}..{-comparison.ci95[0]:+.2%}"
                         if all(math.isfinite(x) for x in interval) else "too few pairs to bound it: an anytime-valid interval needs three or more")
        measured = f"shim overhead {-comparison.change:+.2%} ({interval_text}, {arm.pairs} pairs)"
        if decision == OverheadDecision.WITHIN:
            note = (f"{measured} is within {cfg.overhead_limit:.0%}: {cfg.unit} and counters come from the "
                    f"same shimmed runs")
            return InstrumentationPlan(True, comparison, note, overhead_pairs=arm.pairs)
        why = "is beyond" if decision == OverheadDecision.BEYOND else "is not proven within"
        note = (f"{measured} {why} {cfg.overhead_limit:.0%}: {cfg.unit} from unshimmed runs, counters "
                f"from separate shimmed runs")
        return InstrumentationPlan(False, comparison, note, overhead_pairs=arm.pairs)

    # -- the probe's footprint: which commits are candidates (hunts/footprints.py) -------------------

    def _search_footprint(self, source: SampleSource, plan: InstrumentationPlan):
        """The search over the commits touching what GOOD and BAD read; again, over those touching
        what the measured candidates read too, while that reaches commits set aside (each search
        reuses every sample stored before it: docs/design.md, "The probe's footprint")."""
        footprints = self.footprints
        if not footprints.active:
            return self._search(source, plan)
        self.progress.phase("the probe's footprint at GOOD and BAD: the files it reads")
        for end in (self.range_commits[0], self.range_commits[-1]):
            self._record_footprint(source, plan, end)
        added: list[CommitInfo] = []
        while True:
            self._use_candidates(footprints.candidates())
            footprints.start_pass(added)
            result = self._search(source, plan, namespace="search" if footprints.passes == 1
                                  else f"search-{footprints.passes}")
            for commit in self.range_commits:   # measured from the store alone, by a hunt that recorded none
                if commit.sha in self._measured and footprints.active:
                    self._record_footprint(source, plan, commit)
            added = footprints.grown() if footprints.active else list(footprints.set_aside)
            if not added:
                break
            self.progress.message(f"the probe read more at the commits measured: {len(added)} commit(s) set aside "
                                  f"touch it, and the search runs again with them")
        footprints.stop_recording()
        return result

    def _use_candidates(self, commits: Sequence[CommitInfo]) -> None:
        self.commits = list(commits)
        self.candidates = [Candidate(c.sha) for c in self.commits]
        self.progress.set_labels([c.sha[:10] for c in self.commits])

    def _record_footprint(self, source: SampleSource, plan: InstrumentationPlan, commit: CommitInfo) -> None:
        """Make the footprint of `commit` known, never at the cost of a probe the hunt would not
        run otherwise: the first probe of an end in the arm the search reads (its control arm's
        first sample of it, which the search reads back from the store). A commit with samples
        stored and no footprint (taken by a hunt that recorded none) is not probed again to learn
        it: every commit is a candidate, as where it cannot be read. An end's failure ends the
        hunt, another's ends the footprint."""
        footprints = self.footprints
        if not footprints.active or footprints.known_at(commit):
            return
        candidate = Candidate(commit.sha)
        if source.stored(candidate, plan.main_instrumented):
            footprints.give_up(f"the samples stored of {commit.sha[:10]} were taken without recording what the probe reads")
            return
        self._draw_checked(source, [Request(candidate, instrumented=plan.main_instrumented,
                                            namespace="footprint")], ["footprint"])
        if footprints.active and not footprints.known_at(commit):
            footprints.give_up(f"the footprint of {commit.sha[:10]} could not be recorded: its probe failed")

    def _search(self, source: SampleSource, plan: InstrumentationPlan, namespace: str = "search"):
        cfg = self.config
        settings = SearchSettings.of(cfg, "run")
        prior, self._noise_prior_facts = self._noise_prior(source, plan)
        search = CommitSearch(len(self.candidates), settings, noise_prior=prior)
        self._cached_by_index = {}
        self.progress.phase("control arm: GOOD and BAD interleaved, then the search")

        def measure(batch: Sequence[Measure]):
            requests = [Request(self.candidates[m.index], instrumented=plan.main_instrumented, namespace=namespace)
                        for m in batch]
            draws = self._draw_checked(source, requests, [m.reason for m in batch])
            self._measured.update(d.candidate.commit for d in draws if d.sample is not None)
            return draws

        def recorded(m: Measure, draw) -> None:
            if draw.cached:
                self._cached_by_index[m.index] = self._cached_by_index.get(m.index, 0) + 1
            self._progress_sample(source, draw, note=f"#{m.index} {m.reason}", interval=search.live_interval(),
                                  remaining=search.estimated_remaining())

        result = drive(search, measure, slots=cfg.lanes, value=lambda draw: draw.value, recorded=recorded)
        self._noise_prior_facts.update(search.noise_prior_report() or {})
        self._search_noise = search.book.noise()
        return result

    def _drill(self, rig: Rig, source: SampleSource, plan: InstrumentationPlan,
               result) -> dict[str, DrillReport]:
        """--drill: the hunks of each culprit's diff against its first parent, hunted as `hunks
        --commit` hunts them (hunts/hunks.py) with this hunt's probe, budget, store, worktrees,
        meter and pooled noise, and a probe cap in proportion to the search that named the culprit
        (`budget.drill_probe_cap`); the culprit and its parent are BASE + every hunk and BASE, so
        their samples from the search are the drill's first. commit sha -> its report entry."""
        from regressbisect.hunts.hunks import HunkHunt

        drills: dict[str, DrillReport] = {}
        for culprit in result.culprits:
            sha = self.commits[culprit.first_bad].sha
            try:
                drill = HunkHunt(self.history, self.config, commit=sha, store_path=self.store_path,
                                 progress=self.progress, executor=self.executor, noise_prior=self._search_noise,
                                 instrumented=plan.main_instrumented,
                                 max_probes=drill_probe_cap(result.probes, self.config.max_samples))
            except UserError as error:     # no hunks: e.g. an empty commit, a submodule added
                drills[sha] = DrillReport(verdict=DrillVerdict.NO_HUNKS, reason=error.message)
                continue
            if len(drill.hunks) < 2:
                drills[sha] = drill.drill_report(None, None)
                continue
            drill.meter = self.meter
            self.progress.phase(f"drill: the {len(drill.hunks)} hunks of culprit {sha[:10]}, against its parent")
            drill_source = drill.sample_source(rig, source.isolation)
            drills[sha] = drill.drill_report(drill.decide(drill_source), drill_source)
        return drills

    def _noise_prior(self, source: SampleSource, plan: InstrumentationPlan) -> tuple[stats.NoisePool | None, dict]:
        """A remembered noise scale: the within-candidate spread of samples earlier hunts stored
        under this probe config and machine fingerprint (other candidates than this hunt's, whose
        stored samples it reuses anyway). Never their levels (docs/search.md, section 1)."""
        if not self.config.noise_prior:
            return None, {"used": False, "reason": "off (--no-noise-prior)"}
        groups = source.store.spread_groups(self.config_hash, self.env_fingerprint,
                                            instrumented=plan.main_instrumented,
                                            exclude_trees=set(self._trees.values()))
        if not groups:
            return None, {"used": False, "reason": "no earlier samples on this machine with this probe config"}
        pool = stats.NoisePool.of(groups)
        return pool, {"candidates": len(groups), "samples": sum(len(g) for g in groups),
                      "sigma": pool.sigma, "df": pool.df}

    def _explain(self, source: SampleSource, plan: InstrumentationPlan, result
                 ) -> tuple[dict[int, dict[str, float]], dict[str, Any]]:
        """Counters and the work per step at GOOD, BAD and both sides of each culprit: one probe
        of the counting arm each (docs/design.md, "Work per step"), never a source of tok/s. With
        tok/s from shimmed runs, the four counters come from those runs; else from these probes.
        Returns the counts per candidate index (the `work.` ones included) and the arm's cost."""
        cost = {"probes": 0, "seconds": 0.0, "commits": 0}
        if (self.config.instrument == "off" or not (plan.counters_available or plan.work_available)
                or result.verdict not in (Verdict.CULPRITS, Verdict.NOT_LOCALISED, Verdict.UNDECIDED)):
            return {}, cost
        indices = sorted({0, len(self.candidates) - 1}
                         | {c.first_bad for c in result.culprits} | {c.last_good for c in result.culprits})
        counters: dict[int, dict[str, float]] = {}
        if plan.main_instrumented:
            counters = {i: median_counters(source.stored(self.candidates[i], instrumented=True)) for i in indices}
        self.progress.phase("counting arm: the work per step at GOOD, BAD and each culprit and its parent")
        probes_before, started = self.meter.totals.probes if self.meter else 0, time.perf_counter()
        for batch in _batches(indices, self.config.lanes):
            requests = [Request(self.candidates[i], instrumented=True, work=True, namespace="counters")
                        for i in batch]
            for i, draw in zip(batch, source.draw_many(requests)):
                self._progress_sample(source, draw, note=f"#{i} counting arm")
                counts = median_counters([draw.sample]) if draw.sample is not None else {}
                if draw.sample is None and draw.skip_reason:
                    cost.setdefault("failed", {})[self.candidates[i].short] = draw.skip_reason
                if plan.main_instrumented:   # the four counters from the shimmed runs; the work from here
                    counts = {**counts, **counters.get(i, {})}
                counters[i] = counts
        probes = (self.meter.totals.probes if self.meter else 0) - probes_before
        cost.update(probes=probes, seconds=round(time.perf_counter() - started, 3) if probes else 0.0,
                    commits=len(indices))
        return counters, cost

    def _progress_sample(self, source: SampleSource, draw, note: str, **kw) -> None:
        meter = self.meter
        if meter is not None:
            self.progress.cost(meter.totals.line())
        self.progress.sample(draw.candidate.short, draw.value, draw.skip_reason, draw.cached,
                             probes=meter.totals.probes if meter else source.probes_run,
                             cached_total=source.cached_used, note=note, **kw)


def _batches(items: Sequence, size: int) -> list[list]:
    """`items` in consecutive batches of at most `size` (the probes a hunt runs at once)."""
    return [list(items[i:i + size]) for i in range(0, len(items), size)]
