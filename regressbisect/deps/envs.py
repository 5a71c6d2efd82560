"""The pins of an environment and the difference between two.

An environment is a pinned requirements file (`pip freeze` output included: `name==version`
lines, comments, `--hash` options) or a `uv.lock` (its `[[package]]` tables). Names are compared
as PEP 503 normalises them (`Foo_Bar` is `foo-bar`). What cannot be a pin of a package index's
release (an editable install, a URL or path requirement, an option line, an unpinned range, a
lockfile's editable or git source) is left out and listed in `Environment.unsupported`: the
caller says so in one line.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from regressbisect.errors import UserError
from regressbisect.tomlread import tomllib

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*===?\s*([^\s;,]+)\s*(?:;.*)?$")
_REGISTRY_SOURCES = ("registry",)
"""uv.lock sources whose packages are releases of an index (editable, path, git and virtual ones
are the project's own or built from elsewhere)."""


def normalise(name: str) -> str:
    """PEP 503: runs of '-', '_', '.' are one '-', lower case."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Environment:
    """An environment's pinned packages, by normalised name."""

    source: str
    """The file it was read from, as the user named it."""
    pins: Mapping[str, str]
    """Normalised name -> version."""
    names: Mapping[str, str] = field(default_factory=dict)
    """Normalised name -> the name as the file spells it (for the report)."""
    unsupported: tuple[str, ...] = ()
    """Lines (or lockfile packages) left out: not a release of an index pinned to one version."""

    def display(self, name: str) -> str:
        return self.names.get(name, name)


def read_environment(path: Path) -> Environment:
    """The environment a file pins: `uv.lock` (by its name or its TOML `[[package]]` tables),
    else a requirements file. UserError when it cannot be read or pins nothing."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read environment {path}: {exc}") from None
    env = (read_uv_lock(text, str(path)) if path.name.endswith(".lock") or text.lstrip().startswith("version =")
           else read_requirements(text, str(path)))
    if not env.pins:
        raise UserError(f"{path} pins no package of an index ('name==version' lines, or a uv.lock's "
                        f"[[package]] tables){_left_out(env)}")
    return env


def read_requirements(text: str, source: str = "requirements") -> Environment:
    """`name==version` lines (`pip freeze`, `uv pip compile`): comments, blank lines, environment
    markers, extras and `--hash` options are read past; continuation lines are joined."""
    pins: dict[str, str] = {}
    names: dict[str, str] = {}
    unsupported: list[str] = []
    for line in _logical_lines(text):
        requirement = re.split(r"\s--hash[=\s]", line)[0].strip()
        match = _PIN.match(requirement)
        if match is None or "@" in requirement.split(";")[0]:
            unsupported.append(line)
            continue
        name, version = match.group(1), match.group(2)
        key = normalise(name)
        if key in pins and pins[key] != version:
            raise UserError(f"{source} pins {name} twice ({pins[key]} and {version}): keep one")
        pins[key], names[key] = version, name
    return Environment(source, pins, names, tuple(unsupported))


def read_uv_lock(text: str, source: str = "uv.lock") -> Environment:
    """A uv.lock's `[[package]]` tables from a registry, name and version each; the project's own
    (editable, virtual) and packages from git, a path or a URL are listed as unsupported."""
    try:
        lock = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{source} is not valid TOML: {exc}") from None
    pins: dict[str, str] = {}
    names: dict[str, str] = {}
    unsupported: list[str] = []
    for package in lock.get("package") or []:
        name, version = package.get("name"), package.get("version")
        source_kind = next(iter(package.get("source") or {"registry": ""}), "")
        if not name or not version or source_kind not in _REGISTRY_SOURCES:
            unsupported.append(f"{name} ({source_kind or 'no version'})")
            continue
        key = normalise(name)
        if key in pins and pins[key] != version:
            # uv.lock forks by marker: one package at two versions cannot be one candidate's pin
            unsupported.append(f"{name} ({pins[key]} and {version}: one version per marker)")
            continue
        pins[key], names[key] = version, name
    return Environment(source, pins, names, tuple(unsupported))


def _logical_lines(text: str) -> list[str]:
    """Non-empty lines without comments, with backslash continuations joined."""
    out: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = (pending + line).strip(), ""
        if line:
            out.append(line)
    if pending.strip():
        out.append(pending.strip())
    return out


def _left_out(env: Environment) -> str:
    if not env.unsupported:
        return ""
    return f"; {len(env.unsupported)} line(s) left out, e.g. {env.unsupported[0]!r}"


def unsupported_line(env: Environment) -> str | None:
    """The one line that says what of `env` was left out, or None."""
    if not env.unsupported:
        return None
    shown = ", ".join(repr(u) for u in env.unsupported[:3]) + (", ..." if len(env.unsupported) > 3 else "")
    return (f"{env.source}: {len(env.unsupported)} requirement(s) left out, not pinned releases of an "
            f"index (editable, URL, path and option lines are not supported): {shown}")


@dataclass(frozen=True)
class Change:
    """One package whose pin differs between GOOD and BAD."""

    name: str
    """Normalised name."""
    good: str | None
    """GOOD's version (None: BAD added the package)."""
    bad: str | None
    """BAD's version (None: BAD removed it)."""
    display: str = ""
    """The name as the files spell it."""

    @property
    def kind(self) -> str:
        return "added" if self.good is None else "removed" if self.bad is None else "changed"

    def describe(self) -> str:
        return f"{self.display or self.name} {self.good or '(none)'} -> {self.bad or '(removed)'}"


def same_version(a: str, b: str) -> bool:
    """Equal as PEP 440 versions (1.0 is 1.0.0), else as strings."""
    from packaging.version import InvalidVersion, Version

    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def diff(good: Environment, bad: Environment) -> list[Change]:
    """The packages whose pin differs (changed, added, removed), by normalised name."""
    out: list[Change] = []
    for name in sorted(set(good.pins) | set(bad.pins)):
        before, after = good.pins.get(name), bad.pins.get(name)
        if before is not None and after is not None and same_version(before, after):
            continue
        out.append(Change(name, before, after, bad.display(name) if after is not None else good.display(name)))
    return out


def apply(good: Environment, changes: Sequence[Change], at: Mapping[str, str] | None = None) -> dict[str, str]:
    """GOOD's pins with `changes` made (each package at BAD's version, added or removed); `at`
    overrides a changed package's version (a release between its two)."""
    pins = dict(good.pins)
    for change in changes:
        if change.bad is None:
            pins.pop(change.name, None)
        else:
            pins[change.name] = change.bad
    pins.update(at or {})
    return dict(sorted(pins.items()))
