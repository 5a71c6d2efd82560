"""The releases of a package between two versions, from the package index (its simple API, PEP
691 JSON or PEP 503 HTML) or from the files of `--find-links` directories.

Pre-releases and yanked releases are left out unless asked (a pre-release end is kept: the user
named it). A release is listed when any file of it is there, wheel or sdist; whether one installs
here is the build's to say (a release that does not is skipped and named, never blamed).

Nightlies: where both ends are dev releases (`2.6.0.dev20250101`, as torch's nightly index names
them) their dev releases between are kept without --pre, and where pre-releases are kept and the
index's JSON API gives every release's `upload-time` (PEP 700), the releases between are ordered
by it (a date axis, each release's date its first file's upload) instead of by version.
"""
from __future__ import annotations

import datetime
import html.parser
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from regressbisect.deps.builds import IndexOptions
from regressbisect.deps.envs import normalise

DEFAULT_INDEX = "https://pypi.org/simple"
TIMEOUT_S = 60.0
_ARCHIVE = re.compile(r"^(?P<name>.+?)-(?P<version>\d[^-]*?)(?:-[^-]+-[^-]+-[^-]+)?\.(?:whl|tar\.gz|zip|tar\.bz2)$")
_WHEEL = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)-.*\.whl$")


class ReleasesUnavailable(Exception):
    """The index could not be read: the release step of that package is left out, with this reason."""


@dataclass(frozen=True)
class ReleaseRule:
    pre: bool = False
    """Keep pre-releases (and dev releases)."""
    yanked: bool = False
    """Keep yanked releases."""


@dataclass(frozen=True)
class Releases:
    """The releases from GOOD's version to BAD's, in the order they are bisected."""

    versions: list[str]
    uploaded: dict[str, str]
    """version -> its first file's upload time (ISO 8601, as the index gives it), where known."""
    axis: str = "version"
    """"date": the releases between are ordered by upload time; "version": by version."""


def releases_between(name: str, good: str, bad: str, index: IndexOptions, rule: ReleaseRule = ReleaseRule()
                     ) -> list[str]:
    """Every release of `name` from `good` to `bad` (both included, in that order: a downgrade
    walks down), as the index spells them. ReleasesUnavailable when no source could be read."""
    return dated_releases(name, good, bad, index, rule).versions


def dated_releases(name: str, good: str, bad: str, index: IndexOptions, rule: ReleaseRule = ReleaseRule()
                   ) -> Releases:
    """releases_between's list with each release's upload time, ordered by it where pre-releases
    are kept (--pre, or two dev-release ends: nightlies) and every release has one."""
    from packaging.version import InvalidVersion, Version

    files = list(_files(normalise(name), index))
    try:
        lo, hi = Version(good), Version(bad)
    except InvalidVersion as exc:
        raise ReleasesUnavailable(f"{exc}: not a PEP 440 version") from None
    versions: dict[Version, str] = {}
    yanked_only: dict[Version, bool] = {}
    uploaded: dict[Version, str] = {}
    for version_text, yanked, upload_time in files:
        try:
            version = Version(version_text)
        except InvalidVersion:
            continue
        versions.setdefault(version, version_text)
        yanked_only[version] = yanked_only.get(version, True) and yanked
        if upload_time and (version not in uploaded or _instant(upload_time) < _instant(uploaded[version])):
            uploaded[version] = upload_time
    pre = rule.pre or (lo.is_devrelease and hi.is_devrelease)
    low, high = min(lo, hi), max(lo, hi)
    kept = [v for v in versions if low < v < high
            and (pre or not (v.is_prerelease or v.is_devrelease))
            and (rule.yanked or not yanked_only[v])]
    by_date = pre and bool(kept) and all(v in uploaded for v in kept)
    if by_date:
        downward = _instant(uploaded[lo]) > _instant(uploaded[hi]) if lo in uploaded and hi in uploaded else lo > hi
        inner = sorted(kept, key=lambda v: (_instant(uploaded[v]), v), reverse=downward)
    else:
        inner = sorted(kept, reverse=lo > hi)
    named = [(lo, good), *((v, versions[v]) for v in inner), (hi, bad)]
    dates = {text: uploaded[v] for v, text in named if v in uploaded}
    return Releases([text for _, text in named], dates, "date" if by_date else "version")


