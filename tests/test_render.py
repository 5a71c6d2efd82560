"""Rendering of JSON reports: text table, Markdown, PNG plots, self-contained HTML, screenshot."""
from __future__ import annotations

import copy
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib import image as mpimg

from regressbisect.render import render_html, render_markdown, render_plots, render_summary, render_table
from tests.ci import missing

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "screenshot_report.py"


def sha(n: int) -> str:
    return f"{n:x}".rjust(2, "0") * 20


# ------------------------------------------------------------------ fixture factory

def commits_report(*, verdict: str = "culprits", culprits: int = 1, length: int = 9) -> dict[str, Any]:
    """A commits report as the hunt writes it: a 5.1% step at position 4 (and 2.2% at 7)."""
    levels = [1000.0] * 4 + [949.0] * 3 + [928.0] * (length - 7)
    candidates = [{"index": i, "commit": sha(i + 1), "subject": f"change number {i}", "patch": None,
                   "n": 5 + i % 3, "cached": i % 2, "median_tok_s": tok,
                   "ci95": [tok * 0.99, tok * 1.01], "verdict": "good" if i < 4 else "bad"}
                  for i, tok in enumerate(levels)]
    steps = [{"commit": sha(5), "parent": sha(4), "subject": "build the block mask per layer",
              "index": 4, "step_pct": -5.1, "ci95_pct": [-6.0, -4.2], "share_of_gap": 0.70,
              "counters_before": {"create_block_mask_calls": 1, "create_block_mask_ms": 12.0,
                                  "lm_head_calls": 8, "host_syncs": 3},
              "counters_after": {"create_block_mask_calls": 2, "create_block_mask_ms": 50.0,
                                 "lm_head_calls": 8, "host_syncs": 3}},
             {"commit": sha(8), "parent": sha(7), "subject": "metrics every step",
              "index": 7, "step_pct": -2.2, "ci95_pct": [-3.1, -1.4], "share_of_gap": 0.30,
              "counters_before": {"lm_head_calls": 8}, "counters_after": {"lm_head_calls": 10}}]
    return {
        "schema": 1, "kind": "commits", "good": sha(1), "bad": sha(length), "verdict": verdict,
        "endpoints": {"good": {"median_tok_s": 1000.0, "ci95": [990.0, 1010.0], "n": 10},
                      "bad": {"median_tok_s": levels[-1], "ci95": [levels[-1] - 9, levels[-1] + 9], "n": 10}},
        "gap_pct": -7.2, "unexplained_pct": -0.4, "unexplained_share": 0.05,
        "culprits": steps[:culprits] if verdict == "culprits" else [],
        "candidates": candidates,
        "probes": 37, "cached_samples": 4,
        "instrumentation_overhead_pct": {"value": 0.3, "ci95": [-0.2, 0.8]},
        "instrumentation": {"mode": "auto", "note": "tok/s from unshimmed runs"},
    }


def minimal_report() -> dict[str, Any]:
    """The least a report can be: endpoints that do not differ, nothing else."""
    return {"schema": 1, "kind": "commits", "good": sha(1), "bad": sha(2), "verdict": "not-reproduced",
            "endpoints": {"good": {"median_tok_s": 1000.0, "ci95": [990.0, 1010.0], "n": 5},
                          "bad": {"median_tok_s": 998.0, "ci95": [989.0, 1009.0], "n": 5}},
            "culprits": [], "candidates": [], "probes": 10, "cached_samples": 0,
            "instrumentation_overhead_pct": None}


def hunks_report() -> dict[str, Any]:
    report = commits_report(culprits=1)
    report.update(kind="hunks", good=sha(3), bad=sha(3), candidates=[], gap_pct=-4.8)
    culprit = report["culprits"][0]
    culprit.update(commit=sha(3), parent=sha(3), subject="1 uncommitted hunk(s) in dflash/train.py",
                   hunks=[{"id": "h1", "file": "dflash/train.py", "lines": [120, 134],
                           "function": "drafter_step",
                           "excerpt": "-    mask = build_mask(ids)\n+    for layer in layers:\n+        mask = build_mask(ids)  # <per layer>"}])
    return report


