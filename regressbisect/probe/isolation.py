"""Probe isolation: every probe imports the candidate's code, and we check that it did.

Two halves (docs/isolation.md states the rule in full):

1. Import roots first. A worktree's import roots are the directories from which its project is
   imported: the package directories the project declares (setuptools, hatch, flit, poetry, pdm,
   maturin, scikit-build-core, setup.cfg, a literal `package_dir={"": ...}` in setup.py, and a
   `src/` directory by convention), then the worktree root. They go first on the probe's
   PYTHONPATH; PYTHONPATH entries come before site-packages, before the directories that `.pth`
   files add, and path-based finding comes before the meta-path finders of editable installs,
   so `import mypkg` finds the worktree's copy even when the user's checkout is installed.
   The user's own PYTHONPATH entries that point into their checkout are mapped to the same place
   in the worktree.

2. The check. The probe's `sitecustomize` (probe/shim) writes, at exit of every Python process
   of the probe, where the project's modules were imported from ({module: file}, one JSON file
   per process, so every torchrun rank reports). The parent reads these records after each probe;
   a project module that came from anywhere but the probe's own worktree stops the hunt with one
   line (IsolationError, exit code 7) before the sample is stored or used.

The same records say which files outside the worktree a probe read and wrote (`OutsideFiles`):
the modules it imported from there go into the sample key (hunts/skeleton.py, `Hunt.learn_imports`),
and one file written by two probes that ran side by side is named in a warning (`verify_round`).
Where the hunt asks for it (`Isolation.footprint_for`), they also say what the probe read of its
worktree: its footprint (probe/footprint.py), handed to `Isolation.on_footprint`.

Pure parent-side code: nothing here imports the probe's project.
"""
from __future__ import annotations

import ast
import configparser
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from regressbisect.errors import ExitCode, UserError, warn
from regressbisect.probe.contract import (FOOTPRINT_ENV, FOOTPRINT_KEY, IMPORT_RECORD_SUFFIX, IMPORTS_DIR_ENV,
                                          PROJECT_MODULES_ENV, WRITES_ENV, WRITES_ON)
from regressbisect.probe.footprint import Footprint, read_footprint, scope

from regressbisect.tomlread import tomllib

FIX_FLAG = "--no-isolation-check"
MAIN_MODULE = "__main__"
"""The recorder also reports the script a process ran: a `cd` to another checkout shows there."""

_EXTENSION_SUFFIX = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\.(?:[^.]+\.)?(?:so|pyd)$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Names a project file may carry that are never the project's code in a probe process.
_NOT_PROJECT = {"sitecustomize", "usercustomize", "__main__", "__init__", "conftest"}
_NAMESPACE_DEPTH = 3


class IsolationError(UserError):
    """A probe imported a project module from somewhere else than its own worktree."""

    def __init__(self, message: str):
        super().__init__(message, ExitCode.ISOLATION)


# ------------------------------------------------------------------ import roots of a worktree

def import_roots(worktree: Path) -> list[Path]:
    """The worktree's import roots, most specific first, the worktree root last; each once.

    Declared package directories come from the project's own build configuration; a path that
    does not exist in this worktree or points outside it is ignored (a candidate may predate it).
    """
    worktree = Path(worktree)
    declared: list[str] = []
    pyproject = _read_toml(worktree / "pyproject.toml")
    declared += _pyproject_dirs(pyproject, worktree)
    declared += _setup_cfg_dirs(worktree / "setup.cfg")
    declared += _setup_py_dirs(worktree / "setup.py")
    if _holds_python(worktree / "src"):
        declared.append("src")
    roots: list[Path] = []
    for rel in declared + ["."]:
        path = _inside(worktree, rel)
        if path is not None and path.is_dir() and path not in roots:
            roots.append(path)
    return roots


def _read_toml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except (OSError, ValueError):  # a broken pyproject of one candidate: the convention still applies
        return {}


