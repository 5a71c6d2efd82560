"""regressbisect probe start-up hook: loaded at interpreter start-up through PYTHONPATH.

Two independent jobs, each switched on by the runner through the environment (the variables
of the probe contract, probe/contract.py, loaded here by path):
- the import recorder (REGRESSBISECT_IMPORTS_DIR set): at exit, writes where the project's
  modules came from, for the isolation check (regressbisect/probe/isolation.py), the files of
  the modules it imported by name that are not the interpreter's (what the sample key holds
  where they lie outside the worktree) and, when probes run side by side
  (REGRESSBISECT_RECORD_WRITES), the files it opened for writing (two probes writing one file
  outside their worktrees share it) and, in the first probe of a candidate of a commit hunt
  (REGRESSBISECT_FOOTPRINT), what the process read of its worktree: the probe's footprint;
- the counters (REGRESSBISECT_INSTRUMENT=1), described below.

Counters: cheap by design: it imports no torch. A meta-path finder waits for `torch` (and
`torch.nn.attention.flex_attention`) to be imported by the program, then lets
regressbisect/probe/instrument.py patch them; a program that never imports torch pays one
extra finder on sys.meta_path and nothing else. Any other `sitecustomize` further down the
path is run afterwards, as if this one were not there.
"""
# Imports are kept to what the interpreter has loaded anyway: this runs in every probe.
import importlib.machinery
import importlib.util
import os
import sys

_SHIM_DIR = os.path.dirname(os.path.abspath(__file__))
_TOOL_DIR = os.path.dirname(os.path.dirname(_SHIM_DIR))
"""The regressbisect package: its files loaded in a probe are the tool's, not what is measured."""
_MOST_WRITTEN = 10000
"""Paths opened for writing recorded per process at most (a probe that writes a file per step)."""
_MOST_READ = 50000
"""Files of the worktree opened recorded per process at most; past it the footprint says
`overflow` and the parent reads it as unknown (it would stand for every file)."""
_FOOTPRINT_EVENTS = frozenset({"open", "import", "os.listdir", "os.scandir", "subprocess.Popen", "os.system",
                               "os.exec", "os.posix_spawn", "os.spawn"})
_IMPORT_SYSTEM = ("<frozen importlib", os.sep + "importlib" + os.sep + "metadata", "importlib_metadata",
                  os.sep + "pkg_resources" + os.sep)
"""Callers whose directory listings are the import system's own (a path entry's cache, the
search for distributions' metadata): which modules a process imports is recorded by name."""


