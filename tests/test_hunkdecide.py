"""search/hunkdecide.py with a simulated probe: the prefix search, what it costs, what it names."""
from __future__ import annotations

import math
import random

import pytest

from regressbisect.git.hunks import Hunk
from regressbisect.render.report_hunks import HuntedHunks
from regressbisect.search.bisect import SearchSettings
from regressbisect.search.ddmin import DdminSettings
from regressbisect.search.hunkdecide import decide_hunks
from regressbisect.search.hunks.alone import alone
from regressbisect.search.hunks.context import HuntContext
from regressbisect.search.hunks.runnable import Purpose, Runnable
from regressbisect.search.hunks.subsets import Joined
from regressbisect.search.levels import LevelRule
from regressbisect.search.naming import AlphaSpender
from regressbisect.testing.hunkdiff import SimulatedDiff, feature_chain

Diff = SimulatedDiff   # n hunks in files of 5


class Probe:
    """One run of BASE + subset: lognormal noise; None (a crash) for a subset that cannot run."""

    def __init__(self, diff: Diff, seed: int, cv: float = 0.02):
        self.diff, self.rng, self.cv = diff, random.Random(seed), cv
        self.runs: list[frozenset[str]] = []
        self.purposes: list[Purpose] = []

    def __call__(self, subset: frozenset[str], purpose: Purpose) -> float | None:
        self.runs.append(subset)
        self.purposes.append(purpose)
        if not self.diff.runs(subset):
            return None
        value = self.diff.tok_s(subset) * math.exp(self.rng.gauss(0.0, self.cv))
        return value * self.diff.stall_factor(subset, self.rng.random) if self.diff.stalls else value


def hunt(diff: Diff, seed: int, cv: float = 0.02, tell_needs: bool | dict = True):
    """tell_needs: True tells the hunt every need of the diff, False none, a dict those in it."""
    probe = Probe(diff, seed, cv)
    told = diff.needs if tell_needs is True else tell_needs or {}
    extra = {"needs": told} if told else {}
    decision = decide_hunks(diff.ids, diff.groups(), probe, SearchSettings(), **extra)
    return decision, probe


def named(decision) -> set[frozenset[str]]:
    return {c.hunks for c in decision.culprits}


def test_prefix_groups_keep_file_order_and_put_dependent_hunks_in_one_group():
    from regressbisect.search.hunkdecide import prefix_groups

    groups = [[["a1", "a2"], ["b1", "b2", "b3"]], [["a1"], ["a2"], ["b1"], ["b2"], ["b3"]]]
    assert prefix_groups(["b3", "a1", "b1", "a2", "b2"], groups) == [
        frozenset({h}) for h in ("a1", "a2", "b1", "b2", "b3")]
    # b2 needs a1, b3 needs b2: one group, where its first hunk is
    assert prefix_groups(["a1", "a2", "b1", "b2", "b3"], groups, {"b2": {"a1"}, "b3": {"b2"}}) == [
        frozenset({"a1", "b2", "b3"}), frozenset({"a2"}), frozenset({"b1"})]


def test_one_slow_hunk_in_200_costs_about_a_commit_bisection_not_a_delta_debugging():
    # delta debugging paid ~200 runs here (paired subsets, log2(200) levels of them); a prefix
    # search decides ~log2(200) steps like a commit bisection
    probes = []
    for seed in range(4):
        slow = f"h{random.Random(seed).randrange(200):03d}"
        decision, probe = hunt(Diff(200, effects={slow: 0.10}), seed)
        assert named(decision) == {frozenset({slow})}
        probes.append(len(probe.runs))
    assert sum(probes) / len(probes) < 90


def test_a_subset_that_cannot_run_is_never_measured():
    # h031 calls a helper h012 defines; h040..h044 rename a function and its call sites
    rename = frozenset(f"h04{i}" for i in range(5))
    diff = Diff(50, joint=[(frozenset({"h012", "h031"}), 0.10)],
                needs={"h031": frozenset({"h012"}), **{h: rename - {h} for h in rename}})
    decision, probe = hunt(diff, seed=3)
    assert named(decision) == {frozenset({"h012", "h031"})}
    assert all(diff.runs(s) for s in probe.runs)