def _instant(when: str) -> datetime.datetime:
    """An upload time as a comparable UTC instant (PEP 700: ISO 8601, `Z` or an offset)."""
    try:
        parsed = datetime.datetime.fromisoformat(when.replace("Z", "+00:00"))
    except ValueError:
        return datetime.datetime.max.replace(tzinfo=datetime.timezone.utc)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.timezone.utc)


def _files(name: str, index: IndexOptions) -> Iterable[tuple[str, bool, str | None]]:
    """(version, yanked, upload time or None) of every file of `name` the sources hold."""
    read_any = False
    errors: list[str] = []
    for link in index.find_links:
        try:
            yield from _find_links(name, link)
            read_any = True
        except ReleasesUnavailable as exc:
            errors.append(str(exc))
    if not index.no_index:
        try:
            yield from _simple_index(name, index.index_url or DEFAULT_INDEX)
            read_any = True
        except ReleasesUnavailable as exc:
            errors.append(str(exc))
    if not read_any:
        raise ReleasesUnavailable("; ".join(errors) or "no index to list releases from (--no-index without "
                                  "--find-links)")


def _version_of(filename: str, name: str) -> str | None:
    """The version a distribution file of `name` is of, or None when it is of another package."""
    match = _WHEEL.match(filename) or _ARCHIVE.match(filename)
    if match is None or normalise(match.group("name")) != name:
        return None
    return match.group("version")


def _find_links(name: str, link: str) -> Iterable[tuple[str, bool, str | None]]:
    parsed = urllib.parse.urlparse(link)
    if parsed.scheme in ("", "file"):
        directory = Path(urllib.parse.unquote(parsed.path) if parsed.scheme else link)
        if not directory.is_dir():
            raise ReleasesUnavailable(f"--find-links {link} is not a directory")
        return [(v, False, None) for f in sorted(directory.iterdir()) if (v := _version_of(f.name, name))]
    links = _AnchorParser.read(_get(link, "text/html"))
    return [(v, yanked, None) for href, yanked in links
            if (v := _version_of(urllib.parse.unquote(href.split("#")[0].rsplit("/", 1)[-1]), name))]


def _simple_index(name: str, index_url: str) -> Iterable[tuple[str, bool, str | None]]:
    url = f"{index_url.rstrip('/')}/{name}/"
    body, content_type = _get(url, "application/vnd.pypi.simple.v1+json, text/html;q=0.1", with_type=True)
    if "json" in content_type:
        try:
            files = json.loads(body)["files"]
        except (ValueError, KeyError, TypeError):
            raise ReleasesUnavailable(f"{url} did not answer the simple API's JSON") from None
        return [(v, bool(f.get("yanked")), f.get("upload-time") if isinstance(f.get("upload-time"), str) else None)
                for f in files if (v := _version_of(f.get("filename", ""), name))]
    return [(v, yanked, None) for href, yanked in _AnchorParser.read(body)
            if (v := _version_of(urllib.parse.unquote(href.split("#")[0].rsplit("/", 1)[-1]), name))]


def _get(url: str, accept: str, with_type: bool = False):
    request = urllib.request.Request(url, headers={"Accept": accept, "User-Agent": "regressbisect"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            body = response.read().decode("utf-8", errors="replace")
            content_type = response.headers.get("Content-Type", "")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ReleasesUnavailable(f"cannot read {url}: {getattr(exc, 'reason', exc)}") from None
    return (body, content_type) if with_type else body


class _AnchorParser(html.parser.HTMLParser):
    """The links of a PEP 503 page: (href, yanked)."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, bool]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            values = dict(attrs)
            if values.get("href"):
                self.links.append((values["href"] or "", "data-yanked" in values))

    @classmethod
    def read(cls, body: str) -> list[tuple[str, bool]]:
        parser = cls()
        parser.feed(body)
        return parser.links