def nightly_report() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    tok = 1000 * np.exp(rng.normal(0, 0.01, 20))
    tok[12:] *= 0.95
    series = [{"commit": sha(i + 1), "subject": f"nightly commit {i}", "date": f"2026-03-{i + 1:02d}T02:00:00",
               "median_tok_s": float(t), "ci95": [float(t) * 0.99, float(t) * 1.01], "n": 5,
               "flagged": i == 5} for i, t in enumerate(tok)]
    hunt = commits_report(culprits=1)
    hunt.update(good=sha(12), bad=sha(13))
    return {"schema": 1, "kind": "nightly", "good": sha(1), "bad": sha(20), "verdict": "culprits",
            "night": {"tip": sha(20), "date": "2026-03-20T02:00:00", "measured": [sha(20)], "flagged": False},
            "machine": {"status": "ok", "reasons": ["matmul 531 TFLOP/s is within 15% of this machine's median 530 (12 checks)"],
                        "check": {"device": "cuda: NVIDIA H200"}},
            "series": series,
            "change_points": [{"index": 12, "commit": sha(13), "before_commit": sha(12), "before": 1000.0,
                               "after": 950.0, "change": -0.05, "change_pct": -5.0, "p_value": 0.0005}],
            "hunts": [hunt], "culprits": hunt["culprits"]}


# ------------------------------------------------------------------ text and Markdown

def test_table_lists_candidates_and_marks_the_culprit():
    table = render_table(commits_report())
    lines = table.splitlines()
    assert lines[0].split()[:4] == ["commit", "subject", "n", "median"]
    assert len(lines) == 2 + 9  # header, rule, one row per candidate
    culprit_rows = [line for line in lines if "(culprit)" in line]
    assert len(culprit_rows) == 1 and culprit_rows[0].startswith(sha(5)[:10])
    assert "949 .. " not in table and "939.5 .. 958.5" in table  # CI printed as lo .. hi


def test_summary_gives_verdict_step_share_counters_and_overhead():
    text = render_summary(commits_report(culprits=2))
    assert text.splitlines()[0] == "2 culprit commit(s) found (tok/s -7.2% from good to bad)."
    assert "step -5.1% tok/s (95% CI -6.0% .. -4.2%), 70% of the gap" in text
    assert "create_block_mask calls/iter 1 -> 2" in text
    assert "lm_head calls/iter 8 -> 10" in text
    assert "Instrumentation overhead: +0.3%" in text


def test_a_merge_culprit_is_said_to_be_one_with_the_hunt_of_its_branch_everywhere(tmp_path):
    report = commits_report(culprits=1)
    follow_up = f"regressbisect run $(git merge-base {sha(4)} {sha(40)}) {sha(40)}"
    report["culprits"][0]["merge"] = {"parents": [sha(4), sha(40)], "follow_up": [follow_up]}
    text, markdown = render_summary(report), render_markdown(report)
    page = render_html(report, tmp_path).read_text()
    for rendered in (text, markdown, page):
        assert "is a merge" in rendered and follow_up in rendered.replace("&#x27;", "'")
    assert "is a merge" not in render_summary(commits_report(culprits=1))


def test_the_remainder_gives_its_interval_and_says_when_it_includes_none():
    report = commits_report(culprits=2)
    report["unexplained_share_ci95"] = [-0.21, 0.31]
    assert ("Unexplained remainder: 5% of the gap (-0.4% tok/s; 95% CI -21% .. 31% of the gap, which "
            "includes none)." in render_summary(report))
    report["unexplained_share_ci95"] = [0.12, 0.31]
    assert "(-0.4% tok/s; 95% CI 12% .. 31% of the gap)." in render_markdown(report)
    report["unexplained_share_ci95"] = [None, None]   # unknown: nothing said
    assert "Unexplained remainder: 5% of the gap (-0.4% tok/s)." in render_markdown(report)


