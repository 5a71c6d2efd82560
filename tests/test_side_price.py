"""A side check stops at its price and says what it bought (SearchSettings.side_resolution)."""
from __future__ import annotations

import math

import numpy as np

from regressbisect.render import render_summary
from regressbisect.search.bisect import SearchSettings
from regressbisect.search.book import SampleBook
from regressbisect.search.simulate import FakeHistory, simulate, step_levels
from regressbisect.search.sides import SideRule


def _sides(settings: SearchSettings, seed: int):
    # one 20% step at 6% noise, every side's margin min_effect (side_share 0): ruling out 2% at this
    # noise costs about 60 pairs a side, more than the search before it
    return simulate(FakeHistory(step_levels(32, {12: -0.20}), 0.06), settings, seed=seed)


def test_a_side_that_has_cost_as_much_as_the_search_stops_at_the_step_its_pairs_ruled_out():
    priced = insisted = 0
    for seed in range(4):
        shipped = _sides(SearchSettings(side_share=0.0), seed)
        strict = _sides(SearchSettings(side_share=0.0, side_resolution=0.02), seed)
        assert [c.first_bad for c in shipped.result.culprits] == [c.first_bad for c in strict.result.culprits] == [12]
        for side in shipped.result.sides:
            if side.priced:
                priced += 1
                assert side.outcome == "cleared" and 0.02 <= side.ruled_out < 0.20   # above min_effect, below the gap
        assert not any(side.priced for side in strict.result.sides)
        assert all(side.ruled_out <= 0.0201 for side in strict.result.sides if side.outcome == "cleared")
        insisted += strict.executions - shipped.executions
    assert priced >= 4 and insisted > 0       # the price bought fewer probes; insisting pays them


def test_the_resolution_is_what_the_fresh_pairs_rule_out_and_none_while_the_ends_differ():
    rng = np.random.default_rng(0)
    book = SampleBook(pair_window=1)
    rule = SideRule(book, min_effect=0.02, alpha=0.05, side_share=0.0, side_drop=0.1, side_pairs=None)
    reached = []
    for k in range(40):
        for i in (0, 1):
            book.add(i, 1000.0 * math.exp(rng.normal(0, 0.05)), tag=None, when=2 * k + i)
        if k in (4, 39):
            reached.append(rule.resolution(0, 1, -1, sign=-1))
    assert reached[0] > reached[1] >= 1 - 1 / 1.02 - 1e-12   # more pairs rule out a smaller step, min_effect at least
    slow = SampleBook(pair_window=1)
    for k in range(20):
        slow.add(0, 1000.0 * math.exp(rng.normal(0, 0.01)), tag=None, when=2 * k)
        slow.add(1, 800.0 * math.exp(rng.normal(0, 0.01)), tag=None, when=2 * k + 1)
    rule = SideRule(slow, min_effect=0.02, alpha=0.05, side_share=0.0, side_drop=0.1, side_pairs=None)
    assert rule.resolution(0, 1, -1, sign=-1) is None      # the ends differ our way: no resolution


def test_the_report_says_a_priced_side_did_not_look_for_smaller_steps_and_names_the_flag():
    report = {"kind": "commits", "verdict": "culprits", "good": "a" * 40, "bad": "b" * 40,
              "culprits": [{"commit": "c" * 40, "parent": "d" * 40, "subject": "slow", "index": 3,
                            "step_pct": -20.0, "ci95_pct": [-22.0, -18.0], "share_of_gap": 1.0}],
              "unexplained_share": 0.0, "unexplained_pct": 0.0, "gap_pct": -20.0,
              "settings": {"min_effect": 0.02, "direction": "slower"},
              "sides": [{"from": "a" * 40, "to": "d" * 40, "outcome": "cleared", "ruled_out_pct": 6.4, "priced": True},
                        {"from": "c" * 40, "to": "b" * 40, "outcome": "cleared", "ruled_out_pct": 2.0, "priced": False}],
              "candidates": [], "probes": 40, "cached_samples": 0}
    text = render_summary(report)
    assert "In 1 side(s) a further slowdown of 6.4% or more is ruled out and smaller ones were not looked for" in text
    assert "--side-resolution 2% to insist" in text
    report["sides"][0]["priced"] = False
    assert "--side-resolution" not in render_summary(report)