def _table(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, str)]
    return []


def _package_parent(path: str) -> str:
    """'src/mypkg' -> 'src', 'mypkg' -> '.' (a declared package's directory sits in its root)."""
    parent = os.path.dirname(path.rstrip("/"))
    return parent or "."


def _pyproject_dirs(data: Mapping[str, Any], worktree: Path) -> list[str]:
    dirs: list[str] = []
    tool = _table(data, "tool") or {}
    # setuptools: packages.find.where, and package-dir {"" = "src", "pkg" = "lib/pkg"}
    dirs += _strings(_table(tool, "setuptools", "packages", "find", "where"))
    package_dir = _table(tool, "setuptools", "package-dir")
    if isinstance(package_dir, Mapping):
        dirs += _package_dir_roots(package_dir)
    # hatch: wheel packages ["src/pkg"] and sources ["src"] or {"src" = ""}
    wheel = _table(tool, "hatch", "build", "targets", "wheel") or {}
    for build in (wheel, _table(tool, "hatch", "build") or {}):
        dirs += [_package_parent(p) for p in _strings(build.get("packages"))]
        sources = build.get("sources")
        if isinstance(sources, Mapping):
            dirs += [k for k, v in sources.items() if isinstance(k, str) and v in ("", ".", "/")]
        else:
            dirs += _strings(sources)
    # flit: the module (name from [tool.flit.module] or [project]) lives at the root or in src/
    module = _table(tool, "flit", "module", "name") or (
        _table(data, "project", "name") if _table(data, "build-system", "build-backend") == "flit_core.buildapi"
        else None)
    if isinstance(module, str):
        name = module.replace("-", "_").split(".")[0]
        if (worktree / "src" / name).exists() or (worktree / "src" / f"{name}.py").exists():
            dirs.append("src")
    # poetry: packages = [{include = "pkg", from = "src"}]
    for entry in _table(tool, "poetry", "packages") or []:
        if isinstance(entry, Mapping) and isinstance(entry.get("from"), str):
            dirs.append(entry["from"])
    # pdm: [tool.pdm.build] package-dir = "src"
    dirs += _strings(_table(tool, "pdm", "build", "package-dir"))
    # maturin: python-source = "python"; scikit-build-core: wheel.packages = ["src/pkg"]
    dirs += _strings(_table(tool, "maturin", "python-source"))
    dirs += [_package_parent(p) for p in _strings(_table(tool, "scikit-build", "wheel", "packages"))]
    return dirs


def _package_dir_roots(package_dir: Mapping[str, Any]) -> list[str]:
    """setuptools package_dir: '' maps the root package; 'pkg' -> 'lib/pkg' is importable from
    'lib' only when the directory carries the package's name (else it cannot be put on a path)."""
    roots = []
    for package, where in package_dir.items():
        if not isinstance(package, str) or not isinstance(where, str):
            continue
        if package == "":
            roots.append(where)
        elif "." not in package and os.path.basename(where.rstrip("/")) == package:
            roots.append(_package_parent(where))
    return roots


def _setup_cfg_dirs(path: Path) -> list[str]:
    if not path.is_file():
        return []
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return []
    dirs: list[str] = []
    if parser.has_option("options", "package_dir"):
        mapping = {}
        for line in re.split(r"[\n,]", parser.get("options", "package_dir")):
            if "=" in line:
                key, value = line.split("=", 1)
                mapping[key.strip()] = value.strip()
        dirs += _package_dir_roots(mapping)
    if parser.has_option("options.packages.find", "where"):
        dirs += [w.strip() for w in re.split(r"[\n,]", parser.get("options.packages.find", "where")) if w.strip()]
    return dirs


def _setup_py_dirs(path: Path) -> list[str]:
    """A literal `package_dir={"": "src"}` in setup.py (setup.py is code: nothing else is read)."""
    if not path.is_file():
        return []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return re.findall(r"""package_dir\s*=\s*\{\s*(?:""|'')\s*:\s*["']([^"']+)["']""", text)