def _probe_module(name):
    """Load ../<name>.py by path (regressbisect need not be importable in the probe) and register
    it under its package name, so `import regressbisect.probe.<name>` in the program (and in
    instrument.py) finds this one instance (and the counters their one state)."""
    full_name = "regressbisect.probe." + name
    module = sys.modules.get(full_name)
    if module is not None:
        return module
    path = os.path.join(os.path.dirname(_SHIM_DIR), name + ".py")
    spec = importlib.util.spec_from_file_location(full_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[full_name] = module
    spec.loader.exec_module(module)
    return module


_contract = _probe_module("contract")


def _instrument():
    return _probe_module("instrument")


def _on_torch(module) -> None:
    _instrument().on_torch_imported(module)


def _on_flex_attention(module) -> None:
    _instrument().on_flex_attention_imported(module)


class _PostImportHooks:
    """A sys.meta_path finder: runs a hook right after a watched module has executed, then forgets that module."""

    def __init__(self, hooks) -> None:
        self.hooks = dict(hooks)

    def find_spec(self, fullname, path, target=None):
        hook = self.hooks.get(fullname)
        if hook is None:
            return None
        spec = None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        del self.hooks[fullname]
        if not self.hooks and self in sys.meta_path:
            sys.meta_path.remove(self)
        loader_exec = spec.loader.exec_module

        def exec_module(module) -> None:
            loader_exec(module)
            try:
                hook(module)
            except Exception:  # counters must never break the measured program
                import traceback

                print("regressbisect shim: counters disabled:", file=sys.stderr)
                traceback.print_exc()

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _record_imports(directory, names, watched=(), at_import=None, written=None, footprint=None) -> None:
    """atexit: {module: file} of the project's modules (and the script run) in `directory`/<pid>.rec,
    as a Python literal (repr): no json import in a probe that has none; which of `watched`
    (third-party stacks a preload server could import once, probe/preload.py) were imported; the
    files of the modules imported by name (and the script) that are not the interpreter's or the
    tool's; the paths opened for writing (`written`, when watched); and what it read of its
    worktree (`footprint`, a _Footprint, when watched)."""
    prefixes = tuple(n + "." for n in names)
    wanted = set(names)
    theirs = tuple(os.path.join(p, "") for p in {sys.prefix, sys.base_prefix, sys.exec_prefix,
                                                   sys.base_exec_prefix, _TOOL_DIR} if p)
    installed = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)
    roots = {os.path.abspath(p or ".") for p in sys.path if isinstance(p, str)}
    modules, read = {}, set()
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if name == "__main__" and not file:  # CPython drops a script's __file__ once it has run
            file = getattr(getattr(module, "__loader__", None), "path", None)
        if not isinstance(file, str):
            continue
        file = os.path.abspath(file)
        if name == "__main__" or name in wanted or name.startswith(prefixes):
            modules[name] = file
        if ((name == "__main__" or _on_path(name, file, roots)) and not file.startswith(theirs)
                and not any(part in file for part in installed)):
            read.add(file)
    record = {"pid": os.getpid(), "rank": os.environ.get("RANK"), "modules": modules,
              "watched": [n for n in watched if n in sys.modules],
              "env_before_import": at_import.changed if at_import is not None else {},
              "read": sorted(read), "written": sorted(written or ())}
    if footprint is not None:
        record[_contract.FOOTPRINT_KEY] = footprint.record()
    try:
        path = os.path.join(directory, "%d%s" % (os.getpid(), _contract.IMPORT_RECORD_SUFFIX))
        with open(path + ".tmp", "w") as f:
            f.write(repr(record))
        os.replace(path + ".tmp", path)  # the parent never reads half a record
    except OSError:  # the directory is gone (the probe outlived its parent): nothing to report to
        pass


def _on_path(name, file, roots):
    """Whether module `name` was found by its name in a directory of `roots` (sys.path): `file` is
    <root>/a/b/c.py (or c/__init__.py, c.<abi>.so) for a.b.c. Code a library generates and loads
    by its path (inductor's and triton's kernels in their caches) is not: its name is no path."""
    parts = name.split(".")
    head, tail = os.path.split(file)
    if tail.split(".")[0] == "__init__":
        head, tail = os.path.split(head)
    if tail.split(".")[0] != parts[-1]:
        return False
    for part in reversed(parts[:-1]):
        head, tail = os.path.split(head)
        if tail != part:
            return False
    return head in roots


def _watch_writes(directory):
    """The set of absolute paths this process opens for writing from now on (an audit hook on
    `open`: builtins.open, io, os.open), but the record's own `directory`, a file created under a
    name no other process can have (O_EXCL: mkstemp, tempfile) and a directory (O_TMPFILE)."""
    written = set()
    own = os.path.join(os.path.abspath(directory), "")
    own_file = os.O_EXCL | getattr(os, "O_DIRECTORY", 0)

    def hook(event, args):
        if event != "open" or len(written) >= _MOST_WRITTEN:
            return
        try:
            path, _, flags = args
            if isinstance(path, bytes):
                path = os.fsdecode(path)
            if isinstance(path, str) and flags & os.O_ACCMODE != os.O_RDONLY and not flags & own_file:
                path = os.path.abspath(path)
                if not path.startswith(own):
                    written.add(path)
        except Exception:  # never break the measured program
            pass

    sys.addaudithook(hook)
    return written


