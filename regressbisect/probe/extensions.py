"""Does the project compile extension modules? Then a hunt without a setup step measures nothing real.

A slot holds the candidate's sources only (`git clean -ffdx` on every switch), so a compiled
module (a C, C++, Cython or Rust extension) does not exist there unless `--setup` builds it. The
probe then imports whatever works without it: a pure-Python fallback (markupsafe's `_speedups`),
or fails in a way that reads as a crash of every candidate. `declared_extensions` reads the
build files of a checked-out candidate and says where it declares compiled modules; the hunts
stop before its first probe with one line naming the fix (hunts/common.py `measurement_parts`,
docs/setup.md). `--no-build-check` (`build_check = false`) measures anyway.

What counts as a declaration (a static reading of the files, never running them):
* setup.py: `ext_modules=`, `cffi_modules=`, `rust_extensions=`, or a call of `Extension(`,
  `Pybind11Extension(`, `cythonize(`, `RustExtension(`;
* pyproject.toml: a build backend that compiles (scikit-build-core, meson-python, maturin,
  py-build-cmake, sip), build requirements that compile (setuptools-rust, Cython, pybind11,
  nanobind, scikit-build, cffi, hatch-cython, mypy for mypyc), or `[tool.setuptools] ext-modules`;
* setup.cfg: the same build requirements in `setup_requires`.
"""
from __future__ import annotations

import configparser
import re
from dataclasses import dataclass
from pathlib import Path

from regressbisect.tomlread import tomllib

COMPILING_BACKENDS = ("scikit_build_core", "mesonpy", "maturin", "py_build_cmake", "sipbuild")
"""Build backends (their module, the part before the first dot) that compile the project."""
COMPILING_REQUIRES = ("setuptools-rust", "cython", "pybind11", "nanobind", "scikit-build", "cffi",
                      "hatch-cython", "mypy")
"""Build requirements (normalised names) that are there to compile a module."""
_SETUP_PY = re.compile(r"\b(ext_modules|cffi_modules|rust_extensions)\s*=|"
                       r"\b(Extension|Pybind11Extension|RustExtension|cythonize)\s*\(")
_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


@dataclass(frozen=True)
class Declaration:
    """Where a project declares compiled modules, and the setup command that builds them."""

    where: str
    """e.g. 'setup.py (ext_modules=)', "pyproject.toml (build-backend 'mesonpy')"."""
    setuptools: bool
    """Built by setuptools' own `build_ext` (then `python setup.py build_ext --inplace` works)."""

    def fix(self) -> str:
        if self.setuptools:
            return '--setup "python setup.py build_ext --inplace"'
        return '--venv --setup "pip install --no-deps --no-build-isolation ."'


def declared_extensions(root: Path) -> Declaration | None:
    """The first declaration of compiled modules in the project at `root`, or None."""
    return _pyproject(root / "pyproject.toml") or _setup_py(root / "setup.py") or _setup_cfg(root / "setup.cfg")


def _setup_py(path: Path) -> Declaration | None:
    text = _read(path)
    match = _SETUP_PY.search(text) if text else None
    if match is None:
        return None
    found = match.group(1) + "=" if match.group(1) else match.group(2) + "("
    return Declaration(f"setup.py ({found})", setuptools=found not in ("rust_extensions=", "RustExtension("))


def _pyproject(path: Path) -> Declaration | None:
    text = _read(path)
    if not text:
        return None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None   # a broken pyproject is reported where the hunt reads its config
    system = data.get("build-system") if isinstance(data.get("build-system"), dict) else {}
    backend = str(system.get("build-backend") or "")
    if backend.split(".")[0] in COMPILING_BACKENDS:
        return Declaration(f"pyproject.toml (build-backend {backend!r})", setuptools=False)
    setuptools_table = data.get("tool", {}).get("setuptools", {}) if isinstance(data.get("tool"), dict) else {}
    if isinstance(setuptools_table, dict) and setuptools_table.get("ext-modules"):
        return Declaration("pyproject.toml ([tool.setuptools] ext-modules)", setuptools=True)
    requires = system.get("requires") if isinstance(system.get("requires"), list) else []
    compiling = _compiling_requirement(str(r) for r in requires)
    if compiling:
        return Declaration(f"pyproject.toml (build requires {compiling!r})",
                           setuptools=backend.startswith("setuptools") and compiling != "setuptools-rust")
    return None


def _setup_cfg(path: Path) -> Declaration | None:
    text = _read(path)
    if not text:
        return None
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    requires = parser.get("options", "setup_requires", fallback="")
    compiling = _compiling_requirement(line for line in re.split(r"[\n;]", requires))
    if compiling:
        return Declaration(f"setup.cfg (setup_requires {compiling!r})", setuptools=compiling != "setuptools-rust")
    return None


def _compiling_requirement(requirements) -> str | None:
    for requirement in requirements:
        match = _REQUIREMENT_NAME.match(requirement)
        if match is None:
            continue
        name = re.sub(r"[-_.]+", "-", match.group(1)).lower()
        if name in COMPILING_REQUIRES:
            return name
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
    except OSError:
        return ""
