"""Verdicts a script can trust: the culprit rule, the 'reproduced' rule and the exit codes.

Fake executors throughout (no processes): the commit search fed chosen numbers, bench repos
measured by SpeedProbe, hunk hunts by a fake probe that reads the candidate's worktree.
"""
from __future__ import annotations

import math
import os
import random
import signal
from pathlib import Path

import pytest

from regressbisect.config import build_config
from regressbisect.errors import ExitCode
from regressbisect.git.history import History
from regressbisect.hunts.commits import VERDICT_EXIT, CommitHunt
from regressbisect.probe.interrupts import INTERRUPTS
from regressbisect.samples import ProbeOutcome, Sample
from regressbisect.search.bisect import CommitSearch, SearchSettings
from regressbisect.search.control import ControlOutcome, run_control_arm
from regressbisect.search.simulate import FakeHistory, simulate, step_levels
from regressbisect.testing.benchrepo import SpeedProbe, make_bench_repo
from regressbisect.testing.gitrepo import make_repo, write_files


def control_arm(diffs: list[float], settings: SearchSettings = SearchSettings()) -> ControlOutcome:
    """A control arm whose BAD runs at exp(d) x GOOD in the i-th pair, GOOD at 1000; its verdict
    is None when the pairs run out first."""
    pairs = {0: iter([1000.0] * len(diffs)), 1: iter([1000.0 * math.exp(d) for d in diffs])}
    return run_control_arm(lambda i: next(pairs[i]), settings, max_measures=2 * len(diffs))


# -- 'reproduced' is held to the culprit rule ---------------------------------------------------

def test_three_lucky_pairs_at_high_noise_do_not_reproduce_a_slowdown():
    # the A/A range: 3 samples a side said "reproduced (-4.9%)" at 14% CV. Three pairs
    # that all happen to read 5-8% slower are not enough for a decision, whatever their p value
    outcome = control_arm([-0.05, -0.08, -0.06])
    assert outcome.verdict is None                                           # more pairs needed
    assert outcome.comparison is not None and outcome.comparison.p_value < 0.05   # the old rule's 'go'


def test_a_significant_difference_below_min_effect_is_not_reproduced():
    # -1.2% on average, interval reaching -2%: the old rule started the hunt (its interval
    # 'reaches min_effect'); a step below --min-effect is not a regression to hunt
    diffs = [-0.012 + e for e in (0.006, -0.008, 0.004, -0.003, 0.007, -0.006) * 8]
    outcome = control_arm(diffs)
    assert outcome.verdict == "not-reproduced"
    assert VERDICT_EXIT[outcome.verdict] == ExitCode.NOT_REPRODUCED


def test_a_clear_slowdown_reproduces_without_a_floor_of_pairs():
    # a 10% step at ~0.5% scatter: the e-value decides it after a few pairs; the t test at looks of
    # 3, 6, 12, ... pairs, never before the second look, took 6
    outcome = control_arm([-0.10 + e for e in (0.01, -0.01, 0.005, -0.004, 0.002, -0.003)])
    assert outcome.verdict == "reproduced"
    assert 2 <= outcome.pairs < 6


@pytest.mark.parametrize("cv", [0.08, 0.15])
def test_aa_ranges_at_high_noise_are_never_called_reproduced(cv):
    # 30 A/A hunts at a busy machine's noise: the old control arm (p < alpha per look, 3 pairs)
    # called several of them reproduced and then hunted a culprit that cannot exist
    history = FakeHistory(step_levels(16, {}), cv=cv)
    runs = [simulate(history, SearchSettings(max_samples=24), seed=seed) for seed in range(30)]
    assert not any(r.result.culprits for r in runs)
    assert sum(r.result.reproduced for r in runs) == 0
    assert all(r.result.verdict in ("not-reproduced", "undecided") for r in runs)


# -- a culprit is named only when its step passes the rule --------------------------------------

def test_a_step_too_small_for_the_noise_is_undecided_not_a_culprit():
    # 3% at 15% CV cannot be found within 24 samples: 'could not decide' (or not reproduced),
    # never a commit named
    history = FakeHistory(step_levels(16, {9: -0.03}), cv=0.15)
    for seed in range(12):
        result = simulate(history, SearchSettings(max_samples=24), seed=seed).result
        assert [c.first_bad for c in result.culprits] in ([], [9])
        assert result.verdict in ("culprits", "undecided", "not-reproduced")


def test_culprits_whose_shares_do_not_add_up_are_not_named():
    search = CommitSearch(8, SearchSettings())
    from regressbisect.search.bisect import Culprit
    from regressbisect.search.commit.verdict import search_result
    # a confirmed step of -30% in a range whose ends differ by -5%: 6 times the gap
    rng = random.Random(1)
    for i in range(8):
        level = 1000.0 if i < 4 else 700.0
        if i == 7:
            level = 950.0
        for _ in range(12):
            search.book.add(i, level * math.exp(rng.gauss(0, 0.01)), tag=None, when=len(search.book.time.get(i, [])))
    search.ctx.culprits.append(Culprit(first_bad=4, last_good=3, step=math.nan, step_ci95=(math.nan, math.nan),
                                       step_tok_s=math.nan, share_of_gap=math.nan))
    result = search_result(search.ctx, None, finished=True)
    assert result.culprits == () and [c.first_bad for c in result.suspects] == [4]
    assert result.verdict == "undecided" and "does not add up" in result.reason


# -- exit codes a script can trust ---------------------------------------------------------------

