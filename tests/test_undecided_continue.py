"""An undecided commit hunt says what it had established and the command that goes further: the
user's own command with a larger --max-samples, which reuses every stored sample (the sample key
holds no cap) and continues the search where it stopped, instead of starting over."""
from __future__ import annotations

import html
import json
import shlex
import sys
from pathlib import Path

from regressbisect.cli.options import without_revisions
from regressbisect.config import build_config
from regressbisect.errors import ExitCode
from regressbisect.git.history import History
from regressbisect.hunts.common import continue_command
from regressbisect.hunts.hunks import HunkHunt
from regressbisect.render import render_summary
from regressbisect.render.html import render_html
from regressbisect.render.markdown import render_markdown
from regressbisect.testing.benchrepo import make_bench_repo
from regressbisect.testing.gitrepo import commit, git
from tests.cli import run_cli
from tests.test_hunkhunt import FakeProbe, make_dirty_repo

SPEEDS = [1324.0] * 6 + [1074.0] * 6          # the demo's lm_head step, -19%, at index 6


def hunt_args(repo: Path, state: Path, *extra: str) -> list[str]:
    return ["run", "-C", str(repo), "--cmd", f"{sys.executable} bench.py", "--tokens", "1000",
            "--env", f"BENCH_STATE={state}", "--env", "BENCH_NOISE=0.15", "--instrument", "off", *extra]


def test_an_undecided_hunt_names_its_leading_step_and_a_command_that_continues_it(tmp_path, capsys, fake_probes):
    repo, state = tmp_path / "repo", tmp_path / "state"
    shas = make_bench_repo(repo, SPEEDS)
    first = tmp_path / "first.json"
    assert run_cli(hunt_args(repo, state, "--max-samples", "16", "--json", str(first), shas[0], shas[-1])) \
        == ExitCode.UNDECIDED
    report = json.loads(first.read_text())
    printed = capsys.readouterr().out
    step = report["established"]
    assert (step["last_good"], step["first_bad"]) == (shas[5], shas[6]) and step["probability"] > 0.5
    assert step["before"]["median_tok_s"] > step["after"]["median_tok_s"]
    assert f"Established so far: the step is at {shas[5][:10]}..{shas[6][:10]} (#5..#6, p=" in printed
    command = report["continue_command"]
    assert f"To go further (the stored samples are reused): {command}" in printed
    assert f"- Established so far: the step is at {shas[5][:10]}..{shas[6][:10]}" in render_markdown(report)
    assert f"`{command}`" in render_markdown(report)
    page = render_html(report, tmp_path / "html").read_text()
    assert "Established so far: the step is at" in page and f"<code>{html.escape(command)}</code>" in page
    words = shlex.split(command)
    assert words[0] == "regressbisect" and words[-4:] == ["--max-samples", "32", shas[0], shas[-1]]
    assert words.count("--max-samples") == 1

    # the printed command, as the user would paste it: it reuses every stored sample and names the step
    second = tmp_path / "second.json"
    code = run_cli([w if w != str(first) else str(second) for w in words[1:]])
    continued = json.loads(second.read_text())
    assert code == ExitCode.OK and [c["commit"] for c in continued["culprits"]] == [shas[6]]
    # the search, fed the stored samples in the order it asks, takes nearly all of them (a larger
    # budget may ask a commit it sampled once for none again: that sample stays in the store)
    assert 0.9 * report["probes"] <= continued["cached_samples"] <= report["probes"]

    # a fresh hunt at the same budget, on its own store and noise sequence, runs more probes
    fresh = tmp_path / "fresh.json"
    run_cli(hunt_args(repo, tmp_path / "fresh-state", "--max-samples", "32", "--store", str(tmp_path / "fresh.sqlite"),
                      "--json", str(fresh), shas[0], shas[-1]))
    assert continued["probes"] < json.loads(fresh.read_text())["probes"]


def test_the_continue_command_doubles_the_cap_the_user_gave_in_either_spelling():
    assert continue_command(["regressbisect", "run", "--max-samples=12", "--quiet"], 12, ["A", "B"]) == \
        "regressbisect run --quiet --max-samples 24 A B"
    assert continue_command(["regressbisect", "run", "--max-samples", "12", "--cmd", "python b.py"], 12, ["A", "B"]) == \
        "regressbisect run --cmd 'python b.py' --max-samples 24 A B"
    assert continue_command(["regressbisect", "run"], 96, ["A", "B"]) == "regressbisect run --max-samples 192 A B"
    assert continue_command(None, 96, ["A", "B"]) is None


def test_the_continue_command_names_the_commits_the_users_revisions_resolved_to(tmp_path, fake_probes):
    """'HEAD~11 HEAD' names other commits once one lands: the command continues this hunt's."""
    repo, state = tmp_path / "repo", tmp_path / "state"
    shas = make_bench_repo(repo, SPEEDS)
    first = tmp_path / "first.json"
    assert run_cli(hunt_args(repo, state, "--max-samples", "16", "--json", str(first), "HEAD~11", "HEAD")) \
        == ExitCode.UNDECIDED
    report = json.loads(first.read_text())
    words = shlex.split(report["continue_command"])
    assert words[-2:] == [shas[0], shas[-1]] and "HEAD~11" not in words and "HEAD" not in words
    commit(repo, {"notes/later.txt": "landed after the hunt\n"}, "a later commit")
    second = tmp_path / "second.json"
    run_cli([w if w != str(first) else str(second) for w in words[1:]])
    continued = json.loads(second.read_text())
    assert (continued["good"], continued["bad"]) == (shas[0], shas[-1])
    assert continued["cached_samples"] >= 0.9 * report["probes"]


