"""Candidate environments of `regressbisect deps` (deps/builds.py, needs.py, releases.py), on a
local index of hand-written wheels: no network."""
from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import shutil
import threading

import pytest

from regressbisect.deps.builds import EnvBuilder, IndexOptions
from regressbisect.deps.envs import Change
from regressbisect.deps.needs import change_needs, installed_requirements
from regressbisect.deps.releases import ReleaseRule, ReleasesUnavailable, dated_releases, releases_between
from regressbisect.probe.venvs import READY_MARKER, base_interpreter
from regressbisect.testing.wheels import write_broken_wheel, write_wheel
from tests.ci import missing


@pytest.fixture
def wheels(tmp_path):
    d = tmp_path / "wheels"
    for v in ("1.0", "1.1", "1.2", "1.3rc1", "2.0"):
        write_wheel(d, "slowpkg", v, {"slowpkg/__init__.py": f"VERSION = {v!r}\n"},
                    requires=["helper>=2"] if v == "2.0" else ())
    write_wheel(d, "helper", "1.0", {"helper/__init__.py": ""})
    write_wheel(d, "helper", "2.0", {"helper/__init__.py": ""})
    write_broken_wheel(d, "slowpkg", "1.1.1")
    return d


@pytest.fixture
def builder(tmp_path, wheels):
    if shutil.which("uv") is None:
        missing("uv is not installed")
    return EnvBuilder(tmp_path / "venvs", base_interpreter(), IndexOptions(find_links=(str(wheels),), no_index=True))


def test_an_environment_is_built_once_from_exactly_its_pins_and_found_again(builder):
    built = builder.build({"slowpkg": "1.2", "helper": "1.0"})
    assert built.ok and not built.cached
    assert (built.path / READY_MARKER).is_file() and built.path.parent == builder.root
    site = {p.name for p in built.path.glob("lib/python*/site-packages/*.dist-info")}
    assert site == {"slowpkg-1.2.dist-info", "helper-1.0.dist-info"}
    assert built.env()["VIRTUAL_ENV"] == str(built.path)
    again = builder.build({"helper": "1.0", "slowpkg": "1.2"})
    assert again.cached and again.path == built.path and builder.builds == 1


def test_a_combination_that_does_not_resolve_or_install_is_a_failure_with_its_reason(builder):
    unresolved = builder.build({"slowpkg": "2.0", "helper": "1.0"})
    assert not unresolved.ok
    assert unresolved.reason.startswith("does not resolve") and "helper>=2" in unresolved.reason
    broken = builder.build({"slowpkg": "1.1.1", "helper": "1.0"})
    assert not broken.ok and broken.reason.startswith("does not install")
    assert "\n" not in broken.reason
    assert not builder.path({"slowpkg": "2.0", "helper": "1.0"}).exists()   # nothing half-made is kept
    assert builder.build({"slowpkg": "2.0", "helper": "1.0"}) is builder._failed[builder.key({"slowpkg": "2.0", "helper": "1.0"})]


def test_needs_come_from_the_metadata_of_both_ends(builder):
    good = builder.build({"slowpkg": "1.0", "helper": "1.0"})
    bad = builder.build({"slowpkg": "2.0", "helper": "2.0"})
    assert installed_requirements(bad.path)["slowpkg"] == ["helper>=2"]
    changes = [Change("helper", "1.0", "2.0"), Change("slowpkg", "1.0", "2.0")]
    needs = change_needs(changes, installed_requirements(good.path), installed_requirements(bad.path))
    assert needs == {"slowpkg": frozenset({"helper"})}      # helper 2.0 alone is fine
    # a package the new version no longer needs cannot be removed before that version comes
    needs = change_needs([Change("helper", "1.0", None), Change("slowpkg", "2.0", "1.0")],
                         {"slowpkg": ["helper>=2"]}, {})
    assert needs == {"helper": frozenset({"slowpkg"})}


def test_releases_between_two_versions_leave_pre_releases_out_unless_asked(wheels):
    index = IndexOptions(find_links=(str(wheels),), no_index=True)
    assert releases_between("slowpkg", "1.0", "2.0", index) == ["1.0", "1.1", "1.1.1", "1.2", "2.0"]
    assert releases_between("SlowPkg", "2.0", "1.1", index) == ["2.0", "1.2", "1.1.1", "1.1"]
    assert "1.3rc1" in releases_between("slowpkg", "1.0", "2.0", index, ReleaseRule(pre=True))
    with pytest.raises(ReleasesUnavailable, match="--no-index without --find-links"):
        releases_between("slowpkg", "1.0", "2.0", IndexOptions(no_index=True))