def test_a_dependency_nobody_declared_is_found_by_what_the_step_needs():
    # h031 crashes without h012 and nobody said so: the prefixes order them either way round
    for user, helper in (("h031", "h012"), ("h012", "h031")):
        diff = Diff(50, joint=[(frozenset({user, helper}), 0.10)], needs={user: frozenset({helper})})
        decision, probe = hunt(diff, seed=7, tell_needs=False)
        assert named(decision) == {frozenset({user, helper})}
        assert len(probe.runs) < 250          # delta debugging over all 50 paid ~300


@pytest.mark.parametrize("seed", range(3))
def test_a_feature_whose_prefixes_crash_is_named_whole_at_the_cost_of_a_few_searches(seed):
    # most prefixes hold the object without its config field and crash; walking them (two probes
    # each, as git bisect's skip does) cost ~400 probes at 2% noise and ended in delta debugging
    # one time in six: a run of crashes is crossed by bisection on where it ends, and what a hunk
    # needs to run is found by bisection on whether it runs (a crash answers without noise)
    # six hunks slow only together; the hunt is told only the needs the diff shows
    diff, told = feature_chain(54, random.Random(seed).sample(range(53), 5))
    decision, probe = hunt(diff, seed, tell_needs=told)
    assert named(decision) == diff.culprits()
    assert len(probe.runs) < 220
    crashes = sum(not diff.runs(s) for s in probe.runs)
    assert crashes < 40


def test_every_run_of_a_hunk_hunt_names_its_purpose():
    """Purposes are Purpose members: the hunk hunt stops on a CONTROL run that fails by it."""
    chain, told = feature_chain(30, [2, 8, 14, 20, 25])
    purposes = hunt(Diff(30, joint=[(frozenset({"h004", "h022"}), 0.10)]), seed=11)[1].purposes
    purposes += hunt(chain, seed=3, tell_needs=told)[1].purposes
    assert {type(p) for p in purposes} == {Purpose} and Purpose.CONTROL in purposes
    assert len(set(purposes)) >= 4


def test_hunks_slow_only_together_are_one_culprit():
    # both run alone and neither is slow alone: the step's hunk needs the earlier one to be slow
    diff = Diff(30, joint=[(frozenset({"h004", "h022"}), 0.10)])
    decision, _ = hunt(diff, seed=11)
    assert named(decision) == {frozenset({"h004", "h022"})}


def test_a_declared_dependency_that_is_not_needed_names_only_the_slow_hunk():
    # h020 is said to need h021 (they are one group); h021 alone is the slowdown, h020 does nothing
    diff = Diff(30, effects={"h021": 0.10}, needs={"h020": frozenset({"h021"})})
    decision, _ = hunt(diff, seed=5)
    assert named(decision) == {frozenset({"h021"})}


def test_two_declared_dependencies_that_are_not_needed_are_both_dropped():
    # h020 and h022 are said to need h021 (one group of three); h021 alone is the slowdown: each of
    # the two is found not needed on its own, and the second again once the first is gone
    diff = Diff(30, effects={"h021": 0.10}, needs={"h020": frozenset({"h021"}), "h022": frozenset({"h021"})})
    decision, _ = hunt(diff, seed=5)
    assert named(decision) == {frozenset({"h021"})}


@pytest.mark.parametrize("seed", [1, 2])
def test_the_hunks_of_a_culprit_are_left_out_side_by_side(seed):
    # a culprit of six hunks, four of which can be left out: one rotation measures BASE, the four
    # rests and the culprit, so BASE and the culprit run once a round for all four tests (three
    # runs per test and round measured them four times as often)
    diff, told = feature_chain(54, random.Random(seed).sample(range(53), 5))
    (group,) = diff.culprits()
    phase, runs = [""], []

    def probe(subset, purpose):
        runs.append((phase[0], subset))
        return diff.tok_s(subset) * math.exp(rng.gauss(0.0, 0.02)) if diff.runs(subset) else None

    rng = random.Random(seed)
    decision = decide_hunks(diff.ids, diff.groups(), probe, SearchSettings(), needs=told,
                            on_phase=lambda text: phase.__setitem__(0, text))
    assert named(decision) == {group}
    naming = [subset for text, subset in runs if text.startswith("naming:")]
    rests = {h: naming.count(group - {h}) for h in group if naming.count(group - {h})}
    assert len(rests) >= 2
    assert naming.count(group) == naming.count(frozenset()) == max(rests.values())


def test_two_independent_hunks_are_two_culprits():
    diff = Diff(50, effects={"h008": 0.05, "h037": 0.05})
    decision, _ = hunt(diff, seed=2)
    assert named(decision) == {frozenset({"h008"}), frozenset({"h037"})}


