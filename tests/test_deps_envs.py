"""Environments of `regressbisect deps`: pins read from `pip freeze` output and uv.lock files, and
the difference between two (regressbisect/deps/envs.py)."""
from __future__ import annotations

import pytest

from regressbisect.deps.envs import (Change, apply, diff, normalise, read_environment, read_requirements,
                                     read_uv_lock, unsupported_line)
from regressbisect.errors import UserError

FREEZE = """\
# a pip freeze
-e git+https://example.org/me/proj.git@0123abc#egg=proj
Foo_Bar==1.0
numpy==1.26.4 \\
    --hash=sha256:00ff
requests[socks]==2.31.0 ; python_version >= "3.8"  # pinned for the proxy
torch @ file:///wheels/torch-2.5.0-cp311-linux_x86_64.whl
tqdm>=4
"""

LOCK = """\
version = 1
requires-python = ">=3.10"

[[package]]
name = "foo-bar"
version = "1.2"
source = { registry = "https://pypi.org/simple" }

[[package]]
name = "numpy"
version = "1.26.4.0"
source = { registry = "https://pypi.org/simple" }

[[package]]
name = "proj"
version = "0.1.0"
source = { editable = "." }

[[package]]
name = "tqdm"
version = "4.66.1"
source = { registry = "https://pypi.org/simple" }
"""


def test_a_freeze_gives_its_pins_by_normalised_name_and_lists_what_it_cannot_pin():
    env = read_requirements(FREEZE, "good.txt")
    assert dict(env.pins) == {"foo-bar": "1.0", "numpy": "1.26.4", "requests": "2.31.0"}
    assert env.display("foo-bar") == "Foo_Bar"
    assert [u.split()[0] for u in env.unsupported] == ["-e", "torch", "tqdm>=4"]
    line = unsupported_line(env)
    assert line.startswith("good.txt: 3 requirement(s) left out") and "\n" not in line


def test_a_uv_lock_gives_its_registry_packages_and_leaves_the_project_out():
    env = read_uv_lock(LOCK, "uv.lock")
    assert dict(env.pins) == {"foo-bar": "1.2", "numpy": "1.26.4.0", "tqdm": "4.66.1"}
    assert env.unsupported == ("proj (editable)",)


def test_the_difference_is_changed_added_and_removed_and_equal_versions_are_no_change():
    good = read_requirements(FREEZE, "good.txt")
    bad = read_uv_lock(LOCK, "uv.lock")
    changes = diff(good, bad)
    assert [(c.name, c.kind, c.good, c.bad) for c in changes] == [
        ("foo-bar", "changed", "1.0", "1.2"),
        ("requests", "removed", "2.31.0", None),
        ("tqdm", "added", None, "4.66.1"),
    ]   # numpy 1.26.4 and 1.26.4.0 are one version
    assert apply(good, changes[:1]) == {"foo-bar": "1.2", "numpy": "1.26.4", "requests": "2.31.0"}
    assert apply(good, changes) == {"foo-bar": "1.2", "numpy": "1.26.4", "tqdm": "4.66.1"}
    assert apply(good, changes[:1], at={"foo-bar": "1.1"})["foo-bar"] == "1.1"


def test_files_are_told_apart_by_content_and_a_file_without_pins_is_one_line(tmp_path):
    (tmp_path / "good.txt").write_text(FREEZE)
    (tmp_path / "locked").write_text(LOCK)
    assert read_environment(tmp_path / "locked").pins["tqdm"] == "4.66.1"
    assert read_environment(tmp_path / "good.txt").pins["foo-bar"] == "1.0"
    (tmp_path / "empty.txt").write_text("-e .\n")
    with pytest.raises(UserError, match="pins no package.*left out"):
        read_environment(tmp_path / "empty.txt")
    with pytest.raises(UserError, match="cannot read"):
        read_environment(tmp_path / "missing.txt")


def test_a_package_pinned_twice_at_two_versions_is_refused():
    with pytest.raises(UserError, match="twice"):
        read_requirements("a==1\nA==2\n", "r.txt")


def test_names_normalise_as_pep_503_says():
    assert normalise("Foo.Bar__baz") == "foo-bar-baz"
    assert Change("x", None, "1").kind == "added"
