"""regressbisect reaper: the probe's parent, which kills whatever the probe leaves behind.

A process group does not hold what a probe starts: a child that calls `setsid` (a daemon's
double fork, a server started in the background) leaves the probe's group and session, and
once its parent exits it is re-parented away from the probe's tree. Such a process would run
beside every later sample. This process is made a child subreaper (Linux `prctl
PR_SET_CHILD_SUBREAPER`): every process the probe starts, however it detaches, is re-parented to
it when its own parent dies, so "every process below this one" is exactly what the probe
started. Once the probe has exited (or been killed), `sweep` SIGKILLs all of them and names
those that were still running. The preload server (probe/preload_server.py) loads this file
and sweeps the same way after each probe it forked.

Run by the tool's interpreter (`python -I -S reaper.py FD`, FD one end of a socket pair;
only the standard library): it reads one JSON line {"argv": [...], "env": {...}}, starts argv in
a session of its own with exactly that environment (the probe's process group, as the runner
starts it), answers {"pid": N}, and once the probe has ended and the sweep is done
{"status": S, "leftovers": ["PID COMMAND", ...]}, S the exit code or -signal (what the preload
server answers). When the tool's end of the socket closes first (the hunt was killed), the
probe's process group is killed and swept too.
"""
import os
import select
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
SWEEP_WAIT_S = 10.0
"""How long a sweep waits for what it killed to be gone (a process in uninterruptible sleep
dies only when its I/O ends)."""
DESCRIBE_CHARS = 120


def become_subreaper():
    """Make this process the child subreaper of its descendants; False where the kernel has
    none (not Linux): then a detached process escapes, as it would without this process."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def _processes():
    """{pid: (ppid, state)} of every process on the machine."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                raw = f.read()
        except OSError:
            continue   # exited meanwhile
        rest = raw[raw.rfind(b")") + 2:].split()
        try:
            out[int(name)] = (int(rest[1]), rest[0].decode())
        except (IndexError, ValueError):
            continue
    return out


def descendants(root):
    """[(pid, state)] of every process below `root`, parents before children."""
    procs = _processes()
    children = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    found, stack = [], [root]
    while stack:
        for child in sorted(children.get(stack.pop(), ())):
            found.append((child, procs[child][1]))
            stack.append(child)
    return found


def describe(pid):
    """'PID COMMAND LINE' as ps would show it, cut to DESCRIBE_CHARS in its middle: a long
    interpreter path and a long directory would otherwise cut off the script's name."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            words = f.read().split(b"\0")
        command = " ".join(w.decode(errors="replace") for w in words if w)
        if not command:
            with open("/proc/%d/comm" % pid, "rb") as f:
                command = "[%s]" % f.read().decode(errors="replace").strip()
    except OSError:
        command = "?"
    line = "%d %s" % (pid, command)
    if len(line) <= DESCRIBE_CHARS:
        return line
    head = (DESCRIBE_CHARS - 3) // 2
    return line[:head] + "..." + line[len(line) - (DESCRIBE_CHARS - 3 - head):]


def sweep(root=None):
    """SIGKILL every process below `root` (this process, a subreaper) and reap them, until this
    process has no child left; returns those that were running (not zombies), described.

    No child left means no descendant left: a process whose parent dies is re-parented here."""
    root = os.getpid() if root is None else root
    left, seen = [], set()
    deadline = time.monotonic() + SWEEP_WAIT_S
    while True:
        for pid, state in descendants(root):
            if pid not in seen and state not in ("Z", "X"):
                seen.add(pid)
                left.append(describe(pid))
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return left
        if time.monotonic() > deadline:
            return left
        time.sleep(0.01)


def _send(fd, message):
    import json

    os.write(fd, json.dumps(message).encode() + b"\n")


def _request(fd):
    import json

    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            sys.exit(0)   # the tool went away before asking for anything
        data += chunk
    return json.loads(data.decode())


def _start(argv, env):
    """Fork the probe: its own session (and process group), signals as a fresh process has them."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            # Python ignores these at start-up; a shell and its pipelines need the defaults.
            for signum in (signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(signum, signal.SIG_DFL)
            os.execvpe(argv[0], argv, env)
        except BaseException as exc:  # noqa: BLE001 - reported on the probe's stderr
            os.write(2, ("regressbisect: cannot run %s: %s\n" % (argv[0], exc)).encode())
        os._exit(127)
    return pid


def _wait(pid, fd, wakeup):
    """Wait for the probe; kill its process group if the tool's end of `fd` closes first."""
    watched = [fd, wakeup]
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        ready, _, _ = select.select(watched, [], [])
        if wakeup in ready:
            os.read(wakeup, 4096)
        if fd in ready and not os.read(fd, 4096):
            watched.remove(fd)   # the hunt is gone: nobody will read this probe's sample
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass


def main():
    fd = int(sys.argv[1])
    os.set_inheritable(fd, False)   # the probe must not hold the tool's socket
    become_subreaper()
    request = _request(fd)
    wakeup, wake_write = os.pipe()  # SIGCHLD wakes the select below
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    pid = _start(request["argv"], request["env"])
    _send(fd, {"pid": pid})
    status = _wait(pid, fd, wakeup)
    leftovers = sweep()
    try:
        _send(fd, {"status": status, "leftovers": leftovers})
    except OSError:
        pass   # the tool is gone


if __name__ == "__main__":
    main()
