"""The metrics line protocol: report() round trip, regex fallback, counters aggregation, errors."""
from __future__ import annotations

import io
import json

import pytest

from regressbisect.probe.protocol import (COUNTERS_PREFIX, DEFAULT_METRIC_REGEX, PREFIX, ProtocolError, parse_number,
                                          parse_output, report)


def _reported(**kwargs) -> str:
    buffer = io.StringIO()
    report(file=buffer, **kwargs)
    return buffer.getvalue()


def test_report_round_trips_through_parse_output():
    iters = [{"ms": 40.0, "tokens": 512, "lm_head_calls": 2},
             {"ms": 42.0, "tokens": 512, "lm_head_calls": 4},
             {"ms": 41.0, "tokens": 512, "lm_head_calls": 2}]
    text = _reported(tokens=1536, seconds=0.123, iters=iters, seed=7)
    assert text.startswith(PREFIX) and text.count("\n") == 1
    assert json.loads(text[len(PREFIX):])["seed"] == 7
    [sample] = parse_output("noise before\n" + text + "noise after\n")
    assert sample.tokens == 1536 and sample.seconds == 0.123
    assert sample.tok_s == pytest.approx(1536 / 0.123)
    assert [r["ms"] for r in sample.iters] == [40.0, 42.0, 41.0]
    assert sample.counters == {"lm_head_calls": 2.0}  # median per iteration, ms/tokens excluded
    assert not sample.instrumented
    assert parse_output(text, instrumented=True)[0].instrumented


@pytest.mark.parametrize("tokens,seconds", [(0, 1.0), (10, 0), (-5, 1.0), (10, float("nan")),
                                            (10, float("inf"))])
def test_report_rejects_non_positive_or_non_finite(tokens, seconds):
    with pytest.raises(ValueError):
        report(tokens=tokens, seconds=seconds, file=io.StringIO())


def test_missing_tok_s_is_computed_and_several_lines_give_several_samples():
    text = (f'{PREFIX}{{"tokens": 100, "seconds": 4}}\n'
            f'[default0]:{PREFIX}{{"tokens": 300, "seconds": 2, "tok_s": 150}}\n')
    samples = parse_output(text)
    assert [s.tok_s for s in samples] == [25.0, 150.0]


@pytest.mark.parametrize("output,expected", [
    ("step 100 | loss 2.31 | 14,200.5 tok/s\n", 14200.5),
    ("throughput: 11.2K tok/s\n", 11200.0),
    ("step 1 | 900 tok/s\nstep 2 | 1.5M tok/s\ndone\n", 1.5e6),  # the LAST match wins
])
def test_regex_fallback(output, expected):
    [sample] = parse_output(output)
    assert sample.tok_s == pytest.approx(expected)
    assert sample.tokens is None and sample.seconds is None


def test_protocol_line_beats_regex_and_no_metric_gives_nothing():
    text = f"999 tok/s\n{PREFIX}{{\"tokens\": 10, \"seconds\": 1}}\n"
    assert [s.tok_s for s in parse_output(text)] == [10.0]
    assert parse_output("loss 2.0\nno throughput here\n") == []
    assert parse_output("123 tok/s\n", metric_regex=None) == []


@pytest.mark.parametrize("output, regex", [
    ("throughput: -20337728.3 tok/s\n", DEFAULT_METRIC_REGEX),
    ("step 9 | loss 2.0 | -1.2K tok/s\n", DEFAULT_METRIC_REGEX),
    ("served \u22125.0 tok/s\n", DEFAULT_METRIC_REGEX),          # a typographic minus sign
    ("0.0 tok/s\n", DEFAULT_METRIC_REGEX),
    ("rate -812.5 items/s\n", r"([0-9.]+) items/s"),            # a user regex without the sign
    ("rate=-812.5\n", r"rate=\D*([\d.]+)"),
    ("rate 0 items/s\n", r"([0-9.]+) items/s"),
])
def test_a_negative_or_zero_metric_is_rejected_not_read_as_positive(output, regex):
    with pytest.raises(ProtocolError, match="not a positive number"):
        parse_output(output, metric_regex=regex)


