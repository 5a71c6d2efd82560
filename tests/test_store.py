"""The SQLite store: round trip, durability under kill -9, schema/corruption errors, resume."""
from __future__ import annotations

import dataclasses
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import regressbisect

from regressbisect.errors import ExitCode, UserError
from regressbisect.samples import Candidate, ProbeOutcome, Sample, SampleKey
from regressbisect.store import SCHEMA_VERSION, Store
from regressbisect.version import tool_commit, tool_identity

REPO = Path(__file__).resolve().parents[1]
SHA_A, SHA_B = "a" * 40, "b" * 40
KEY_A = SampleKey(tree="t" * 40, patch_hash=None, config_hash="cfg", env_fingerprint="env")
KEY_P = SampleKey(tree="t" * 40, patch_hash="p1", config_hash="cfg", env_fingerprint="env")


def _measured(tok_s: float, **kwargs) -> ProbeOutcome:
    return ProbeOutcome(sample=Sample(tok_s=tok_s, **kwargs), skip_reason=None, exit_code=0,
                        wall_seconds=1.5, output_tail="ok")


def _skipped(reason: str, code: int | None = 1) -> ProbeOutcome:
    return ProbeOutcome(sample=None, skip_reason=reason, exit_code=code, wall_seconds=0.2,
                        output_tail="Traceback ...\nRuntimeError: boom")


def test_round_trip_keys_arms_and_iterations(tmp_path):
    with Store(tmp_path / "deep" / "dir" / "store.sqlite") as store:
        hunt = store.start_hunt(kind="commits", good=SHA_A, bad=SHA_B, config_hash="cfg",
                                env_fingerprint="env", settings={"n": 5})
        iters = ({"ms": 40.0, "tokens": 512, "lm_head_calls": 2},
                 {"ms": 41.5, "tokens": 512, "lm_head_calls": 3})
        first = store.add_outcome(KEY_A, Candidate(SHA_A), _measured(
            1000.0, tokens=512.0, seconds=0.5, iters=iters, counters={"lm_head_calls": 2.5}),
            hunt_id=hunt)
        store.add_outcome(KEY_A, Candidate(SHA_A), _measured(1100.0), hunt_id=hunt)
        store.add_outcome(KEY_A, Candidate(SHA_A), _measured(900.0, instrumented=True),
                          hunt_id=hunt, arm="instrumented")
        store.add_outcome(KEY_P, Candidate(SHA_A, ("h2", "h1")), _measured(500.0), hunt_id=hunt)
        store.add_outcome(KEY_A, Candidate(SHA_A), _skipped("exit 1: RuntimeError: boom"),
                          hunt_id=hunt)
        store.add_outcome(KEY_A, Candidate(SHA_A), _skipped("timeout after 60s", None),
                          hunt_id=None)

        plain = store.samples(KEY_A)
        assert [s.tok_s for s in plain] == [1000.0, 1100.0]  # insertion order, no instrumented
        assert plain[0].iters == iters and plain[0].counters == {"lm_head_calls": 2.5}
        assert plain[0].tokens == 512.0 and plain[1].tokens is None
        assert [s.tok_s for s in store.samples(KEY_A, instrumented=None)] == [1000, 1100, 900]
        assert [s.tok_s for s in store.samples(KEY_A, instrumented=True, arm="instrumented")] \
            == [900.0]
        assert store.samples(KEY_A, arm="control") == []
        assert [s.tok_s for s in store.samples(KEY_P)] == [500.0]  # the patch is part of the key
        assert store.skips(KEY_A) == ["exit 1: RuntimeError: boom", "timeout after 60s"]
        assert store.skips(KEY_P) == []

        frame = store.iterations(first)
        assert list(frame["iter"]) == [0, 1]
        assert list(frame["ms"]) == [40.0, 41.5] and list(frame["lm_head_calls"]) == [2, 3]

        hunts = store.hunts()
        assert list(hunts["id"]) == [hunt] and list(hunts["samples"]) == [4]
        assert list(hunts["skips"]) == [1]
        assert store.hunt_report(hunt) is None
        store.finish_hunt(hunt, {"schema": 1, "verdict": "none"})
        assert store.hunt_report(hunt) == {"schema": 1, "verdict": "none", **tool_identity()}
        assert store.hunts()["verdict"].tolist() == ["none"]
        assert store.last_hunt_id() == hunt


