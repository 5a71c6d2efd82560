#!/usr/bin/env python
"""Simulate `regressbisect run --drill` on a real git history with a fake probe; print a table.

    python scripts/sim_drill.py [--hunks 10] [--effect 0.015] [--large 0] [--seeds 1-5] [--cv 0.02]

The history: BASE holds ten modules of twenty settings that return 0; a docs commit; the culprit
commit, which sets `--hunks` settings (each its own hunk, spread over the modules), each making the
step `--effect` slower (costs add: tok/s = 1000 / (1 + the sum)), the first `--large` slower
instead; a docs commit after it. The probe is a fake executor (as in tests/test_hunkhunt.py): it
reads the candidate's worktree (the commit checked out, or the parent plus a subset's patch) and
derives tok/s from the settings there, times lognormal noise (`--cv`, seeded per hunt). The
commit hunt and its drill are the real ones (hunts/commits.py, hunts/hunks.py), in a temporary
folder; the busy-machine guard is off (the fake probe does not feel the load).

Per seed: the probes of the commit search (the hunt's less the drill's), the drill's probes and
its cap (`search.budget.drill_probe_cap`; '-' in versions without one), its verdict, each named
group's hunks and step with its 95% interval, the share of the commit's step it leaves, and the
reason when none was named. The default is the case of ten hunks of 1.5% at min_effect 2%.
"""
from __future__ import annotations

import argparse
import math
import random
import re
import statistics
import tempfile
from pathlib import Path

from tabulate import tabulate

import _common  # noqa: E402,F401  (puts the repository on sys.path)
from regressbisect.config import build_config  # noqa: E402
from regressbisect.git.history import History  # noqa: E402
from regressbisect.hunts.commits import CommitHunt  # noqa: E402
from regressbisect.samples import ProbeOutcome, Sample  # noqa: E402
from regressbisect.testing.gitrepo import commit, make_repo  # noqa: E402

MODULES = 10
SETTINGS = 20


def module_text(index: int, values: dict[int, int]) -> str:
    """A module of twenty settings, far enough apart that each edit is its own hunk."""
    return f'"""module {index}"""\n' + "".join(f"def setting_{k}():\n    return {values.get(k, 0)}\n\n\n"
                                               for k in range(SETTINGS))


def make_history(path: Path, effects: list[float]) -> list[str]:
    """BASE, docs, the culprit commit (one setting per effect, each 100000 + the effect in
    thousandths, spread over the modules), docs. Returns the shas."""
    make_repo(path, [{f"pkg/m{m}.py": module_text(m, {}) for m in range(MODULES)} | {"README.md": "x\n"}])
    values: dict[int, dict[int, int]] = {m: {} for m in range(MODULES)}
    for i, effect in enumerate(effects):
        values[i % MODULES][(i // MODULES) * 2 % SETTINGS] = 100000 + round(effect * 1000)
    shas = [commit(path, {"README.md": "one\n"}, "docs")]
    shas.append(commit(path, {f"pkg/m{m}.py": module_text(m, v) for m, v in values.items()}, "many small changes"))
    shas.append(commit(path, {"README.md": "two\n"}, "docs again"))
    return [History.open(path).resolve("HEAD~3")] + shas


class Probe:
    """tok/s = 1000 / (1 + the costs the worktree's settings add), times lognormal noise."""

    def __init__(self, seed: int, cv: float):
        self.rng, self.cv, self.runs = random.Random(seed), cv, 0

    def __call__(self, spec, worktree: Path, extra_env=None) -> ProbeOutcome:
        self.runs += 1
        cost = sum((int(v) - 100000) / 1000 for p in (Path(worktree) / "pkg").glob("*.py")
                   for v in re.findall(r"return (1\d{5})\n", p.read_text()))
        value = 1000.0 / (1 + cost) * math.exp(self.rng.gauss(0.0, self.cv))
        return ProbeOutcome(sample=Sample(tok_s=value, tokens=1000, seconds=1000 / value),
                            skip_reason=None, exit_code=0, wall_seconds=0.01)


def seeds(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hunks", type=int, default=10)
    parser.add_argument("--effect", type=float, default=0.015, help="slowdown of each hunk (fraction)")
    parser.add_argument("--large", type=int, default=0, help="how many of the hunks are 12%% slower instead")
    parser.add_argument("--seeds", default="1-5", help="probe noise seeds, e.g. 1-5")
    parser.add_argument("--cv", type=float, default=0.02, help="probe noise (lognormal sigma)")
    args = parser.parse_args(argv)
    effects = [0.12] * args.large + [args.effect] * (args.hunks - args.large)
    rows, drills, searches = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        shas = make_history(repo, effects)
        for seed in seeds(args.seeds):
            probe = Probe(seed, args.cv)
            config = build_config({}, {"cmd": "fake", "instrument": "off", "drill": True, "busy_check": False})
            report = CommitHunt(History.open(repo), shas[0], shas[-1], config, store_path=Path(tmp) / f"{seed}.sqlite",
                                probe_runner=probe).run().report
            culprit = next((c for c in report.get("culprits") or () if c.get("commit") == shas[2]), None)
            drill = (culprit or {}).get("hunks") or {}
            search = report["probes"] - (drill.get("probes") or 0)
            named = "; ".join(
                f"{'+'.join(h['file'].split('/')[-1] + ':' + str(h['lines'][0]) for h in g['hunks'])} "
                f"{g['step_pct']:+.1f}% [{g['ci95_pct'][0]:+.1f}, {g['ci95_pct'][1]:+.1f}]"
                for g in drill.get("culprits") or ())
            share = drill.get("unexplained_share")
            if share is None and drill.get("culprits"):     # versions that kept only its interval
                share = 1 - sum(g["share_of_gap"] or 0 for g in drill["culprits"])
            interval = drill.get("unexplained_share_ci95")
            remainder = (f"{share:.0%}" + (f" [{interval[0]:.0%}, {interval[1]:.0%}]" if interval else "")
                         if share is not None else "-")
            rows.append([seed, report["verdict"], search, drill.get("probes", "-"), drill.get("max_probes", "-"),
                         drill.get("verdict", "-"), named or "-", remainder, (drill.get("reason") or "")[:90]])
            drills.append(drill.get("probes") or 0)
            searches.append(search)
    print(f"{args.hunks} hunks ({args.large} of 12%, the rest {args.effect:.1%} each), {args.cv:.0%} noise, "
          f"seeds {args.seeds}: drill probes mean {statistics.mean(drills):.0f} (median "
          f"{statistics.median(drills):.0f}), commit search {statistics.mean(searches):.0f}")
    print(tabulate(rows, headers=["seed", "hunt", "search probes", "drill probes", "drill cap", "drill",
                                  "named (step, 95% CI)", "drill remainder", "reason"], tablefmt="github"))


if __name__ == "__main__":
    main()
