"""The cost levers (docs/cost.md): anytime-valid overhead arm, no arm that measures nothing,
--tokens auto, shared caches, cost accounting. Fake executors for the hunt-level tests (the
budget and overhead logic only needs outcomes); the real-process hunt of a no-torch probe
is in tests/test_hunt_integration.py."""
from __future__ import annotations

import functools
import math
import random
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from regressbisect.hunts import cost as costs
from regressbisect.search import stats
from regressbisect.search.budget import Pilot, choose_budget
from regressbisect.search.overhead import OverheadArm, overhead_decision
from regressbisect.config import build_config
from regressbisect.errors import UserError
from regressbisect.git.history import History
from regressbisect.git.worktrees import WorktreePool
from regressbisect.hunts.commits import NO_COUNTERS_NOTE, CommitHunt
from regressbisect.probe.setup_step import SPARE_TREES
from regressbisect.samples import ProbeOutcome, Sample, SampleKey
from regressbisect.store import Store
from regressbisect.testing.benchrepo import make_bench_repo


# -- the anytime-valid interval ------------------------------------------------------------------

def test_confidence_sequence_covers_the_mean_at_every_look(monkeypatch):
    """Looked at after every value, it misses the true mean at SOME time in at most ~alpha of
    sequences; a t interval looked at as often misses far more (the reason it is not used)."""
    rng = np.random.default_rng(7)
    misses_cs = misses_t = 0
    trials, n = 300, 30
    from scipy import stats as st
    # c(n) depends on n alone, and its bisection is the slow part: computed once per n
    monkeypatch.setattr(stats, "t_cs_multiplier", functools.lru_cache(stats.t_cs_multiplier))
    t_quantile = {m: st.t.ppf(0.975, m - 1) for m in range(2, n + 1)}
    for _ in range(trials):
        x = rng.standard_normal(n) * 0.01 + 0.003
        cs_missed = t_missed = False
        for m in range(2, n + 1):
            lo, hi = stats.t_confidence_sequence(x[:m])
            cs_missed |= not lo <= 0.003 <= hi
            half = t_quantile[m] * x[:m].std(ddof=1) / math.sqrt(m)
            t_missed |= abs(x[:m].mean() - 0.003) > half
        misses_cs += cs_missed
        misses_t += t_missed
    assert misses_cs / trials <= 0.06
    assert misses_t / trials > 2 * misses_cs / trials


def test_no_finite_interval_from_two_values_then_narrowing():
    assert stats.t_cs_multiplier(2) == math.inf
    assert stats.t_cs_multiplier(3) < stats.t_cs_multiplier(4) * 2
    widths = [np.subtract(*stats.t_confidence_sequence([0.01, 0.012, 0.009, 0.011, 0.0105][:n]))
              for n in (3, 4, 5)]
    assert -widths[2] < -widths[1] < -widths[0]


# -- the overhead arm's decision -----------------------------------------------------------------

def _pairs(n, overhead, sd, seed=1):
    rng = random.Random(seed)
    plain = [1000 * math.exp(rng.gauss(0, sd)) for _ in range(n)]
    shimmed = [p * math.exp(rng.gauss(0, sd)) / (1 + overhead) for p in plain]
    return plain, shimmed


def test_overhead_decided_within_in_three_pairs_at_gpu_noise():
    plain, shimmed = _pairs(3, 0.002, 0.0003)
    assert overhead_decision(plain[:2], shimmed[:2], limit=0.01, max_pairs=6)[0] == "continue"
    decision, (lo, hi) = overhead_decision(plain, shimmed, limit=0.01, max_pairs=6)
    assert decision == "within" and hi < math.log1p(0.01)


def test_overhead_beyond_the_limit_is_decided_beyond():
    plain, shimmed = _pairs(4, 0.05, 0.0005)
    assert overhead_decision(plain, shimmed, limit=0.01, max_pairs=6)[0] == "beyond"


def test_overhead_at_cpu_noise_stops_for_futility_after_two_pairs():
    plain, shimmed = _pairs(2, 0.0, 0.12)
    assert overhead_decision(plain, shimmed, limit=0.01, max_pairs=4)[0] == "undecidable"


def _run_arm(arm: OverheadArm, plain: list[float], shimmed: list[float]) -> list[list[bool]]:
    """Feed the arm its samples in the order it asks; the rounds it asked for."""
    rounds, taken = [], {False: iter(plain), True: iter(shimmed)}
    while order := arm.next_round():
        rounds.append(order)
        for s in order:
            arm.record(s, next(taken[s]))
    return rounds


