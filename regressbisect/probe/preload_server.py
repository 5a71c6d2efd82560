"""regressbisect preload server: run by the probe's own interpreter, never imported by the tool.

It imports the probe's heavy third-party stack once (e.g. `torch`, never a module of the project)
and then forks one child per probe; the child becomes the probe command (`python -m mod ...`,
`python script.py ...`, `python -c code ...`) in the candidate's worktree, with the probe's
environment, PYTHONPATH, argv and output files, and imports the candidate's code itself. Like
multiprocessing's forkserver, with the tool's side in regressbisect/probe/preload.py; why and
when: docs/cost.md, "Start-up paid once".

Usage: python [flags] preload_server.py SOCKET PRELOAD PROJECT_MODULES
(PRELOAD and PROJECT_MODULES comma-separated). Protocol, one connection per probe, JSON lines:
request (with the stdout and stderr descriptors attached, SCM_RIGHTS) -> {"pid": N} ->
{"status": S, "leftovers": [...]}, S the exit code, or -signal. The server is a child subreaper:
once a child has ended, every process it left (a daemon that called setsid included) is killed
and named in `leftovers`, as the reaper does for a fresh probe (reaper.py, beside this file). It prints "ready" or "refused: <why>" on stdout once, then serves
until its parent is gone: its stdin is a pipe whose only writer is the hunt's process, so end of
file there means the hunt ended, even by kill -9 (a pipe, not PR_SET_PDEATHSIG, which fires when
the *thread* that started the server ends). It then kills the probe it is running, if any, and
removes its folder (socket and log). Only the standard library, and nothing of the project is
imported here.
"""
import sys

del sys.path[0]   # this file's directory (regressbisect/probe) must not shadow any module

import gc  # noqa: E402
import importlib.machinery  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import select  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402

_HUNT = 0
"""stdin: the pipe from the hunt's process; readable at end of file, once that process is gone."""
_POLL_S = 0.05
"""How often a probe's end is checked where the kernel gives no pidfd (before Linux 5.3)."""


def _load_reaper():
    """reaper.py (beside this file) by its path: this interpreter may not have regressbisect."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reaper.py")
    spec = importlib.util.spec_from_file_location("_regressbisect_reaper", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_reaper = _load_reaper()


def _preload(modules, project):
    """Import `modules`; a reason to refuse, or None. A module of the project must never be
    preloaded: the child must import the candidate's copy (a torch plugin the stack loads through
    entry points would be the installed copy)."""
    for name in modules:
        try:
            importlib.import_module(name)
        except BaseException as exc:  # noqa: BLE001 - any failure means: run probes fresh
            return "import %s failed: %s: %s" % (name, type(exc).__name__, exc)
    prefixes = tuple(p + "." for p in project)
    loaded = sorted(n for n in sys.modules if n in project or n.startswith(prefixes))
    if loaded:
        return "preloading %s imported the project's %s" % (",".join(modules), loaded[0])
    if _child_cannot_use_cuda():
        return "preloading %s initialised CUDA, which a forked child cannot use" % ",".join(modules)
    return None


def _child_cannot_use_cuda():
    """Fork once and ask torch in the child: once the parent has initialised CUDA (some modules
    do at import: a device query), torch refuses CUDA in every forked child."""
    cuda = getattr(sys.modules.get("torch"), "cuda", None)
    in_bad_fork = getattr(cuda, "_is_in_bad_fork", None)
    if in_bad_fork is None:
        return False
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os._exit(1 if in_bad_fork() else 0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) != 0


def _hunt_gone():
    """True once the hunt's end of the stdin pipe is closed (it never writes)."""
    try:
        return os.read(_HUNT, 1) == b""
    except OSError:
        return True


def _leave(folder, child=None):
    """The hunt is gone: kill the probe being run (no one will store its sample) and what it
    left, remove this hunt's folder (sockets, logs) and exit."""
    if child is not None:
        try:
            os.killpg(child, signal.SIGKILL)   # the probe has a process group of its own
        except OSError:
            pass
    _reaper.sweep()
    shutil.rmtree(folder, ignore_errors=True)
    os._exit(0)


def _wait_for_probe(pid, folder):
    """The probe's wait status; leaves (never returns) when the hunt ends first."""
    try:
        ended = os.pidfd_open(pid)
    except (AttributeError, OSError):
        ended = None
    try:
        while True:
            ready, _, _ = select.select([_HUNT] + ([ended] if ended is not None else []), [], [],
                                        None if ended is not None else _POLL_S)
            if _HUNT in ready and _hunt_gone():
                _leave(folder, child=pid)
            if ended is None:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    return status
            elif ended in ready:
                return os.waitpid(pid, 0)[1]
    finally:
        if ended is not None:
            os.close(ended)