def test_samples_are_visible_to_a_second_connection_at_once(tmp_path):
    path = tmp_path / "store.sqlite"
    with Store(path) as writer, Store(path) as reader:
        writer.add_outcome(KEY_A, Candidate(SHA_A), _measured(123.0), hunt_id=None)
        assert [s.tok_s for s in reader.samples(KEY_A)] == [123.0]
        # and from a plain sqlite3 connection, without our code
        with sqlite3.connect(path) as raw:
            assert raw.execute("SELECT tok_s FROM samples").fetchall() == [(123.0,)]


def test_kill_9_mid_writing_loses_no_reported_sample(tmp_path):
    path = tmp_path / "store.sqlite"
    writer = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from regressbisect.samples import Candidate, ProbeOutcome, Sample, SampleKey
        from regressbisect.store import Store
        key = SampleKey(tree="t" * 40, patch_hash=None, config_hash="cfg", env_fingerprint="env")
        store = Store(Path({str(path)!r}))
        iters = [{{"ms": 1.0 + i, "tokens": 8, "lm_head_calls": 2}} for i in range(20)]
        for i in range(1, 100000):
            outcome = ProbeOutcome(sample=Sample(tok_s=float(i), iters=iters), skip_reason=None,
                                   exit_code=0, wall_seconds=0.1)
            store.add_outcome(key, Candidate("a" * 40), outcome, hunt_id=None)
            print(i, flush=True)  # reported only once add_outcome returned
    """)
    process = subprocess.Popen([sys.executable, "-c", writer], stdout=subprocess.PIPE,
                               text=True, cwd=REPO)
    reported = []
    try:
        for line in process.stdout:
            reported.append(int(line))
            if len(reported) >= 40:
                break
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    # Whatever the pipe still held was also written before the kill.
    reported += [int(line) for line in process.stdout.read().split()]
    assert len(reported) >= 40, "the writer did not get going"

    with Store(path) as store:  # opens fine: WAL recovery, no corruption
        stored = [s.tok_s for s in store.samples(KEY_A)]
        assert set(map(float, reported)) <= set(stored)
        assert stored == [float(i) for i in range(1, len(stored) + 1)]  # no gap, no half sample
        assert all(len(s.iters) == 20 for s in store.samples(KEY_A))
        assert sqlite3.connect(path).execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_newer_schema_is_refused_with_one_line(tmp_path):
    path = tmp_path / "store.sqlite"
    Store(path).close()
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                    (str(SCHEMA_VERSION + 1),))
    with pytest.raises(UserError) as caught:
        Store(path)
    assert caught.value.exit_code == ExitCode.USER_ERROR
    assert caught.value.message == (
        f"store {path} was written by a newer regressbisect (schema {SCHEMA_VERSION + 1}); "
        f"upgrade, or pass --store NEWPATH")


@pytest.mark.parametrize("content", [b"this is not sqlite at all\n" * 50,
                                     b"SQLite format 3\x00" + b"\xff" * 4000])
def test_corrupt_file_is_refused_with_one_line(tmp_path, content):
    path = tmp_path / "store.sqlite"
    path.write_bytes(content)
    with pytest.raises(UserError) as caught:
        Store(path)
    assert caught.value.exit_code == ExitCode.USER_ERROR
    assert caught.value.message.startswith(f"store {path} is not a valid regressbisect store (")
    assert caught.value.message.endswith("move it away or pass --store NEWPATH")
    assert path.read_bytes() == content  # the user's file is not touched


def test_another_programs_database_is_refused(tmp_path):
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as raw:
        raw.execute("CREATE TABLE users (name TEXT)")
    with pytest.raises(UserError, match="not a valid regressbisect store"):
        Store(path)


def test_unfinished_hunt_is_resumed_finished_one_is_not(tmp_path):
    path = tmp_path / "store.sqlite"
    args = dict(kind="commits", good=SHA_A, bad=SHA_B, config_hash="cfg", env_fingerprint="env",
                settings={"min_runs": 5, "alpha": 0.05})
    with Store(path) as store:
        hunt = store.start_hunt(**args)
    with Store(path) as store:  # a new process after a kill
        assert store.start_hunt(**{**args, "settings": {"alpha": 0.05, "min_runs": 5}}) == hunt
        different = store.start_hunt(**{**args, "settings": {"min_runs": 7, "alpha": 0.05}})
        assert different != hunt
        store.finish_hunt(hunt, {"verdict": "none"})
        again = store.start_hunt(**args)
        assert again not in (hunt, different)
        assert store.last_hunt_id() == again


def _hand_listed_settings(kind: str, c) -> dict:
    """A hunt's stored settings as the hunts listed them by hand before they came from the knobs."""
    if kind == "hunks":
        return {"min_effect": c.min_effect, "direction": c.direction, "max_samples": c.max_samples,
                "interference": c.interference, "slots": c.slots, "overlap": c.overlap}
    return {"min_effect": c.min_effect, "direction": c.direction, "max_samples": c.max_samples,
            "interference": c.interference, "side_resolution": c.side_resolution,
            "slots": c.slots, "overlap": c.overlap, "instrument": c.instrument,
            "tokens_auto": c.tokens_auto, "noise_prior": c.noise_prior}