@pytest.mark.parametrize("cv", [0.02, 0.14])
def test_an_aa_diff_ends_not_reproduced(cv):
    for seed in range(3):
        decision, _ = hunt(Diff(10), seed, cv)
        assert decision.verdict == "not-reproduced" and not decision.culprits
        # the reason names the hunk hunt's ends, not a commit range's
        assert decision.reason.startswith("BASE->BASE + all hunks ") and "GOOD" not in decision.reason


def test_a_prefix_search_out_of_samples_ends_undecided_without_delta_debugging():
    # 30% noise, a 14% hunk: the prefix search often reaches its sample caps; delta debugging
    # after it spent 1500-3000 more runs on subsets it could not place either, and named nothing
    undecided = 0
    for seed in range(1, 5):
        diff = Diff(6, effects={"h004": 0.14}, needs={"h001": frozenset({"h002"})})
        purposes = []
        probe = Probe(diff, seed=seed, cv=0.3)

        def measure(subset, purpose, probe=probe, purposes=purposes):
            purposes.append(purpose)
            return probe(subset, purpose)

        decision = decide_hunks(diff.ids, diff.groups(), measure, SearchSettings(), needs=diff.needs)
        assert "ddmin" not in purposes and len(purposes) < 600
        assert named(decision) in (set(), {frozenset({"h004"})}), seed   # right or silent
        undecided += decision.verdict == "undecided" and "the prefix search was left undecided" in decision.reason
    assert undecided >= 1


def test_a_culprit_after_a_large_one_in_file_order_is_named_too():
    # the demo's shape: costs in time add, so a hunk 22% slower alone is 9% slower on top of one of
    # -65%: too small a step in the prefixes for their side checks (a fifth of the gap), while the
    # named culprit alone leaves 9% of the gap unexplained; the rest is searched again. The large
    # one is often named on a single pair: the remainder's estimate is then too wide to tell, and
    # the second was missed at 2 of these 60 seeds (15 of 300) until the remainder was asked
    # directly; 3 of 300 now (docs/results/hunks.md), a silent miss, never a wrong hunk
    ids = [f"h{i:03d}" for i in range(30)]
    cost = {"h009": 1.857, "h013": 0.28}
    missed = []
    for seed in range(60):
        rng = random.Random(seed)

        def measure(subset, purpose, rng=rng):
            return 1000 / (1 + sum(cost.get(h, 0.0) for h in subset)) * math.exp(rng.gauss(0.0, 0.02))

        decision = decide_hunks(ids, [[ids], [[h] for h in ids]], measure, SearchSettings())
        assert frozenset({"h009"}) in named(decision) <= {frozenset({"h009"}), frozenset({"h013"})}, seed
        missed += [seed] if frozenset({"h013"}) not in named(decision) else []
    assert len(missed) <= 1, missed


def test_the_hunk_remainder_has_an_interval_that_covers_what_is_left_of_the_gap():
    # one or two slow hunks and nothing else: the true remainder is zero; each culprit is sized
    # from its own alone test against BASE, so the interval must be wide enough to cover it
    named_hunts = covered = 0
    for effects in ({"h012": 0.10}, {"h008": 0.05, "h037": 0.05}):
        for seed in range(6):
            decision, _ = hunt(Diff(50, effects=effects), seed)
            if decision.verdict != "culprits":
                continue
            lo, hi = decision.unexplained_ci95
            unexplained = 1 - sum(c.share_of_gap for c in decision.culprits)
            assert lo < unexplained < hi
            named_hunts += 1
            covered += lo <= 0 <= hi
    assert named_hunts >= 10 and covered >= named_hunts - 1


def test_a_hunk_hunt_without_culprits_has_no_remainder_interval():
    decision, _ = hunt(Diff(10), seed=0)
    assert decision.verdict == "not-reproduced" and all(math.isnan(x) for x in decision.unexplained_ci95)


# -- what a named hunk's step is, and a slowdown spread over many small hunks ----------------------