@pytest.mark.parametrize("output, expected", [
    ("step 3 | 14,095 tok/s\n", 14095.0),      # a thousands separator: a comma and 3 digits
    ("step 3 | 12,34,567 tok/s\n", 1234567.0), # lakh grouping: 3 digits after the last comma
    ("step 3 | 14.095 tok/s\n", 14.095),
])
def test_thousands_separators_are_read_as_before(output, expected):
    [sample] = parse_output(output)
    assert sample.tok_s == pytest.approx(expected)


@pytest.mark.parametrize("output, regex", [
    ("step 9 | 838,8 tok/s\n", DEFAULT_METRIC_REGEX),        # was read as 8388
    ("step 9 | 14.095,3 tok/s\n", DEFAULT_METRIC_REGEX),     # was read as 953 (from '095,3')
    ("step 9 | 1.838,853 tok/s\n", DEFAULT_METRIC_REGEX),    # a point before the comma
    ("rate 838,85 items/s\n", r"([\d.,]+) items/s"),         # the user's regex reads it whole too
])
def test_a_decimal_comma_stops_the_hunt_with_one_line_instead_of_a_wrong_number(output, regex):
    from regressbisect.errors import UserError

    with pytest.raises(UserError) as raised:
        parse_output(output, metric_regex=regex)
    assert "\n" not in raised.value.message
    assert "looks like a decimal comma: pass --metric-regex" in raised.value.message


@pytest.mark.parametrize("output", [
    "1e253 tok/s\n",
    "2e18 tok/s\n",
    "1e400 tok/s\n",                                           # inf
    PREFIX + '{"tokens": 1e300, "seconds": 1}\n',
    PREFIX + '{"tokens": 10, "seconds": 1, "tok_s": 1e253}\n',
    PREFIX + '{"tokens": 10, "seconds": 1, "tok_s": Infinity}\n',
])
def test_a_rate_beyond_any_machine_is_a_protocol_error(output):
    with pytest.raises(ProtocolError, match="beyond any machine"):
        parse_output(output)


def test_a_rate_beyond_any_machine_skips_the_run_with_its_reason(tmp_path):
    from regressbisect.probe.runner import ProbeSpec, run_probe

    outcome = run_probe(ProbeSpec(command="echo '1e253 tok/s'", tokens=8, timeout_s=30), tmp_path)
    assert outcome.sample is None
    assert "'1e253' is beyond any machine" in outcome.skip_reason


def test_a_minus_between_numbers_is_a_range_not_a_sign():
    [sample] = parse_output("batch 10-20 tok/s\n")
    assert sample.tok_s == 20.0


def test_a_negative_metric_skips_the_candidate_with_its_reason(tmp_path):
    from regressbisect.probe.runner import ProbeSpec, run_probe

    spec = ProbeSpec(command="echo '-20337728.3 tok/s'", tokens=8, timeout_s=30)
    outcome = run_probe(spec, tmp_path)
    assert outcome.sample is None
    assert "'-20337728.3'" in outcome.skip_reason and "not a positive number" in outcome.skip_reason


def test_custom_metric_regex_needs_one_group():
    assert parse_output("speed=812.5\n", metric_regex=r"speed=([\d.]+)")[0].tok_s == 812.5
    with pytest.raises(ValueError, match="exactly one group"):
        parse_output("speed=812.5\n", metric_regex=r"(speed)=([\d.]+)")


def test_counters_from_two_ranks_are_summed_medians():
    rank0 = {"rank": 0, "pid": 11, "iters": [{"lm_head_calls": 2, "host_syncs": 9},
                                              {"lm_head_calls": 2, "host_syncs": 1},
                                              {"lm_head_calls": 8, "host_syncs": 1}]}
    rank1 = {"rank": 1, "pid": 12, "iters": [{"lm_head_calls": 3}, {"lm_head_calls": 3}]}
    launcher = {"rank": -1, "pid": 10, "iters": []}
    text = "\n".join([f"{PREFIX}{json.dumps({'tokens': 64, 'seconds': 1, 'iters': [{'ms': 5}]})}",
                      *(COUNTERS_PREFIX + json.dumps(r) for r in (rank0, rank1, launcher))])
    [sample] = parse_output(text, instrumented=True)
    # rank0 medians: lm 2, syncs 1; rank1: lm 3, syncs absent -> 0
    assert sample.counters == {"lm_head_calls": 5.0, "host_syncs": 1.0}


