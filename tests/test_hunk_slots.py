"""Hunk candidates side by side: `hunks --slots 2` runs each round's subsets at once, one per slot
(its own worktree and patch), and names what one slot names."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from regressbisect.cli import main
from regressbisect.store import Store
from regressbisect.testing.gitrepo import snapshot_checkout, write_files
from tests.test_hunkhunt import culprit_sets, hunk_line, make_dirty_repo

SLEEPING_BENCH = '''\
import json, math, random, re, time
from pathlib import Path
cost = sum((int(v) - 100000) / 1000 for p in Path("pkg").glob("*.py")
           for v in re.findall(r"return (1\\d{5})\\n", p.read_text()) if v != "100000")
time.sleep(0.1)             # a probe that waits, on no CPU: slots side by side cost no time
value = 1000.0 / (1 + cost) * math.exp(random.gauss(0, 0.01))
print("@regressbisect " + json.dumps({"tokens": 1000, "seconds": 1000 / value, "tok_s": value}))
'''


def hunt_on_slots(repo: Path, tmp_path: Path, slots: int) -> tuple[dict, list[tuple[float, float]]]:
    out, store = tmp_path / f"hunks-{slots}.json", tmp_path / f"store-{slots}.sqlite"
    try:
        main(["hunks", "-C", str(repo), "--cmd", f"{sys.executable} {repo / 'bench.py'}", "--slots", str(slots),
              "--instrument", "off", "--quiet", "--tracked-only", "--store", str(store), "--json", str(out)])
    except SystemExit as exc:
        assert exc.code == 0
    report = json.loads(out.read_text())
    with Store(store) as db:
        spans = db.hunt_probe_spans(report["hunt_id"])
    return report, [(start, start + wall) for start, wall in spans]


def overlapping(spans: list[tuple[float, float]]) -> int:
    """Probes that ran while another did."""
    return sum(any(a < end and start < b for j, (a, b) in enumerate(spans) if j != i)
               for i, (start, end) in enumerate(spans))


def test_two_slots_run_hunk_candidates_side_by_side_and_name_the_same_hunk(tmp_path):
    repo = tmp_path / "repo"
    make_dirty_repo(repo, 24, {9: 0.15}, dependent=False)
    write_files(repo, {"bench.py": SLEEPING_BENCH})   # untracked, left out (--tracked-only)
    before = snapshot_checkout(repo)
    one, one_spans = hunt_on_slots(repo, tmp_path, 1)
    two, two_spans = hunt_on_slots(repo, tmp_path, 2)
    assert one["hunk_count"] == two["hunk_count"] == 24
    assert culprit_sets(one) == culprit_sets(two) == [{hunk_line(9)}]
    assert overlapping(one_spans) == 0
    # most rounds of two: the control arm's pairs, the prefix search's picks, the alone test's arms
    assert overlapping(two_spans) >= len(two_spans) / 2, (len(two_spans), overlapping(two_spans))
    assert snapshot_checkout(repo) == before