@pytest.mark.parametrize("kind", ["commits", "hunks"])
@pytest.mark.parametrize("flags", [{}, {"min_effect": 0.05, "direction": "both", "max_samples": 40,
                                        "interference": False, "side_resolution": 0.03, "slots": 2,
                                        "instrument": "off", "noise_prior": False}])
def test_a_hunt_stored_before_the_settings_were_derived_from_the_knobs_resumes(tmp_path, kind, flags):
    from regressbisect.config import build_config
    from regressbisect.hunts import commits, hunks

    config = build_config({"cmd": "python bench.py {tokens}"}, flags)
    stored_settings = {"commits": commits.stored_settings, "hunks": hunks.stored_settings}[kind]
    args = dict(kind=kind, good=SHA_A, bad=SHA_B, config_hash="cfg", env_fingerprint="env")
    with Store(tmp_path / "store.sqlite") as store:
        old = store.start_hunt(**args, settings=_hand_listed_settings(kind, config))
        assert store.start_hunt(**args, settings=stored_settings(config)) == old


def test_an_arm_is_stored_as_its_value_and_rows_stored_as_plain_text_are_found_by_it(tmp_path):
    from regressbisect.samples import Arm

    path = tmp_path / "store.sqlite"
    with Store(path) as store:
        hunt = store.start_hunt(kind="commits", good=SHA_A, bad=SHA_B, config_hash="cfg", env_fingerprint="env",
                                settings={})
        store.add_outcome(KEY_A, Candidate(SHA_A), _measured(1000.0), hunt_id=hunt, arm="main")   # as written before Arm
        store.add_outcome(KEY_A, Candidate(SHA_A), _measured(900.0), hunt_id=hunt, arm=Arm.FLAGGED)
        assert [s.tok_s for s in store.samples(KEY_A, arm=Arm.MAIN)] == [1000.0]
        assert [v for _, _, v in store.hunt_samples_in_order(hunt)] == [1000.0]
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT arm, typeof(arm) FROM samples ORDER BY id").fetchall() == [
            ("main", "text"), ("flagged", "text")]
    raw.close()


def test_series_per_commit_and_machine_checks(tmp_path):
    with Store(tmp_path / "s.sqlite") as store:
        key_b = SampleKey(tree="u" * 40, patch_hash=None, config_hash="cfg", env_fingerprint="env")
        other_env = SampleKey(tree="u" * 40, patch_hash=None, config_hash="cfg",
                              env_fingerprint="env2")
        for tok_s in (100.0, 104.0, 98.0):
            store.add_outcome(KEY_A, Candidate(SHA_A), _measured(tok_s), hunt_id=None)
        for tok_s in (90.0, 92.0):
            store.add_outcome(key_b, Candidate(SHA_B), _measured(tok_s), hunt_id=None)
        store.add_outcome(other_env, Candidate(SHA_B), _measured(10.0), hunt_id=None)
        store.add_outcome(KEY_P, Candidate(SHA_A, ("h",)), _measured(1.0), hunt_id=None)
        store.add_outcome(KEY_A, Candidate(SHA_A), _measured(5.0, instrumented=True),
                          hunt_id=None, arm="instrumented")

        series = store.series(config_hash="cfg", env_fingerprint="env")
        assert series["commit"].tolist() == [SHA_A, SHA_B]
        assert series["n"].tolist() == [3, 2]
        assert series["median_tok_s"].tolist() == [100.0, 91.0]
        assert (series["first"] <= series["last"]).all()
        assert store.series(config_hash="cfg")["n"].tolist() == [3, 3]
        assert store.series(config_hash="nope").empty

        assert store.machine_checks("env").empty
        store.record_machine_check("env", {"matmul_tflops": 50.1, "memcpy_gbs": 20.0})
        store.record_machine_check("env", {"matmul_tflops": 49.0, "memcpy_gbs": 21.0})
        store.record_machine_check("env2", {"matmul_tflops": 1.0})
        checks = store.machine_checks("env")
        assert checks["matmul_tflops"].tolist() == [50.1, 49.0]


