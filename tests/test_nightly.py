"""Nightly over a simulated history: a fake executor (no processes) on a real git repo.

The fake probe reads SPEED from the candidate's worktree (regressbisect/testing/benchrepo.py layout) and
multiplies it by seeded lognormal noise and by the machine's current slowdown factor.
"""
from __future__ import annotations

from regressbisect.search.changepoints import ChangePointSettings
from regressbisect.errors import ExitCode
from regressbisect.testing.benchrepo import make_bench_repo
from regressbisect.testing.nightly import FakeMachine, nightly_for


def test_a_5pct_step_at_night_18_raises_one_alarm_and_hunts_the_culprit(tmp_path):
    speeds = [1000.0] * 17 + [950.0] * 13          # night 18 (index 17) brings the step
    shas = make_bench_repo(tmp_path / "repo", speeds)
    machine = FakeMachine(seed=1)
    # report files (the HTML's plots: most of a night's time) only on the nights the alarm may come
    alarm_window = range(17, 17 + ChangePointSettings().min_segment + 3)
    nightly = nightly_for(tmp_path / "repo", machine, tmp_path)
    report_dir, nights = nightly.report_dir, []
    for i, sha in enumerate(shas):
        nightly.report_dir = report_dir if i in alarm_window else None
        nights.append(nightly.run(sha))
    alarms = [(i, n) for i, n in enumerate(nights) if n.exit_code == ExitCode.NIGHTLY_REGRESSION]
    assert len(alarms) == 1, [n.report["change_points"] for n in nights]
    night, outcome = alarms[0]
    # reported after the nights the method needs, never before the step exists
    assert night in alarm_window
    assert [c["commit"] for c in outcome.report["culprits"]] == [shas[17]]
    last = nights[-1].report
    assert [p["commit"] for p in last["change_points"]] == [shas[17]]
    assert last["new_alarms"] == []                 # already hunted: reported, not re-hunted
    assert nights[-1].exit_code == ExitCode.OK
    # the night's measurements and its hunts share sample keys: the same start-up env for both
    assert {e.get("TORCHINDUCTOR_COMPILE_THREADS") for e in machine.envs} == {"1"}
    json_path, md_path, html_path = nights[night].report_files
    assert shas[17][:10] in md_path.read_text()
    assert html_path.exists()


def test_a_flat_noisy_series_raises_no_alarm_on_any_night(tmp_path):
    make_bench_repo(tmp_path / "repo", [1000.0] * 30)
    machine = FakeMachine(seed=7)
    nights = nightly_for(tmp_path / "repo", machine, tmp_path, reports=False).replay(30)
    assert all(n.exit_code == ExitCode.OK for n in nights)
    assert all(n.report["change_points"] == [] for n in nights)


def test_rerunning_a_night_measures_nothing_twice(tmp_path):
    make_bench_repo(tmp_path / "repo", [1000.0] * 5)
    machine = FakeMachine()
    nightly = nightly_for(tmp_path / "repo", machine, tmp_path, max_new=5)
    nightly.run()
    runs = machine.runs
    assert runs == 5 * 5
    nightly.run()
    assert machine.runs == runs


def test_a_slow_machine_night_is_flagged_and_not_used_as_evidence(tmp_path):
    shas = make_bench_repo(tmp_path / "repo", [1000.0] * 16)
    machine = FakeMachine(seed=3)
    nightly = nightly_for(tmp_path / "repo", machine, tmp_path, max_new=3, reports=False)
    outcomes = []
    for i, sha in enumerate(shas):
        machine.slowdown = 0.7 if i in (10, 11, 12, 13) else 1.0   # four bad nights in a row
        outcomes.append(nightly.run(sha))
    for i in (10, 11, 12, 13):
        report = outcomes[i].report
        assert report["night"]["flagged"] and report["machine"]["status"] == "slow"
        # shown, from its flagged samples, but not evidence
        flags = {row["commit"]: row["flagged"] for row in report["series"]}
        assert flags[shas[i]] is True
        assert not any(flags[sha] for sha in shas[:10] if sha in flags)
    # the slow nights' 30% drop would be a change point if it were evidence
    assert all(o.exit_code == ExitCode.OK for o in outcomes)
    assert all(o.report["change_points"] == [] for o in outcomes)
    # the flagged nights' tips are measured again on later good nights (unseen commits)
    final_series = [row["commit"] for row in outcomes[-1].report["series"]]
    assert all(shas[i] in final_series for i in (10, 11, 12, 13))


