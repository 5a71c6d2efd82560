"""Start-up paid once: probe processes forked from a server that has imported the probe's stack.

A probe of a PyTorch job spends most of its wall time starting: `import torch` alone is 1.6-2.2 s
of a 3.7 s tiny-preset probe on a 2-core CPU machine, 3-4 s of 20 s on an H200 host. Where the
probe command is a plain Python invocation (`python -m mod ...`, `python script.py ...`,
`python -c ...`), a preload server (probe/preload_server.py, run by the probe's own interpreter
with the probe's environment) imports that stack once per slot and forks a child per probe. The
child becomes the probe: the candidate's worktree as cwd, the probe's environment, PYTHONPATH,
argv and output files, its own process group, and it imports the candidate's code itself (a
server that imported any module of the project refuses to serve). What is preloaded is never
the code measured, and the measured window comes after the probe's own warm-up either way.

`--preload auto` (the default) learns what to preload: the hunt's first probe runs fresh and its
import record says which of WATCHED it imported; later probes are forked from their slot's
server, which preloads those. A probe command that is not a plain Python invocation (a shell
pipeline, torchrun, another program), a setup step (it may reinstall the stack) or a Slurm
executor runs every probe fresh. docs/cost.md, "Start-up paid once".
"""
from __future__ import annotations

import functools
import itertools
import json
import os
import re
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from regressbisect.probe.contract import (FOOTPRINT_ENV, IMPORTS_DIR_ENV, INSTRUMENT_ENV, PROJECT_MODULES_ENV,
                                          TOKENS_ENV, WATCH_ENV, WORK_ENV)
from regressbisect.probe.isolation import import_roots, project_modules, watched_imports
from regressbisect.probe.runner import (SHIM_DIR, ProbeSpec, ReportedProcess, probe_environment,
                                        run_probe_all)
from regressbisect.samples import ProbeOutcome

SERVER_SCRIPT = Path(__file__).resolve().parent / "preload_server.py"
WATCHED = ("torch", "torch._dynamo")
"""Stacks worth preloading under `--preload auto`, in import order: their import takes seconds
(torch 3.6 s, torch._dynamo 3 s more of an h200 probe's start-up; docs/cost.md). Not
torch._inductor: importing it initialises CUDA, and a forked child could not use it."""
PRELOAD_OFF = "off"
PRELOAD_AUTO = "auto"
PER_PROBE_ENV = frozenset({TOKENS_ENV, INSTRUMENT_ENV, WORK_ENV, IMPORTS_DIR_ENV,
                           PROJECT_MODULES_ENV, WATCH_ENV, FOOTPRINT_ENV, "PYTHONPATH"})
"""Variables that may differ from probe to probe of one server; every other variable of the
probe's environment is the server's own (a different value means another server)."""
SERVER_START_TIMEOUT_S = 300.0
FOLDER_PREFIX = "regressbisect-preload-"
"""A hunt's servers' folder (sockets, logs) in the temporary directory is named
`regressbisect-preload-<pid>-<start>-<random>`: its owner, the hunt's process, by pid and start
time (a pid alone may be reused), so that a later hunt or `clean` removes the folders of hunts
that are gone (kill -9) and never a running one's."""
_SHELL_SPECIALS = re.compile(r"[$;|&<>`*?~(){}!\\\n\[\]#]")
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?$")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_FLAGS_ALONE = frozenset({"-u", "-B", "-O", "-OO", "-s", "-b", "-bb", "-P", "-q", "-v"})
_FLAGS_WITH_VALUE = frozenset({"-X", "-W"})


@dataclass(frozen=True)
class PythonCommand:
    """A probe command that is one plain Python invocation (what a fork can stand in for)."""

    assignments: tuple[tuple[str, str], ...]
    """`VAR=value` words before the interpreter (bash puts them in its environment)."""
    interpreter: str
    flags: tuple[str, ...]
    kind: str
    """'module' (-m), 'script' or 'code' (-c)."""
    target: str
    args: tuple[str, ...]