def test_markdown_has_counters_before_after_and_the_remainder():
    md = render_markdown(commits_report(culprits=2))
    assert f"**{sha(5)[:10]} build the block mask per layer**: -5.1% tok/s (95% CI -6.0% .. -4.2%), 70% of the gap" in md
    assert ("counters before -> after: create_block_mask calls/iter 1 -> 2; "
            "create_block_mask host ms/iter 12.0 -> 50.0 (+38.0)") in md
    assert "lm_head calls/iter 8 -> 10" in md
    assert "host_syncs" not in md  # unchanged counters explain nothing
    assert "Unexplained remainder: 5% of the gap (-0.4% tok/s)." in md
    assert re.search(r"^\| commit\s+\| subject", md, re.M)  # a GitHub table
    assert "Probes run: 37, cached samples reused: 4." in md


def test_a_remainder_beyond_what_the_sides_ruled_out_says_where_the_hunt_looked():
    report = commits_report(culprits=1)
    report["sides"] = [{"from": sha(5), "to": sha(9), "outcome": "cleared", "ruled_out_pct": 3.7},
                       {"from": sha(1), "to": sha(4), "outcome": "remainder", "ruled_out_pct": None}]
    report.update(unexplained_pct=-9.1, unexplained_share=0.24, settings={"direction": "slower"})
    text = render_summary(report)
    # what a side rules out (one step in it) and the remainder (possibly several) say one thing
    assert "in any one side, a further slowdown of 3.7% or more has under 10% probability" in text
    assert "no further slowdown" not in text and "The remainder is larger than that" not in text
    assert "The remainder (-9.1%) is more than that, so it is unlikely to be one slowdown in one side" in text
    # the hunt searched a side itself: the user is handed no command to do it
    assert f"so the hunt searched the side {sha(1)[:10]}..{sha(4)[:10]}, whose ends differed most, for it." in text
    assert "regressbisect run" not in text and "hunt it alone" not in text
    report.update(unexplained_pct=-1.9, unexplained_share=0.06)   # within what was ruled out
    assert "unlikely to be one slowdown" not in render_summary(report)
    # culprits that explain more than the gap leave no slowdown to look for, however large
    report.update(unexplained_pct=+4.5, unexplained_share=-0.12)
    assert "unlikely to be one slowdown" not in render_summary(report)


def test_minimal_not_reproduced_report_renders_everywhere(tmp_path):
    report = minimal_report()
    md = render_markdown(report)
    assert "No regression reproduced" in md and "Culprits" not in md
    assert render_table(report) == "(no candidates measured)"
    assert "No regression reproduced" in render_summary(report)
    assert render_plots(report, tmp_path / "plots") == []
    page = render_html(report, tmp_path / "html").read_text()
    assert "No regression reproduced" in page and "<img" not in page


def test_report_with_missing_fields_still_renders(tmp_path):
    bare = {"kind": "commits", "verdict": "culprits",
            "culprits": [{"commit": sha(7), "step_pct": None}], "candidates": [{"commit": sha(7)}]}
    assert sha(7)[:10] in render_markdown(bare)
    assert sha(7) in render_html(bare, tmp_path).read_text()


def test_hunks_report_shows_file_lines_function_and_excerpt(tmp_path):
    report = hunks_report()
    md = render_markdown(report)
    assert "`dflash/train.py:120-134 in drafter_step`" in md
    assert "```diff" in md and "+        mask = build_mask(ids)" in md
    page = render_html(report, tmp_path).read_text()
    assert "dflash/train.py:120-134 in drafter_step" in page
    assert "# &lt;per layer&gt;" in page  # excerpt escaped, not markup


# ------------------------------------------------------------------ plots

def _assert_png(path: Path) -> np.ndarray:
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = mpimg.imread(path)
    assert pixels.ndim == 3 and pixels.shape[0] > 100 and pixels.shape[1] > 100
    assert float(pixels[..., :3].var()) > 0  # something was drawn
    return pixels


def test_commit_plots_are_valid_images(tmp_path):
    paths = render_plots(commits_report(culprits=2), tmp_path)
    assert [p.name for p in paths] == ["candidates.png", "culprit1-counters.png", "culprit2-counters.png"]
    for path in paths:
        _assert_png(path)


def test_nightly_plots_series_and_each_hunt(tmp_path):
    paths = render_plots(nightly_report(), tmp_path)
    assert [p.name for p in paths] == ["series.png", "hunt1-candidates.png", "hunt1-culprit1-counters.png"]
    series = _assert_png(paths[0])
    assert series.shape[1] >= 700


