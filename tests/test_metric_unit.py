"""The metric's unit follows the probe: 'tok/s' for the protocol line, the unit a --metric-regex
spells out after its number, or --unit / `unit` in [tool.regressbisect]. JSON fields keep their
tok_s names; every rendering and the progress lines print the unit."""
from __future__ import annotations

import math
import random
import subprocess
from pathlib import Path

import pytest

from regressbisect.config import build_config
from regressbisect.git.history import History
from regressbisect.hunts.commits import CommitHunt
from regressbisect.samples import ProbeOutcome
from regressbisect.metric import DEFAULT_METRIC_REGEX, metric_unit
from regressbisect.probe.protocol import parse_output
from regressbisect.render.progress import HuntProgress
from regressbisect.render import render_html, render_markdown, render_summary
from regressbisect.testing.benchrepo import make_bench_repo

REQ_REGEX = r"([0-9.]+) req/s"


@pytest.mark.parametrize("regex, unit", [
    (None, "tok/s"),
    (DEFAULT_METRIC_REGEX, "tok/s"),
    (REQ_REGEX, "req/s"),
    (r"([\d.]+)\s*img/s", "img/s"),
    (r"(?:rate|speed)[:=] ([0-9.]+) seq/s\b", "seq/s"),
    (r"([\d.]+)\s+samples\/sec", "samples/sec"),
    (r"throughput=([\d.]+)", "units/s"),        # nothing after the number
    (r"([\d.]+) tokens?/s", "units/s"),         # the regex varies the unit: not obvious
])
def test_unit_derived_from_the_metric_regex(regex, unit):
    assert metric_unit(regex) == unit


def test_config_unit_layers():
    assert build_config({}, {"cmd": "x"}).unit == "tok/s"
    assert build_config({"metric_regex": REQ_REGEX}, {"cmd": "x"}).unit == "req/s"
    assert build_config({"metric_regex": REQ_REGEX, "unit": "queries/s"}, {"cmd": "x"}).unit == "queries/s"
    assert build_config({"unit": "queries/s"}, {"cmd": "x", "unit": "rps"}).unit == "rps"


class RequestsProbe:
    """Fake executor whose output is 'served N req/s', read through the config's metric regex."""

    def __init__(self):
        self.count: dict[str, int] = {}

    def __call__(self, spec, worktree: Path, extra_env=None) -> ProbeOutcome:
        speed = float((worktree / "speed.py").read_text().split("=")[1])
        commit = subprocess.run(["git", "-C", str(worktree), "rev-parse", "HEAD"],
                                capture_output=True, text=True, check=True).stdout.strip()
        self.count[commit] = n = self.count.get(commit, 0) + 1
        value = speed * math.exp(random.Random(f"{commit}-{n}").gauss(0.0, 0.01))
        (sample,) = parse_output(f"warming up\nserved {value:.2f} req/s\n", spec.metric_regex)
        return ProbeOutcome(sample=sample, skip_reason=None, exit_code=0, wall_seconds=0.01)


def test_a_req_per_second_probe_is_reported_in_req_per_second(tmp_path, capsys):
    shas = make_bench_repo(tmp_path / "repo", [1000.0] * 5 + [850.0] * 3)
    config = build_config({}, {"cmd": "fake", "instrument": "off", "metric_regex": REQ_REGEX})
    progress = HuntProgress(live=False, unit=config.unit)
    with progress:
        report = CommitHunt(History.open(tmp_path / "repo"), shas[0], shas[-1], config,
                            store_path=tmp_path / "store.sqlite", probe_runner=RequestsProbe(),
                            progress=progress).run().report
    assert report["unit"] == "req/s"
    assert report["verdict"] == "culprits"
    assert "median_tok_s" in report["endpoints"]["good"]          # field names stay stable
    logged = capsys.readouterr().err
    rendered = {"progress": logged, "text": render_summary(report), "markdown": render_markdown(report),
                "html": render_html(report, tmp_path / "html").read_text()}
    for name, text in rendered.items():
        assert "req/s" in text, name
        assert "tok/s" not in text, (name, [line for line in text.splitlines() if "tok/s" in line])
