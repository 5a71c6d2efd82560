"""Which package changes cannot go without which others, read from the packages' metadata (no
probe), as hunts/hunks.py reads a hunk's needs from the diff.

A change C needs a change D when an environment with C made and D not made breaks a requirement:
C's package at BAD's version requires D's package in a version D's GOOD pin does not meet (or D
adds it), or D's package at GOOD's version requires C's in a version C's BAD pin does not meet (or
C removes it). The requirements are those the two ends' environments have installed. A need
missed here costs a candidate that does not build (a crash, as a hunk that does not run); one
read here keeps the two in one group of the search.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Mapping, Sequence

from regressbisect.deps.envs import Change, normalise

_READ_REQUIRES = ("import importlib.metadata as m, json; print(json.dumps({d.metadata['Name']: "
                  "d.requires or [] for d in m.distributions()}))")


def installed_requirements(venv: Path) -> dict[str, list[str]]:
    """Normalised name -> its Requires-Dist lines, of every distribution installed in `venv`
    ({} when they cannot be read: no need is then known, which costs probes, not answers)."""
    try:
        out = subprocess.run([str(venv / "bin" / "python"), "-I", "-c", _READ_REQUIRES], capture_output=True,
                             text=True, timeout=120)
        raw = json.loads(out.stdout) if out.returncode == 0 else {}
    except (OSError, subprocess.SubprocessError, ValueError):
        raw = {}
    return {normalise(name): list(requires) for name, requires in raw.items() if name}


def change_needs(changes: Sequence[Change], good_requires: Mapping[str, list[str]],
                 bad_requires: Mapping[str, list[str]]) -> dict[str, frozenset[str]]:
    """For each change (by name), the changes it cannot go without (see the module docstring)."""
    by_name = {c.name: c for c in changes}
    out: dict[str, set[str]] = {}
    for c in changes:
        for d in changes:
            if c is d:
                continue
            # C made, D not: C's package at BAD requires D's at GOOD; D's at GOOD requires C's at BAD
            if (c.bad is not None and _breaks(bad_requires.get(c.name, ()), d.name, d.good)) or \
                    (d.good is not None and _breaks(good_requires.get(d.name, ()), c.name, c.bad)):
                out.setdefault(c.name, set()).add(d.name)
    return {name: frozenset(need) for name, need in out.items() if name in by_name}


def _breaks(requires, name: str, version: str | None) -> bool:
    """Whether `requires` (Requires-Dist lines) holds one for `name` that `version` (None: the
    package absent) does not meet. Requirements of an extra are left out."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version

    for line in requires:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if normalise(requirement.name) != name:
            continue
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        if version is None:
            return True
        try:
            if not requirement.specifier.contains(Version(version), prereleases=True):
                return True
        except InvalidVersion:
            continue
    return False
