"""A probe's footprint: which files of its worktree its Python processes read, and which of its
directories they list, as the shim records them (probe/shim/sitecustomize.py, FOOTPRINT_ENV).

A commit hunt records it at the first probe of each candidate (hunts/footprints.py) and sets
aside the commits that touch none of what GOOD, BAD and the measured candidates read: a commit
that changes no file the probe reads, adds or removes no file in a directory it lists and adds
no module where one it imports would be found runs the same code as the commit before it.

What is read (`Footprint`), worktree-relative and '/'-separated:
- `files`: the files its processes opened for reading (or tried to: a config file a later
  commit adds), the files of the modules they loaded (a cached `__pycache__/m.*.pyc` stands for
  `m.py`), the script;
- `probed`: where each module a process imported, or tried to, would be found in the worktree's
  import directories (`m.py`, `m/__init__.py`, `m`): a commit adding one changes what it imports;
- `dirs`: the directories the program listed (os.listdir, os.scandir, os.walk, glob, pathlib),
  not those the import system lists for its own cache: a plugin added to such a directory is read.

The footprint cannot be read (`unreadable`, then it stands for every file) where no process
recorded one (a probe that is not Python), a process started a program that is not Python and
names a path of the worktree (`bash run.sh`, `./bench`), or a Python process without the
recorder (`python -I`, an environment without it), or a process opened more files of the
worktree than it keeps. `program_not_python` says the same of the probe command itself.

Pure parent-side code: nothing here imports the probe's project.
"""
from __future__ import annotations

import functools
import os
import posixpath
import re
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from regressbisect.git.history import Change

_PYTHON = re.compile(r"(python|pypy)(\d+(\.\d+)*)?$")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_WRAPPERS = frozenset({"env", "exec", "nice", "nohup", "time", "timeout", "taskset", "numactl", "stdbuf",
                       "command", "chrt", "ionice", "srun"})
"""Programs that run the program their command line names (`timeout 600 python bench.py`)."""
_READ_NOTHING = frozenset({"cd", "export", "set", "unset", "true", ":", "echo", "printf", "sleep", "wait",
                           "exit", "tee"})
"""Shell builtins and programs that read no file of the worktree (tee writes its files)."""
_NO_RECORDER = frozenset("IES")
"""Python flags under which the shim is not loaded from PYTHONPATH (-I, -E, -S): nothing recorded."""
_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", ";;", "|&", "\n"})


@dataclass(frozen=True)
class Footprint:
    """What a probe read of its worktree at one commit (or, united, at several)."""

    files: frozenset[str] = frozenset()
    """Files whose content the probe read (or tried to read)."""
    probed: frozenset[str] = frozenset()
    """Paths whose existence decides what it imports."""
    dirs: frozenset[str] = frozenset()
    """Directories it listed ('' is the worktree's top)."""
    unreadable: str | None = None
    """Why the footprint cannot be read: then it stands for every file, and every commit touches it."""

    @staticmethod
    def unknown(reason: str) -> "Footprint":
        return Footprint(unreadable=reason)

    @functools.cached_property
    def _above(self) -> frozenset[str]:
        """Every directory that holds a path of the footprint (a submodule's path among them)."""
        above: set[str] = set()
        for path in (*self.files, *self.probed, *self.dirs):
            while path:
                path = posixpath.dirname(path)
                if path in above:
                    break
                above.add(path)
        return frozenset(above)

    def touched_by(self, changes: Iterable[Change]) -> bool:
        """Whether a commit's changes reach what the probe reads: a file it read, an entry added
        to or removed from a directory it listed, a module added or removed where it looked for
        one, a submodule it read from moved. True for every commit where it cannot be read."""
        if self.unreadable is not None:
            return True
        for change in changes:
            parent = posixpath.dirname(change.path)
            added_or_removed = change.status in ("A", "D", "T")
            if change.kind == "tree":   # a directory's own entry: created or removed, seen in its parent
                if added_or_removed and (parent in self.dirs or change.path in self.probed):
                    return True
                continue
            if change.path in self.files:
                return True
            if added_or_removed and (change.path in self.probed or parent in self.dirs):
                return True
            if change.kind == "gitlink" and (change.path in self._above or change.path in self.dirs):
                return True
        return False

    @staticmethod
    def union(footprints: Iterable["Footprint"]) -> "Footprint":
        files: set[str] = set()
        probed: set[str] = set()
        dirs: set[str] = set()
        for footprint in footprints:
            if footprint.unreadable is not None:
                return footprint
            files |= footprint.files
            probed |= footprint.probed
            dirs |= footprint.dirs
        return Footprint(frozenset(files), frozenset(probed), frozenset(dirs))

    def to_json(self) -> dict[str, Any]:
        if self.unreadable is not None:
            return {"unreadable": self.unreadable}
        return {"files": sorted(self.files), "probed": sorted(self.probed), "dirs": sorted(self.dirs)}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> "Footprint":
        if data.get("unreadable") is not None:
            return Footprint.unknown(str(data["unreadable"]))
        return Footprint(*(frozenset(str(p) for p in data.get(key) or ()) for key in ("files", "probed", "dirs")))