def parse_python_command(command: str) -> PythonCommand | None:
    """The command as a PythonCommand, or None where bash would do more than start one Python
    process (expansions, redirections, pipes, lists, globs: any of them is a reason to run it
    as it is)."""
    if _SHELL_SPECIALS.search(command):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    assignments = []
    while words and _ASSIGNMENT.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        assignments.append((name, value))
    if not words or not _PYTHON.match(os.path.basename(words[0])):
        return None
    interpreter, rest = words[0], words[1:]
    flags: list[str] = []
    while rest and rest[0].startswith("-") and rest[0] not in ("-m", "-c", "-"):
        flag = rest.pop(0)
        if flag in _FLAGS_ALONE or flag[:2] in _FLAGS_WITH_VALUE and len(flag) > 2:
            flags.append(flag)
        elif flag in _FLAGS_WITH_VALUE and rest:
            flags += [flag, rest.pop(0)]
        else:
            return None   # -E, -I, -S, -i ... change start-up in ways a fork does not repeat
    if not rest or rest[0] == "-":
        return None
    if rest[0] in ("-m", "-c"):
        if len(rest) < 2:
            return None
        kind = "module" if rest[0] == "-m" else "code"
        return PythonCommand(tuple(assignments), interpreter, tuple(flags), kind, rest[1], tuple(rest[2:]))
    return PythonCommand(tuple(assignments), interpreter, tuple(flags), "script", rest[0], tuple(rest[1:]))


@dataclass
class PreloadStats:
    """What the report says of preloading (`cost.preload`)."""

    mode: str
    modules: list[str] = field(default_factory=list)
    forked: int = 0
    """Probes forked from a server."""
    fresh: int = 0
    """Probes started as fresh processes."""
    servers: int = 0
    server_start_s: float = 0.0
    """Wall time of the servers' start-up (their imports), paid once per slot."""
    notes: list[str] = field(default_factory=list)
    watched_checked: int = 0
    """Probes whose imports of WATCHED were recorded (the learning probes)."""
    watched_imported: list[str] = field(default_factory=list)
    """WATCHED modules any of them imported (none: the probe never imports torch, and the report
    leaves out the torch caches and compile settings)."""

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "modules": sorted(set(self.modules)), "probes_forked": self.forked,
                "probes_fresh": self.fresh, "servers": self.servers,
                "watched_checked": self.watched_checked, "watched_imported": sorted(set(self.watched_imported)),
                "server_start_s": round(self.server_start_s, 2), "notes": list(dict.fromkeys(self.notes))}


