"""What a probe's number is and what it is called: the fallback regex for probes that print no
protocol line, the check of a --metric-regex, and the unit shown for it. Stdlib only and below
both the settings (config.py validates --metric-regex with it) and the probe protocol
(probe/protocol.py reads output with it)."""
from __future__ import annotations

import re

DEFAULT_METRIC_REGEX = r"(?<![\d.,])(\d[\d,.]*(?:[eE][+-]?\d+)?\s?[kKmM]?)\s*tok(?:ens)?/s(?:ec)?\b"
"""Fallback for probes without a protocol line: a number (thousands separators and a K/M
suffix allowed) followed by `tok/s`. The last match in the output wins (the final summary).
The number is read whole: nothing of it may stand before the match (`14.095,3 tok/s` is not
`095,3`), and its points and commas are all in the group, so a decimal comma is seen and
refused (probe/protocol.parse_number) rather than read as a thousands separator."""

HASHED_DEFAULT_METRIC_REGEX = r"(\d[\d,]*(?:\.\d+)?(?:[eE][+-]?\d+)?\s?[kKmM]?)\s*tok(?:ens)?/s(?:ec)?\b"
"""What the config hash holds for DEFAULT_METRIC_REGEX: its earlier spelling, which read part of
a number where the default now reads it whole or refuses it. Every value the default reads, that
spelling read alike, so the samples (and nightly's series) stored under it stay in their series."""

MAX_METRIC = 1e18
"""The largest value read as a measured rate, in any unit per second: an 8-GPU node reaches
about 1e17 FLOP/s, so a probe reporting more misread or misprinted its number (`1e253 tok/s`).
Such a run is skipped with its reason; the statistics never see it (a square overflows from 1.4e154)."""


def compile_metric_regex(metric_regex: str) -> re.Pattern[str]:
    """Compile a --metric-regex; it must have exactly one group (the number)."""
    try:
        pattern = re.compile(metric_regex)
    except re.error as error:
        raise ValueError(f"--metric-regex {metric_regex!r} is not a valid regex: {error}") from None
    if pattern.groups != 1:
        raise ValueError(f"--metric-regex {metric_regex!r} must have exactly one group "
                         f"(the tok/s number), it has {pattern.groups}")
    return pattern


DEFAULT_UNIT = "tok/s"
"""Unit of the protocol line's tok_s and of the default regex."""
GENERIC_UNIT = "units/s"
"""Unit of a --metric-regex that does not spell one out after its number."""

# After the number group: optional regex whitespace, then a literal unit such as `req/s`.
_REGEX_SPACE = re.compile(r"^(?:\\s[*+?]?| [*+?]?)*")
_LITERAL_UNIT = re.compile(r"^(?:[A-Za-z%]|\\?/)+")
_UNIT_END = re.compile(r"^(?:$|\\[bB]|\$|\s|\\s|\)|\|)")


def metric_unit(metric_regex: str | None) -> str:
    """The unit a metric is reported in: 'tok/s' for the protocol line and the default regex;
    for another --metric-regex, the literal text right after its number group
    (`([0-9.]+) req/s` -> 'req/s', `([\\d.]+)\\s*img/s` -> 'img/s'), else 'units/s'."""
    if metric_regex is None or metric_regex == DEFAULT_METRIC_REGEX:
        return DEFAULT_UNIT
    end = _group_end(metric_regex)
    if end is None:
        return GENERIC_UNIT
    rest = metric_regex[end:]
    rest = rest[_REGEX_SPACE.match(rest).end():]
    unit = _LITERAL_UNIT.match(rest)
    if unit is None or not _UNIT_END.match(rest[unit.end():]):
        return GENERIC_UNIT    # no unit, or one the regex goes on to vary (`tokens?/s`): not obvious
    return unit.group(0).replace("\\/", "/")


def _group_end(regex: str) -> int | None:
    """Index just past the closing parenthesis of the first capturing group, or None."""
    depth, start_depth, i, in_class = 0, None, 0, False
    while i < len(regex):
        ch = regex[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(":
            depth += 1
            if start_depth is None and not regex.startswith("(?", i):
                start_depth = depth
        elif ch == ")":
            if depth == start_depth:
                return i + 1
            depth -= 1
        i += 1
    return None