# ------------------------------------------------------------------ HTML

def test_html_is_self_contained_and_names_culprit_and_step(tmp_path):
    report = commits_report(culprits=2)
    page_path = render_html(report, tmp_path)
    page = page_path.read_text()
    assert page_path.name == "report.html"
    assert "http://" not in page and "https://" not in page
    assert not re.search(r"<(script|link|iframe)\b", page)
    sources = re.findall(r'src="([^"]*)"', page)
    assert len(sources) == 3 and all(s.startswith("data:image/png;base64,") for s in sources)
    assert sha(5) in page and sha(8) in page  # full culprit shas
    assert "-5.1% tok/s (95% CI -6.0% .. -4.2%)" in page
    assert "create_block_mask calls/iter 1 -&gt; 2" in page


def test_html_escapes_subjects(tmp_path):
    report = commits_report()
    report["culprits"][0]["subject"] = "<script>alert(1)</script>"
    page = render_html(report, tmp_path).read_text()
    assert "<script>" not in page and "&lt;script&gt;" in page


def test_nightly_html_and_markdown_show_machine_change_point_and_hunt(tmp_path):
    report = nightly_report()
    page = render_html(report, tmp_path).read_text()
    md = render_markdown(report)
    for text in (page, md):
        assert "Machine (cuda: NVIDIA H200): ok" in text
        assert f"-5.0% at {sha(13)[:10]} nightly commit 12 (night #12, p=0.0005)" in text
        assert "build the block mask per layer" in text  # the hunt's culprit
    assert page.count("data:image/png;base64,") == 3
    assert "1 change point(s), 1 culprit(s) bisected" in render_summary(report)


def test_renderers_do_not_modify_the_report(tmp_path):
    report = nightly_report()
    before = copy.deepcopy(report)
    render_html(report, tmp_path)
    render_summary(report)
    assert report == before


def _load_script():
    # as `python scripts/screenshot_report.py` runs it: scripts/ on sys.path, for its _common import
    if str(SCRIPT.parent) not in sys.path:
        sys.path.insert(0, str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("screenshot_report", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_html_renders_in_chromium(tmp_path):
    if _load_script().find_chromium() is None:
        missing("no Chromium on this machine (apt-get install -y chromium)")
    report_path = tmp_path / "report.json"
    report_path.write_text(json.dumps(commits_report(culprits=2)))
    out = tmp_path / "shot.png"
    done = subprocess.run([sys.executable, str(SCRIPT), str(report_path), str(out), "--height", "1200"],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    pixels = _assert_png(out)
    assert pixels.shape[:2] == (1200, 1280)
    # The page is not blank: a good share of pixels differ from the white background.
    assert (pixels[..., :3] < 0.9).any(axis=-1).mean() > 0.01


def test_markdown_and_html_say_where_the_probe_imported_the_project_from(tmp_path):
    """The isolation line (render/facts.isolation_line) is in every rendering, not only the text."""
    from regressbisect.render import render_html, render_markdown

    report = {"schema": 2, "kind": "commits", "unit": "tok/s", "verdict": "culprits", "culprits": [],
              "candidates": [], "isolation": {"checked": True, "modules": {"mypkg": "src/mypkg/__init__.py"},
                                             "processes_per_probe": 1, "note": "imported from src/mypkg/"}}
    line = "imports: imported from src/mypkg/"
    assert line in render_markdown(report)
    assert line in render_html(report, tmp_path / "html").read_text()


# ------------------------------------------------------------------ live progress

def _to_go(estimates, capsys) -> list[str]:
    """The 'to go' part of each progress line for a hunt whose estimates are `estimates`."""
    from regressbisect.render.progress import HuntProgress

    with HuntProgress(live=False) as progress:
        for n, remaining in enumerate(estimates, 1):
            progress.sample("abc", 1000.0, None, False, probes=n, cached_total=0, remaining=remaining)
    lines = capsys.readouterr().err.splitlines()
    return [line.split("cached", 1)[1].split("]", 1)[0] for line in lines]


def test_the_probes_to_go_are_shown_only_once_the_estimate_is_steady(capsys):
    # the control arm's estimate (21) is not the search's (508): neither is shown while it jumps
    shown = _to_go([21, 21, 508, 506, 506, 504, 380, 300, 90, 88, 85, 84, 80], capsys)
    assert shown[:5] == [""] * 5
    assert shown[5] == ", ~500 to go"                 # four estimates within half of each other
    assert "to go" not in shown[6] and "to go" not in shown[7]
    assert shown[-1] == ", ~80 to go"
    assert _to_go([None, None], capsys) == ["", ""]
    assert _to_go([5, 4, 3, 2, 1], capsys)[-1] == ", ~1 to go"    # small counts count down


def _figure_texts(fig) -> list[str]:
    fig.canvas.draw()
    texts = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))]
    return [t for t in texts if t]


