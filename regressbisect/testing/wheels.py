"""Tiny pure-Python wheels written by hand, for a local package index (`--find-links DIR`):

    write_wheel(tmp_path / "wheels", "slowpkg", "1.2", {"slowpkg/__init__.py": "SPIN = 200000\n"},
                requires=["helper>=2"])

A wheel is a zip of the package's files, its METADATA, WHEEL and a RECORD of their hashes;
nothing is built, so a test needs no setuptools and no network. `write_broken_wheel` writes a
file with a wheel's name that is no zip: its install fails.
"""
from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path
from typing import Mapping, Sequence


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def wheel_name(name: str, version: str) -> str:
    return f"{name.replace('-', '_')}-{version}-py3-none-any.whl"


def write_wheel(directory: Path, name: str, version: str, files: Mapping[str, str],
                requires: Sequence[str] = ()) -> Path:
    """A py3-none-any wheel of `files` (path in site-packages -> text) in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    dist_info = f"{name.replace('-', '_')}-{version}.dist-info"
    metadata = "".join([f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
                        *(f"Requires-Dist: {r}\n" for r in requires)])
    contents = {path: text.encode() for path, text in files.items()}
    contents[f"{dist_info}/METADATA"] = metadata.encode()
    contents[f"{dist_info}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: regressbisect-tests\n"
                                      b"Root-Is-Purelib: true\nTag: py3-none-any\n")
    record = "".join(f"{path},{_record_hash(data)},{len(data)}\n" for path, data in contents.items())
    contents[f"{dist_info}/RECORD"] = (record + f"{dist_info}/RECORD,,\n").encode()
    path = directory / wheel_name(name, version)
    with zipfile.ZipFile(path, "w") as archive:
        for member, data in contents.items():
            archive.writestr(member, data)
    return path


def write_broken_wheel(directory: Path, name: str, version: str) -> Path:
    """A file named as `name`'s wheel of `version` that is not a zip: installing it fails."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / wheel_name(name, version)
    path.write_bytes(b"not a zip archive\n")
    return path