class _Footprint:
    """What this process reads of its worktree (`scope`: the worktree's paths): the files it
    opens for reading (or tries to), the directories it lists, the modules it imports (or tries
    to) by name, and the programs it starts, from an audit hook. Installed only in the first
    probe of a candidate (FOOTPRINT_ENV); the hook returns at once on every other event."""

    def __init__(self, scope) -> None:
        self.roots = tuple(p.rstrip(os.sep) or os.sep for p in scope.split(os.pathsep) if p)
        self.prefixes = tuple(os.path.join(p, "") for p in self.roots)
        self.opened, self.listed, self.imported, self.spawned = set(), set(), set(), {}
        self.overflow = False

    def _inside(self, path):
        if isinstance(path, os.PathLike):
            path = os.fspath(path)
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str):
            return None   # a file descriptor (os.fwalk, dir_fd): no path to name
        path = os.path.abspath(path)
        return path if path.startswith(self.prefixes) or path in self.roots else None

    def watch(self, event, args):
        """One of _FOOTPRINT_EVENTS (the hook, `_watch_footprint`, lets every other event go)."""
        try:
            if event == "open":
                path, _, flags = args
                if isinstance(flags, int) and flags & os.O_ACCMODE == os.O_WRONLY:
                    return   # written, not read
                path = self._inside(path)
                if path is not None:
                    if len(self.opened) >= _MOST_READ:
                        self.overflow = True
                    else:
                        self.opened.add(path)
            elif event == "import":
                if isinstance(args[0], str):
                    self.imported.add(args[0])
            elif event in ("os.listdir", "os.scandir"):
                caller = sys._getframe(2).f_code.co_filename   # 0: this, 1: the hook, 2: who listed
                if caller.startswith(_IMPORT_SYSTEM[0]) or any(part in caller for part in _IMPORT_SYSTEM[1:]):
                    return
                path = self._inside("." if args[0] is None else args[0])
                if path is not None:
                    self.listed.add(path)
            else:
                program = self._program(event, args)
                key = (program["cwd"], program["recorded"], tuple(program["argv"]))
                if key not in self.spawned:
                    if len(self.spawned) >= _MOST_WRITTEN:
                        self.overflow = True
                    else:
                        self.spawned[key] = program
        except Exception:  # never break the measured program
            pass

    @staticmethod
    def _program(event, args):
        """{cwd, argv, recorded} of a program started (os.system: through /bin/sh); `recorded`:
        its environment keeps this recorder (a Python program then records itself)."""
        cwd, env = os.getcwd(), None
        if event == "os.system":
            words = ["/bin/sh", "-c", args[0]]
        elif event == "subprocess.Popen":
            executable, argv, popen_cwd, env = args[0], args[1], args[2], args[3]
            words = [argv] if isinstance(argv, (str, bytes)) else list(argv)
            if popen_cwd is not None:
                cwd = os.path.join(cwd, os.fsdecode(popen_cwd))
            if executable is not None:
                words = [executable] + words[1:]
        elif event == "os.spawn":
            words, env = [args[1]] + list(args[2])[1:], args[3]
        else:   # os.exec, os.posix_spawn: (path, argv, env)
            words, env = [args[0]] + list(args[1])[1:], args[2]
        env = os.environ if env is None else env
        try:
            recorded = (env.get(_contract.FOOTPRINT_ENV) == os.environ.get(_contract.FOOTPRINT_ENV)
                        and bool(env.get(_contract.IMPORTS_DIR_ENV)) and _SHIM_DIR in (env.get("PYTHONPATH") or ""))
        except Exception:  # an environment of bytes keys
            recorded = False
        return {"cwd": cwd, "recorded": recorded,
                "argv": [os.fsdecode(w) if isinstance(w, (str, bytes, os.PathLike)) else str(w) for w in words]}

    def record(self):
        """The record's FOOTPRINT_KEY entry: what was watched, and where each module imported by
        name would be found in the worktree's import directories (a module added there later is
        a change to what this process imports)."""
        dirs = [p for p in (os.path.abspath(e) for e in sys.path if isinstance(e, str))
                if (p.startswith(self.prefixes) or p in self.roots) and os.path.isdir(p)]
        probed, modules = set(), set()
        for name in set(self.imported) | {"sitecustomize", "usercustomize"}:
            parent, _, leaf = name.rpartition(".")
            if parent:
                where = getattr(sys.modules.get(parent), "__path__", None) or ()
                places = [p for p in (os.path.abspath(e) for e in where if isinstance(e, str))
                          if (p.startswith(self.prefixes) or p in self.roots) and os.path.isdir(p)]
            else:
                places = dirs
            for place in places:
                stem = os.path.join(place, leaf)
                probed.update((stem, stem + ".py", os.path.join(stem, "__init__.py")))
        for module in list(sys.modules.values()):
            file = getattr(module, "__file__", None)
            if isinstance(file, str):
                file = os.path.abspath(file)
                if file.startswith(self.prefixes):
                    modules.add(file)
        return {"opened": sorted(self.opened), "listed": sorted(self.listed), "probed": sorted(probed),
                "modules": sorted(modules), "spawned": list(self.spawned.values()), "overflow": self.overflow}