class PreloadServers:
    """The preload servers of one hunt, one per slot (worktree) and environment; thread-safe per
    slot (a slot runs one probe at a time)."""

    def __init__(self, mode: str):
        self.mode = mode.strip()
        explicit = [] if self.mode in (PRELOAD_AUTO, PRELOAD_OFF) else [m.strip() for m in self.mode.split(",") if m.strip()]
        self._explicit = tuple(explicit)
        self._learned: dict[tuple, tuple[str, ...]] = {}
        self._servers: dict[tuple, _Server] = {}
        self._refused: dict[tuple, str] = {}
        self._lock = threading.Lock()
        self._socket_numbers = itertools.count()
        self._dir: Path | None = None
        self.stats = PreloadStats(mode=self.mode)
        remove_folders_of_ended_hunts()

    def run(self, spec: ProbeSpec, worktree: Path, extra_env: Mapping[str, str],
            fresh: Callable[..., ProbeOutcome], on_start: Callable[[int], None] | None = None) -> ProbeOutcome:
        """Run one probe, forked from a server where it can be, else with `fresh` (the runner).
        `on_start(pgid)`: as run_probe_all's."""
        if on_start is not None:
            fresh = functools.partial(fresh, on_start=on_start)
        # Linux only: fork() after importing torch is not safe on macOS (Objective-C runtime).
        usable = self.mode != PRELOAD_OFF and sys.platform.startswith("linux")
        command = parse_python_command(spec.render_command()) if usable else None
        if command is None:
            return self._fresh(spec, worktree, extra_env, fresh)
        env = probe_environment(spec, extra_env)
        env.update(command.assignments)
        interpreter = shutil.which(command.interpreter, path=env.get("PATH"))
        pythonpath = _absolute_entries(env.get("PYTHONPATH", ""), worktree)
        if interpreter is None or pythonpath is None:
            return self._fresh(spec, worktree, extra_env, fresh)
        server_env = {k: v for k, v in env.items() if k not in PER_PROBE_ENV}
        server_path = [p for p in pythonpath
                       if p != str(SHIM_DIR) and not _is_inside(p, worktree)]
        if server_path:
            server_env["PYTHONPATH"] = os.pathsep.join(server_path)
        key = (str(Path(worktree).resolve()), os.path.realpath(interpreter), command.flags,
               tuple(sorted(server_env.items())))
        # What the probe imports is learned once per program, interpreter and environment, not
        # per slot: the slots (and a slot's lanes, --overlap) run the same probe program.
        learned = key[1:] + (command.kind, command.target)
        modules = self._explicit or self._learned.get(learned)
        if modules is None:   # auto, not learned yet: this probe runs fresh and tells
            return self._learn(learned, env.get(IMPORTS_DIR_ENV), spec, worktree, extra_env, fresh)
        if not modules or key in self._refused:
            return self._fresh(spec, worktree, extra_env, fresh)
        server = self._server(key, interpreter, command.flags, server_env, modules, worktree, spec.timeout_s)
        if server is None:
            return self._fresh(spec, worktree, extra_env, fresh)
        request = {"cwd": str(worktree), "env": env, "pythonpath": pythonpath,
                   "server_pythonpath": server_path, "path0": _path0(command, worktree, env),
                   "startup": str(SHIM_DIR / "sitecustomize.py") if str(SHIM_DIR) in pythonpath else None,
                   "kind": command.kind, "target": command.target, "args": list(command.args)}
        try:
            outcome = run_probe_all(spec, worktree, extra_env, on_start=on_start,
                                    start=lambda out, err: server.fork(request, out, err))[0]
        except OSError as exc:   # the server is gone (killed): this slot's probes run fresh from now on
            self._refused[key] = f"the server stopped ({exc})"
            with self._lock:
                self.stats.notes.append(f"not preloaded: {self._refused[key]}; later probes ran fresh")
            server.stop()
            return self._fresh(spec, worktree, extra_env, fresh)
        with self._lock:
            self.stats.forked += 1
        return outcome

    def close(self) -> None:
        """Stop every server (they also stop on their own once the hunt's process is gone)."""
        with self._lock:
            servers, self._servers = list(self._servers.values()), {}
        for server in servers:
            server.stop()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def _learn(self, key: tuple, records: str | None, spec, worktree, extra_env, fresh) -> ProbeOutcome:
        """Run the probe fresh with the import recorder watching WATCHED; remember which of them
        servers for `key` (the program, interpreter and environment) may preload. Without a
        record (isolation check off) nothing is learned."""
        if not records:
            return self._fresh(spec, worktree, extra_env, fresh)
        outcome = self._fresh(spec, worktree, {**extra_env, WATCH_ENV: ",".join(WATCHED)}, fresh)
        if outcome.sample is None:
            return outcome   # the next probe tells
        imported = watched_imports(Path(records))
        # a module imported after the program changed the environment may read it at import
        self._learned[key] = tuple(m for m in WATCHED if m in imported and not imported[m])
        with self._lock:
            self.stats.watched_checked += 1
            self.stats.watched_imported.extend(imported)
            for module, keys in imported.items():
                if keys:
                    self.stats.notes.append(f"{module} not preloaded: the probe sets {', '.join(keys[:4])} "
                                            f"before importing it, which a server's import would not see")
        return outcome

    def _fresh(self, spec, worktree, extra_env, fresh) -> ProbeOutcome:
        with self._lock:
            self.stats.fresh += 1
        return fresh(spec, worktree, extra_env=extra_env)

    def _server(self, key, interpreter, flags, server_env, modules, worktree, timeout_s) -> "_Server | None":
        server = self._servers.get(key)
        if server is not None and server.alive():
            return server
        with self._lock:
            if self._dir is None:
                self._dir = Path(tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{_owner(os.getpid())}-"))
            # a number of its own: lanes start their servers at the same moment (--overlap)
            socket_path = self._dir / f"s{next(self._socket_numbers)}-{os.getpid()}.sock"
        project = project_modules(import_roots(Path(worktree)), Path(worktree))
        started = time.perf_counter()
        server, why = _Server.start(interpreter, flags, server_env, modules, project, socket_path,
                                    self._dir, min(timeout_s, SERVER_START_TIMEOUT_S))
        with self._lock:
            self.stats.server_start_s += time.perf_counter() - started
            if server is None:
                self._refused[key] = why
                self.stats.notes.append(f"not preloaded: {why}; those probes ran fresh")
                return None
            self._servers[key] = server
            self.stats.servers += 1
            self.stats.modules += list(modules)
        return server


class _Server:
    """One running preload server."""

    def __init__(self, process: subprocess.Popen, socket_path: Path):
        self.process = process
        self.socket_path = socket_path

    @classmethod
    def start(cls, interpreter, flags, env, modules, project, socket_path, work_dir, timeout_s):
        """(server, None) once it is ready, or (None, why it refused or failed)."""
        log = open(work_dir / (socket_path.stem + ".log"), "w+b")
        process = subprocess.Popen(
            [interpreter, *flags, str(SERVER_SCRIPT), str(socket_path), ",".join(modules), ",".join(project)],
            # stdin: a pipe only this process writes to (never does): the server ends, and removes
            # its folder, when it reads end of file there, i.e. once this process is gone
            cwd=str(work_dir), env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
            start_new_session=True)
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], timeout_s)
        line = process.stdout.readline().decode(errors="replace").strip() if ready else ""
        if line == "ready":
            log.close()
            return cls(process, socket_path), None
        _stop(process)
        log.seek(0)
        tail = [s for s in log.read().decode(errors="replace").splitlines() if s.strip()][-1:]
        log.close()
        why = line[len("refused: "):] if line.startswith("refused: ") else (
            f"the server did not start ({tail[0] if tail else 'no output'})" if ready or process.poll() is not None
            else f"the server was not ready within {timeout_s:g}s")
        return None, why

    def alive(self) -> bool:
        return self.process.poll() is None

    def fork(self, request: dict, out_file, err_file) -> ReportedProcess:
        """Fork the probe; the server reaps it, kills what it left, and reports (probe/reaper.py)."""
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(str(self.socket_path))
        payload = json.dumps(request).encode() + b"\n"
        socket.send_fds(conn, [payload], [out_file.fileno(), err_file.fileno()])
        return ReportedProcess(conn, " ".join([request["kind"], request["target"]]),
                               start_timeout_s=SERVER_START_TIMEOUT_S)

    def stop(self) -> None:
        _stop(self.process)
        try:
            self.socket_path.unlink()
        except OSError:
            pass