def test_store_import_is_cheap():
    code = ("import sys, regressbisect.store; "
            "bad = [m for m in ('pandas', 'torch') if m in sys.modules]; "
            "sys.exit(str(bad) if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr


def test_damaged_page_in_a_real_store_is_refused(tmp_path):
    path = tmp_path / "store.sqlite"
    with Store(path) as store:
        iters = [{"ms": float(i), "tokens": 8} for i in range(50)]
        for i in range(60):
            store.add_outcome(KEY_A, Candidate(SHA_A), _measured(100.0 + i, iters=iters),
                              hunt_id=None)
    assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0
    data = bytearray(path.read_bytes())
    page = 4096
    assert len(data) > 8 * page
    data[5 * page: 7 * page] = b"\xa5" * (2 * page)  # scribble over two b-tree pages
    path.write_bytes(bytes(data))
    with pytest.raises(UserError, match="not a valid regressbisect store"):
        Store(path)


def _version(path: Path) -> int:
    with sqlite3.connect(path) as raw:
        return int(raw.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0])


def _make_version_1(path: Path) -> None:
    """Turn a current store into what schema 1 wrote: no start times."""
    with sqlite3.connect(path) as raw:
        for table in ("samples", "skips"):
            raw.execute(f"ALTER TABLE {table} DROP COLUMN started_at")
        raw.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")


def test_a_version_1_store_is_migrated_once_to_the_current_schema(tmp_path):
    # Schema 2 added each probe's start time; a store of schema 1 holding a sample is migrated
    # when opened, its sample kept, its start time unknown (None), and new samples get theirs.
    path = tmp_path / "store.sqlite"
    with Store(path) as store:
        hunt = store.start_hunt(kind="commits", good=SHA_A, bad=SHA_B, config_hash="c", env_fingerprint="e",
                                settings={})
        store.add_outcome(KEY_A, Candidate(SHA_A), _measured(1000.0), hunt_id=hunt)
    _make_version_1(path)
    with Store(path) as store:
        assert [s.tok_s for s in store.samples(KEY_A)] == [1000.0]
        store.add_outcome(KEY_A, Candidate(SHA_A), dataclasses.replace(_measured(900.0), started_at=1.5e9),
                          hunt_id=hunt)
        assert [start for start, _ in store.hunt_probe_spans(hunt)] == [None, 1.5e9]
    assert _version(path) == SCHEMA_VERSION == 2
    with Store(path), sqlite3.connect(path) as raw:          # opened again: not migrated twice
        columns = [row[1] for row in raw.execute("PRAGMA table_info(samples)")]
    assert columns.count("started_at") == 1


def test_a_hunts_samples_in_order_are_its_plain_main_arm_samples_by_start_time(tmp_path):
    # scripts/pair_noise.py pairs neighbours in this order: a profiled sample, another arm's or
    # another hunt's must not sit between two samples that were taken side by side
    with Store(tmp_path / "store.sqlite") as store:
        hunt = store.start_hunt(kind="commits", good=SHA_A, bad=SHA_B, config_hash="cfg", env_fingerprint="env",
                                settings={})
        other = store.start_hunt(kind="commits", good=SHA_B, bad=SHA_A, config_hash="cfg", env_fingerprint="env",
                                 settings={})
        assert other != hunt
        started = lambda value, t: dataclasses.replace(_measured(value), started_at=t)  # noqa: E731
        store.add_outcome(KEY_A, Candidate(SHA_B), started(900.0, 20.0), hunt_id=hunt)
        store.add_outcome(KEY_A, Candidate(SHA_A), started(1000.0, 10.0), hunt_id=hunt)
        store.add_outcome(KEY_A, Candidate(SHA_A), started(1100.0, 15.0), hunt_id=hunt, arm="overhead")
        store.add_outcome(KEY_A, Candidate(SHA_A), started(1200.0, 16.0), hunt_id=other)
        store.add_outcome(KEY_A, Candidate(SHA_A), dataclasses.replace(
            _measured(800.0, instrumented=True), started_at=17.0), hunt_id=hunt)
        assert store.hunt_samples_in_order(hunt) == [(SHA_A, "[]", 1000.0), (SHA_B, "[]", 900.0)]