def _inside(worktree: Path, rel: str) -> Path | None:
    """`rel` resolved inside the worktree, or None when it is absolute or escapes it."""
    rel = rel.strip()
    if not rel or os.path.isabs(rel):
        return None
    path = (worktree / rel).resolve()
    base = worktree.resolve()
    return path if path == base or base in path.parents else None


def _holds_python(path: Path) -> bool:
    if not path.is_dir():
        return False
    try:
        return any(entry.suffix == ".py" or (entry / "__init__.py").is_file()
                   or _EXTENSION_SUFFIX.match(entry.name) or (entry.is_dir() and _holds_python_shallow(entry))
                   for entry in path.iterdir())
    except OSError:
        return False


def _holds_python_shallow(path: Path) -> bool:
    try:
        return any(e.suffix == ".py" for e in path.iterdir())
    except OSError:
        return False


# ------------------------------------------------------------------ the project's module names

def project_modules(roots: Sequence[Path], worktree: Path) -> list[str]:
    """Names of the modules the project provides in its import roots.

    A regular package (a directory with __init__.py), a top-level .py module or a compiled
    extension file gives its name. A directory without __init__.py in a declared root (not the
    worktree root, where docs/ or tests/ are plain directories) is a namespace package; namespace
    packages are shared with other distributions, so its regular sub-packages and modules are
    named instead (dotted). Standard-library names are left out: a project file that shares a
    name with a module the interpreter loads at start-up is not what the probe measures.
    """
    names: set[str] = set()
    top = Path(worktree).resolve()
    for root in roots:
        names.update(_modules_in(root, prefix="", depth=0, namespaces=Path(root).resolve() != top))
    stdlib = set(getattr(sys, "stdlib_module_names", ())) | set(sys.builtin_module_names)
    return sorted(n for n in names if n.split(".")[0] not in stdlib and n.split(".")[0] not in _NOT_PROJECT)


def _modules_in(directory: Path, prefix: str, depth: int, namespaces: bool) -> set[str]:
    found: set[str] = set()
    try:
        entries = sorted(directory.iterdir())
    except OSError:
        return found
    for entry in entries:
        name = entry.name
        if entry.is_dir():
            if not _IDENTIFIER.match(name):
                continue
            if (entry / "__init__.py").is_file():
                found.add(prefix + name)
            elif namespaces and depth < _NAMESPACE_DEPTH:
                found |= _modules_in(entry, prefix + name + ".", depth + 1, namespaces)
        elif entry.suffix == ".py" and _IDENTIFIER.match(entry.stem):
            found.add(prefix + entry.stem)
        else:
            match = _EXTENSION_SUFFIX.match(name)
            if match:
                found.add(prefix + match.group(1))
    return found


# ------------------------------------------------------------------ PYTHONPATH of a probe

def probe_pythonpath(roots: Sequence[Path], inherited: str | None, user_root: Path,
                     worktree: Path) -> str:
    """Import roots first, then the inherited entries (those inside the user's checkout mapped
    to the same relative place in the worktree), each once, in order."""
    entries = [str(r) for r in roots]
    for entry in (inherited or "").split(os.pathsep):
        if not entry:
            continue
        mapped = map_into_worktree(entry, user_root, worktree)
        if mapped not in entries:
            entries.append(mapped)
    return os.pathsep.join(entries)


def map_into_worktree(entry: str, user_root: Path, worktree: Path) -> str:
    """`entry` when it is outside the user's checkout, else the same relative path in the worktree."""
    path = os.path.realpath(os.path.join(str(user_root), entry)) if not os.path.isabs(entry) \
        else os.path.realpath(entry)
    rel = _relative_to(path, os.path.realpath(str(user_root)))
    if rel is None or _relative_to(path, os.path.realpath(str(worktree))) is not None:
        return entry
    if rel.split(os.sep)[0] == ".git":  # the pool lives in the git dir: not a checkout path
        return entry
    return str(Path(worktree) / rel) if rel != "." else str(worktree)