def test_a_flagged_night_is_drawn_apart_in_the_series_plot(tmp_path):
    from regressbisect.render.plots import _series_figure
    from regressbisect.render.report_load import load_report

    shas = make_bench_repo(tmp_path / "repo", [1000.0] * 6)
    machine = FakeMachine(seed=5)
    nightly = nightly_for(tmp_path / "repo", machine, tmp_path, max_new=1)
    for sha in shas[:5]:
        nightly.run(sha)
    machine.slowdown = 0.7                                      # the last night: a slow machine
    report = nightly.run(shas[5]).report
    assert report["night"]["flagged"]
    assert [row["flagged"] for row in report["series"]] == [False] * 5 + [True]
    axes = _series_figure(load_report(report)).axes[0]
    labels = [text.get_text() for text in axes.get_legend().get_texts()]
    assert labels == ["median tok/s (95% CI)", "machine flagged"]


def test_the_nightly_report_carries_the_schema_and_tool_version(tmp_path):
    from regressbisect import __version__
    from regressbisect.render.report_json import SCHEMA

    shas = make_bench_repo(tmp_path / "repo", [1000.0] * 3)
    report = nightly_for(tmp_path / "repo", FakeMachine(), tmp_path, samples_per_commit=3).run(shas[-1]).report
    assert (report["schema"], report["kind"], report["tool_version"]) == (SCHEMA, "nightly", __version__)


def test_nightly_cli_writes_the_json_report(tmp_path, monkeypatch, capsys, fake_probes):
    import json
    import sys

    from regressbisect.machine import doctor
    from tests.cli import run_cli

    monkeypatch.setattr(doctor, "run_check", FakeMachine().check)   # no matmul check in a unit test
    shas = make_bench_repo(tmp_path / "repo", [1000.0] * 3)
    out = tmp_path / "night.json"
    code = run_cli(["nightly", "-C", str(tmp_path / "repo"), "--branch", "HEAD", "--samples", "3",
                    "--max-new", "1", "--no-hunt", "--quiet", "--report-dir", str(tmp_path / "reports"),
                    "--cmd", f"{sys.executable} bench.py", "--tokens", "1000",
                    "--env", f"BENCH_STATE={tmp_path / 'state'}", "--json", str(out)])
    assert code == 0, capsys.readouterr()
    report = json.loads(out.read_text())
    assert report["kind"] == "nightly" and report["night"]["tip"] == shas[-1]
    assert report == json.loads((tmp_path / "reports" / f"nightly-{shas[-1][:10]}.json").read_text())


def test_a_report_dir_that_fails_at_the_end_of_the_night_is_one_line_and_keeps_the_night(tmp_path, capsys):
    shas = make_bench_repo(tmp_path / "repo", [1000.0] * 3)
    runner = nightly_for(tmp_path / "repo", FakeMachine(), tmp_path, samples_per_commit=3)
    (tmp_path / "reports").write_text("not a folder\n")   # what was a folder is a file by morning
    outcome = runner.run(shas[-1])
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--report-dir" in err[0] and "samples are stored" in err[0], err
    assert outcome.exit_code == ExitCode.OK and outcome.report_files == ()
    assert outcome.report["night"]["tip"] == shas[-1]
    assert (tmp_path / "reports").read_text() == "not a folder\n"