def test_protocol_rows_stay_per_iteration_rows_and_the_shim_gives_job_totals():
    # rank 0's own rows count rank 0 only; the shim sums every rank.
    shim = [{"rank": r, "pid": r, "iters": [{"lm_head_calls": 2, "host_syncs": 3}]} for r in (0, 1)]
    rows = [{"ms": 1, "lm_head_calls": 2, "create_block_mask_calls": 1}]
    line = {"tokens": 8, "seconds": 1, "iters": rows}
    text = "\n".join([PREFIX + json.dumps(line), *(COUNTERS_PREFIX + json.dumps(s) for s in shim)])
    [sample] = parse_output(text)
    assert sample.iters == tuple(rows)
    assert sample.counters == {"lm_head_calls": 4.0, "host_syncs": 6.0,
                               "create_block_mask_calls": 1.0}


@pytest.mark.parametrize("line,message", [
    (PREFIX + '{"tokens": 10, "seconds": ', "malformed metrics line"),
    (PREFIX + '[1, 2]', "JSON object"),
    (PREFIX + '{"tokens": "ten", "seconds": 1}', "'tokens'"),
    (PREFIX + '{"tokens": 10, "seconds": 0}', "invalid metrics line"),
    (COUNTERS_PREFIX + '{"rank": 0, "iters": [', "malformed counters line"),
])
def test_malformed_lines_raise_protocol_error_naming_the_line(line, message):
    with pytest.raises(ProtocolError, match=message) as caught:
        parse_output("ok\n" + line + "\n")
    assert isinstance(caught.value, ValueError)
    assert line.strip()[:20] in str(caught.value)


def test_parse_number():
    assert parse_number("14,200.5") == 14200.5
    assert parse_number("11.2K") == pytest.approx(11200.0)
    assert parse_number("2 m") == 2e6
    with pytest.raises(ValueError):
        parse_number("0")


def test_importing_the_package_stays_cheap():
    import subprocess
    import sys
    from pathlib import Path
    code = ("import sys, regressbisect; regressbisect.report; "
            "bad = [m for m in ('torch', 'pandas', 'numpy', 'git') if m in sys.modules]; "
            "sys.exit(str(bad) if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=Path(__file__).resolve().parents[1])
    assert result.returncode == 0, result.stderr


# -- the metrics line's version ---------------------------------------------------------------------

def test_report_writes_the_version_it_reads():
    text = _reported(tokens=10, seconds=1.0)
    assert json.loads(text[len(PREFIX):])["v"] == 1
    with pytest.raises(ValueError, match="set by report"):
        report(tokens=10, seconds=1.0, file=io.StringIO(), v=2)


@pytest.mark.parametrize("line", ['{"v": 1, "tokens": 10, "seconds": 2}', '{"tokens": 10, "seconds": 2}'],
                         ids=["v1", "versionless"])
def test_a_version_1_line_and_a_line_without_a_version_read_alike(line):
    [sample] = parse_output(PREFIX + line)
    assert sample.tok_s == 5.0 and sample.tokens == 10


def test_a_line_of_a_newer_version_stops_with_one_line_naming_the_upgrade():
    from regressbisect.errors import UserError

    with pytest.raises(UserError) as raised:
        parse_output(PREFIX + '{"v": 2, "tokens": 10, "seconds": 2}')
    message = raised.value.message
    assert "\n" not in message and "version 2" in message and "pip install -U regressbisect" in message


@pytest.mark.parametrize("version", ['"1"', "0", "1.5", "true"])
def test_a_version_that_is_not_a_positive_integer_is_an_invalid_line(version):
    with pytest.raises(ProtocolError, match="invalid version"):
        parse_output(PREFIX + f'{{"v": {version}, "tokens": 10, "seconds": 2}}')