def _serve(listener, folder):
    """Fork a child per request; returns (request, fds) in the child, never in the server."""
    while True:
        ready, _, _ = select.select([listener, _HUNT], [], [])
        if _HUNT in ready and _hunt_gone():
            _leave(folder)
        if listener not in ready:
            continue
        conn, _ = listener.accept()
        conn.settimeout(None)
        data, fds, _, _ = socket.recv_fds(conn, 1 << 20, 4)
        while not data.endswith(b"\n"):
            more = conn.recv(1 << 20)
            if not more:
                break
            data += more
        request = json.loads(data.decode())
        sys.stdout.flush()
        sys.stderr.flush()
        # Python's own advice for a fork without exec (the gc module's docs, gc.freeze): every
        # object so far goes to the permanent generation, which no collection in the child visits.
        # Garbage is collected first so that none is frozen (after the first fork this walks only
        # what the requests made since).
        gc.collect()
        gc.freeze()
        pid = os.fork()
        if pid == 0:
            listener.close()
            conn.close()
            return request, fds   # _become puts /dev/null on stdin: the probe never holds the hunt's pipe
        for fd in fds:
            os.close(fd)
        try:
            conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        except OSError:
            pass
        code = os.waitstatus_to_exitcode(_wait_for_probe(pid, folder))
        leftovers = _reaper.sweep()   # this server's only children are what this probe left
        try:
            conn.sendall(json.dumps({"status": code, "leftovers": leftovers}).encode() + b"\n")
        except OSError:
            pass
        conn.close()


def _become(request, fds):
    """In the child: turn this process into the probe, as the interpreter would have started it."""
    os.setsid()   # its own process group: a timeout kills everything it starts
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(fds[0], 1)
    os.dup2(fds[1], 2)
    for fd in (devnull, *fds):
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    # sys.path as the interpreter builds it: [script dir | cwd | ''], PYTHONPATH, then the rest
    server_pythonpath = set(request["server_pythonpath"])
    rest = [p for p in sys.path if p not in server_pythonpath]
    first = [] if request["path0"] is None else [request["path0"]]
    sys.path[:] = first + list(request["pythonpath"]) + rest
    if "random" in sys.modules:
        sys.modules["random"].seed()   # a fresh interpreter seeds from the OS, not the server's state
    # No collection here: the server collected and froze its heap just before the fork, so the
    # cyclic collector never walks what the child inherited, neither in the measured window
    # (forked tiny-preset probes measured 2-4% slower than fresh ones when it did) nor in the
    # interpreter's teardown (docs/cost.md).
    startup = request.get("startup")
    if startup:   # regressbisect's sitecustomize (counters, import record), as at interpreter start
        spec = importlib.util.spec_from_file_location("_regressbisect_startup", startup)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    # a fresh __main__, as at interpreter start (the server's own globals must not show through)
    main_module = type(sys)("__main__")
    main_module.__dict__.update(__builtins__=__builtins__, __spec__=None, __package__=None, __cached__=None)
    sys.modules["__main__"] = main_module
    kind, target, args = request["kind"], request["target"], request["args"]
    if kind == "module":
        import runpy

        sys.argv = ["-m"] + args
        runpy._run_module_as_main(target, alter_argv=True)   # what `python -m` itself calls
        return
    if kind == "script":
        sys.argv = [target] + args
        main_module.__file__ = os.path.abspath(target)   # as the interpreter sets it (3.9+)
        with open(target, "rb") as f:
            code = compile(f.read(), target, "exec")
    else:
        sys.argv = ["-c"] + args
        code = compile(target, "<string>", "exec")
    exec(code, main_module.__dict__)

def main():
    socket_path, preload, project = sys.argv[1], sys.argv[2], sys.argv[3]
    modules = [m for m in preload.split(",") if m]
    why = _preload(modules, [m for m in project.split(",") if m])
    if why:
        print("refused: " + why, flush=True)
        sys.exit(3)
    _reaper.become_subreaper()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    listener.listen(4)
    print("ready", flush=True)
    request, fds = _serve(listener, os.path.dirname(os.path.abspath(socket_path)))
    _become(request, fds)


if __name__ == "__main__":
    main()