def test_a_simple_index_is_read_and_its_yanked_releases_left_out(tmp_path):
    files = [{"filename": f"slowpkg-{v}-py3-none-any.whl", "yanked": v == "1.1"} for v in ("1.0", "1.1", "1.2", "2.0")]
    html = "".join(f'<a href="../../f/slowpkg-{v}.tar.gz"{" data-yanked" if v == "1.2" else ""}>x</a>'
                   for v in ("1.0", "1.1", "1.2", "2.0"))

    class Index(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            json_index = self.path.startswith("/json/")
            body = json.dumps({"files": files}) if json_index else html
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json" if json_index else "text/html")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Index)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_port}"
        assert releases_between("slowpkg", "1.0", "2.0", IndexOptions(index_url=f"{base}/json")) == ["1.0", "1.2", "2.0"]
        assert releases_between("slowpkg", "1.0", "2.0", IndexOptions(index_url=f"{base}/html")) == ["1.0", "1.1", "2.0"]
        assert releases_between("slowpkg", "1.0", "2.0", IndexOptions(index_url=f"{base}/json"),
                                ReleaseRule(yanked=True)) == ["1.0", "1.1", "1.2", "2.0"]
    finally:
        server.shutdown()


NIGHTLIES = {f"2.6.0.dev2025010{day}": f"2025-01-0{day}T04:00:00.000000Z" for day in range(1, 6)}
"""nightpkg's nightlies: 2.6.0.dev20250101 to ...05, each uploaded on its day."""


@contextlib.contextmanager
def nightly_index(directory, uploaded=NIGHTLIES):
    """A local index of nightpkg's dev wheels (`uploaded`: version -> upload time) answering the
    simple API's JSON, each file with its `upload-time` (PEP 700), and serving the files: its URL."""
    files = []
    for version, when in uploaded.items():
        wheel = write_wheel(directory, "nightpkg", version, {"nightpkg/__init__.py": f"VERSION = {version!r}\n"})
        files.append({"filename": wheel.name, "url": f"../../files/{wheel.name}", "upload-time": when,
                      "hashes": {"sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()}})

    class Index(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.startswith("/files/"):
                body, kind = (directory / self.path.rsplit("/", 1)[-1]).read_bytes(), "application/octet-stream"
            elif self.path.rstrip("/") == "/simple/nightpkg":
                body = json.dumps({"meta": {"api-version": "1.1"}, "name": "nightpkg", "files": files,
                                   "versions": list(uploaded)}).encode()
                kind = "application/vnd.pypi.simple.v1+json"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Index)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/simple"
    finally:
        server.shutdown()


def test_nightlies_between_two_dev_ends_are_ordered_by_their_upload_time(tmp_path):
    """Two dev-release ends: their dev releases between are kept without --pre, ordered by the
    JSON API's upload-time (here one re-uploaded out of version order), each with its date."""
    uploaded = {**NIGHTLIES, "2.6.0.dev20250103": "2025-01-04T09:00:00Z", "2.6.0.dev20250104": "2025-01-03T09:00:00Z"}
    with nightly_index(tmp_path / "files", uploaded) as url:
        index = IndexOptions(index_url=url)
        listed = dated_releases("nightpkg", "2.6.0.dev20250101", "2.6.0.dev20250105", index)
        assert listed.axis == "date"
        assert listed.versions == ["2.6.0.dev20250101", "2.6.0.dev20250102", "2.6.0.dev20250104",
                                   "2.6.0.dev20250103", "2.6.0.dev20250105"]
        assert listed.uploaded["2.6.0.dev20250104"] == "2025-01-03T09:00:00Z"
        back = dated_releases("nightpkg", "2.6.0.dev20250105", "2.6.0.dev20250101", index)
        assert back.versions == listed.versions[::-1]
    # where no upload time is known (--find-links), by version
    listed = dated_releases("nightpkg", "2.6.0.dev20250101", "2.6.0.dev20250105",
                            IndexOptions(find_links=(str(tmp_path / "files"),), no_index=True))
    assert listed.axis == "version" and listed.uploaded == {}
    assert listed.versions == sorted(NIGHTLIES)


def test_exclude_newer_is_passed_to_uv_and_keys_the_environment(tmp_path):
    if shutil.which("uv") is None:
        missing("uv is not installed")
    with nightly_index(tmp_path / "files") as url:
        plain = IndexOptions(index_url=url)
        dated = IndexOptions(index_url=url, exclude_newer="2025-01-03T12:00:00Z")
        assert dated.uv_args()[-2:] == ["--exclude-newer", "2025-01-03T12:00:00Z"]
        assert plain.key() == json.dumps([url, [], False])       # the key environments had before
        builder = EnvBuilder(tmp_path / "venvs", base_interpreter(), dated)
        assert builder.key({"nightpkg": "2.6.0.dev20250103"}) != \
            EnvBuilder(tmp_path / "venvs", base_interpreter(), plain).key({"nightpkg": "2.6.0.dev20250103"})
        assert builder.build({"nightpkg": "2.6.0.dev20250103"}).ok
        newer = builder.build({"nightpkg": "2.6.0.dev20250104"})
        assert not newer.ok and newer.reason.startswith("does not install"), newer.reason
