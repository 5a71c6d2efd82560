"""A busy machine is seen, not measured: CPU (and GPU) used by processes outside the hunt.

For every sample we know how much CPU the whole machine spent while the probe ran (the busy
jiffies of /proc/stat) and how much of that was ours: this process (all its threads), every
process it started and waited for (os.times' children, which covers each probe and the
descendants it waited for), the live processes below us, and the probes' orphans (processes of
a probe's session whose parent died; their last CPU reading is kept, since nobody of ours reaps
them). The rest is "other load", in CPUs (0.9 = nine tenths of one core on average) and as a
share of the machine. Of the hunt's own CPU, what its other probes (other slots, other lanes) used
while a probe ran is that probe's "sibling load": it counts where the cores were oversubscribed,
and since waiting cannot end it, a sample taken so stops the hunt (HuntOversubscribed). On GPU, nvidia-smi's per-GPU utilisation is split between our compute
processes and foreign ones by their memory. The rule that turns a load into "contended" is
BusyRule (docs/contention.md): a steady load is measured through, each sample compared with the
level of the samples before it (ContentionGuard.judge); a change of that level within a pair, or
cores oversubscribed, is contention. SampleSource stores contended samples in the 'flagged' arm
and re-takes them: at once after a change (exit 8 when the load keeps changing), after a wait for
quiet bounded by a share of the hunt's wall time (ContentionGuard.wait_quiet) on oversubscribed
cores, past which such samples are used as they are.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

from regressbisect.config import MAX_WAIT_SHARE
from regressbisect.errors import ExitCode, UserError
from regressbisect.machine.fingerprint import nvidia_smi

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)
"""user, nice, system, irq, softirq, steal of a /proc/stat cpu line (guest time is inside user)."""
SAMPLER_INTERVAL_S = 2.0
"""How often all processes are scanned for probes' orphans while a window is open (one /proc
scan costs ~15 ms of CPU with 130 processes: every 2 s keeps it under 1% of a core)."""
ORPHAN_INTERVAL_S = 0.25
"""How often the orphans already found are re-read (a few small files): the probe's group is
killed right after the probe ends, so at most this much of an orphan's CPU goes unseen."""
GPU_EVERY_SCANS = 3
"""nvidia-smi is read on the first scan and then every GPU_EVERY_SCANS scans (it costs tens of
milliseconds of CPU per call, which would otherwise disturb the probe it watches)."""
RESOLUTION_TICKS = 4
"""Clock ticks a reading of other load may be off by: /proc/stat and the processes' times count
whole ticks (1/CLK_TCK s), read at both ends of a window, for the machine and for the hunt. Over a
window of s seconds that is 4 / (CLK_TCK * s) CPUs: 0.07 over 0.6 s, 0.4 over 0.1 s."""
FULL_IDLE_SHARE = 0.05
"""The cores were full over a window when other and hunt load left less than this share of them
idle (and less than the reading's resolution): threads then waited for a core, and the probe's may
have been among them (docs/contention.md)."""
FIRST_GAP_S = 0.5
"""The load between the guard's start and the first probe is the first level samples are
compared with, when that gap is at least this long (shorter: too coarse a reading)."""


class MachineBusy(UserError):
    """The load never settled within --max-wait."""

    def __init__(self, message: str):
        super().__init__(message, ExitCode.MACHINE_BUSY)


class HuntOversubscribed(UserError):
    """The hunt's own probes took CPU time from each other: no wait ends that, fewer probes do."""

    def __init__(self, load: "Load"):
        super().__init__(
            f"the hunt's own probes oversubscribe this machine: beside one probe its other probes used "
            f"{load.sibling_cpus:.1f} CPUs, the hunt {load.hunt_cpus:.1f} of {load.ncpus}; such samples are "
            f"stored apart, never used (run fewer probes at once: lower --slots or --overlap, or limit a "
            f"multi-threaded probe's threads, e.g. --env OMP_NUM_THREADS=1)")


# -- readers ----------------------------------------------------------------------------------

def read_proc_stat(path: str = "/proc/stat") -> tuple[float, int]:
    """(busy CPU seconds of the whole machine since boot, number of CPUs)."""
    busy = 0.0
    cpus = 0
    with open(path, encoding="ascii") as f:
        for line in f:
            if line.startswith("cpu "):
                values = [int(v) for v in line.split()[1:]]
                busy = sum(values[i] for i in _BUSY_FIELDS if i < len(values)) / CLK_TCK
            elif line.startswith("cpu"):
                cpus += 1
    return busy, max(cpus, 1)