def test_the_overhead_arm_alternates_one_probe_at_a_time_and_stops_once_within():
    plain, shimmed = _pairs(8, 0.002, 0.0003)
    arm = OverheadArm(limit=0.01, max_pairs=8)
    rounds = _run_arm(arm, plain, shimmed)
    assert rounds == [[False, True]] * 3   # decided 'within' at 3 pairs, not 8
    assert arm.decision == "within" and arm.pairs == 3
    assert arm.comparison().change == pytest.approx(-0.002, abs=0.001) and arm.comparison().verdict == "within"


def test_side_by_side_rounds_lead_with_the_arm_behind_and_look_only_at_whole_pairs():
    plain, shimmed = _pairs(8, 0.002, 0.0003)
    arm = OverheadArm(limit=0.01, max_pairs=8, at_once=3)
    rounds = _run_arm(arm, plain, shimmed)
    # plain, shimmed, plain; then shimmed first: after two rounds, three whole pairs decide
    assert rounds == [[False, True, False], [True, False, True]]
    assert arm.decision == "within" and arm.pairs == 3


def test_the_overhead_arm_never_takes_more_than_its_pairs():
    plain, shimmed = _pairs(3, 0.0, 0.004)   # 0.4% noise: 1% is not proven in three pairs
    arm = OverheadArm(limit=0.01, max_pairs=3, at_once=4)
    rounds = _run_arm(arm, plain, shimmed)
    assert sum(map(len, rounds)) == 6 and arm.decision == "undecidable"


# -- the auto budget -----------------------------------------------------------------------------

def _pilot(startup, step_s, steps, step_tokens, within, level, rng):
    ms = [step_s * 1e3 * math.exp(rng.gauss(0, within)) for _ in range(steps)]
    seconds = sum(ms) / 1e3
    tokens = step_tokens * steps
    return Pilot(wall_s=startup + seconds,
                       sample=Sample(tok_s=level * tokens / seconds, tokens=tokens, seconds=seconds,
                                     iters=tuple({"ms": m, "tokens": step_tokens} for m in ms)))


def test_budget_on_a_gpu_like_probe_is_few_steps_not_the_start_up():
    """20 s start-up, 0.17 s steps, 0.67% per step, no process noise: enough steps that the
    window's noise is under min_effect/8, far below a window as long as the start-up."""
    rng = random.Random(3)
    pilots = [_pilot(20.0, 0.17, 5, 7680, 0.0067, 1.0, rng) for _ in range(3)]
    choice = choose_budget(pilots, initial_tokens=38400, min_effect=0.02, timeout_s=600)
    assert choice.tokens % 7680 == 0
    assert 2 * 7680 <= choice.tokens <= 20 * 7680
    assert "min_effect/8" in choice.reason


def test_budget_from_one_step_pilots_uses_their_spread():
    """The h200 preset's step is 7680 tokens: pilots at 4096 tokens measure one step each. Their
    spread (0.67%) is taken as step noise: a few steps, not a window as long as the start-up."""
    rng = random.Random(8)
    pilots = [_pilot(20.0, 0.17, 1, 7680, 0.0067, 1.0, rng) for _ in range(3)]
    choice = choose_budget(pilots, initial_tokens=4096, min_effect=0.02, timeout_s=600)
    assert choice.facts["within_from_pilot_spread"] is True
    assert 7680 <= choice.tokens <= 30 * 7680 and choice.tokens % 7680 == 0


def test_budget_grows_to_the_start_up_at_most_when_steps_are_noisy():
    rng = random.Random(4)
    pilots = [_pilot(4.0, 0.05, 20, 48, 0.3, 1.0, rng) for _ in range(3)]
    choice = choose_budget(pilots, initial_tokens=960, min_effect=0.02, timeout_s=300)
    assert choice.tokens <= math.ceil(4.0 / 0.05 * 1.2) * 48
    assert choice.tokens % 48 == 0


def test_budget_shrinks_when_process_noise_dominates():
    """Per-process levels that differ by ~15% (a busy shared CPU): a long window buys nothing."""
    rng = random.Random(5)
    pilots = [_pilot(4.0, 0.05, 20, 48, 0.05, level, rng) for level in (1.0, 0.8, 1.2)]
    choice = choose_budget(pilots, initial_tokens=960, min_effect=0.02, timeout_s=300)
    assert choice.tokens < 960
    assert "between-process" in choice.reason


