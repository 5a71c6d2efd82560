"""A simulated uncommitted diff for the hunk hunt's tests and benchmarks (no git, no process).

n hunks h000, h001, ... in files of `per_file` (and functions of `per_function`, when given); each
hunk may slow the step on its own (`effects`), a set of hunks only together (`joint`), and a hunk
may not run without others (`needs`: an import of a file another hunk adds)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["SimulatedDiff", "feature_chain"]


@dataclass
class SimulatedDiff:
    n: int
    effects: dict[str, float] = field(default_factory=dict)
    """Slowdown (fraction of tok/s) of a hunk on its own."""
    joint: list[tuple[frozenset[str], float]] = field(default_factory=list)
    """Slowdown only when every hunk of the set is applied."""
    needs: dict[str, frozenset[str]] = field(default_factory=dict)
    """A hunk that does not run without these."""
    stalls: dict[str, tuple[float, float]] = field(default_factory=dict)
    """A hunk that sends a share of the runs to a factor of their speed (a stall every few
    steps): (share, factor). Its slowdown is that of the mean, not of every run."""
    per_file: int = 5
    per_function: int | None = None
    """Hunks per function (a level of `groups` between files and hunks); None: no such level."""
    base_tok_s: float = 1000.0

    @property
    def ids(self) -> list[str]:
        return [f"h{i:03d}" for i in range(self.n)]

    def groups(self) -> list[list[list[str]]]:
        """Files, (functions,) hunks: the hierarchy the hunk hunt gets from a diff."""
        ids = self.ids
        files = [ids[i:i + self.per_file] for i in range(0, self.n, self.per_file)]
        levels = [files]
        if self.per_function:
            levels.append([f[j:j + self.per_function] for f in files for j in range(0, len(f), self.per_function)])
        return levels + [[[i] for i in ids]]

    def runs(self, subset: frozenset[str]) -> bool:
        """BASE + subset runs: no hunk in it lacks one it needs."""
        return all(self.needs.get(h, frozenset()) <= subset for h in subset)

    def tok_s(self, subset: frozenset[str]) -> float:
        """The noiseless tok/s of BASE + subset (slowdowns compound)."""
        factor = math.prod(1 - self.effects.get(h, 0.0) for h in subset)
        return self.base_tok_s * factor * math.prod(1 - e for members, e in self.joint if members <= subset)

    def culprits(self) -> set[frozenset[str]]:
        """What a right answer names: each slow hunk, each jointly slow set, each stall."""
        return {frozenset({h}) for h in (*self.effects, *self.stalls)} | {m for m, _ in self.joint}

    def stall_factor(self, subset: frozenset[str], draws) -> float:
        """The factor of one run of BASE + subset from its stalls, `draws` giving a uniform draw
        for each stall hunk of the diff in order (each drawn whether in the subset or not)."""
        factor = 1.0
        for hunk, (share, slow) in sorted(self.stalls.items()):
            if draws() < share and hunk in subset:
                factor = slow
        return factor


def feature_chain(n: int, positions, step: float = 0.10, **diff_args) -> tuple[SimulatedDiff, dict[str, frozenset[str]]]:
    """A new feature in six hunks, slow only all together: at the five sorted `positions` (below
    n - 1) its import, an object built from it, its call, a config field and the value that turns
    it on, and the new module itself last (an untracked file, last in path order). Returns the
    diff and the needs the diff shows (the import needs the module, the object the import's name);
    the object and the value also crash without the field, the call without the object."""
    imp, build, call, field_hunk, value = (f"h{i:03d}" for i in sorted(positions))
    module = f"h{n - 1:03d}"
    told = {imp: frozenset({module}), build: frozenset({imp})}
    needs = {**told, build: frozenset({imp, field_hunk}), value: frozenset({field_hunk}), call: frozenset({build})}
    group = frozenset({imp, build, call, field_hunk, value, module})
    return SimulatedDiff(n, joint=[(group, step)], needs=needs, **diff_args), told
