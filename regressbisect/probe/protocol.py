"""Writing and reading the lines of the probe contract (probe/contract.py defines them, and
every other part of the contract), and reading a probe's output (the regex fallback for probes
that print no metrics line is defined in regressbisect/metric.py).

A probe prints one line per measured run on stdout::

    @regressbisect {"v": 1, "tokens": 65536, "seconds": 2.1, "tok_s": 31207.6, "iters": [{"ms": 41.0, ...}]}

The counters shim (loaded into every process of an instrumented probe) prints one line per
process at exit::

    @regressbisect-counters {"rank": 0, "pid": 4242, "iters": [{"lm_head_calls": 2, ...}, ...]}

This module is imported by ``regressbisect/__init__.py`` (for :func:`report`), so it must stay
cheap: stdlib only, and `regressbisect.samples` (itself stdlib only) imported lazily.
"""
from __future__ import annotations

import json
import math
import re
import statistics
import sys
from typing import TYPE_CHECKING, Any, Iterable, Mapping, TextIO

from regressbisect.metric import DEFAULT_METRIC_REGEX, MAX_METRIC, compile_metric_regex
from regressbisect.probe.contract import (COUNTERS_PREFIX, METRICS_VERSION, PREFIX, ROW_FIELDS, VERSION_KEY, WORK_KEY,
                                          WORK_PREFIX, WORK_UNIT_KEY, WORK_UNITS, WORK_WAY_KEY, WORK_WAYS)

if TYPE_CHECKING:
    from regressbisect.samples import Sample

__all__ = ["COUNTERS_PREFIX", "DEFAULT_METRIC_REGEX", "PREFIX", "ProtocolError", "aggregate_counters",
           "parse_number", "parse_output", "report"]

# Launchers may tag each line of a child's output ("[default0]:", "[rank1]: "); accept one tag.
_LINE_TAG = r"^\s*(?:\[[^\]]*\]:?\s*)?"
_PROTOCOL_LINE = re.compile(_LINE_TAG + re.escape(PREFIX) + r"(.*)$")
_COUNTERS_LINE = re.compile(_LINE_TAG + re.escape(COUNTERS_PREFIX) + r"(.*)$")
_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6}


class ProtocolError(ValueError):
    """A line starts with the protocol prefix but does not carry a valid metrics record."""