def test_budget_is_kept_when_the_probe_reports_no_seconds():
    pilots = [Pilot(wall_s=5.0, sample=Sample(tok_s=1000.0)) for _ in range(3)]
    assert choose_budget(pilots, initial_tokens=4096, min_effect=0.02, timeout_s=600).tokens == 4096


def test_budget_respects_half_the_timeout():
    rng = random.Random(6)
    pilots = [_pilot(20.0, 1.0, 4, 100, 0.5, 1.0, rng) for _ in range(3)]
    choice = choose_budget(pilots, initial_tokens=400, min_effect=0.02, timeout_s=60)
    assert choice.tokens <= 10 * 100 and "timeout" in choice.reason


# -- config: who gave a budget -------------------------------------------------------------------

@pytest.mark.parametrize("table, flags, tokens, auto", [
    ({"cmd": "x"}, {}, 4096, True),
    ({"cmd": "x", "tokens": 960}, {}, 960, False),
    ({"cmd": "x", "tokens": "auto"}, {}, 4096, True),
    ({"cmd": "x", "tokens": 960}, {"tokens": "auto"}, 4096, True),
    ({"cmd": "x", "tokens": "auto"}, {"tokens": "2048"}, 2048, False),
    ({"cmd": "x"}, {"tokens": 512}, 512, False),
])
def test_budget_given_or_automatic(table, flags, tokens, auto):
    config = build_config(table, flags)
    assert (config.probe.tokens, config.tokens_auto) == (tokens, auto)


def test_bad_budget_strings_are_user_errors():
    with pytest.raises(UserError, match="positive integer or 'auto'"):
        build_config({"cmd": "x"}, {"tokens": "lots"})
    with pytest.raises(UserError, match="tokens"):
        build_config({"cmd": "x", "tokens": "lots"}, {})


# -- shared caches -------------------------------------------------------------------------------