def _scaled(report: dict[str, Any], factor: float) -> dict[str, Any]:
    report = copy.deepcopy(report)
    for row in report.get("candidates") or report.get("series") or ():
        row["median_tok_s"] *= factor
        row["ci95"] = [v * factor for v in row["ci95"]]
    return report


@pytest.mark.parametrize("make", [commits_report, nightly_report])
def test_plots_name_commits_by_10_hex_digits_as_the_tables_do(make):
    from regressbisect.render import plots
    from regressbisect.render.report_load import load_report

    report = load_report(make())
    figures = [plots._candidates_figure(report) if report.KIND != "nightly" else plots._series_figure(report),
               plots._counters_figure(load_report(commits_report()).culprits[0])]
    for fig in figures:
        hashes = [h for text in _figure_texts(fig) for h in re.findall(r"\b[0-9a-f]{6,40}\b", text)]
        assert hashes and {len(h) for h in hashes} == {10}, hashes


@pytest.mark.parametrize("factor, suffix", [(22_000.0, "M"), (14.0, "K"), (1.0, "")])
def test_plot_y_axes_read_as_numbers_with_a_suffix_not_an_offset(factor, suffix):
    from regressbisect.render import plots
    from regressbisect.render.report_load import load_report

    for fig in (plots._candidates_figure(load_report(_scaled(commits_report(), factor))),
                plots._series_figure(load_report(_scaled(nightly_report(), factor)))):
        fig.canvas.draw()
        ax = fig.axes[0]
        assert ax.yaxis.get_offset_text().get_text() == ""
        labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
        assert len(labels) >= 2 and len(set(labels)) == len(labels), labels
        assert all(re.fullmatch(r"-?[0-9]+(\.[0-9]+)?" + suffix, label) for label in labels), labels
        scale = {"M": 1e6, "K": 1e3, "": 1.0}[suffix]          # each label is its tick, exactly
        assert [float(label.rstrip(suffix)) * scale for label in labels] == pytest.approx(list(ax.get_yticks()))


def test_torch_caches_and_compile_settings_are_said_only_when_the_probe_may_import_torch():
    report = commits_report(culprits=1)
    report["cost"] = {"probe_wall_s": 9.0, "gpu_s": 0.0,
                      "caches": {"shared": ["TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"], "directory": "/c",
                                 "user_set": []},
                      "compile": {"set": {"TORCHINDUCTOR_COMPILE_THREADS": "1"}, "user_set": []}}
    report["measurement"] = {"preload": {"mode": "auto", "watched_checked": 2, "watched_imported": []}}
    text = render_summary(report)
    assert "Probe wall 9s" in text
    assert "TORCHINDUCTOR" not in text and "torch.compile" not in text and "Shared caches" not in text
    report["measurement"]["preload"]["watched_imported"] = ["torch"]
    assert "Shared caches (TORCHINDUCTOR_CACHE_DIR" in render_summary(report)
    report["measurement"]["preload"] = {"mode": "off"}   # imports not recorded: say what was set
    assert "torch.compile in each probe's own process" in render_summary(report)


