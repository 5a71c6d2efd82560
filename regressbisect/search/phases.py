"""The ask/tell runner of a search written as coroutine phases: the commit search and the hunk hunt.

A phase is a coroutine (`Phase`): it yields a `Batch` of requests whose samples do not depend on
each other's values (a round of the localisation, a step's pairs, the ABBA pair of a hunk test),
is sent their values, and returns what it found. `PhaseRunner` hands a batch out a few slots at a
time (`ask`), takes each value back (`tell`), and resumes the phase once the batch is complete, so
every decision is made on the values in the order the requests were asked: replaying a hunt's
stored samples replays its decisions. The searches wrap it (`CommitSearch.next_batch` /
`record`, `hunkdecide.HunkDecider`), and search/driver.py's `drive` feeds either.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generator, Sequence

__all__ = ["Batch", "OutOfProbes", "Phase", "PhaseRunner"]


@dataclass(frozen=True)
class Batch:
    """The samples one look of a phase needs, in the order a single slot takes them; every one is
    independent of the others' values, so several slots may take them side by side (a hunk hunt's:
    (subset, purpose) each; the commit search's: one `Measure` and its pairing tag each).
    `stop_after_skip`: when that request's run is skipped the requests after it are not needed (a
    round whose tested subset does not run has no partner for its other samples): one slot does
    not take them, and their value is None."""

    requests: tuple[Any, ...]
    stop_after_skip: int | None = None


Phase = Generator[Batch, Sequence["float | None"], object]
"""A phase as a coroutine: yields a `Batch`, is sent its values (one per request, in order),
returns what it found. `PhaseRunner` runs it, a few slots at a time."""


class OutOfProbes(Exception):
    """Thrown into (or raised inside) a search's phases once it has spent `SearchSettings.max_probes`
    measures: the phase that holds names re-raises it with them (`names`), and the search reports
    what it found before the cap."""

    def __init__(self, names: object = None):
        super().__init__("the hunt's probe cap ran out")
        self.names = names


class PhaseRunner:
    """Runs one phase coroutine ask/tell. `ask(slots)` hands out the current batch's next requests
    (at most `slots`), `tell(position, value)` takes one back; once every request of a batch is
    told (or the batch's stop request was skipped) the phase is sent the batch's values and yields
    the next. `done` once the phase has returned, its value in `value`."""

    def __init__(self, phase: Phase):
        self._phase = phase
        self._started = False
        self._batch: Batch | None = None
        self._values: list[float | None] = []
        self._next = 0              # the batch's first request not handed out yet
        self._out: list[int] = []   # requests handed out, not told yet (positions in the batch)
        self.done = False
        self.value: object = None
        """What the phase returned, once `done`."""

    def ask(self, slots: float, *, admit: Callable[[Any], bool] = lambda request: True,
            at_cap: Callable[[int], bool] = lambda more: False) -> list[tuple[int, Any]]:
        """The next requests to measure, (position in the batch, request) each, at most `slots`;
        [] once the phase is done. `admit(request)`: whether to measure it at all (False: its value
        stays None, without a probe); `at_cap(more)`: the search has spent its probes (with `more`
        about to be handed out), which throws `OutOfProbes` into the phase."""
        while not self.done:
            if self._batch is None or self._batch_done():
                self._advance()
                continue
            if at_cap(0):
                self._advance(OutOfProbes())
                continue
            out: list[tuple[int, Any]] = []
            requests = self._batch.requests
            while self._next < len(requests) and len(out) < slots and not at_cap(len(out)):
                if admit(requests[self._next]):
                    self._out.append(self._next)
                    out.append((self._next, requests[self._next]))
                self._next += 1
                if self._stopped():
                    break
            if out:
                return out
        return []

    def settle(self) -> None:
        """Resume the phase while its batch is complete (it decides what the values told allow),
        handing nothing out: then `done` says whether it has anything left to ask."""
        while not self.done and not self._out and (self._batch is None or self._batch_done()):
            self._advance()

    def tell(self, position: int, value: float | None) -> None:
        """The value of the request handed out at `position` (None: its run was skipped)."""
        self._out.remove(position)
        self._values[position] = value

    def waiting(self) -> list[tuple[int, Any]]:
        """Requests handed out and not told yet, (position, request) each, in the order asked."""
        return [(p, self._batch.requests[p]) for p in self._out]

    def _stopped(self) -> bool:
        """The batch's stop request was skipped: the requests after it are not needed."""
        stop = self._batch.stop_after_skip
        return stop is not None and stop < self._next and stop not in self._out and self._values[stop] is None

    def _batch_done(self) -> bool:
        return not self._out and (self._next == len(self._batch.requests) or self._stopped())

    def _advance(self, stop: OutOfProbes | None = None) -> None:
        """Send the finished batch's values (the first batch: start) and take the next one; `stop`:
        throw it into the phase instead (the probe cap: it ends with what it found)."""
        try:
            if stop is not None:
                batch = self._phase.throw(stop)
            elif not self._started:
                self._started = True
                batch = next(self._phase)
            else:
                batch = self._phase.send(self._values)
        except StopIteration as finished:
            self.done, self.value = True, finished.value
            self._batch = None
            return
        self._batch, self._values, self._next = batch, [None] * len(batch.requests), 0