def test_shared_caches_leave_user_settings_alone(tmp_path):
    plan = costs.startup_env(tmp_path, {"TRITON_CACHE_DIR": "/mine"},
                             parent_env={"TORCH_EXTENSIONS_DIR": "/theirs"}, compile_workers=True)
    assert plan.env == {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    assert set(plan.user_set) == {"TRITON_CACHE_DIR", "TORCH_EXTENSIONS_DIR"}
    assert costs.startup_env(None, {}, parent_env={}, compile_workers=True).env == {}


def test_compile_runs_in_the_probe_unless_the_user_chose():
    assert costs.startup_env(None, {}, parent_env={}).env == {"TORCHINDUCTOR_COMPILE_THREADS": "1"}
    mine = costs.startup_env(None, {"TORCHINDUCTOR_COMPILE_THREADS": "8"}, parent_env={})
    assert mine.env == {} and mine.compile_json() == {"set": {}, "user_set": ["TORCHINDUCTOR_COMPILE_THREADS"]}
    theirs = costs.startup_env(None, {}, parent_env={"TORCHINDUCTOR_COMPILE_THREADS": "4"})
    assert theirs.env == {} and theirs.compile_user_set == ("TORCHINDUCTOR_COMPILE_THREADS",)


# -- hunts with a fake executor ------------------------------------------------------------------

class StepProbe:
    """Fake executor: tok/s from speed.py, per-step rows, a start-up of `startup` seconds, and
    counters when instrumented (if `counters`). Records every call (tokens, env)."""

    def __init__(self, *, noise=0.01, startup=10.0, step_tokens=100, counters=True, step_noise=0.02,
                 hold_s=0.0):
        self.noise, self.startup, self.step_tokens = noise, startup, step_tokens
        self.step_noise = step_noise
        self.counters = counters
        self.hold_s = hold_s
        """Seconds each call lasts, so that the calls of one round overlap (see `together`)."""
        self.calls: list[tuple[int, bool, dict]] = []
        self.together: list[int] = []
        """Per call, how many calls were running when it started (itself included)."""
        self._running = 0
        self.lock = threading.Lock()

    def __call__(self, spec, worktree: Path, extra_env=None) -> ProbeOutcome:
        speed = float((worktree / "speed.py").read_text().split("=")[1])
        with self.lock:
            self.calls.append((spec.tokens, spec.instrument, dict(extra_env or {})))
            self._running += 1
            self.together.append(self._running)
            rng = random.Random(len(self.calls))
        time.sleep(self.hold_s)
        with self.lock:
            self._running -= 1
        steps = max(1, math.ceil(spec.tokens / self.step_tokens))
        level = math.exp(rng.gauss(0, self.noise))
        ms = [self.step_tokens / speed / level * 1e3 * math.exp(rng.gauss(0, self.step_noise))
              for _ in range(steps)]
        seconds = sum(ms) / 1e3
        tokens = steps * self.step_tokens
        counters = {"lm_head_calls": 2.0} if spec.instrument and self.counters else {}
        sample = Sample(tok_s=tokens / seconds, tokens=tokens, seconds=seconds,
                        iters=tuple({"ms": m, "tokens": self.step_tokens} for m in ms),
                        counters=counters, instrumented=spec.instrument)
        return ProbeOutcome(sample=sample, skip_reason=None, exit_code=0,
                            wall_seconds=self.startup + seconds)


def _hunt(repo: Path, probe, **flags):
    history = History.open(repo)
    table = {"cmd": "python bench.py", **flags.pop("table", {})}
    config = build_config(table, flags)
    shas = [line.split()[0] for line in subprocess.run(
        ["git", "-C", str(repo), "log", "--format=%H", "--reverse"], capture_output=True, text=True,
        check=True).stdout.split()]
    return CommitHunt(history, shas[0], shas[-1], config, probe_runner=probe).run()


@pytest.fixture
def step_repo(tmp_path):
    make_bench_repo(tmp_path / "repo", [1000.0] * 4 + [900.0] * 4)
    return tmp_path / "repo"


def test_no_counters_means_no_overhead_arm_and_no_counters_runs(step_repo):
    probe = StepProbe(counters=False)
    report = _hunt(step_repo, probe, tokens=1000).report
    shimmed = [c for c in probe.calls if c[1]]
    assert len(shimmed) == 1                      # the one that found nothing to count
    assert report["instrumentation"]["note"] == NO_COUNTERS_NOTE
    assert report["instrumentation_overhead_pct"] is None
    assert report["verdict"] == "culprits"


def test_overhead_arm_stops_when_decided_and_is_reused_by_the_next_hunt(step_repo):
    probe = StepProbe(noise=0.0003, step_noise=0.001)   # GPU-like: 0.03% between processes
    first = _hunt(step_repo, probe, tokens=1000, table={"overhead_pairs": 8}).report
    assert first["instrumentation"]["overhead_pairs"] == 3   # decided 'within' at 3 pairs, not 8
    assert [c[1] for c in probe.calls[:6]] == [False, True] * 3
    assert first["instrumentation"]["tok_s_from_shimmed_runs"] is True
    again = StepProbe(noise=0.0003, step_noise=0.001)
    second = _hunt(step_repo, again, tokens=1000, table={"overhead_pairs": 8}).report
    assert again.calls == [] and second["probes"] == 0
    assert second["instrumentation"] == first["instrumentation"]


def test_with_overlap_the_overhead_arm_alternates_its_arms_over_the_lanes(step_repo):
    # three lanes: plain, shimmed, plain then shimmed, plain, shimmed: three pairs in two rounds,
    # every probe in a pair, decided as one probe at a time decides
    probe = StepProbe(noise=0.0003, step_noise=0.001, hold_s=0.3)
    report = _hunt(step_repo, probe, tokens=1000, overlap=3, table={"overhead_pairs": 8}).report
    assert report["instrumentation"]["overhead_pairs"] == 3
    assert max(probe.together[:3]) == 3 and max(probe.together[3:6]) == 3   # two rounds of three
    first, second = probe.calls[:3], probe.calls[3:6]   # the lanes of a round run in threads: any order
    assert sorted(c[1] for c in first) == [False, False, True] and sorted(c[1] for c in second) == [False, True, True]
    assert report["instrumentation"]["tok_s_from_shimmed_runs"] is True and report["verdict"] == "culprits"


def test_auto_budget_keys_samples_by_the_chosen_budget(step_repo):
    probe = StepProbe(noise=0.002, startup=10.0)
    outcome = _hunt(step_repo, probe, instrument="off")
    report = outcome.report
    budget = report["cost"]["budget"]
    assert budget["initial_tokens"] == 4096 and budget["tokens"] != 4096
    assert report["settings"]["tokens"] == budget["tokens"]
    assert [c[0] for c in probe.calls[:3]] == [4096] * 3
    assert {c[0] for c in probe.calls[3:]} == {budget["tokens"]}
    # the pilots are stored under the initial budget, not counted as GOOD's evidence
    good = report["candidates"][0]
    tree = History.open(step_repo).tree_of(report["good"])
    final = build_config({"cmd": "python bench.py", "tokens": budget["tokens"]}, {}).probe.config_hash()
    with Store(Path(report["store"])) as store:
        stored = store.samples(SampleKey(tree, None, final, _fingerprint()), arm="main")
    assert good["n"] == len(stored)
    # a re-run chooses the same budget from the stored pilots and measures nothing
    again = StepProbe(noise=0.002, startup=10.0)
    second = _hunt(step_repo, again, instrument="off").report
    assert again.calls == [] and second["cost"]["budget"]["tokens"] == budget["tokens"]


def test_the_rig_sizes_the_worktree_pool_once_for_every_source_of_an_auto_budget(step_repo, monkeypatch):
    """--tokens auto measures through two sample sources (the pilots', then one at the chosen
    budget); with a setup step the pool holds the worktrees kept built besides the lanes' own.
    It is sized once, by the hunt's rig, and no source resizes it."""
    widened: list[int] = []
    widen = WorktreePool.widen
    monkeypatch.setattr(WorktreePool, "widen", lambda pool, trees: (widened.append(trees), widen(pool, trees)))
    budget = _hunt(step_repo, StepProbe(noise=0.002, startup=10.0), instrument="off", setup="true").report["cost"]["budget"]
    assert budget["tokens"] != budget["initial_tokens"]   # a second source, at the chosen budget
    assert widened == [1 + SPARE_TREES]


def _fingerprint() -> str:
    from regressbisect.machine.fingerprint import environment_fingerprint
    return environment_fingerprint()[0]


def test_cost_and_shared_caches_reach_the_probe_and_the_report(step_repo):
    probe = StepProbe(startup=2.0)
    report = _hunt(step_repo, probe, tokens=1000, instrument="off").report
    cost = report["cost"]
    assert cost["probes"] == report["probes"] == len(probe.calls)
    assert cost["probe_wall_s"] == pytest.approx(sum(2.0 + 0.0 for _ in probe.calls) + cost["measured_s"], rel=1e-3)
    assert 0 < cost["measured_share"] < 1
    assert cost["gpu_s"] == pytest.approx(cost["probe_wall_s"] * cost["gpus_visible"])
    cache_dir = Path(report["store"]).parent / "cache"
    assert all(c[2].get("TORCHINDUCTOR_CACHE_DIR") == str(cache_dir / "inductor") for c in probe.calls)
    # GOOD, BAD and every candidate alike: the control arm stays fair
    assert all(c[2].get("TORCHINDUCTOR_COMPILE_THREADS") == "1" for c in probe.calls)
    assert cost["compile"] == {"set": {"TORCHINDUCTOR_COMPILE_THREADS": "1"}, "user_set": []}
    assert cost["budget"]["reason"].startswith("given by the user")
    off = StepProbe(startup=2.0)
    _hunt(step_repo, off, tokens=1001, instrument="off", shared_caches=False, compile_workers=True)
    assert all("TORCHINDUCTOR_CACHE_DIR" not in c[2] and "TORCHINDUCTOR_COMPILE_THREADS" not in c[2]
               for c in off.calls)


def test_gpus_per_probe_counts_the_slot_devices():
    assert costs.gpus_per_probe({"CUDA_VISIBLE_DEVICES": "0,1"}, 8) == 2
    assert costs.gpus_per_probe({}, 8) == 8
    assert costs.gpus_per_probe(None, 0) == 0


def test_the_timeline_script_groups_probes_into_rounds(tmp_path):
    """scripts/hunt_timeline.py: probes that started together are one round, and the round
    lasts until the next one starts (docs/cost.md)."""
    import sys

    from regressbisect.samples import Candidate

    store_path = tmp_path / "store.sqlite"
    key = SampleKey(tree="t" * 40, patch_hash=None, config_hash="c", env_fingerprint="e")
    t0 = 1_000_000.0
    with Store(store_path) as store:
        hunt = store.start_hunt(kind="commits", good="a" * 40, bad="b" * 40, config_hash="c",
                                env_fingerprint="e", settings={})
        for start, wall in [(0.0, 10.0), (0.2, 14.0), (0.3, 22.0), (23.0, 12.0)]:
            store.add_outcome(key, Candidate("a" * 40), ProbeOutcome(
                sample=Sample(tok_s=100.0, tokens=100.0, seconds=1.0), skip_reason=None, exit_code=0,
                wall_seconds=wall, started_at=t0 + start), hunt_id=hunt)
    script = Path(__file__).resolve().parents[1] / "scripts" / "hunt_timeline.py"
    out = subprocess.run([sys.executable, str(script), str(store_path)], capture_output=True, text=True, check=True).stdout
    assert "4 probes in 2 rounds, 35 s" in out
    assert "| 0 | 0.0 | 3 | 10.0 / 22.0 | 23.0 |" in out and "rounds of 3: 1, median 23.0 s" in out


def test_a_probe_that_reports_no_seconds_has_an_unknown_measured_share_not_zero():
    silent = costs.CostTotals(probes=3, wall_s=4.0, measured_s=0.0, gpu_s=0.0)
    assert silent.measured_share is None and silent.to_json()["measured_share"] is None
    assert "measured" not in silent.line()
    timed = costs.CostTotals(probes=3, wall_s=4.0, measured_s=1.0, gpu_s=0.0)
    assert "(25% measured)" in timed.line()


class CrashingStepProbe(StepProbe):
    """StepProbe whose commits at one of `crash_speeds` exit without a metric after `startup` s."""

    def __init__(self, crash_speeds, **kwargs):
        super().__init__(**kwargs)
        self.crash_speeds = set(crash_speeds)
        self.crashes = 0

    def __call__(self, spec, worktree: Path, extra_env=None) -> ProbeOutcome:
        speed = float((worktree / "speed.py").read_text().split("=")[1])
        if speed not in self.crash_speeds:
            return super().__call__(spec, worktree, extra_env)
        with self.lock:
            self.calls.append((spec.tokens, spec.instrument, dict(extra_env or {})))
            self.crashes += 1
        return ProbeOutcome(sample=None, skip_reason="exit 1: RuntimeError: boom", exit_code=1,
                            wall_seconds=self.startup)


def test_probes_that_crash_count_apart_from_those_that_measured(tmp_path):
    make_bench_repo(tmp_path / "repo", [1000.0] * 3 + [990.0, 980.0] + [900.0] * 3)
    probe = CrashingStepProbe({990.0, 980.0}, startup=2.0)
    report = _hunt(tmp_path / "repo", probe, tokens=1000, instrument="off").report
    cost = report["cost"]
    assert probe.crashes > 0
    assert cost["probes"] == len(probe.calls) and cost["crashed_probes"] == probe.crashes
    assert cost["crashed_wall_s"] == pytest.approx(2.0 * probe.crashes)
    assert cost["probe_wall_s"] > cost["crashed_wall_s"]
    # the store's totals over the hunt id count them the same way
    assert cost["hunt"]["crashed_probes"] == probe.crashes
    assert cost["hunt"]["crashed_wall_s"] == pytest.approx(cost["crashed_wall_s"])
    from regressbisect.render.text import render_summary
    assert f"({probe.crashes} crashed, {2 * probe.crashes:,.0f} s)" in render_summary(report)


def test_the_cost_meter_counts_a_probe_without_a_sample_as_crashed():
    class Executor:
        name = "fake"

        def __init__(self):
            self.outcomes = [ProbeOutcome(sample=Sample(tok_s=100.0, tokens=100.0, seconds=1.0), skip_reason=None,
                                          exit_code=0, wall_seconds=3.0),
                             ProbeOutcome(sample=None, skip_reason="exit 1", exit_code=1, wall_seconds=5.0)]

        def run(self, spec, worktree, extra_env=None, *, label=""):
            from regressbisect.probe.executors.base import ExecutedProbe
            return ExecutedProbe(self.outcomes.pop(0))

    meter = costs.CostMeter(Executor(), held_gpus=0)
    meter.run(None, Path("."))
    assert "crashed" not in meter.totals.line()
    meter.run(None, Path("."))
    totals = meter.totals
    assert (totals.probes, totals.crashed, totals.wall_s, totals.crashed_wall_s) == (2, 1, 8.0, 5.0)
    assert totals.to_json()["crashed_probes"] == 1 and totals.to_json()["crashed_wall_s"] == 5.0
    assert totals.line().startswith("2 probes (1 crashed, 5 s), 8s probe wall")
