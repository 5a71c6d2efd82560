"""What a fresh sample runs: the probe of the hunt's config, in the arm a request asks for, with
the project's import roots first on its PYTHONPATH; after each round, the check of what its
processes imported (probe/isolation.py). The tool itself never imports the measured code: it
only reads the records the probes leave."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable, Sequence

from regressbisect.probe.isolation import Isolation, ProbeImports
from regressbisect.probe.runner import ProbeSpec


class SampleProbe:
    """The probe a sample source runs, and the import check around it."""

    def __init__(self, spec: ProbeSpec, isolation: Isolation | None,
                 on_imports: Callable[[frozenset[str]], None] | None):
        self.spec = spec
        self.isolation = isolation
        """Import roots first on every probe's PYTHONPATH, and the check of what it imported."""
        self._on_imports = on_imports
        """Told, after each round and before it is stored, the files outside the worktrees its
        probes imported (the hunt puts them in the sample key: `key_for` reads it)."""

    def spec_for(self, *, instrumented: bool, work: bool) -> ProbeSpec:
        """The probe in a request's arm: with the counters shim, and counting the work per step."""
        return dataclasses.replace(self.spec, instrument=instrumented, work=work)

    def imports_in(self, worktree: Path) -> ProbeImports | None:
        """Where a probe in `worktree` records its imports, and the import roots it runs with."""
        return self.isolation.prepare(worktree) if self.isolation is not None else None

    def check_round(self, recorded: Sequence[ProbeImports]) -> None:
        """IsolationError when a probe of the round imported the project from elsewhere; else
        the files it imported from outside the worktrees are told (`on_imports`)."""
        if recorded:
            read = self.isolation.verify_round(recorded)
            if read and self._on_imports is not None:
                self._on_imports(read)