def alone_test(seed: int, slower: float, cv: float = 0.02):
    """The alone test (search/hunks/alone.py) of one group `slower` than BASE, beside a prefix that
    is the group itself (it needs nothing), each run lognormal: (outcome, TestedSubset or None)."""
    group = frozenset({"h0"})
    ctx = HuntContext(settings=SearchSettings(), rule=LevelRule(), ddmin=DdminSettings(), runs=Runnable(),
                      ids=["h0"], groups=None, order=[group], on_phase=lambda text: None,
                      leave_out_alphas=AlphaSpender(SearchSettings().name_alpha / 2))
    rng = random.Random(seed)
    phase = alone(ctx, group, group, -1)
    try:
        batch = next(phase)
        while True:
            values = [1000.0 * (1 - slower if subset else 1) * math.exp(rng.gauss(0.0, cv))
                      for subset, _ in batch.requests]
            for (subset, _), value in zip(batch.requests, values):
                ctx.record(subset, value)
            batch = phase.send(values)
    except StopIteration as done:
        outcome, found, _ = done.value
        return outcome, found


def test_a_named_hunks_interval_covers_its_step_at_the_stop_of_the_test_that_named_it():
    # A hunk 1.5% slower at 2% noise, min_effect 2%: its alone test stops once the estimate passes
    # 2% with the e-value, so the hunks it names read -2.0% to -5.2% (-2.35% on average). The
    # report's interval is read at that stop: the fixed-n t interval there covered -1.5% in 55 of
    # these 62 (89%); the confidence sequence of the commit search's rule covers at any stopping
    # time (61 of 62).
    hunk = Hunk(id="h0", file="a.py", old_start=1, old_len=1, new_start=1, new_len=1, lines=(1, 1),
                function=None, header="", text="", excerpt="", kind="modify")
    hunted = HuntedHunks([hunk], "b" * 40, None)
    named = covered = 0
    for seed in range(200):
        outcome, found = alone_test(seed, 0.015)
        if outcome != "reproduced":
            continue
        named += 1
        group = hunted.group(found)
        lo, hi = group.ci95_pct
        assert lo <= group.step_pct <= hi <= -0.0 and group.alone.ci95_pct == [lo, hi]
        covered += lo <= -1.5 <= hi
    assert named >= 40, named
    assert covered >= 0.93 * named, (covered, named)        # 95% nominal


@pytest.mark.parametrize("seed", [0, 3, 4])
def test_a_slowdown_spread_over_many_hunks_below_min_effect_ends_in_the_prefix_search(seed):
    # ten hunks 1.5% slower each, min_effect 2%: the prefix search reproduces the 14% and refutes
    # every single step it proposes. Delta debugging then named pairs of small hunks (and a single
    # one on a stopped test), at 1,500 to 2,000 probes; the hunt now says the slowdown is spread
    diff = Diff(10, effects={f"h{i:03d}": 0.015 for i in range(10)}, per_file=1)
    decision, probe = hunt(diff, seed)
    assert decision.verdict == "not-localised", decision.reason
    assert not decision.culprits and decision.spread_over == frozenset(diff.ids)
    assert "spread over 10 hunks, none alone >= 2%" in decision.reason
    assert decision.spread_note == "spread over 10 hunks, none alone >= 2%"
    assert Purpose.DDMIN not in probe.purposes and len(probe.runs) <= 120, len(probe.runs)


def test_a_hunt_stopped_at_its_probe_cap_reports_what_it_named_before_it():
    # two slow hunks and a small one; uncapped the hunt names both at 80-102 probes. At a cap of
    # 90 or 75 measures (SearchSettings.max_probes, over every phase) it stops where it is: never
    # more probes than the cap, what it had named is named (the rest is its remainder), nothing else
    diff = Diff(20, effects={"h003": 0.06, "h014": 0.05, "h017": 0.015})
    stopped = partly = 0
    for seed in range(3):
        probe = Probe(diff, seed)
        uncapped = decide_hunks(diff.ids, diff.groups(), probe, SearchSettings())
        assert named(uncapped) == {frozenset({"h003"}), frozenset({"h014"})} and len(probe.runs) > 75
        for cap in (90, 75):
            probe = Probe(diff, seed)
            capped = decide_hunks(diff.ids, diff.groups(), probe, SearchSettings(max_probes=cap))
            assert len(probe.runs) <= cap
            if capped.reason == "" and named(capped) == named(uncapped):
                continue        # it ended before the cap
            stopped += 1
            assert f"cap of {cap} probes ran out" in capped.reason
            assert named(capped) < named(uncapped)
            if named(capped):
                partly += 1
                assert capped.verdict == "culprits" and all(math.isfinite(x) for x in capped.unexplained_ci95)
            else:
                assert capped.verdict == "undecided"
    assert stopped >= 4 and partly >= 2, (stopped, partly)