def scope(worktree: Path) -> str:
    """FOOTPRINT_ENV's value for a probe in `worktree`: its path, and its real path if another."""
    paths = [os.path.abspath(worktree), os.path.realpath(worktree)]
    return os.pathsep.join(dict.fromkeys(paths))


@dataclass
class _Reader:
    """Turns the absolute paths of one probe's records into worktree-relative ones."""

    worktree: Path
    roots: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self.roots = list(dict.fromkeys([os.path.abspath(self.worktree), os.path.realpath(self.worktree)]))

    def relative(self, path: str) -> list[str]:
        """`path` inside the worktree, as it was named and as it resolves (a symlink); [] outside."""
        out = []
        for name in dict.fromkeys([path, os.path.realpath(path)]):
            for root in self.roots:
                if name == root:
                    rel = ""
                elif name.startswith(root.rstrip(os.sep) + os.sep):
                    rel = name[len(root.rstrip(os.sep)) + 1:].replace(os.sep, "/")
                else:
                    continue
                if rel != ".git" and not rel.startswith(".git/"):
                    out.append(rel)
                break
        return out

    def inside(self, path: str) -> bool:
        return bool(self.relative(path))


def _source_of(rel: str) -> str | None:
    """'pkg/__pycache__/m.cpython-311.pyc' -> 'pkg/m.py': the source a cached module stands for."""
    folder, name = posixpath.split(rel)
    if posixpath.basename(folder) != "__pycache__" or not name.endswith(".pyc"):
        return None
    return posixpath.join(posixpath.dirname(folder), name.split(".")[0] + ".py")


def read_footprint(records: Sequence[Mapping[str, Any] | None], worktree: Path,
                   path_env: str | None = None) -> Footprint:
    """One probe's footprint from its processes' footprint records (None: a process whose record
    holds none, a Python process the recorder was not asked to watch)."""
    if not records:
        return Footprint.unknown("no process of the probe recorded what it read (a probe that is not Python)")
    if any(record is None for record in records):
        return Footprint.unknown("a Python process of the probe ran without the footprint's recorder")
    reader = _Reader(worktree)
    files: set[str] = set()
    probed: set[str] = set()
    dirs: set[str] = set()
    for record in records:
        if record.get("overflow"):
            return Footprint.unknown("a process of the probe opened more files of its worktree, or started more "
                                     "programs, than are recorded")
        for spawned in record.get("spawned") or ():
            why = _unrecorded_program(spawned, reader, path_env)
            if why is not None:
                return Footprint.unknown(why)
        for path in (*(record.get("opened") or ()), *(record.get("modules") or ())):
            for rel in reader.relative(path):
                files.add(rel)
                source = _source_of(rel)
                if source is not None:
                    files.add(source)
        for path in record.get("probed") or ():
            probed.update(reader.relative(path))
        for path in record.get("listed") or ():
            dirs.update(reader.relative(path))
    return Footprint(frozenset(files), frozenset(probed), frozenset(dirs))


