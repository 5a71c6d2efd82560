"""Live progress of a hunt on stderr: the GOOD..BAD range drawn as it narrows.

On a terminal a Rich live panel is redrawn after every sample; elsewhere (CI logs, pipes, tests)
one plain line per sample is printed, so logs stay readable.
"""
from __future__ import annotations

import sys
import time
from collections import deque
from dataclasses import dataclass
from typing import Sequence

from rich.console import Console
from rich.live import Live
from rich.text import Text

from regressbisect.metric import DEFAULT_UNIT


@dataclass
class ProgressState:
    phase: str = "starting"
    total: int = 0
    """Number of candidates in the range (GOOD and BAD included)."""
    interval: tuple[int, int] = (0, 0)
    measuring: str = ""
    probes: int = 0
    cached: int = 0
    remaining: int | None = None
    """Probes to go as shown: the hunt's estimate once it is steady (SteadyEstimate), else None."""
    last: str = ""
    jobs: str = ""
    """Scheduler jobs of this hunt (Slurm executor): queued / running / done, with their ids."""
    cost: str = ""
    """What the hunt has paid so far: probes, probe wall, measured share, GPU-seconds."""


class HuntProgress:
    """Receives hunt events; renders them live (TTY) or as log lines."""

    def __init__(self, labels: Sequence[str] = (), *, console: Console | None = None,
                 live: bool | None = None, quiet: bool = False, unit: str = DEFAULT_UNIT):
        self.unit = unit
        """Unit of the metric, as the hunt's config names it."""
        self.console = console or Console(stderr=True)
        self.labels = list(labels)
        self.state = ProgressState(total=len(labels))
        self.quiet = quiet
        self._live_enabled = self.console.is_terminal if live is None else live
        self._live: Live | None = None
        self._started = time.monotonic()
        self._remaining = SteadyEstimate()

    def __enter__(self) -> "HuntProgress":
        if self._live_enabled and not self.quiet:
            self._live = Live(self._render(), console=self.console, refresh_per_second=4, transient=True)
            self._live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)
            self._live = None

    def set_labels(self, labels: Sequence[str]) -> None:
        self.labels = list(labels)
        self.state.total = len(labels)
        self.state.interval = (0, max(0, len(labels) - 1))

    def phase(self, name: str) -> None:
        self.state.phase = name
        self._log(f"== {name}")
        self._refresh()

    def measuring(self, what: str) -> None:
        self.state.measuring = what
        self._refresh()

    def sample(self, label: str, value: float | None, skip_reason: str | None, cached: bool,
               *, probes: int, cached_total: int, interval: tuple[int, int] | None = None,
               remaining: int | None = None, note: str = "") -> None:
        self.state.probes = probes
        self.state.cached = cached_total
        self.state.remaining = self._remaining.update(remaining)
        if interval is not None:
            self.state.interval = interval
        what = f"{value:,.1f} {self.unit}" if value is not None else f"skipped ({skip_reason})"
        tag = " (cached)" if cached else ""
        self.state.last = f"{label}: {what}{tag}"
        eta = f", ~{self.state.remaining} to go" if self.state.remaining is not None else ""
        cost = f" | {self.state.cost}" if self.state.cost else ""
        self._log(f"[{probes} run, {cached_total} cached{eta}{cost}] {label} {note}: {what}{tag}")
        self._refresh()

    def cost(self, line: str) -> None:
        self.state.cost = line
        self._refresh()

    def message(self, text: str) -> None:
        self._log(text)

    def job_event(self, event) -> None:
        """A scheduler job changed (slurm.JobEvent); called from the slots' threads."""
        self.state.jobs = job_summary(event.queued, event.running, event.done)
        detail = f" {event.detail}" if event.detail else ""
        self._log(f"job {event.job_id} ({event.label}): {event.status}{detail}   [{self.state.jobs}]")
        self._refresh()

    # -- rendering -------------------------------------------------------------------------

    def _log(self, line: str) -> None:
        if self.quiet:
            return
        if self._live is not None:
            self._live.console.print(line, highlight=False)
        else:
            print(line, file=sys.stderr, flush=True)

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._render())

    def _render(self) -> Text:
        s = self.state
        text = Text()
        text.append(f"regressbisect: {s.phase}", style="bold")
        elapsed = time.monotonic() - self._started
        eta = f"  ~{s.remaining} probes to go" if s.remaining is not None else ""
        text.append(f"   {s.probes} run, {s.cached} cached, {elapsed:.0f}s{eta}\n")
        if s.cost:
            text.append(f" cost: {s.cost}\n", style="dim")
        if s.total:
            text.append(range_bar(s.total, s.interval))
            lo, hi = s.interval
            lo_label = self.labels[lo] if lo < len(self.labels) else lo
            hi_label = self.labels[hi] if hi < len(self.labels) else hi
            text.append(f"\n live interval: #{lo} {lo_label} .. #{hi} {hi_label}\n")
        if s.measuring:
            text.append(f" measuring: {s.measuring}\n", style="cyan")
        if s.jobs:
            text.append(f" jobs: {s.jobs}\n", style="cyan")
        if s.last:
            text.append(f" last: {s.last}", style="dim")
        return text


class SteadyEstimate:
    """The hunt's estimate of the probes to go, as shown: only once its last `window` values lie
    within a quarter of each other (plus a few probes, so that a count down to 0 stays shown), and
    rounded to two significant digits. The estimate jumps where the search changes phase (the
    control arm's ~21 becomes the bisection's ~508 two probes later, then it falls fast); a number
    shown while it jumps reads as a promise broken."""

    def __init__(self, window: int = 4, spread: float = 1.25, slack: int = 4):
        self._recent: deque[int] = deque(maxlen=window)
        self._spread, self._slack = spread, slack

    def update(self, estimate: int | None) -> int | None:
        """Record the latest estimate; return what to show (None: nothing)."""
        if estimate is None:
            self._recent.clear()
            return None
        self._recent.append(estimate)
        if len(self._recent) < (self._recent.maxlen or 1):
            return None
        if max(self._recent) > self._spread * min(self._recent) + self._slack:
            return None
        return int(float(f"{estimate:.2g}"))


def job_summary(queued: Sequence[str], running: Sequence[str], done: int) -> str:
    """'1 queued (1234), 2 running (1232, 1233), 7 done'."""
    def ids(jobs: Sequence[str]) -> str:
        return f" ({', '.join(jobs)})" if jobs else ""
    return f"{len(queued)} queued{ids(queued)}, {len(running)} running{ids(running)}, {done} done"


def range_bar(total: int, interval: tuple[int, int], width: int = 60) -> Text:
    """GOOD ... BAD as a bar; the part still searched is highlighted."""
    lo, hi = interval
    cells = min(total, width)
    bar = Text(" GOOD ")
    for c in range(cells):
        first = c * total // cells
        last = max(first, (c + 1) * total // cells - 1)
        inside = last >= lo and first <= hi
        bar.append("█" if inside else "·", style="yellow" if inside else "dim")
    bar.append(" BAD")
    return bar