def test_the_revisions_a_command_line_names_are_its_arguments_and_revision_options():
    assert without_revisions(["regressbisect", "run", "-qC", "/r", "--cmd", "python b.py", "HEAD~2", "--max-samples=12",
                              "HEAD", "--env", "A=HEAD"]) == \
        ["regressbisect", "run", "-qC", "/r", "--cmd", "python b.py", "--max-samples=12", "--env", "A=HEAD"]
    assert without_revisions(["regressbisect", "run", "-C/r", "--json", "HEAD", "--", "HEAD~2", "HEAD"]) == \
        ["regressbisect", "run", "-C/r", "--json", "HEAD"]
    assert without_revisions(["regressbisect", "hunks", "--commit=HEAD~1", "--store", "s.sqlite", "--base", "main",
                              "--tracked-only"]) == ["regressbisect", "hunks", "--store", "s.sqlite", "--tracked-only"]


def test_an_undecided_hunk_hunt_names_where_the_slowdown_is_and_continues(tmp_path):
    repo = tmp_path / "repo"
    make_dirty_repo(repo, 30, {7: 0.15}, dependent=False)

    def hunk_hunt(max_samples: int, store: Path, seed: int):
        config = build_config({}, {"cmd": "fake", "instrument": "off", "max_samples": max_samples, "busy_check": False})
        return HunkHunt(History.open(repo), config, store_path=store, probe_runner=FakeProbe(noise=0.05, seed=seed),
                        command_line=["regressbisect", "hunks", "--max-samples", str(max_samples)]).run().report

    first = hunk_hunt(6, tmp_path / "store.sqlite", seed=4)
    assert first["verdict"] == "undecided" and first["established"]["files"] == ["pkg/m7.py"]
    assert first["established"]["text"].startswith("the slowdown is at the hunk pkg/m7.py:")
    head = git(repo, "rev-parse", "HEAD")      # the base as a commit: HEAD moves when one lands
    assert first["continue_command"] == f"regressbisect hunks --max-samples 12 --base {head}"
    assert f"Established so far: {first['established']['text']}." in render_summary(first)
    continued = hunk_hunt(12, tmp_path / "store.sqlite", seed=5)
    assert continued["verdict"] == "culprits" and continued["culprits"][0]["hunks"][0]["file"] == "pkg/m7.py"
    assert continued["cached_samples"] >= 0.9 * first["probes"]
    fresh = hunk_hunt(12, tmp_path / "fresh.sqlite", seed=4)
    assert continued["probes"] < fresh["probes"]


def test_a_hunt_not_reproduced_at_the_pair_cap_that_did_not_rule_a_regression_out_gives_the_command(
        tmp_path, capsys, fake_probes):
    # an A/A range at 15% noise and a cap of 4 pairs: the control arm's interval still reaches a
    # regression of --min-effect, so 'not reproduced' (exit 2, --stall-share 0: four pairs cannot
    # rule a stall out) says more --max-samples would tell, and the report gives the command that
    # goes on from the stored samples
    repo, state = tmp_path / "repo", tmp_path / "state"
    shas = make_bench_repo(repo, [1000.0] * 8)
    first = tmp_path / "first.json"
    assert run_cli(hunt_args(repo, state, "--max-samples", "4", "--stall-share", "0", "--json", str(first),
                             shas[0], shas[-1])) == ExitCode.NOT_REPRODUCED
    report = json.loads(first.read_text())
    assert "more --max-samples would tell" in report["verdict_reason"]
    command = report["continue_command"]
    assert command and shlex.split(command)[-4:] == ["--max-samples", "8", shas[0], shas[-1]]
    # at the default --stall-share the cap leaves a stall of 30% of the runs not ruled out: undecided
    capped = tmp_path / "capped.json"
    assert run_cli(hunt_args(repo, tmp_path / "state3", "--max-samples", "4", "--json", str(capped),
                             shas[0], shas[-1])) == ExitCode.UNDECIDED
    assert "(--stall-share) is not ruled out" in json.loads(capped.read_text())["verdict_reason"]
    assert f"To go further (the stored samples are reused): {command}" in capsys.readouterr().out
    second = tmp_path / "second.json"
    run_cli([w if w != str(first) else str(second) for w in shlex.split(command)[1:]])
    assert json.loads(second.read_text())["cached_samples"] == report["probes"]

    # a range whose control arm ruled the regression out names no command
    clear = tmp_path / "clear.json"
    run_cli(hunt_args(repo, tmp_path / "state2", "--env", "BENCH_NOISE=0.002", "--store", str(tmp_path / "q.sqlite"),
                      "--json", str(clear), shas[0], shas[-1]))
    quiet = json.loads(clear.read_text())
    assert quiet["verdict"] == "not-reproduced" and "ruled out" in quiet["verdict_reason"]
    assert quiet["continue_command"] is None


def test_a_hunk_hunt_not_reproduced_at_the_pair_cap_gives_the_command_too(tmp_path):
    repo = tmp_path / "repo"
    make_dirty_repo(repo, 10, {}, dependent=False)        # harmless hunks, 15% noise, a cap of 4 pairs
    config = build_config({}, {"cmd": "fake", "instrument": "off", "max_samples": 4, "busy_check": False})
    report = HunkHunt(History.open(repo), config, store_path=tmp_path / "s.sqlite",
                      probe_runner=FakeProbe(noise=0.15, seed=3),
                      command_line=["regressbisect", "hunks", "--max-samples", "4"]).run().report
    assert report["verdict"] == "not-reproduced" and "more --max-samples would tell" in report["verdict_reason"]
    assert report["continue_command"] == f"regressbisect hunks --max-samples 8 --base {git(repo, 'rev-parse', 'HEAD')}"