def _watch_footprint(scope, write_record):
    """Install the footprint's audit hook; a process forked from this one (multiprocessing's
    workers, a DataLoader's) writes its record when it leaves through os._exit, which skips atexit."""
    footprint = _Footprint(scope)

    def hook(event, args, events=_FOOTPRINT_EVENTS, watch=footprint.watch):
        if event in events:   # a plain function, its names local: an ignored event costs least so
            watch(event, args)

    sys.addaudithook(hook)

    def after_fork_in_child():
        real_exit = os._exit
        if getattr(real_exit, "_regressbisect", False):
            return

        def _exit(status):
            try:
                write_record()
            finally:
                real_exit(status)

        _exit._regressbisect = True
        os._exit = _exit

    os.register_at_fork(after_in_child=after_fork_in_child)
    return footprint


class _EnvAtImport:
    """A sys.meta_path finder that finds nothing: when a watched module is first imported, it
    notes the environment variables the program changed since start-up. A preload server imports
    that module before the program runs, so a program that configures it through the
    environment first (OMP_NUM_THREADS, TORCH_LOGS ... set before `import torch`) must not be
    forked (probe/preload.py). The contract's variables are read by this shim when used, not at
    import."""

    def __init__(self, watched) -> None:
        self.pending = set(watched)
        self.start = dict(os.environ)
        self.changed = {}

    def find_spec(self, fullname, path, target=None):
        if fullname in self.pending:
            self.pending.discard(fullname)
            now = os.environ
            self.changed[fullname] = sorted(k for k in set(self.start) | set(now)
                                            if self.start.get(k) != now.get(k)
                                            and not k.startswith(_contract.ENV_PREFIX))
            if not self.pending and self in sys.meta_path:
                sys.meta_path.remove(self)
        return None


def _install_recorder() -> None:
    directory = os.environ.get(_contract.IMPORTS_DIR_ENV)
    if not directory:
        return
    import atexit

    names = [n for n in os.environ.get(_contract.PROJECT_MODULES_ENV, "").split(",") if n]
    watched = [n for n in os.environ.get(_contract.WATCH_ENV, "").split(",") if n]
    at_import = None
    if watched:
        at_import = _EnvAtImport(n for n in watched if n not in sys.modules)
        sys.meta_path.insert(0, at_import)
    written = _watch_writes(directory) if os.environ.get(_contract.WRITES_ENV) == _contract.WRITES_ON else None
    scope = os.environ.get(_contract.FOOTPRINT_ENV)
    footprint = None
    if scope:
        footprint = _watch_footprint(scope, lambda: _record_imports(directory, names, watched, at_import, written,
                                                                    footprint))
    atexit.register(_record_imports, directory, names, watched, at_import, written, footprint)


def _install() -> None:
    if os.environ.get(_contract.INSTRUMENT_ENV) != _contract.INSTRUMENT_ON:
        return
    hooks = {"torch": _on_torch, "torch.nn.attention.flex_attention": _on_flex_attention}
    for name in list(hooks):
        if name in sys.modules:  # imported before us (unusual): patch now
            hooks.pop(name)(sys.modules[name])
    if hooks:
        sys.meta_path.insert(0, _PostImportHooks(hooks))


def _chain_next_sitecustomize() -> None:
    """Run the sitecustomize this one shadows (the first one on sys.path after our dir)."""
    here = os.path.realpath(_SHIM_DIR)
    rest = [p for p in sys.path if os.path.realpath(p or os.getcwd()) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception:  # as site.py does: report and go on
        import traceback

        print(f"Error in sitecustomize {spec.origin} (chained by regressbisect):", file=sys.stderr)
        traceback.print_exc()


_install_recorder()
_install()
if __name__ == "sitecustomize":   # a forked probe (probe/preload.py) loads this file under another
    _chain_next_sitecustomize()   # name: its server ran the user's sitecustomize at its own start