def test_every_verdict_has_its_own_exit_code_and_only_culprits_exit_0():
    assert VERDICT_EXIT == {"culprits": 0, "not-reproduced": 2, "all-skipped": 4,
                            "not-localised": 5, "undecided": 6, "ambiguous": 9}



def test_each_hunt_verdict_is_written_as_its_documented_value():
    """A Verdict is its value wherever a report writes it (JSON, str, f-strings: Python 3.11 would
    write 'Verdict.CULPRITS'), and the schema's table has each hunt verdict with its exit code."""
    import json

    from regressbisect.jsonio import dumps
    from regressbisect.search.verdicts import Verdict

    assert set(VERDICT_EXIT) == set(Verdict) - {Verdict.REPRODUCED}   # a control arm's, never a hunt's
    schema = (Path(__file__).resolve().parents[1] / "docs" / "report-schema.md").read_text()
    for verdict, code in VERDICT_EXIT.items():
        assert f"| `{verdict}` | {int(code)} |" in schema, verdict
        assert json.loads(dumps({"verdict": verdict})) == {"verdict": verdict.value}
        assert str(verdict) == f"{verdict}" == verdict.value

def commit_hunt(tmp_path: Path, speeds, noise: float, **flags):
    repo = tmp_path / "repo"
    make_bench_repo(repo, speeds)
    config = build_config({}, {"cmd": "python bench.py", "instrument": "off", **flags})
    hunt = CommitHunt(History.open(repo), "HEAD~%d" % (len(speeds) - 1), "HEAD", config,
                      store_path=tmp_path / "store.sqlite", probe_runner=SpeedProbe(noise))
    return hunt.run()


def test_a_gradual_slowdown_is_reproduced_but_not_localised_exit_5(tmp_path):
    # ten steps of 1% (each below --min-effect 2%): the regression is real, no single commit owns it
    speeds = [1000.0 * 0.99 ** i for i in range(11)]
    outcome = commit_hunt(tmp_path, speeds, noise=0.002)
    report = outcome.report
    assert report["verdict"] in ("not-localised", "undecided") and report["culprits"] == []
    assert int(outcome.exit_code) == report["exit_code"] == VERDICT_EXIT[report["verdict"]] != 0
    assert report["reproduced"] is True and report["verdict_reason"]
    assert report["schema"] == 3


def test_a_step_that_cannot_be_decided_within_the_cap_exits_6_not_0(tmp_path):
    # a real 5% step at 12% noise with a cap of 6 samples: undecided (or not reproduced), never 0
    speeds = [1000.0] * 4 + [950.0] * 4
    outcome = commit_hunt(tmp_path, speeds, noise=0.12, max_samples=6)
    assert int(outcome.exit_code) in (int(ExitCode.UNDECIDED), int(ExitCode.NOT_REPRODUCED))
    assert outcome.report["culprits"] == []


# -- SIGINT/SIGTERM handler ------------------------------------------------------------------------

def test_sigint_stops_a_hunt_even_when_it_was_inherited_ignored():
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)   # a background job of a script
    try:
        with pytest.raises(KeyboardInterrupt):
            with INTERRUPTS.hunt():
                os.kill(os.getpid(), signal.SIGINT)
                for _ in range(1000):      # the handler runs between bytecodes
                    pass
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN   # restored after the hunt
    finally:
        signal.signal(signal.SIGINT, previous)


# -- hunks: untracked files by default, and the missing module named -------------------------------

def dirty_with_new_module(path: Path) -> None:
    make_repo(path, [{"train.py": "import json\nSTEP = 1\n"}], ["base"])
    write_files(path, {"train.py": "import json\nimport helpers\nSTEP = 1\n",
                       "helpers.py": "def fmt(x):\n    return str(x)\n"})


class ImportProbe:
    """Fails with ModuleNotFoundError when train.py imports helpers but helpers.py is absent."""

    def __call__(self, spec, worktree: Path, extra_env=None) -> ProbeOutcome:
        if "import helpers" in (worktree / "train.py").read_text() and not (worktree / "helpers.py").exists():
            return ProbeOutcome(sample=None, exit_code=1, wall_seconds=0.01,
                                skip_reason="exit 1: ModuleNotFoundError: No module named 'helpers'")
        return ProbeOutcome(sample=Sample(tok_s=1000.0, tokens=1000, seconds=1.0), skip_reason=None,
                            exit_code=0, wall_seconds=0.01)


def test_hunks_include_untracked_files_by_default(tmp_path):
    from regressbisect.hunts.hunks import HunkHunt
    repo = tmp_path / "repo"
    dirty_with_new_module(repo)
    config = build_config({}, {"cmd": "fake", "instrument": "off"})
    hunt = HunkHunt(History.open(repo), config, store_path=tmp_path / "s.sqlite", probe_runner=ImportProbe())
    assert "helpers.py" in {h.file for h in hunt.hunks}
    assert hunt.run().report["verdict"] == "not-reproduced"     # it imports: measured, and equal


def test_tracked_only_and_a_missing_module_names_the_file_and_the_flag(tmp_path):
    from regressbisect.errors import UserError
    from regressbisect.hunts.hunks import HunkHunt
    repo = tmp_path / "repo"
    dirty_with_new_module(repo)
    config = build_config({}, {"cmd": "fake", "instrument": "off"})
    hunt = HunkHunt(History.open(repo), config, include_untracked=False, store_path=tmp_path / "s.sqlite",
                    probe_runner=ImportProbe())
    with pytest.raises(UserError) as error:
        hunt.run()
    assert "helpers.py" in error.value.message and "--tracked-only" in error.value.message