@pytest.mark.parametrize("seed", range(3))
def test_a_hunk_that_makes_a_share_of_the_runs_slow_is_named(seed):
    # 40% of the runs at 0.7x with the hunk (a stall every few steps: the mean 14% slower): read as
    # interference, BASE + every hunk had its typical runs at BASE's level and the hunt said 'not
    # reproduced'. The change of shape is the hunk's, and every later test reads every run
    diff = Diff(10, stalls={"h006": (0.40, 0.7)})
    decision, _ = hunt(diff, seed)
    assert named(decision) == {frozenset({"h006"})}
    assert decision.prefix.shape is not None and decision.prefix.shape.bad_share > 0.2


def _hunks(ids):
    return [Hunk(id=i, file=f"f{i}.py", old_start=1, old_len=1, new_start=1, new_len=1, lines=(1, 1),
                 function=None, header="", text="", excerpt="", kind="modify") for i in ids]


@pytest.mark.parametrize("seed", [0, 1])
def test_a_hunk_joined_by_a_crash_is_kept_without_a_leave_one_out_test(seed):
    # h020 crashes without h010 (nobody said so) and is slow only with h005: the alone test's crash
    # joins h010, the needs search's step h005. Leave-one-out measured the rest without h010 (a
    # crash again); it no longer does. The needs search's gate steers and named h005's step on
    # fewer fresh pairs than naming needs: leave-one-out tests it, and it keeps how it joined
    diff = Diff(30, joint=[(frozenset({"h005", "h020"}), 0.10)], needs={"h020": frozenset({"h010"})})
    phase, runs = [""], []
    rng = random.Random(seed)

    def probe(subset, purpose):
        runs.append((phase[0], subset))
        return diff.tok_s(subset) * math.exp(rng.gauss(0.0, 0.02)) if diff.runs(subset) else None

    decision = decide_hunks(diff.ids, diff.groups(), probe, SearchSettings(),
                            on_phase=lambda text: phase.__setitem__(0, text))
    group = frozenset({"h005", "h010", "h020"})
    assert named(decision) == {group}
    (culprit,) = decision.culprits
    assert culprit.how_joined() == {"h005": Joined.NEEDED_TO_BE_SLOW, "h010": Joined.NEEDED_TO_RUN,
                                    "h020": Joined.KEPT_BY_LEAVE_ONE_OUT}
    naming = [subset for text, subset in runs if text.startswith("naming:")]
    assert group - {"h020"} in naming and group - {"h005"} in naming
    assert group - {"h010"} not in naming
    # the report says it, in the JSON and beside each hunk in the text
    reported = HuntedHunks(_hunks(diff.ids), "b" * 40, None).group(culprit)
    assert reported.to_json()["joined"] == {"h005": "needed to be slow", "h010": "needed to run",
                                            "h020": "kept by leave-one-out"}
    from regressbisect.render.facts import culprit_facts, joined_note
    lines = [joined_note(h) for h in culprit_facts(reported).hunks]
    assert lines == [" (needed to be slow)", " (needed to run)", " (kept by leave-one-out)"]


def test_a_hidden_need_is_reported_as_needed_to_run_and_not_left_out():
    # h031 calls a helper h012 adds, undeclared: alone, h031 crashes and h012 joins it
    diff = Diff(50, joint=[(frozenset({"h012", "h031"}), 0.10)], needs={"h031": frozenset({"h012"})})
    decision, probe = hunt(diff, seed=7, tell_needs=False)
    (culprit,) = decision.culprits
    assert culprit.hunks == {"h012", "h031"}
    assert culprit.how_joined()["h012"] == Joined.NEEDED_TO_RUN
    assert "h012" in culprit.settled
    assert probe.runs.count(frozenset({"h031"})) <= 2     # the alone test's crash, never re-tested


def _with_a_mode(diff, rng_key, share, factor):
    """The probe of scripts/bench_hunks.py with a second mode: lognormal 2% noise, then `share`
    of the runs at `factor`, from numpy's generator of `rng_key`."""
    import numpy as np

    noise = np.random.default_rng(rng_key)

    def probe(subset, purpose):
        if not diff.runs(subset):
            return None
        value = diff.tok_s(subset) * math.exp(noise.normal(0.0, 0.02))
        return value * factor if noise.random() < share else value
    return probe