def report(tokens: float, seconds: float, iters: list[dict] | None = None,
           file: TextIO | None = None, **extra: Any) -> None:
    """Print the metrics line for one measured run (the one-line helper for user scripts).

    `tokens` processed in `seconds` of the measured stage (after warm-up); `iters` optional
    per-iteration rows (`ms`, `tokens`, counters); `extra` keys are kept in the record.
    """
    for name, value in (("tokens", tokens), ("seconds", seconds)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value) or value <= 0:
            raise ValueError(f"report(): {name} must be a finite positive number, got {value!r}")
    if iters is not None and (not isinstance(iters, (list, tuple))
                              or not all(isinstance(r, Mapping) for r in iters)):
        raise ValueError("report(): iters must be a list of dicts (one per iteration)")
    clash = {VERSION_KEY, "tokens", "seconds", "tok_s", "iters"} & extra.keys()
    if clash:
        raise ValueError(f"report(): {sorted(clash)} are set by report() itself")
    record: dict[str, Any] = {VERSION_KEY: METRICS_VERSION, "tokens": tokens, "seconds": seconds,
                              "tok_s": tokens / seconds}
    if iters is not None:
        record["iters"] = [dict(r) for r in iters]
    record.update(extra)
    shim = sys.modules.get("regressbisect.probe.instrument")
    if shim is not None:   # the counting arm of a program without optimizer steps counts this window
        shim.window_end(seconds)
    out = sys.stdout if file is None else file
    # allow_nan=False: NaN is not JSON, and the parent would reject the line anyway.
    out.write(PREFIX + json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n")
    out.flush()


def parse_output(text: str, metric_regex: str | None = DEFAULT_METRIC_REGEX,
                 instrumented: bool = False) -> list["Sample"]:
    """Read every sample a probe printed: one per protocol line, in order.

    Without any protocol line, the last `metric_regex` match gives one Sample(tok_s=...);
    with neither, the list is empty. Counters lines from the shim become `Sample.counters`
    (sum over processes of each process's median per-iteration value) of every sample; a
    protocol line's own `iters` rows stay its per-iteration rows, and their median counters
    fill `Sample.counters` for names the shim did not report.
    Raises ProtocolError for a malformed protocol or counters line, or a rate that is no
    measurement (`measured_rate`); UserError for a metrics line of a version this tool does not
    read (a line without a version is version 1), or a regex number with a decimal comma
    (`parse_number`): no candidate's line could be read, so the hunt stops with one line instead
    of skipping every candidate.
    """
    from regressbisect.samples import Sample  # lazy: keeps `import regressbisect` minimal

    records: list[tuple[dict[str, Any], str]] = []
    process_rows: list[list[Mapping[str, Any]]] = []
    work_rows: list[list[Mapping[str, Any]]] = []
    work_units: set[str] = set()
    work_ways: set[str] = set()
    for line in text.splitlines():
        match = _PROTOCOL_LINE.match(line)
        if match:
            records.append((_load_record(match.group(1), line), line))
            continue
        match = _COUNTERS_LINE.match(line)
        if match:
            rows, work, unit, way = _load_counters(match.group(1), line)
            process_rows.append(rows)
            if work:
                work_rows.append(work)
                work_units.add(unit)
                work_ways.add(way)

    shim_counters = aggregate_counters(process_rows)
    shim_counters.update(work_counters(work_rows, work_units, work_ways))
    samples = []
    for record, line in records:
        iters = record.get("iters") or []
        # The probe's own rows stay the per-iteration rows (Sample.iters); Sample.counters is
        # the job total from the shim (every rank), falling back to the medians of the probe's
        # own rows for counters the shim did not report (often rank 0 only).
        counters = _median_counters(iters)
        counters.update(shim_counters)
        try:
            tok_s = record.get("tok_s")
            if tok_s is None:
                tok_s = record["tokens"] / record["seconds"]
            measured_rate(tok_s, f"tok_s {tok_s!r}")
            samples.append(Sample(tok_s=tok_s, tokens=record["tokens"], seconds=record["seconds"],
                                  iters=tuple(iters), counters=counters,
                                  instrumented=instrumented))
        except (ValueError, TypeError, ZeroDivisionError) as error:
            raise ProtocolError(f"invalid metrics line ({error}): {_clip(line)}") from None
    if samples or metric_regex is None:
        return samples

    pattern = compile_metric_regex(metric_regex)
    matches = list(pattern.finditer(text))
    if not matches:
        return []
    raw = _with_sign(text, matches[-1])
    try:
        tok_s = parse_number(raw)
    except ValueError as error:
        raise ProtocolError(f"--metric-regex: {error}") from None
    return [Sample(tok_s=tok_s, counters=shim_counters, instrumented=instrumented)]


_MINUS_SIGNS = "-\u2212"
"""ASCII hyphen-minus and the typographic minus sign (U+2212)."""


def _with_sign(text: str, match: re.Match[str]) -> str:
    """The number group of `match`, with the minus sign the output wrote right before it.

    A regex that starts at a digit (the default one, most users' `([0-9.]+) ...`) would read
    `-5 tok/s` as 5: a sign just before the number belongs to it, so the value is rejected
    as not positive instead of read as a normal sample. `10-20` is a range, not a sign."""
    number = match.group(1).strip()
    start = match.start(1)
    before = text[start - 1] if start >= 1 else None   # ("" would be `in` any string)
    if before is not None and before in _MINUS_SIGNS and not (start >= 2 and text[start - 2].isalnum()):
        return "-" + number
    return number


# A comma that is no thousands separator: one or two digits after the last one, or a point
# before one (`838,8`, `14.095,3`, `1.838,853`); `14,095` and `12,34,567` are thousands.
_DECIMAL_COMMA = re.compile(r",\d{1,2}$|\..*,")


def parse_number(raw: str) -> float:
    """'14,200.5' -> 14200.5, '11.2K' -> 11200.0, '1.5 M' -> 1.5e6. ValueError when it is no
    measured rate (`measured_rate`); UserError for a decimal comma, which no number of this
    reading can take (stripped as a thousands separator, '838,8' would read as 8388), so the
    hunt stops with one line instead of measuring every candidate wrong or skipping it."""
    text = raw.strip().replace("_", "")
    suffix = text[-1:].lower() if text[-1:].lower() in ("k", "m") else ""
    digits = text[: len(text) - len(suffix)].strip()
    if _DECIMAL_COMMA.search(re.split("[eE]", digits)[0]):
        from regressbisect.errors import UserError  # lazy: errors imports sqlite3

        raise UserError(f"the probe's metric {raw.strip()!r} looks like a decimal comma: pass --metric-regex "
                        f"with a group that leaves the comma out, or print the number with a decimal point "
                        f"(or the @regressbisect line)")
    try:
        value = float(digits.replace(",", "")) * _SUFFIX[suffix]
    except ValueError:
        raise ValueError(f"{raw.strip()!r} is not a number") from None
    return measured_rate(value, repr(raw.strip()))


def measured_rate(value: float, shown: str) -> float:
    """`value` when it can be a measured rate (positive, at most MAX_METRIC), else ValueError
    saying why, `shown` naming it: the probe's run is then skipped with that reason (a protocol
    line's or a --metric-regex number alike)."""
    if not value > 0:   # NaN too
        raise ValueError(f"{shown} is not a positive number")
    if not value <= MAX_METRIC:
        raise ValueError(f"{shown} is beyond any machine (more than {MAX_METRIC:g} per second): a misread "
                         f"or misprinted number, not a measurement")
    return value


def aggregate_counters(process_rows: Iterable[list[Mapping[str, Any]]]) -> dict[str, float]:
    """Sum over processes (ranks) of each process's median per-iteration counter value.

    The median per iteration is robust to the first iterations (compile, cache warm-up) doing
    extra work; summing over ranks gives the job's per-step total. A counter absent from a row
    did not fire in that iteration (0). Processes with no iteration (a launcher) are skipped.
    """
    totals: dict[str, float] = {}
    for rows in process_rows:
        for name, value in _median_counters(rows).items():
            totals[name] = totals.get(name, 0.0) + value
    return totals


def work_counters(process_rows: list[list[Mapping[str, Any]]], units: set[str],
                  ways: set[str] = frozenset()) -> dict[str, float]:
    """The counting arm's work rows as Sample.counters entries: per process the median of each
    count over its rows, summed over processes, under WORK_PREFIX; `work.unit` is the index in
    WORK_UNITS of the coarsest unit any process reported, `work.way` the index in WORK_WAYS of the
    last way any process counted by (a compiled rank makes the job compiled), `work.rows` the
    rows per process."""
    if not process_rows:
        return {}
    counts = {WORK_PREFIX + name: value for name, value in aggregate_counters(process_rows).items()}
    known = [u for u in WORK_UNITS if u in units] or [WORK_UNITS[-1]]
    counts[WORK_PREFIX + "unit"] = float(WORK_UNITS.index(known[-1]))
    counts[WORK_PREFIX + "way"] = float(max((WORK_WAYS.index(w) for w in ways if w in WORK_WAYS), default=0))
    counts[WORK_PREFIX + "rows"] = float(max(len(rows) for rows in process_rows))
    return counts


def _median_counters(rows: list[Mapping[str, Any]]) -> dict[str, float]:
    names = sorted({k for r in rows for k, v in r.items()
                    if k not in ROW_FIELDS and _is_number(v)})
    return {name: float(statistics.median(float(r.get(name, 0) or 0) for r in rows))
            for name in names}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _load_record(payload: str, line: str) -> dict[str, Any]:
    record = _load_json(payload, line, "metrics")
    version = record.get(VERSION_KEY, METRICS_VERSION)   # lines from before the field are version 1
    if not _is_number(version) or version != int(version) or version < 1:
        raise ProtocolError(f"metrics line has an invalid version {VERSION_KEY!r} (a positive integer): "
                            f"{_clip(line)}")
    if version > METRICS_VERSION:
        from regressbisect.errors import UserError  # lazy: errors imports sqlite3

        raise UserError(f"the probe printed a version {int(version)} metrics line, newer than this "
                        f"regressbisect reads (version {METRICS_VERSION}): upgrade regressbisect where "
                        f"the hunt runs to the one the probe uses (pip install -U regressbisect): "
                        f"{_clip(line, 80)}")
    for name in ("tokens", "seconds"):
        if not _is_number(record.get(name)):
            raise ProtocolError(f"metrics line needs a number {name!r}: {_clip(line)}")
    if "tok_s" in record and record["tok_s"] is not None and not _is_number(record["tok_s"]):
        raise ProtocolError(f"metrics line has a non-numeric 'tok_s': {_clip(line)}")
    iters = record.get("iters")
    if iters is not None and (not isinstance(iters, list)
                              or not all(isinstance(r, dict) for r in iters)):
        raise ProtocolError(f"metrics line 'iters' must be a list of objects: {_clip(line)}")
    return record


def _load_counters(payload: str, line: str) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]], str, str]:
    """(per-step rows, the counting arm's work rows, what a work row covers, how it was counted:
    a line from before the ways is the dispatch way's)."""
    record = _load_json(payload, line, "counters")
    lists = []
    for key in ("iters", WORK_KEY):
        rows = record.get(key) or []
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise ProtocolError(f"counters line {key!r} must be a list of objects: {_clip(line)}")
        lists.append(rows)
    return (lists[0], lists[1], str(record.get(WORK_UNIT_KEY) or WORK_UNITS[-1]),
            str(record.get(WORK_WAY_KEY) or WORK_WAYS[0]))


def _load_json(payload: str, line: str, what: str) -> dict[str, Any]:
    try:
        record = json.loads(payload)
    except json.JSONDecodeError as error:
        raise ProtocolError(f"malformed {what} line ({error.msg} at column {error.pos + 1}): "
                            f"{_clip(line)}") from None
    if not isinstance(record, dict):
        raise ProtocolError(f"{what} line must carry a JSON object: {_clip(line)}")
    return record


def _clip(line: str, limit: int = 200) -> str:
    line = line.strip()
    return line if len(line) <= limit else line[:limit] + "..."