def _stop(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        process.wait()
    for pipe in (process.stdin, process.stdout):
        if pipe is not None:
            pipe.close()


def _owner(pid: int) -> str | None:
    """`<pid>-<start time>` of a running process (clock ticks since boot, /proc), or None
    when it is not running; `<pid>-0` where there is no /proc."""
    try:
        return f"{pid}-{Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()[19]}"
    except (OSError, IndexError):
        pass
    if Path("/proc/self/stat").exists():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return f"{pid}-0"


def remove_folders_of_ended_hunts(tmp: Path | None = None) -> int:
    """Remove the preload folders whose owning hunt is no longer running (a hunt killed by
    kill -9 leaves its folder when its servers could not remove it); returns how many."""
    removed = 0
    for folder in Path(tmp or tempfile.gettempdir()).glob(FOLDER_PREFIX + "*"):
        pid, start = (folder.name[len(FOLDER_PREFIX):].split("-") + ["", ""])[:2]
        if not (pid.isdigit() and start.isdigit()) or not folder.is_dir():
            continue   # not named by a version that records its owner: whose it is is unknown
        if _owner(int(pid)) not in (f"{pid}-{start}", f"{pid}-0"):
            shutil.rmtree(folder, ignore_errors=True)
            removed += not folder.exists()   # another user's stays: theirs to remove
    return removed


def _absolute_entries(pythonpath: str, cwd: Path) -> list[str] | None:
    """PYTHONPATH as the interpreter adds it to sys.path (site makes entries absolute, drops
    duplicates); None when an entry is relative (it would resolve against the server's cwd)."""
    out: list[str] = []
    for entry in pythonpath.split(os.pathsep):
        if not entry:
            continue
        if not os.path.isabs(entry):
            return None
        entry = os.path.normpath(entry)
        if entry not in out:
            out.append(entry)
    return out


def _path0(command: PythonCommand, worktree: Path, env: Mapping[str, str]) -> str | None:
    """sys.path[0] as the interpreter sets it: the cwd for -m, the script's directory (symlinks
    resolved), '' for -c; nothing with PYTHONSAFEPATH or -P."""
    if env.get("PYTHONSAFEPATH") or "-P" in command.flags:
        return None
    if command.kind == "module":
        return os.path.realpath(str(worktree))   # os.getcwd() in the probe
    if command.kind == "script":
        return os.path.dirname(os.path.realpath(os.path.join(str(worktree), command.target)))
    return ""


def _is_inside(path: str, directory: Path) -> bool:
    real, root = os.path.realpath(path), os.path.realpath(str(directory))
    return real == root or real.startswith(root + os.sep)