def _relative_to(path: str, base: str) -> str | None:
    if path == base:
        return "."
    if path.startswith(base.rstrip(os.sep) + os.sep):
        return path[len(base.rstrip(os.sep)) + 1:]
    return None


# ------------------------------------------------------------------ the check

_PSEUDO_FILE_SYSTEMS = ("/dev/", "/proc/", "/sys/")
"""Writing there (/dev/null) shares no file between probes."""


def _shared_by_design(path: str) -> bool:
    """A path many processes write without reading each other's: a device, a lock file (shared
    to be taken in turn), or no file at all: a directory (tempfile reports the folder of the file
    it makes under a name of its own; the shim leaves out such files, opened O_EXCL)."""
    return path.startswith(_PSEUDO_FILE_SYSTEMS) or path.endswith(".lock") or os.path.isdir(path)


@dataclass(frozen=True)
class OutsideFiles:
    """The files outside its worktree (and outside the tool's own folders) that a probe's
    processes imported and opened for writing, absolute paths."""

    read: frozenset[str] = frozenset()
    """Module files (and the script run) that are not the interpreter's or the tool's."""
    written: frozenset[str] = frozenset()
    """Files opened for writing (recorded only when probes run side by side), less those
    written by design by many processes (`_shared_by_design`)."""


@dataclass
class ProbeImports:
    """One probe's isolation: the environment to add, then the records it left."""

    worktree: Path
    env: dict[str, str]
    records_dir: Path | None
    """Where the probe's processes write their records (None: the check is off)."""
    project_processes: int = 0
    """Processes of the probe that imported a project module (each torchrun rank is one)."""
    files_read: set[str] = field(default_factory=set)
    """Over every process: the module files the records name (`read`), wherever they are."""
    files_written: set[str] = field(default_factory=set)
    """Over every process: the paths opened for writing the records name (`written`)."""
    outside: OutsideFiles = OutsideFiles()
    """What of those lies outside the worktree (set by Isolation.verify)."""
    footprint_key: str | None = None
    """Whose footprint the probe records (Isolation.footprint_for), None: it records none."""
    footprints: list[Mapping[str, Any] | None] = field(default_factory=list)
    """One per process that wrote a record: its footprint entry (None where it holds none)."""

    def discard(self) -> None:
        """Remove the records of a probe that did not finish (interrupted)."""
        if self.records_dir is not None:
            shutil.rmtree(self.records_dir, ignore_errors=True)

    def read(self) -> dict[str, str]:
        """{module: file} over every process of the probe; removes the records."""
        merged: dict[str, str] = {}
        if self.records_dir is None:
            return merged
        try:
            for path in sorted(self.records_dir.glob("*" + IMPORT_RECORD_SUFFIX)):
                try:
                    record = ast.literal_eval(path.read_text(encoding="utf-8"))
                except (OSError, ValueError, SyntaxError, MemoryError):
                    continue
                if not isinstance(record, dict):
                    continue
                modules = record.get("modules") or {}
                footprint = record.get(FOOTPRINT_KEY)
                self.footprints.append(footprint if isinstance(footprint, Mapping) else None)
                self.project_processes += any(m != MAIN_MODULE for m in modules)
                for key, files in (("read", self.files_read), ("written", self.files_written)):
                    files.update(f for f in record.get(key) or () if isinstance(f, str))
                for module, file in modules.items():
                    if not isinstance(module, str) or not isinstance(file, str):
                        continue
                    # Any process (rank) that loaded a module from elsewhere decides: keep that one.
                    if module not in merged or (_is_inside(merged[module], self.worktree)
                                                and not _is_inside(file, self.worktree)):
                        merged[module] = file
        finally:
            shutil.rmtree(self.records_dir, ignore_errors=True)
        return merged