def test_a_later_migration_runs_once(tmp_path, monkeypatch):
    import regressbisect.store as store_module

    path = tmp_path / "store.sqlite"
    with Store(path) as store:
        store.add_outcome(KEY_A, Candidate(SHA_A), _measured(1000.0), hunt_id=None)
    monkeypatch.setattr(store_module, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    monkeypatch.setattr(store_module, "_MIGRATIONS", {**store_module._MIGRATIONS,
                                                      SCHEMA_VERSION + 1: ("ALTER TABLE samples ADD COLUMN note TEXT",)})
    with Store(path) as store:
        assert [s.tok_s for s in store.samples(KEY_A)] == [1000.0]
    assert _version(path) == SCHEMA_VERSION + 1
    with Store(path), sqlite3.connect(path) as raw:
        columns = [row[1] for row in raw.execute("PRAGMA table_info(samples)")]
    assert columns.count("note") == 1


def test_a_failed_migration_leaves_the_store_unchanged(tmp_path, monkeypatch):
    import regressbisect.store as store_module

    path = tmp_path / "store.sqlite"
    with Store(path) as store:
        store.add_outcome(KEY_A, Candidate(SHA_A), _measured(1000.0), hunt_id=None)
    _make_version_1(path)
    monkeypatch.setattr(store_module, "_MIGRATIONS", {2: ("ALTER TABLE samples ADD COLUMN started_at REAL",
                                                          "ALTER TABLE no_such_table ADD COLUMN x")})
    with pytest.raises(UserError) as caught:
        Store(path)
    assert "migrating schema 1 to 2 failed" in caught.value.message
    assert "\n" not in caught.value.message
    assert _version(path) == 1
    with sqlite3.connect(path) as raw:
        assert "started_at" not in [row[1] for row in raw.execute("PRAGMA table_info(samples)")]


def test_a_store_version_without_a_migration_path_is_refused(tmp_path):
    path = tmp_path / "store.sqlite"
    Store(path).close()
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    with pytest.raises(UserError) as caught:
        Store(path)
    assert "schema 0 has no migration" in caught.value.message


def test_a_store_on_a_read_only_file_system_is_read(read_only):
    path = read_only.path / "store.sqlite"
    with Store(path) as store:
        hunt = store.start_hunt(kind="commits", good=SHA_A, bad=SHA_B, config_hash="c", env_fingerprint="e",
                                settings={})
        store.add_outcome(KEY_A, Candidate(SHA_A), _measured(1000.0), hunt_id=hunt)
        store.finish_hunt(hunt, {"verdict": "culprits"})
    read_only.freeze()
    before = sorted(p.name for p in read_only.path.iterdir())
    with Store(path, read_only=True) as store:
        assert store.hunt_report(store.last_hunt_id()) == {"verdict": "culprits", **tool_identity()}
        assert [s.tok_s for s in store.samples(KEY_A)] == [1000.0]
        assert list(store.hunts()["verdict"]) == ["culprits"]
    assert sorted(p.name for p in read_only.path.iterdir()) == before


def test_a_read_only_store_sees_a_running_hunts_samples_and_never_writes(tmp_path):
    path = tmp_path / "store.sqlite"
    with Store(path) as writer:
        writer.add_outcome(KEY_A, Candidate(SHA_A), _measured(1.0), hunt_id=None)
        with Store(path, read_only=True) as reader:
            writer.add_outcome(KEY_A, Candidate(SHA_A), _measured(2.0), hunt_id=None)
            assert [s.tok_s for s in reader.samples(KEY_A)] == [1.0, 2.0]
            with pytest.raises(sqlite3.OperationalError, match="readonly"):
                reader.add_outcome(KEY_A, Candidate(SHA_A), _measured(3.0), hunt_id=None)
    with pytest.raises(UserError, match="no store at"):
        Store(tmp_path / "missing.sqlite", read_only=True)
    assert not (tmp_path / "missing.sqlite").exists()


def test_a_store_created_on_a_full_disk_says_so_and_leaves_nothing_behind(tmp_path):
    from tests.diskfs import fill, small_disk

    with small_disk(tmp_path / "disk", 256 * 1024) as disk:
        fill(disk, 0)
        path = disk / "store.sqlite"
        with pytest.raises(UserError) as caught:
            Store(path)
        assert caught.value.exit_code == ExitCode.USER_ERROR
        assert "disk is full" in caught.value.message and "--store" in caught.value.message
        assert "not a valid" not in caught.value.message
        assert sorted(p.name for p in disk.iterdir()) == ["filler"]


def test_an_existing_store_on_a_full_disk_says_so_and_is_kept(tmp_path):
    from tests.diskfs import fill, small_disk

    with small_disk(tmp_path / "disk", 512 * 1024) as disk:
        path = disk / "store.sqlite"
        with Store(path) as store:
            store.add_outcome(KEY_A, Candidate(SHA_A), _measured(1000.0), hunt_id=None)
        fill(disk, 0)
        with pytest.raises(UserError) as caught:
            Store(path)
        assert "disk is full" in caught.value.message and "not a valid" not in caught.value.message
        (disk / "filler").unlink()
        with Store(path) as store:
            assert [s.tok_s for s in store.samples(KEY_A)] == [1000.0]


def test_a_write_on_a_full_disk_raises_disk_full_and_keeps_every_sample_before_it(tmp_path):
    from regressbisect.errors import DiskFull
    from tests.diskfs import fill, small_disk

    with small_disk(tmp_path / "disk", 1024 * 1024) as disk:
        path = disk / "store.sqlite"
        with Store(path) as store:
            fill(disk, 48 * 1024)
            stored = 0
            with pytest.raises(DiskFull):
                for stored in range(1, 10_000):
                    store.add_outcome(KEY_A, Candidate(SHA_A), _measured(float(stored)), hunt_id=None)
        (disk / "filler").unlink()
        with Store(path) as store:
            assert [s.tok_s for s in store.samples(KEY_A)] == [float(i) for i in range(1, stored)]


def test_spread_groups_are_other_candidates_samples_of_the_same_probe_config_and_machine(tmp_path):
    # what a remembered noise scale is made of: per candidate of an earlier hunt, its samples
    # under this config and machine; the hunt's own candidates, another config or machine, shimmed
    # runs and single samples are not part of it
    other = dataclasses.replace(KEY_A, tree="u" * 40)
    with Store(tmp_path / "store.sqlite") as store:
        hunt = store.start_hunt(kind="commits", good=SHA_A, bad=SHA_B, config_hash="cfg",
                                env_fingerprint="env", settings={})
        for v in (1000.0, 1010.0, 990.0):
            store.add_outcome(KEY_A, Candidate(SHA_A), _measured(v), hunt_id=hunt)
            store.add_outcome(other, Candidate(SHA_B), _measured(v * 2), hunt_id=hunt)
            store.add_outcome(other, Candidate(SHA_B), _measured(v, instrumented=True), hunt_id=hunt,
                              arm="instrumented")
        store.add_outcome(dataclasses.replace(other, config_hash="cfg2"), Candidate(SHA_B), _measured(5.0), hunt_id=hunt)
        store.add_outcome(dataclasses.replace(other, tree="w" * 40), Candidate(SHA_B), _measured(7.0), hunt_id=hunt)
        groups = store.spread_groups("cfg", "env", instrumented=False, exclude_trees={KEY_A.tree})
        assert [sorted(g) for g in groups] == [[1980.0, 2000.0, 2020.0]]
        assert len(store.spread_groups("cfg", "env", instrumented=False, exclude_trees=set())) == 2
        assert [sorted(g) for g in store.spread_groups("cfg", "env", instrumented=True, exclude_trees=set())] == [[990.0, 1000.0, 1010.0]]


def test_a_stored_report_names_the_version_and_commit_of_the_code_that_wrote_it(tmp_path):
    """An error report is built without the header: the store stamps it, so every stored
    report can be traced to code."""
    with Store(tmp_path / "store.sqlite") as store:
        hunt = store.start_hunt(kind="commits", good=SHA_A, bad=SHA_B, config_hash="c", env_fingerprint="e",
                                settings={})
        store.finish_hunt(hunt, {"verdict": "error", "error": "no GPU"})
        report = store.hunt_report(hunt)
    assert report["tool_version"] == regressbisect.__version__
    assert report["tool_commit"] == tool_commit() and report["tool_commit"]
    assert report["error"] == "no GPU"