def test_the_runs_read_as_interfered_are_named_in_every_report_and_the_figures_are_of_the_rest():
    report = commits_report()
    report["candidates"][0]["interfered_tok_s"] = [702.2, 675.5]
    report["candidates"][5]["interfered_tok_s"] = [640.0]
    runs = sum(c["n"] for c in report["candidates"]) + 3
    expected = f"Runs read as interfered (far off their candidate's level; left out of every test and figure): 3 of {runs}"
    for text in (render_summary(report), render_markdown(report)):
        assert expected in text and sha(1)[:10] in text and "702.2, 675.5" in text
    assert "interfered" not in render_summary(commits_report())


def drilled_report() -> dict[str, Any]:
    """A commits report whose culprit's drill named a hunk and a pair of hunks, suspected one more
    and left 60% of the commit's step, the rest spread over four hunks."""
    def hunk(path: str, line: int) -> dict[str, Any]:
        return {"id": f"{path}{line}", "file": path, "lines": [line, line + 1], "function": "step",
                "kind": "modify", "excerpt": f"-    x = {line}\n+    x = {line + 1}"}

    def group(hunks, step, ci, share, verdict="reproduced"):
        return {"commit": sha(5), "parent": sha(4), "subject": "x", "cluster": len(hunks) > 1, "hunks": hunks,
                "step_pct": step, "ci95_pct": ci, "share_of_gap": share,
                "alone": {"change_pct": step, "ci95_pct": ci, "pairs": 12, "verdict": verdict}}

    report = commits_report()
    report["culprits"][0]["hunks"] = {
        "verdict": "culprits", "reason": "", "base": sha(4), "hunk_count": 10,
        "culprits": [group([hunk("a.py", 3)], -2.2, [-3.9, -0.4], 0.15),
                     group([hunk("b.py", 7), hunk("c.py", 9)], -3.0, [-5.1, -0.8], 0.25)],
        "suspects": [group([hunk("d.py", 11)], -1.9, [-2.6, -1.2], 0.13, verdict="undecided")],
        "unexplained_share": 0.6, "unexplained_share_ci95": [0.44, 0.69],
        "spread": {"hunks": ["e", "f", "g", "h"], "text": "spread over 4 hunks, none alone >= 2%"},
        "probes": 150, "cached_samples": 8, "max_probes": 192}
    return report


def test_a_drill_prints_each_named_groups_step_its_remainder_and_its_suspects_under_its_culprit(tmp_path):
    report = drilled_report()
    lines = render_summary(report).splitlines()
    at = lines.index("culprit 1: 0505050505 build the block mask per layer")
    assert lines[at + 2: at + 9] == [
        "  3 of its 10 hunks named (drill)",
        "  hunk a.py:3-4 in step: -2.2% tok/s (95% CI -3.9% .. -0.4%), 15% of the commit's step",
        "  2 hunks together: -3.0% tok/s (95% CI -5.1% .. -0.8%), 25% of the commit's step",
        "    hunk b.py:7-8 in step",
        "    hunk c.py:9-10 in step",
        "  drill remainder: 60% of the commit's step not in its named hunks (95% CI 44% .. 69%); the rest is "
        "spread over 4 hunks, none alone >= 2%",
        "  drill suspect: hunk d.py:11-12 in step: -1.9% tok/s (95% CI -2.6% .. -1.2%), 13% of the commit's step "
        "(not named: its test ran out of pairs)"]
    # the commits' own remainder at the end says whose it is
    assert any(line.startswith("Unexplained remainder (commits; a drill's is under its culprit): 5% of the gap")
               for line in lines)
    md = render_markdown(report)
    assert "   - `a.py:3-4 in step`: -2.2% tok/s (95% CI -3.9% .. -0.4%), 15% of the commit's step" in md
    assert ("   - drill remainder: 60% of the commit's step not in its named hunks (95% CI 44% .. 69%); the rest is "
            "spread over 4 hunks, none alone >= 2%") in md
    assert "   - drill suspect: `d.py:11-12 in step`: -1.9% tok/s (95% CI -2.6% .. -1.2%)" in md
    assert "+    x = 4" in md          # the named hunks' excerpts, as before
    page = render_html(report, tmp_path).read_text()
    assert "drill remainder: 60% of the commit&#x27;s step" in page or "drill remainder: 60% of the commit's step" in page