@dataclass
class Isolation:
    """Per hunt: import roots for every probe, and the check of what each probe imported."""

    user_root: Path
    """The user's checkout (History.root): only ever read, and never what a probe should import."""
    other_worktrees: Sequence[Path] = ()
    """Pool slots and any other worktree of the repository: wrong places for this probe."""
    check: bool = True
    inherited_pythonpath: str | None = None
    """The PYTHONPATH the probe would get without us (the parent's, or the one in --env)."""
    imported_from: dict[str, str] = field(default_factory=dict)
    """module -> worktree-relative file, first seen per module, over every checked probe
    (`__main__`: the script the probe ran, when it is the worktree's)."""
    probes_checked: int = 0
    probes_without_project_imports: int = 0
    most_processes: int = 0
    """The most processes of one probe that imported the project (ranks of a torchrun probe)."""
    records_root: Path | None = None
    """Where each probe's record directory is made: beside the worktree pool, so that a probe
    run on another node (Slurm) writes where the hunt reads; None: the system's temp dir."""
    record_writes: bool = False
    """Probes run side by side on this machine: record the files they open for writing."""
    shared_write_named: bool = False
    """Whether the warning about a file two probes of one round wrote was given (once a hunt)."""
    footprint_for: Callable[[Path], str | None] | None = None
    """Whether a probe in this worktree records the probe's footprint: the key it is handed back
    under (`on_footprint`), or None. Asked when the worktree holds the candidate (a commit hunt:
    hunts/footprints.py)."""
    on_footprint: Callable[[str, Footprint], None] | None = None
    """Told each recorded footprint after the probe, by `verify`, in the caller's thread."""
    path_env: str | None = None
    """The PATH of the probes, where the programs they start are looked up."""

    def prepare(self, worktree: Path) -> ProbeImports:
        """The environment of one probe in `worktree`: its PYTHONPATH, and the recorder's inputs."""
        worktree = Path(worktree)
        roots = import_roots(worktree)
        env = {"PYTHONPATH": probe_pythonpath(roots, self.inherited_pythonpath, self.user_root, worktree)}
        if not self.check:
            env[IMPORTS_DIR_ENV] = ""  # nothing recorded, even where the parent's environment has it
            env[FOOTPRINT_ENV] = ""
            return ProbeImports(worktree, env, None)
        if self.records_root is not None:
            Path(self.records_root).mkdir(parents=True, exist_ok=True)
        records = Path(tempfile.mkdtemp(prefix="regressbisect-imports-", dir=self.records_root))
        env[IMPORTS_DIR_ENV] = str(records)
        env[PROJECT_MODULES_ENV] = ",".join(project_modules(roots, worktree))
        env[WRITES_ENV] = WRITES_ON if self.record_writes else ""
        key = self.footprint_for(worktree) if self.footprint_for is not None else None
        env[FOOTPRINT_ENV] = scope(worktree) if key is not None else ""
        return ProbeImports(worktree, env, records, footprint_key=key)

    def verify_round(self, probes: Sequence[ProbeImports]) -> frozenset[str]:
        """Verify each probe of a round (probes that ran side by side); warn, once a hunt, when
        two of them wrote one file outside their worktrees; the files outside their worktrees
        they imported."""
        for probe in probes:
            self.verify(probe)
        writers: dict[str, int] = {}
        for probe in probes:
            for path in probe.outside.written:
                writers[path] = writers.get(path, 0) + 1
        shared = sorted(path for path, count in writers.items() if count > 1)
        if shared and not self.shared_write_named:
            self.shared_write_named = True
            more = f" (and {len(shared) - 1} other file(s))" if len(shared) > 1 else ""
            warn(f"probes running side by side both wrote {shared[0]}{more}, outside their worktrees: a probe "
                 f"that reads back such a file may read another's, and the slots then measure each other; "
                 f"give each probe its own path (relative to its worktree, or a tempfile), or measure one "
                 f"probe at a time (--slots 1 --overlap 1)")
        return frozenset().union(*(probe.outside.read for probe in probes))

    def verify(self, probe: ProbeImports) -> dict[str, str]:
        """Read the probe's records; raise IsolationError naming the first module from elsewhere.
        Sets `probe.outside`: what it read and wrote outside its worktree."""
        imported = probe.read()
        if probe.records_dir is None:
            return imported
        probe.outside = OutsideFiles(
            read=frozenset(self._outside(probe.files_read, probe.worktree)),
            written=frozenset(f for f in self._outside(probe.files_written, probe.worktree)
                              if not _shared_by_design(f)))
        if probe.footprint_key is not None and self.on_footprint is not None:
            self.on_footprint(probe.footprint_key, read_footprint(probe.footprints, probe.worktree, self.path_env))
        self.probes_checked += 1
        self.most_processes = max(self.most_processes, probe.project_processes)
        project = {m: f for m, f in imported.items() if m != MAIN_MODULE}
        if not project:
            self.probes_without_project_imports += 1
        for module, file in sorted(imported.items(), key=lambda kv: (kv[0] == MAIN_MODULE, kv[0])):
            if _is_inside(file, probe.worktree):
                continue
            where = self._classify(file)
            if module == MAIN_MODULE and not self._script_of_candidate(file, where, probe.worktree):
                continue  # a launcher (torchrun), or a fixed harness the candidate does not have
            raise IsolationError(self._message(module, file, where, probe.worktree))
        for module, file in sorted(imported.items()):
            if module == MAIN_MODULE and not _is_inside(file, probe.worktree):
                continue  # a launcher's script is not the project's
            self.imported_from.setdefault(module, os.path.relpath(os.path.realpath(file),
                                                                  os.path.realpath(probe.worktree)))
        return imported

    def _outside(self, files: set[str], worktree: Path) -> list[str]:
        """`files` that lie outside `worktree` and outside the pool's other worktrees (the tool's
        folder among them: records, venvs, shared caches)."""
        places = [os.path.realpath(str(p)) for p in (worktree, *self.other_worktrees)]
        return [f for f in files
                if not any(_relative_to(os.path.realpath(f), place) is not None for place in places)]

    def _script_of_candidate(self, file: str, where: str, worktree: Path) -> bool:
        """Whether a script run from elsewhere has its own version in the worktree (then the
        probe ran the wrong one); a script the candidate lacks (an untracked harness in the
        checkout, a launcher) is what the user chose to run on every candidate."""
        if where == "another worktree":
            return True
        if where != "your checkout":
            return False
        rel = _relative_to(os.path.realpath(file), os.path.realpath(str(self.user_root)))
        return rel is not None and (Path(worktree) / rel).exists()

    def _classify(self, file: str) -> str:
        for other in self.other_worktrees:
            if _is_inside(file, other):
                return "another worktree"
        if _is_inside(file, self.user_root):
            return "your checkout"
        parts = Path(file).parts
        if "site-packages" in parts or "dist-packages" in parts:
            return "an installed copy"
        return "outside"

    def _message(self, module: str, file: str, where: str, worktree: Path) -> str:
        expected = _expected_path(module, file, worktree)
        what = "the probe ran the script" if module == MAIN_MODULE else f"the probe imported {module}"
        source = "" if where == "outside" else f" ({where})"
        if where in ("your checkout", "another worktree"):
            fix = ("the probe command or program puts that path first (a cd, an absolute sys.path entry): "
                   f"make it relative to the worktree, or pass {FIX_FLAG} to measure anyway")
        else:
            fix = ("something put that copy ahead of the worktree's import roots (python -I/-E, a reset "
                   f"PYTHONPATH, a .pth or sys.path insert): remove it, or pass {FIX_FLAG} to measure anyway")
        return (f"isolation: {what} from {file}{source}, not from its worktree ({expected}); "
                f"{fix} (docs/isolation.md)")

    def report(self) -> dict[str, Any]:
        """The report's `isolation` entry (render/report_parts.isolation_part types it for every hunt kind)."""
        if not self.check:
            note = f"isolation check off ({FIX_FLAG}): where the probe imported the project from was not checked"
        elif self.probes_checked == 0:
            note = "every sample came from the store (each was checked when it was taken)"
        elif not set(self.imported_from) - {MAIN_MODULE}:
            note = "no project module was imported (a probe that is not Python, or imports nothing of the project)"
        else:
            dirs = sorted({_first_dirs(path) for path in self.imported_from.values()})
            note = f"the project's modules were imported from the probe's worktree: {', '.join(dirs)}"
        return {"check": self.check, "probes_checked": self.probes_checked,
                "probes_without_project_imports": self.probes_without_project_imports,
                "processes_per_probe": self.most_processes,
                "imported_from": dict(sorted(self.imported_from.items())), "note": note}


