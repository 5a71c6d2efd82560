"""regressbisect probe start-up hook: loaded at interpreter start-up through PYTHONPATH.

Two independent jobs, each switched on by the runner through the environment (the variables
of the probe contract, probe/contract.py, loaded here by path):
- the import recorder (REGRESSBISECT_IMPORTS_DIR set): at exit, writes where the project's
  modules came from, for the isolation check (regressbisect/probe/isolation.py), the files of
  the modules it imported by name that are not the interpreter's (what the sample key holds
  where they lie outside the worktree) and, when probes run side by side
  (REGRESSBISECT_RECORD_WRITES), the files it opened for writing (two probes writing one file
  outside their worktrees share it);
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


def _record_imports(directory, names, watched=(), at_import=None, written=None) -> None:
    """atexit: {module: file} of the project's modules (and the script run) in `directory`/<pid>.rec,
    as a Python literal (repr): no json import in a probe that has none; which of `watched`
    (third-party stacks a preload server could import once, probe/preload.py) were imported; the
    files of the modules imported by name (and the script) that are not the interpreter's or the
    tool's; and the paths opened for writing (`written`, when watched)."""
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
    try:
        path = os.path.join(directory, "%d%s" % (os.getpid(), _contract.IMPORT_RECORD_SUFFIX))
        with open(path + ".tmp", "w") as f:
            f.write(repr({"pid": os.getpid(), "rank": os.environ.get("RANK"), "modules": modules,
                          "watched": [n for n in watched if n in sys.modules],
                          "env_before_import": at_import.changed if at_import is not None else {},
                          "read": sorted(read), "written": sorted(written or ())}))
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
    atexit.register(_record_imports, directory, names, watched, at_import, written)


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