def _unrecorded_program(spawned: Any, reader: _Reader, path_env: str | None) -> str | None:
    """Why a program a probe process started leaves the footprint unknown, or None: a Python
    program that records itself, or another that names no path of the worktree (a compiler on a
    generated file, nvidia-smi, git) and so is taken to read none of it."""
    if not isinstance(spawned, Mapping):
        return None
    argv = [str(w) for w in spawned.get("argv") or ()]
    cwd = str(spawned.get("cwd") or reader.worktree)
    if not argv:
        return None
    program = argv[0]
    if _is_python(program, cwd, path_env):
        if not spawned.get("recorded", True):
            return f"a process of the probe started {posixpath.basename(program)} without the recorder in its environment"
        flags = _python_flags(argv[1:])
        if flags & _NO_RECORDER:
            return (f"a process of the probe started {posixpath.basename(program)} with -{''.join(sorted(flags & _NO_RECORDER))}, "
                    f"which loads no recorder")
        return None
    named = [program, *argv[1:]]
    for word in named:
        if word.startswith("-") or not word:
            continue
        path = word if os.path.isabs(word) else os.path.join(cwd, word)
        if os.path.lexists(path) and reader.inside(os.path.abspath(path)):
            return (f"a process of the probe started {posixpath.basename(program)}, which is not Python, on "
                    f"{word} of its worktree: what it reads is not recorded")
    return None


def _python_flags(args: Sequence[str]) -> set[str]:
    """The single-letter flags before a Python command line's script, -c or -m."""
    letters: set[str] = set()
    for arg in args:
        if not arg.startswith("-") or arg in ("-", "--") or arg.startswith("--"):
            break
        if arg in ("-c", "-m") or arg[1:2] in ("c", "m"):
            break
        if arg[1:2] in ("X", "W"):
            continue
        letters |= set(arg[1:])
    return letters


def _is_python(word: str, cwd: str | Path, path_env: str | None) -> bool:
    """A Python interpreter by its name, or a script run by one (its #! line: torchrun, ./bench.py)."""
    if _PYTHON.match(posixpath.basename(word)):
        return True
    if "/" in word:
        found: str | None = word if os.path.isabs(word) else os.path.join(str(cwd), word)
    else:
        found = shutil.which(word, path=path_env)
    if not found or not os.path.isfile(found):
        return False
    try:
        with open(found, "rb") as f:
            first = f.readline(256)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def program_not_python(command: str, cwd: Path, path_env: str | None = None) -> str | None:
    """The first program of the probe command (a shell command line) that is not Python and may
    read the worktree, or None: a Python interpreter, or a script whose #! line runs one, each
    maybe behind variable assignments, `cd` and the like, and wrappers that run the program their
    command line names (`timeout 600 python bench.py`). A command substitution is not read."""
    if "`" in command or "$(" in command:
        return "a command substitution"
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        return command.split()[0] if command.split() else "the command"
    simple: list[list[str]] = [[]]
    skip_next = False
    for token in tokens:
        if skip_next:
            skip_next = False
            continue
        if token in _SEPARATORS:
            simple.append([])
        elif token and set(token) <= set("<>&|;()") and ("<" in token or ">" in token):
            skip_next = True   # a redirection's target
        else:
            simple[-1].append(token)
    for words in simple:
        while words and _ASSIGNMENT.match(words[0]):
            words = words[1:]
        if not words or words[0] in _READ_NOTHING:
            continue
        first = words[0]
        if _is_python(first, cwd, path_env):
            continue
        if posixpath.basename(first) in _WRAPPERS and any(_is_python(w, cwd, path_env) for w in words[1:]):
            continue
        return first
    return None