def watched_imports(records_dir: Path) -> dict[str, list[str]]:
    """{watched module (WATCH_ENV): the environment variables changed before its first import}
    over the modules every recorded process of a probe imported (a variable changed in any
    process counts); the records stay for the check (Isolation.verify reads and removes them)."""
    common: set[str] | None = None
    changed: dict[str, set[str]] = {}
    for path in sorted(Path(records_dir).glob("*" + IMPORT_RECORD_SUFFIX)):
        try:
            record = ast.literal_eval(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, SyntaxError, MemoryError):
            continue
        if isinstance(record, dict):
            names = {n for n in record.get("watched") or () if isinstance(n, str)}
            common = names if common is None else common & names
            for module, keys in (record.get("env_before_import") or {}).items():
                changed.setdefault(module, set()).update(k for k in keys if isinstance(k, str))
    return {m: sorted(changed.get(m, ())) for m in sorted(common or ())}


def _first_dirs(relpath: str) -> str:
    """'src/mypkg/core.py' -> 'src/mypkg/', 'bench.py' -> 'bench.py' (a short place for the note)."""
    parts = Path(relpath).parts
    return relpath if len(parts) == 1 else "/".join(parts[:-1][:2]) + "/"


def _expected_path(module: str, file: str, worktree: Path) -> str:
    """Where the module sits in the worktree (same tail as the file it came from), else the worktree."""
    if module == MAIN_MODULE:
        return str(worktree / Path(file).name)
    tail = Path(*module.split("."))
    for root in import_roots(worktree):
        for candidate in (root / tail / "__init__.py", root / tail.with_suffix(".py"), root / tail):
            if candidate.exists():
                return str(candidate)
    return str(worktree)


def _is_inside(file: str, directory: Path | str) -> bool:
    return _relative_to(os.path.realpath(file), os.path.realpath(str(directory))) is not None


def isolation_for_hunt(history, check: bool, env: Mapping[str, str],
                       records_root: Path | None = None, record_writes: bool = False) -> Isolation:
    """The Isolation of a hunt in `history` (run, hunks, nightly and doctor share it);
    `record_writes` where its probes run side by side on this machine."""
    from regressbisect.git.worktrees import _registered_worktrees, pool_root

    others = [pool_root(history)]
    try:
        others += [p for p in _registered_worktrees(history)
                   if os.path.realpath(p) != os.path.realpath(history.root)]
    except Exception:  # the list only names the place in the message; the check does not need it
        pass
    inherited = env.get("PYTHONPATH", os.environ.get("PYTHONPATH"))
    return Isolation(user_root=Path(history.root), other_worktrees=others, check=check,
                     inherited_pythonpath=inherited, path_env=env.get("PATH", os.environ.get("PATH")),
                     records_root=None if records_root is None else Path(records_root) / "imports",
                     record_writes=record_writes)