def test_a_remainder_search_skips_a_cleared_side_whose_end_has_no_typical_run():
    # half the runs at 0.7x: a side's end had each of its few runs read as interfered, and the
    # search for the remainder compared its ends' typical runs: KeyError (the hunt crashed)
    diff = Diff(10, effects={"h002": 0.05, "h006": 0.05}, per_function=2, base_tok_s=10_000.0)
    decision = decide_hunks(diff.ids, diff.groups(), _with_a_mode(diff, [0, 1, 2, 1], 0.5, 0.7), SearchSettings(),
                            needs=diff.needs)
    assert set().union(*named(decision)) <= {"h002", "h006"}


def test_a_first_group_is_named_on_pairs_of_its_own_where_the_runs_have_a_second_mode():
    # 30% of the runs at 1.4x: the prefix search's first four runs of BASE all fell in the fast
    # mode beside BASE + h000's at the level, its gate (which steers, on one fresh pair) placed a
    # step at the first group, and the harmless h000 was named -29% beside the two true culprits
    diff = Diff(10, effects={"h004": 0.05, "h009": 0.05}, per_function=2, base_tok_s=10_000.0)
    decision = decide_hunks(diff.ids, diff.groups(), _with_a_mode(diff, [0, 1, 8, 1], 0.3, 1.4), SearchSettings(),
                            needs=diff.needs)
    assert set().union(*named(decision)) <= {"h004", "h009"}


def test_a_step_the_size_of_the_machines_mode_is_named_by_the_signs_of_every_pair_too():
    # half the runs at 0.7x: the alone test of h005 read BASE's five typical runs at the level
    # beside h005's five all slowed (its level read at the mode) as -31%, and the harmless h005
    # was named beside the true culprit h036; the hunt's kinds read that mode at a share of a
    # sixth, so five runs looked enough
    diff = SimulatedDiff(50, effects={"h036": 0.10}, per_function=2, base_tok_s=10_000.0)
    decision = decide_hunks(diff.ids, diff.groups(), _with_a_mode(diff, [0, 3, 56, 1], 0.5, 0.7), SearchSettings(),
                            needs=diff.needs)
    assert set().union(*named(decision)) <= {"h036"}


def test_the_signs_of_a_test_are_asked_only_for_a_step_the_size_of_a_kind():
    ctx = HuntContext(settings=SearchSettings(), rule=LevelRule(), ddmin=DdminSettings(), runs=Runnable(),
                      ids=["a", "b", "c"], groups=None, order=[], on_phase=lambda text: None,
                      leave_out_alphas=AlphaSpender(SearchSettings().name_alpha / 2))
    rng = random.Random(3)
    for k in range(40):      # the hunt's runs: a third of them at 0.7x, at 1% noise
        for key in ("a", "b", "c"):
            slowed = 0.7 if (k + ord(key)) % 3 == 0 else 1.0
            ctx.reading.add(frozenset({key}), math.log(1000.0 * slowed) + rng.gauss(0.0, 0.01))
    quick, slow = [1000.0] * 6, [700.0] * 6
    # -36% lies at the kind: six pairs all one way are short of 1 / 0.001 (the signs' floor)
    assert ctx.near_a_kind(math.log(0.7), 0.001)
    assert not ctx.signs_show(quick, slow, math.log(0.7), 0.001, -1)
    assert ctx.signs_show(quick * 3, slow * 3, math.log(0.7), 0.001, -1)
    # -10% is no kind's size: the signs are not asked
    assert not ctx.near_a_kind(math.log(0.9), 0.001)
    assert ctx.signs_show(quick, [900.0] * 6, math.log(0.9), 0.001, -1)


def test_a_hunk_a_needs_search_joined_on_fewer_fresh_pairs_than_naming_needs_is_left_out_in_turn():
    # half the runs at 0.7x: a needs search's gate (which steers) placed a step at a harmless
    # h033 on too few fresh pairs; joined as "confirmed", it was kept beside the true h020 without
    # a leave-one-out test
    diff = SimulatedDiff(50, effects={"h020": 0.10}, per_function=2, base_tok_s=10_000.0)
    decision = decide_hunks(diff.ids, diff.groups(), _with_a_mode(diff, [0, 3, 58, 1], 0.5, 0.7), SearchSettings(),
                            needs=diff.needs)
    assert set().union(*named(decision)) <= {"h020"}