@dataclass(frozen=True)
class _Proc:
    pid: int
    ppid: int
    session: int
    start: int
    cpu: float
    """utime + stime + cutime + cstime, seconds."""
    name: str = ""
    """The command (comm) as /proc/PID/stat gives it."""


def _scan_processes(proc: str = "/proc") -> list[_Proc]:
    out = []
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        try:
            with open(f"{proc}/{name}/stat", encoding="utf-8", errors="replace") as f:
                raw = f.read()
        except OSError:
            continue  # exited between listdir and open
        rest = raw[raw.rfind(")") + 2:].split()
        try:
            ticks = sum(int(rest[i]) for i in (11, 12, 13, 14))
            out.append(_Proc(pid=int(name), ppid=int(rest[1]), session=int(rest[3]),
                             start=int(rest[19]), cpu=ticks / CLK_TCK,
                             name=raw[raw.find("(") + 1:raw.rfind(")")]))
        except (IndexError, ValueError):
            continue
    return out


def _command_line(pid: int, proc: str = "/proc") -> str | None:
    """The process's command line, its arguments joined by spaces (None once it is gone)."""
    try:
        with open(f"{proc}/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return " ".join(raw.decode(errors="replace").split("\0")).strip() or None


class HuntCpu:
    """Cumulative CPU seconds of this process and everything it started (see module doc)."""

    def __init__(self, scan: Callable[[], list[_Proc]] = _scan_processes,
                 command_line: Callable[[int], str | None] = _command_line):
        self._scan = scan
        self._command_line = command_line
        self._foreign: dict[tuple[int, int], _Proc] = {}
        self._lock = threading.Lock()
        self._probe_sessions: set[int] = set()
        self._orphans: dict[tuple[int, int], float] = {}
        self.pids: set[int] = set()
        """Our live processes at the last reading (for the GPU split)."""
        self.sessions: dict[int, float] = {}
        """Per live probe session (a probe is a session of its own: its id is the probe's process
        group), the most CPU seconds its processes together were seen to have used: a child's
        time moves into its parent's when reaped, and the leader's last reading stays."""
        self._members: dict[int, set[tuple[int, int]]] = {}
        """Per probe session, its processes (pid, start) at the last scan, re-read cheaply."""

    def total(self) -> float:
        times = os.times()
        own = times.user + times.system + times.children_user + times.children_system
        me = os.getpid()
        my_session = os.getsid(0)
        procs = self._scan()
        children: dict[int, list[_Proc]] = {}
        for p in procs:
            children.setdefault(p.ppid, []).append(p)
        descendants: dict[int, _Proc] = {}
        stack = [me]
        while stack:
            for child in children.get(stack.pop(), ()):
                if child.pid not in descendants:
                    descendants[child.pid] = child
                    stack.append(child.pid)
        with self._lock:
            self._probe_sessions |= {p.session for p in descendants.values() if p.session != my_session}
            for p in procs:
                if p.pid not in descendants and p.session in self._probe_sessions and p.pid != me:
                    key = (p.pid, p.start)
                    self._orphans[key] = max(self._orphans.get(key, 0.0), p.cpu)
            self.pids = {me, *descendants, *(pid for pid, _ in self._orphans)}
            members: dict[int, set[tuple[int, int]]] = {}
            now: dict[int, float] = {}
            for p in procs:
                if p.pid in self.pids and p.session in self._probe_sessions:
                    members.setdefault(p.session, set()).add((p.pid, p.start))
                    now[p.session] = now.get(p.session, 0.0) + p.cpu
            # sessions with no process left are gone (so a reused id starts afresh)
            self.sessions = {sid: max(cpu, self.sessions.get(sid, 0.0)) for sid, cpu in now.items()}
            self._members = members
            self._foreign = {(p.pid, p.start): p for p in procs if p.pid not in self.pids}
            return own + sum(p.cpu for p in descendants.values()) + sum(self._orphans.values())

    def refresh_sessions(self, leaders: Iterable[int] = (), proc: str = "/proc") -> None:
        """Re-read the probe sessions' known processes, and the leaders of probes started since the
        last scan (cheap: no full scan), so a probe that ends between two scans is seen to its end."""
        with self._lock:
            members = {sid: set(m) for sid, m in self._members.items()}
        for leader in leaders:
            if leader not in members:
                start = _start_time(leader, proc)
                members[leader] = set() if start is None else {(leader, start)}
        now: dict[int, float] = {}
        for sid, procs in members.items():
            now[sid] = sum(cpu for pid, start in procs if (cpu := _cpu_of(pid, start, proc)) is not None)
        with self._lock:
            for sid, cpu in now.items():
                self.sessions[sid] = max(cpu, self.sessions.get(sid, 0.0))
            for sid, procs in members.items():
                self._members.setdefault(sid, set()).update(procs)

    def foreign(self) -> dict[tuple[int, int], _Proc]:
        """The processes outside the hunt at the last reading, by (pid, start time)."""
        with self._lock:
            return dict(self._foreign)

    def busiest(self, before: dict[tuple[int, int], _Proc], seconds: float, at_most: float,
                count: int = 3, floor_cpus: float = 0.05) -> tuple[tuple[int, str, float], ...]:
        """(pid, command, CPUs) of the `count` foreign processes that used the most CPU since
        `before` (a `foreign()` reading `seconds` ago), those under `floor_cpus` left out. A
        process's CPU includes the children it reaped, so a shell running short jobs is named;
        of a child that was already running at `before`, only what it used since counts: reaping
        moves a child's whole lifetime into its parent's time (`timeout` reaping an hours-long job
        would read as 15 CPUs of a 2-core machine). An ended child's time goes to its nearest
        ancestor still alive (a shell that ended reaped its own job first, and was reaped in turn).
        No process is named with more than `at_most` CPUs, the foreign load the whole machine
        showed in the window."""
        now_procs = self.foreign()
        alive = {p.pid for p in now_procs.values()}
        parent_then = {then.pid: then.ppid for then in before.values()}
        reaped_before: dict[int, float] = {}   # live pid -> CPU its ended descendants had at `before`
        for key, then in before.items():
            if key in now_procs:
                continue
            heir, seen = then.ppid, set()
            while heir not in alive and heir in parent_then and heir not in seen:
                seen.add(heir)
                heir = parent_then[heir]
            reaped_before[heir] = reaped_before.get(heir, 0.0) + then.cpu
        used = []
        for key, now in now_procs.items():
            then = before.get(key)
            used_s = now.cpu - (then.cpu + reaped_before.get(now.pid, 0.0) if then else 0.0)
            cpus = min(max(used_s, 0.0) / max(seconds, 1e-6), at_most)
            if cpus >= floor_cpus:
                used.append((cpus, now))
        used.sort(key=lambda item: -item[0])
        named = []
        for cpus, p in used[:count]:
            command = " ".join((self._command_line(p.pid) or p.name or "?").split())
            named.append((p.pid, command[:60] + ("..." if len(command) > 60 else ""), cpus))
        return tuple(named)

    def refresh_orphans(self, proc: str = "/proc") -> None:
        """Re-read the orphans found so far (cheap: no full scan); dead ones keep their value."""
        with self._lock:
            keys = list(self._orphans)
        for pid, start in keys:
            try:
                with open(f"{proc}/{pid}/stat", encoding="utf-8", errors="replace") as f:
                    rest = f.read().rsplit(")", 1)[1].split()
                if int(rest[19]) != start:
                    continue  # the pid was reused by another process
                cpu = sum(int(rest[i]) for i in (11, 12, 13, 14)) / CLK_TCK
            except (OSError, IndexError, ValueError):
                continue
            with self._lock:
                self._orphans[(pid, start)] = max(self._orphans.get((pid, start), 0.0), cpu)


def _stat_fields(pid: int, proc: str) -> list[str] | None:
    try:
        with open(f"{proc}/{pid}/stat", encoding="utf-8", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _start_time(pid: int, proc: str = "/proc") -> int | None:
    fields = _stat_fields(pid, proc)
    try:
        return None if fields is None else int(fields[19])
    except (IndexError, ValueError):
        return None


def _cpu_of(pid: int, start: int, proc: str = "/proc") -> float | None:
    """utime + stime + cutime + cstime of `pid`, seconds; None once it is gone (or reused)."""
    fields = _stat_fields(pid, proc)
    try:
        if fields is None or int(fields[19]) != start:
            return None
        return sum(int(fields[i]) for i in (11, 12, 13, 14)) / CLK_TCK
    except (IndexError, ValueError):
        return None


def read_gpu_apps(run: Callable[[list[str]], str | None] | None = None
                  ) -> tuple[dict[str, float], list[tuple[int, str, float]]] | None:
    """({gpu uuid: utilisation 0..1}, [(pid, gpu uuid, used MiB)]) from nvidia-smi; None without it."""
    run = run or (lambda args: nvidia_smi(args, timeout_s=10))
    gpus = run(["--query-gpu=uuid,utilization.gpu", "--format=csv,noheader,nounits"])
    apps = run(["--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader,nounits"])
    if gpus is None or apps is None:
        return None
    util = {}
    for line in gpus.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2:
            util[parts[0]] = _number(parts[1]) / 100.0
    procs = []
    for line in apps.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[0].isdigit():
            procs.append((int(parts[0]), parts[1], _number(parts[2])))
    return util, procs


def foreign_gpu_load(reading, ours: set[int]) -> float | None:
    """Utilisation of the GPUs our processes use, times the foreign processes' share of their
    memory (nvidia-smi has no per-process utilisation); None when none of ours is on a GPU."""
    if reading is None:
        return None
    util, procs = reading
    our_gpus = {gpu for pid, gpu, _ in procs if pid in ours}
    if not our_gpus:
        return None
    loads = []
    for gpu in our_gpus:
        on_gpu = [(pid, mem) for pid, g, mem in procs if g == gpu]
        total = sum(max(mem, 1.0) for _, mem in on_gpu)
        foreign = sum(max(mem, 1.0) for pid, mem in on_gpu if pid not in ours)
        loads.append(util.get(gpu, 0.0) * foreign / total)
    return max(loads)


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 0.0  # '[N/A]' on some boards


# -- the rule ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Load:
    """What other processes used while one sample (or one quiet check) ran."""

    seconds: float
    other_cpus: float
    """Average CPUs used by processes outside the hunt (0.9 = 90% of one core)."""
    hunt_cpus: float
    """Average CPUs used by this hunt (the probe, other slots' probes, ourselves)."""
    ncpus: int
    other_gpu: float | None = None
    """Share of our GPUs' utilisation attributed to foreign processes (None: no GPU in use)."""
    sibling_cpus: float = 0.0
    """Of hunt_cpus, the average CPUs the hunt's other probes (other slots and lanes) used while
    this probe ran; 0 for a quiet check, which runs no probe of its own."""
    busiest: tuple[tuple[int, str, float], ...] = ()
    """(pid, command, CPUs) of the foreign processes that used the most CPU, busiest first."""
    reference_cpus: float | None = None
    """The other load this sample is compared with (ContentionGuard.judge): the level of the
    samples before it, so its pair partner's or the one its partner will be compared with; None
    for a hunt's first reading and for a quiet check."""

    @property
    def machine_share(self) -> float:
        return self.other_cpus / self.ncpus

    def without_siblings(self) -> "Load":
        """This load had the hunt's other probes not run."""
        return dataclasses.replace(self, hunt_cpus=max(self.hunt_cpus - self.sibling_cpus, 0.0), sibling_cpus=0.0)

    def to_json(self) -> dict[str, float | int | None]:
        return {"other_cpus": round(self.other_cpus, 3), "machine_share": round(self.machine_share, 4),
                "hunt_cpus": round(self.hunt_cpus, 3), "sibling_cpus": round(self.sibling_cpus, 3),
                "ncpus": self.ncpus,
                "other_gpu": None if self.other_gpu is None else round(self.other_gpu, 3),
                "seconds": round(self.seconds, 3),
                "reference_cpus": None if self.reference_cpus is None else round(self.reference_cpus, 3)}

    def describe(self) -> str:
        text = f"other processes use {self.other_cpus:.1f} of {self.ncpus} CPUs"
        if self.other_gpu:
            text += f" and {self.other_gpu:.0%} of the GPU"
        if self.busiest:
            text += " (busiest: " + ", ".join(f"{command} (pid {pid}, {cpus:.1f} CPUs)"
                                              for pid, command, cpus in self.busiest) + ")"
        return text


@dataclass(frozen=True)
class BusyRule:
    """When a sample counts as taken under contention (defaults in config.HuntConfig;
    docs/contention.md). A steady load is not contention: both samples of a pair run under it, and
    the pair cancels it."""

    cpus: float
    share: float
    gpu: float

    def floor(self, ncpus: int) -> float:
        """Other load a quiet machine may have: busy_cpus, or busy_share of a large machine's cores."""
        return max(self.cpus, self.share * ncpus)

    def change_cpus(self, load: Load) -> float:
        """How far other load may move from the level it is compared with before the sample is
        contended: half the quiet floor (0.25 CPU on 2 cores, 6.4 on 128), at least the reading's
        resolution over the sample's window."""
        return max(self.floor(load.ncpus) / 2, _resolution(load))

    @staticmethod
    def full(load: Load) -> bool:
        """The cores were full: other and hunt load left less than FULL_IDLE_SHARE of them idle
        (0.1 CPU of 2), or less than the reading's resolution."""
        idle = load.ncpus - load.other_cpus - load.hunt_cpus
        return idle < max(FULL_IDLE_SHARE * load.ncpus, _resolution(load))

    def changed(self, load: Load) -> bool:
        """The other load moved from its level during this sample (load.reference_cpus)."""
        return (load.reference_cpus is not None
                and abs(load.other_cpus - load.reference_cpus) > self.change_cpus(load))

    def reason(self, load: Load) -> str | None:
        """Why `load` is contention, or None. See docs/contention.md."""
        if self.changed(load):
            return (f"other load changed: {load.other_cpus:.1f} CPUs during the sample, {load.reference_cpus:.1f} "
                    f"before (by more than {self.change_cpus(load):.2g})")
        oversubscribed = self.full(load)
        if oversubscribed and load.other_cpus > self.cpus:
            return (f"other load {load.other_cpus:.1f} CPUs while the hunt used {load.hunt_cpus:.1f} "
                    f"of {load.ncpus}: cores oversubscribed")
        # The hunt's other probes are load like any other job's where they left this one short of
        # CPU time; below that they are the company every sample of the hunt has (the concurrency
        # is in the sample key), so they do not count.
        if oversubscribed and load.other_cpus + load.sibling_cpus > self.cpus:
            return (f"the hunt's other probes used {load.sibling_cpus:.1f} CPUs beside this one (other load "
                    f"{load.other_cpus:.1f}, the hunt {load.hunt_cpus:.1f} of {load.ncpus}): cores oversubscribed")
        if load.other_gpu is not None and load.other_gpu > self.gpu:
            return f"other GPU load {load.other_gpu:.0%} > {self.gpu:.0%}"
        return None

    def by_the_hunt(self, load: Load) -> bool:
        """Contended only because of the hunt's own other probes: no wait for quiet would help."""
        return self.reason(load) is not None and self.reason(load.without_siblings()) is None


def _resolution(load: Load) -> float:
    """CPUs a reading of other load over `load`'s window may be off by (RESOLUTION_TICKS)."""
    return RESOLUTION_TICKS / (CLK_TCK * max(load.seconds, 1e-3))


# -- the guard --------------------------------------------------------------------------------

@dataclass
class Window:
    started: float
    busy: float
    hunt: float
    gpu_loads: list[float] = field(default_factory=list)
    thread: int | None = None
    """The thread that runs this window's probe (its probe's group is registered under it); None
    for a quiet check."""
    sibling_first: dict[int, float] = field(default_factory=dict)
    """Per other probe of the hunt: its session's CPU seconds when this window first saw it (0 for
    one that started after the window did)."""
    sibling_last: dict[int, float] = field(default_factory=dict)
    """Per other probe: its session's CPU seconds at the last reading."""

    def sibling_seconds(self) -> float:
        return sum(max(last - self.sibling_first[g], 0.0) for g, last in self.sibling_last.items())
    foreign: dict = field(default_factory=dict)
    """HuntCpu.foreign() at the start: whose CPU the window's other load was."""


class WaitCancelled(Exception):
    """A wait for a quiet machine ended because the hunt is stopping (ContentionGuard.cancel)."""


class ContentionGuard:
    """Measures other load over windows, follows its level, waits for quiet within a share of the
    hunt's wall time, and gives up on a load that keeps changing after max_wait_s."""

    def __init__(self, rule: BusyRule, *, max_wait_s: float, quiet_window_s: float = 2.0,
                 wait_share: float = MAX_WAIT_SHARE,
                 proc_stat: Callable[[], tuple[float, int]] | None = None,
                 hunt_cpu: HuntCpu | None = None,
                 gpu_reader: Callable[[], object] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep,
                 on_wait: Callable[[str], None] | None = None,
                 probe_groups: Callable[[], Mapping[int, int]] | None = None):
        self.rule = rule
        self.max_wait_s = max_wait_s
        self.quiet_window_s = quiet_window_s
        self.wait_share = wait_share
        """Waits for quiet add up to at most this share of the wall time since the guard started."""
        self._proc_stat = proc_stat or (lambda: read_proc_stat())  # looked up per call: tests scope it
        self._hunt_cpu = hunt_cpu or HuntCpu()
        if gpu_reader is None and shutil.which("nvidia-smi") is not None:
            gpu_reader = read_gpu_apps
        self._gpu_reader = gpu_reader
        self._clock = clock
        self._sleep = sleep
        self.on_wait = on_wait
        self._probe_groups = probe_groups
        """{process group: thread ident} of the hunt's probes running now (probe/runner.py), to
        tell a window's own probe from its siblings; None: no sibling load is seen."""
        self._open: list[Window] = []
        self._lock = threading.Lock()
        self._sampler: threading.Thread | None = None
        self._stop = threading.Event()
        self._cancelled = threading.Event()
        self.waited_s = 0.0
        self.started = clock()
        """When the guard started (the hunt's start): the wait budget is a share of the time since."""
        self._level: float | None = None
        """The level of other load samples are compared with: the last reading that was not off it."""
        self._off: float | None = None
        """The last reading off that level, while the load has not settled again."""
        self._measured_through: float | None = None
        """The level at which a wait for quiet ran out: while the load stays there, samples on
        oversubscribed cores are used as they are."""
        self.level_changes = 0
        """How often the load moved to another level and stayed there (docs/contention.md)."""
        self.ncpus: int | None = None
        busy, ncpus = self._proc_stat()
        self._first_gap: tuple[float, float, float, int] | None = (busy, self._hunt_cpu.total(), self.started, ncpus)
        """(busy, hunt, clock, CPUs) at the start: the load before the first probe is the first level."""

    def cancel(self) -> None:
        """End every wait_quiet in progress (with WaitCancelled): the hunt is stopping, and a
        slot thread waiting for quiet must not hold it up for --max-wait."""
        self._cancelled.set()

    def resume(self) -> None:
        """Let waits wait again (a new round)."""
        self._cancelled.clear()

    def start(self, *, probe: bool = True) -> Window:
        """Open a window over a probe run by the calling thread (`probe=False`: a quiet check)."""
        busy, ncpus = self._proc_stat()
        window = Window(started=self._clock(), busy=busy, hunt=self._hunt_cpu.total(),
                        thread=threading.get_ident() if probe else None,
                        foreign=self._hunt_cpu.foreign())
        with self._lock:
            gap, self._first_gap = (self._first_gap, None) if probe else (None, self._first_gap)
            if gap is not None and self._level is None and window.started - gap[2] >= FIRST_GAP_S:
                seconds = window.started - gap[2]
                other = max(busy - gap[0] - (window.hunt - gap[1]), 0.0) / seconds
                first = Load(seconds=seconds, other_cpus=min(other, float(ncpus)), hunt_cpus=0.0, ncpus=ncpus)
                self._read_level(first.other_cpus, self.rule.change_cpus(first))
            self._note_siblings([window], first=True)
            self._open.append(window)
            if self._sampler is None:
                self._stop.clear()
                self._sampler = threading.Thread(target=self._sample_loop, daemon=True)
                self._sampler.start()
        return window

    def finish(self, window: Window) -> Load:
        # the same order as start(): the machine, the clock, then the hunt (a scan of every
        # process, tens of ms while the hunt's probes run on). Both windows then have one length;
        # read the other way round at one end, the machine's was two scans longer and the hunt's
        # own CPU in them read as other load
        busy, ncpus = self._proc_stat()
        seconds = max(self._clock() - window.started, 1e-6)
        hunt = self._hunt_cpu.total()
        with self._lock:
            self._note_siblings(self._open)   # a fresh scan: every open window takes it
            self._open.remove(window)
            sampler = self._sampler if not self._open else None
            if sampler is not None:
                self._sampler = None
                self._stop.set()
        if sampler is not None:
            sampler.join(timeout=5)
        gpu = window.gpu_loads
        hunt_cpus = max(hunt - window.hunt, 0.0) / seconds
        other = max(busy - window.busy - (hunt - window.hunt), 0.0) / seconds
        busiest = (self._hunt_cpu.busiest(window.foreign, seconds, at_most=min(other, float(ncpus)))
                   if other > 0 else ())
        return Load(seconds=seconds, other_cpus=min(other, float(ncpus)), hunt_cpus=hunt_cpus,
                    ncpus=ncpus, other_gpu=sum(gpu) / len(gpu) if gpu else None,
                    sibling_cpus=min(window.sibling_seconds() / seconds, hunt_cpus), busiest=busiest)

    def _note_siblings(self, windows: list[Window], *, first: bool = False) -> None:
        """Read the other probes' CPU into each probe window, from the last process scan (under
        self._lock). A sibling that ends within a window keeps its last reading (taken at most
        SAMPLER_INTERVAL_S before): its last seconds go unseen, never another probe's."""
        if self._probe_groups is None:
            return
        groups = self._probe_groups()
        readings = self._hunt_cpu.sessions
        for window in windows:
            if window.thread is None:
                continue
            for group, thread in groups.items():
                if thread == window.thread or group not in readings:
                    continue
                window.sibling_first.setdefault(group, readings[group] if first else 0.0)
                window.sibling_last[group] = max(window.sibling_last.get(group, 0.0), readings[group])

    def measure(self, seconds: float) -> Load:
        """Other load over the next `seconds` (doctor, quiet checks)."""
        window = self.start(probe=False)
        self._sleep(seconds)
        return self.finish(window)

    # -- the level of the load, and what follows a contended sample ------------------------------

    def judge(self, load: Load) -> Load:
        """`load` (a probe's window) with the other load it is compared with (`reference_cpus`),
        and the level moved on. The level is the last reading that was on it: a sample within
        BusyRule.change_cpus of it is steady and becomes the level (so a sample is compared with
        the one before it, its pair partner or its partner's neighbour); one further off is a
        change, and when the next reading agrees with that one the load has moved and stayed for
        as long as a pair takes: that is the level now, compared with the reading that confirmed it."""
        with self._lock:
            self.ncpus = load.ncpus
            reference = self._read_level(load.other_cpus, self.rule.change_cpus(load))
        return dataclasses.replace(load, reference_cpus=reference)

    def _read_level(self, other: float, tolerance: float) -> float | None:
        """One reading of other load against the level (under self._lock); the reference it is
        compared with (None: the first reading, which sets the level)."""
        level, off = self._level, self._off
        if level is None:
            self._level = other
            return None
        if abs(other - level) <= tolerance:
            self._level, self._off = other, None
            return level
        if off is not None and abs(other - off) <= tolerance:
            self._level, self._off = other, None
            self.level_changes += 1
            return off
        self._off = other
        return level

    def wall_s(self) -> float:
        """Seconds since the guard started: the hunt's wall time the wait budget is a share of."""
        return self._clock() - self.started

    def wait_room(self) -> bool:
        """Whether one more quiet-check window fits in the wait budget: waits add up to at most
        wait_share of the wall time since the guard started."""
        with self._lock:
            waited = self.waited_s
        return waited + self.quiet_window_s <= self.wait_share * self.wall_s()

    def measured_through(self, load: Load) -> bool:
        """Whether a contended sample is used as it is: its load is steady (no change, none of the
        hunt's own making) and the wait for quiet has no room left in the budget, or ran out
        already at this level of load (docs/contention.md)."""
        if self.rule.changed(load) or self.rule.by_the_hunt(load):
            return False
        tolerance = self.rule.change_cpus(load)
        with self._lock:
            if self._measured_through is not None and abs(load.other_cpus - self._measured_through) <= tolerance:
                return True
        if self.wait_room():
            return False
        with self._lock:
            self._measured_through = load.other_cpus
        return True

    def before_retake(self, load: Load, *, what: str = "", since: float | None = None) -> float:
        """After a contended sample (`load`, judged), before it is taken again; returns when this
        sample's contention began (`since`, pass it back on its next re-take).

        A change of the load is not waited for: the re-take is the next reading, and two readings
        that agree settle the level. Once the load has kept changing for max_wait_s since `since`,
        MachineBusy (exit 8). Oversubscribed cores (or a shared GPU): wait_quiet."""
        if self._cancelled.is_set():
            raise WaitCancelled(f"stopped waiting for a quiet machine{' ' + what if what else ''}")
        now = self._clock()
        since = now if since is None else since
        if self.rule.changed(load):
            if now - since >= self.max_wait_s:
                raise MachineBusy(f"machine busy: other load kept changing for {now - since:.0f} s"
                                  f"{' ' + what if what else ''} (last {load.other_cpus:.1f} CPUs, "
                                  f"{load.reference_cpus:.1f} before; {load.describe()}); samples taken while it "
                                  f"changes are kept apart, never used (free the machine, or raise --max-wait / "
                                  f"--busy-cpus)")
            return since
        self.wait_quiet(what=what, need=load.hunt_cpus, level=load.other_cpus)
        return since

    def wait_quiet(self, *, what: str = "", need: float = 0.0, level: float | None = None) -> float:
        """Block until a quiet-check window leaves a probe using `need` CPUs its cores (the rule
        finds nothing, the window read as if the probe ran) and, given the `level` of other load
        that filled them, that load has gone down by more than BusyRule.change_cpus; returns the
        seconds waited. The wait stops, without quiet, when the next window would pass the wait
        budget (wait_room) or max_wait_s: the load at `level` is then measured through
        (measured_through)."""
        waited = 0.0
        while True:
            if self._cancelled.is_set():
                raise WaitCancelled(f"stopped waiting for a quiet machine{' ' + what if what else ''}")
            if not self.wait_room() or waited + self.quiet_window_s > self.max_wait_s:
                with self._lock:
                    self._measured_through = self._level if level is None else level
                    total = self.waited_s
                if self.on_wait is not None:
                    self.on_wait(f"machine busy: waited {total:.0f} s for quiet (at most {self.wait_share:.0%} of "
                                 f"the hunt's wall time, --max-wait-share); samples are taken under this load "
                                 f"as it is, each pair under one load")
                return waited
            started = self._clock()
            load = self.measure(self.quiet_window_s)
            spent = self._clock() - started
            waited += spent
            with self._lock:
                self.waited_s += spent
                total = self.waited_s
            # quiet: the window leaves the probe its cores, and the load that filled them has gone
            # down (at the level it was, a re-take would only find the cores full again)
            as_if_probed = dataclasses.replace(load, hunt_cpus=max(load.hunt_cpus, need))
            lighter = level is None or load.other_cpus < level - self.rule.change_cpus(load)
            if lighter and self.rule.reason(as_if_probed) is None:
                return waited
            if self.on_wait is not None:
                self.on_wait(f"machine busy: {load.describe()}; waiting ({total:.0f} s, at most "
                             f"{self.wait_share:.0%} of the hunt's wall time)")

    def _sample_loop(self) -> None:
        ticks_per_scan = max(1, round(SAMPLER_INTERVAL_S / ORPHAN_INTERVAL_S))
        tick = 0
        while not self._stop.wait(ORPHAN_INTERVAL_S):
            tick += 1
            if tick % ticks_per_scan:
                self._hunt_cpu.refresh_orphans()
                if self._probe_groups is not None:
                    self._hunt_cpu.refresh_sessions(self._probe_groups())
                    with self._lock:
                        self._note_siblings(self._open)
                continue
            self._hunt_cpu.total()  # finds new orphans of probes and keeps their last reading
            with self._lock:
                self._note_siblings(self._open)
            scans = tick // ticks_per_scan
            if self._gpu_reader is not None and scans % GPU_EVERY_SCANS == 1:
                load = foreign_gpu_load(self._gpu_reader(), self._hunt_cpu.pids)
                if load is not None:
                    with self._lock:
                        for window in self._open:
                            window.gpu_loads.append(load)
