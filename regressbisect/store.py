"""SQLite store of hunts, samples, skips and per-iteration rows.

Every sample is committed the moment it exists (WAL journal, synchronous=FULL, one
transaction per sample), so a `kill -9` at any moment loses no stored sample and a resumed
hunt reuses everything measured before. Samples are keyed by SampleKey (tree, patch hash,
config hash, environment fingerprint): identical trees share samples across commits and hunts.

pandas is imported only by the methods that return DataFrames.
"""
from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from regressbisect.errors import DiskFull, UserError, is_disk_full
from regressbisect.jsonio import dumps
from regressbisect.samples import Arm, Candidate, ProbeOutcome, Sample, SampleKey
from regressbisect.version import tool_identity

if TYPE_CHECKING:
    import pandas

SCHEMA_VERSION = 2
"""The store's schema version, kept in its meta table. A change bumps it and adds the SQL that
moves a store from the previous version to `_MIGRATIONS`; older stores are migrated when opened,
newer ones are refused with one line. A table that adds to what an older version reads, and that
it may ignore (`outside_imports`, `footprints`), is made by `_SCHEMA` when a store is opened for writing, with
no new version: an older regressbisect still opens the store."""
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    # 2: when each probe started (unix seconds), so a hunt's GPU time counts overlapped probes once
    2: ("ALTER TABLE samples ADD COLUMN started_at REAL",
        "ALTER TABLE skips ADD COLUMN started_at REAL"),
}
"""version -> statements that turn a store of version-1 into one of version, run in order in one
transaction (a failure leaves the store as it was)."""
BUSY_TIMEOUT_MS = 30_000
"""How long a writer waits for another process's transaction (parallel hunts on one store)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS hunts (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    good TEXT NOT NULL,
    bad TEXT NOT NULL,
    config_hash TEXT NOT NULL,
    env_fingerprint TEXT NOT NULL,
    settings TEXT NOT NULL,          -- canonical JSON (sorted keys): part of the resume key
    started_at REAL NOT NULL,        -- unix seconds
    finished_at REAL,
    report TEXT                      -- JSON report, set by finish_hunt
);
CREATE TABLE IF NOT EXISTS samples (
    id INTEGER PRIMARY KEY,
    hunt_id INTEGER REFERENCES hunts(id),
    tree TEXT NOT NULL,
    patch_hash TEXT,
    config_hash TEXT NOT NULL,
    env_fingerprint TEXT NOT NULL,
    commit_sha TEXT NOT NULL,
    patch_ids TEXT NOT NULL,         -- JSON list of hunk ids
    arm TEXT NOT NULL,               -- 'main' | 'instrumented' | 'control' | ...
    instrumented INTEGER NOT NULL,
    tok_s REAL NOT NULL,
    tokens REAL,
    seconds REAL,
    counters TEXT NOT NULL,          -- JSON object
    wall_seconds REAL NOT NULL,
    exit_code INTEGER,
    created_at REAL NOT NULL,
    started_at REAL                  -- unix seconds the probe started (schema 2, else NULL)
);
CREATE INDEX IF NOT EXISTS samples_by_key
    ON samples(tree, patch_hash, config_hash, env_fingerprint);
CREATE INDEX IF NOT EXISTS samples_by_config ON samples(config_hash, env_fingerprint);
CREATE TABLE IF NOT EXISTS iterations (
    sample_id INTEGER NOT NULL REFERENCES samples(id),
    iter INTEGER NOT NULL,           -- 0-based position in the sample's iters
    name TEXT NOT NULL,              -- 'ms', 'tokens', or a counter name
    value,                           -- usually REAL
    PRIMARY KEY (sample_id, iter, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS skips (
    id INTEGER PRIMARY KEY,
    hunt_id INTEGER REFERENCES hunts(id),
    tree TEXT NOT NULL,
    patch_hash TEXT,
    config_hash TEXT NOT NULL,
    env_fingerprint TEXT NOT NULL,
    commit_sha TEXT NOT NULL,
    patch_ids TEXT NOT NULL,
    arm TEXT NOT NULL,
    reason TEXT NOT NULL,
    exit_code INTEGER,
    output_tail TEXT NOT NULL,
    wall_seconds REAL NOT NULL,
    created_at REAL NOT NULL,
    started_at REAL
);
CREATE INDEX IF NOT EXISTS skips_by_key ON skips(tree, patch_hash, config_hash, env_fingerprint);
CREATE TABLE IF NOT EXISTS setups (     -- per-candidate setup step runs (docs/setup.md)
    id INTEGER PRIMARY KEY,
    hunt_id INTEGER REFERENCES hunts(id),
    tree TEXT NOT NULL,
    patch_hash TEXT,
    setup_hash TEXT NOT NULL,        -- command + slot virtualenv base
    env_fingerprint TEXT NOT NULL,
    command TEXT NOT NULL,
    ok INTEGER NOT NULL,
    reason TEXT,                     -- why it failed
    exit_code INTEGER,
    seconds REAL NOT NULL,
    output_tail TEXT NOT NULL,
    log_path TEXT,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS setups_by_key ON setups(tree, patch_hash, setup_hash, env_fingerprint);
CREATE TABLE IF NOT EXISTS sample_loads ( -- other load while a sample ran (docs/contention.md)
    sample_id INTEGER PRIMARY KEY REFERENCES samples(id),
    other_cpus REAL NOT NULL,
    machine_share REAL NOT NULL,
    hunt_cpus REAL NOT NULL,
    ncpus INTEGER NOT NULL,
    other_gpu REAL,
    contended TEXT                   -- the reason it was re-taken, NULL if not contended
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS outside_imports (  -- files outside the worktree the probes imported
    config_hash TEXT NOT NULL,       -- ProbeConfig.imports_key(): the probe config's, without them
    path TEXT NOT NULL,
    PRIMARY KEY (config_hash, path)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS footprints (  -- what a probe read of a commit's tree (probe/footprint.py)
    tree TEXT NOT NULL,
    config_hash TEXT NOT NULL,       -- ProbeConfig.imports_key(): the probe config, at any budget
    env_fingerprint TEXT NOT NULL,
    footprint TEXT NOT NULL,         -- JSON: {"files", "probed", "dirs"} or {"unreadable": why}
    created_at REAL NOT NULL,
    PRIMARY KEY (tree, config_hash, env_fingerprint)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS machine_checks (
    id INTEGER PRIMARY KEY,
    env_fingerprint TEXT NOT NULL,
    metrics TEXT NOT NULL,           -- JSON object
    created_at REAL NOT NULL
);
"""

def _number(column: str, *, positive: bool = True, optional: bool = False) -> str:
    """SQL true when `column` is a finite number (> 0, or >= 0); NULL too when `optional`."""
    check = (f"(typeof({column}) IN ('real', 'integer') AND {column} {'>' if positive else '>='} 0"
             f" AND {column} < 9e999)")  # 9e999 is SQLite's infinity; a NaN is stored as NULL
    return f"({column} IS NULL OR {check})" if optional else check


_BAD_SAMPLE_NUMBERS = " OR ".join(f"NOT {check}" for check in (
    _number("tok_s"), _number("tokens", optional=True), _number("seconds", optional=True),
    _number("wall_seconds", positive=False)))
"""A samples row whose numbers no Sample or ProbeOutcome has (Sample.__post_init__'s rules)."""

_KEY_WHERE = "tree = ? AND patch_hash IS ? AND config_hash = ? AND env_fingerprint = ?"


def _sample_filter(key: SampleKey, instrumented: bool | None, arm: str | None) -> tuple[str, list]:
    """WHERE clause and parameters selecting a key's samples (None = any arm / either kind)."""
    where, params = _KEY_WHERE, list(_key_params(key))
    if instrumented is not None:
        where += " AND instrumented = ?"
        params.append(int(instrumented))
    if arm is not None:
        where += " AND arm = ?"
        params.append(arm)
    return where, params


class Store:
    """One SQLite file; safe to share between threads of one process and between processes."""

    def __init__(self, path: Path, *, read_only: bool = False):
        """Open (or create) the store; `read_only` for commands that only read (`report`): no
        write, no migration, and a store on a read-only file system or in a folder of someone
        else's opens too."""
        self.path = Path(path)
        self.read_only = read_only
        self._lock = threading.RLock()
        if self.path.is_dir():
            raise UserError(f"store {self.path} is a directory; pass --store FILE")
        if read_only:
            if not self.path.exists():
                raise UserError(f"no store at {self.path}: run a hunt first, or pass --store")
        else:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise UserError(f"cannot create the store directory {self.path.parent}: "
                                f"{error.strerror}; pass --store NEWPATH") from None
        created = not read_only and not self.path.exists()
        try:
            try:
                self._conn = self._connect_read_only() if read_only else self._connect("")
            except sqlite3.Error as error:
                raise self._invalid(error) from None
            try:
                self._open()
            except BaseException:
                self._conn.close()
                raise
        except BaseException:
            if created and self._nothing_written():
                # a store this call began and could not write (a full disk) is no store: a
                # 0-byte file left behind would be called "not a valid store" next time
                for leftover in store_files(self.path):
                    leftover.unlink(missing_ok=True)
            raise

    def _nothing_written(self) -> bool:
        """No page of the store is on disk, in its file or in its WAL (so no other process that
        opened it at the same moment has anything in it either)."""
        def size(path: Path) -> int:
            try:
                return path.stat().st_size
            except OSError:
                return 0
        main, wal, _ = store_files(self.path)
        return size(main) == 0 and size(wal) == 0

    def _connect(self, mode: str) -> sqlite3.Connection:
        """A connection; `mode` is a URI query ("mode=ro", "immutable=1"), "" for read-write."""
        target = f"{self.path.absolute().as_uri()}?{mode}" if mode else str(self.path)
        return sqlite3.connect(target, uri=bool(mode), timeout=BUSY_TIMEOUT_MS / 1000,
                               isolation_level=None, check_same_thread=False)

    def _connect_read_only(self) -> sqlite3.Connection:
        """mode=ro sees a running hunt's newest samples through its -wal and -shm files, but a
        WAL store needs the -shm file, which it cannot create in a folder it may not write to.
        There (a read-only file system, another user's folder) no process can be writing the
        store either, so it is opened immutable."""
        conn = self._connect("mode=ro")
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError:
            conn.close()
            if os.access(self.path.parent, os.W_OK):
                raise
        return self._connect("immutable=1")

    def _invalid(self, error: Exception) -> UserError:
        if is_disk_full(error, self.path):
            return UserError(f"the disk is full: cannot open the store {self.path}; free some space "
                             f"or pass --store NEWPATH")
        detail = str(error).replace("\n", " ")
        if "unable to open" in detail or "readonly" in detail:
            return UserError(f"cannot open store {self.path} ({detail}); "
                             f"check its permissions or pass --store NEWPATH")
        return UserError(f"store {self.path} is not a valid regressbisect store ({detail}); "
                         f"move it away or pass --store NEWPATH")

    def _open(self) -> None:
        try:
            self._open_checked()
        except (sqlite3.DatabaseError, DiskFull) as error:
            raise self._invalid(error) from None

    def _open_checked(self) -> None:
        conn = self._conn
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        # Reading the schema first fails fast on a file that is not SQLite at all.
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if self.read_only and "meta" not in tables:
            raise self._invalid(ValueError("no meta table: empty, or another program's database?"))
        if tables and "meta" not in tables:
            raise self._invalid(ValueError("no meta table: another program's database?"))
        if "meta" in tables:
            version = _schema_version(conn)
            if version is None:
                raise self._invalid(ValueError("no schema version"))
            if version > SCHEMA_VERSION:
                raise UserError(f"store {self.path} was written by a newer regressbisect "
                                f"(schema {version}); upgrade, or pass --store NEWPATH")
            if version < 1 or any(v not in _MIGRATIONS for v in range(version + 1, SCHEMA_VERSION + 1)):
                raise self._invalid(ValueError(f"schema {version} has no migration to {SCHEMA_VERSION}"))
            # quick_check reads every page (milliseconds for a store of this size): a damaged
            # page fails here with one line, not as a traceback in the middle of a hunt.
            problem = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
            if problem != "ok":
                raise self._invalid(ValueError(f"integrity check: {problem}"))
            if not self.read_only:  # a hunt would stop on it half-way (`report` reads reports only)
                self._check_sample_rows()
        if self.read_only:
            # An older schema is read as it is: what the reading commands query (hunts and
            # their reports) is the same in every schema; the next hunt migrates it.
            return
        # WAL + FULL: a committed transaction survives kill -9 and power loss; readers in other
        # processes see each sample at once without blocking the writer.
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
        with self._transaction():
            if "meta" in tables:
                self._migrate()
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)",
                         (str(SCHEMA_VERSION),))

    def _check_sample_rows(self) -> None:
        """Every stored sample's numbers are what a Sample holds (an edited or foreign row is
        not): the first that is not makes the store invalid, before a hunt is registered."""
        row = self._conn.execute(f"SELECT id, tok_s, tokens, seconds, wall_seconds FROM samples "
                                 f"WHERE {_BAD_SAMPLE_NUMBERS} ORDER BY id LIMIT 1").fetchone()
        if row is not None:
            values = ", ".join(f"{name} = {value!r}" for name, value in
                               zip(("tok_s", "tokens", "seconds", "wall_seconds"), row[1:]))
            raise self._invalid(ValueError(f"row {row[0]} of samples: {values}"))

    def _migrate(self) -> None:
        """Bring the store to SCHEMA_VERSION, inside the caller's write transaction: the version
        is read again there, so two processes opening an old store migrate it once."""
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        for target in range(int(row[0]) + 1, SCHEMA_VERSION + 1):
            try:
                for statement in _MIGRATIONS[target]:
                    self._conn.execute(statement)
            except sqlite3.Error as error:
                raise UserError(f"store {self.path}: migrating schema {target - 1} to {target} failed "
                                f"({error}); the store is unchanged; pass --store NEWPATH") from None
            self._conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(target),))

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _transaction(self):
        return _Transaction(self._conn, self._lock, self.path)

    # -- samples -----------------------------------------------------------------------------

    def add_outcome(self, key: SampleKey, candidate: Candidate, outcome: ProbeOutcome, *,
                    hunt_id: int | None, arm: str = Arm.MAIN, load: dict | None = None,
                    contended: str | None = None) -> int:
        """Store one probe outcome (a sample with its iteration rows, or a skip), committed at
        once. Returns the row id (in `samples` or in `skips`). `load` (contention.Load.to_json)
        and `contended` (why it must be re-taken) go into sample_loads, in the same transaction."""
        now = time.time()
        common = (hunt_id, key.tree, key.patch_hash, key.config_hash, key.env_fingerprint,
                  candidate.commit, json.dumps(list(candidate.patch)), arm)
        with self._transaction() as conn:
            if outcome.sample is None:
                cursor = conn.execute(
                    "INSERT INTO skips(hunt_id, tree, patch_hash, config_hash, env_fingerprint,"
                    " commit_sha, patch_ids, arm, reason, exit_code, output_tail, wall_seconds,"
                    " created_at, started_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    common + (outcome.skip_reason, outcome.exit_code, outcome.output_tail,
                              outcome.wall_seconds, now, outcome.started_at))
                return int(cursor.lastrowid)
            sample = outcome.sample
            cursor = conn.execute(
                "INSERT INTO samples(hunt_id, tree, patch_hash, config_hash, env_fingerprint,"
                " commit_sha, patch_ids, arm, instrumented, tok_s, tokens, seconds, counters,"
                " wall_seconds, exit_code, created_at, started_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                common + (int(sample.instrumented), sample.tok_s, sample.tokens, sample.seconds,
                          json.dumps(dict(sample.counters)), outcome.wall_seconds,
                          outcome.exit_code, now, outcome.started_at))
            sample_id = int(cursor.lastrowid)
            conn.executemany(
                "INSERT INTO iterations(sample_id, iter, name, value) VALUES (?,?,?,?)",
                [(sample_id, i, str(name), _sql_value(value))
                 for i, row in enumerate(sample.iters) for name, value in row.items()])
            if load is not None:
                conn.execute(
                    "INSERT INTO sample_loads(sample_id, other_cpus, machine_share, hunt_cpus, ncpus,"
                    " other_gpu, contended) VALUES (?,?,?,?,?,?,?)",
                    (sample_id, load["other_cpus"], load["machine_share"], load["hunt_cpus"],
                     load["ncpus"], load.get("other_gpu"), contended))
            return sample_id

    def samples(self, key: SampleKey, *, instrumented: bool | None = False,
                arm: str | None = None) -> list[Sample]:
        """Samples stored under `key`, in insertion order; `instrumented`/`arm` None = any."""
        where, params = _sample_filter(key, instrumented, arm)
        with self._lock:
            rows = self._conn.execute(
                f"SELECT id, tok_s, tokens, seconds, counters, instrumented FROM samples "
                f"WHERE {where} ORDER BY id", params).fetchall()
            iters = self._iteration_rows([r[0] for r in rows])
        return [Sample(tok_s=tok_s, tokens=tokens, seconds=seconds, iters=iters.get(sid, ()),
                       counters=json.loads(counters), instrumented=bool(instr))
                for sid, tok_s, tokens, seconds, counters, instr in rows]

    def spread_groups(self, config_hash: str, env_fingerprint: str, *, instrumented: bool,
                      exclude_trees: set[str], limit: int = 64) -> list[list[float]]:
        """The tok/s of earlier samples under one probe config and machine, grouped by candidate
        (tree and patch), the most recent `limit` groups of two or more: what a remembered noise
        scale is made of (levels are never carried over). Candidates in `exclude_trees` (the
        hunt's own, whose stored samples the hunt reuses as its own) are left out."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT tree, coalesce(patch_hash, ''), tok_s FROM samples "
                "WHERE config_hash = ? AND env_fingerprint = ? AND instrumented = ? AND arm IN (?, ?) ORDER BY id DESC",
                (config_hash, env_fingerprint, int(instrumented), Arm.MAIN, Arm.INSTRUMENTED)).fetchall()
        groups: dict[tuple[str, str], list[float]] = {}
        for tree, patch, tok_s in rows:
            if tree in exclude_trees and not patch:
                continue
            groups.setdefault((tree, patch), []).append(float(tok_s))
        return [g for g in groups.values() if len(g) > 1][:limit]

    def sample_walls(self, key: SampleKey, *, instrumented: bool | None = False,
                     arm: str | None = None) -> list[float]:
        """Probe wall seconds of the samples `samples()` returns, same order (what each cost)."""
        where, params = _sample_filter(key, instrumented, arm)
        with self._lock:
            return [float(r[0]) for r in self._conn.execute(
                f"SELECT wall_seconds FROM samples WHERE {where} ORDER BY id", params)]

    def hunt_probe_totals(self, hunt_id: int) -> tuple[int, float, float]:
        """(probes, probe wall seconds, measured seconds) stored by one hunt, over every run of
        it (a resumed hunt included), skipped probes counted."""
        with self._lock:
            n, wall, measured = self._conn.execute(
                "SELECT count(*), coalesce(sum(wall_seconds), 0), coalesce(sum(seconds), 0) "
                "FROM samples WHERE hunt_id = ?", (hunt_id,)).fetchone()
            skips, skip_wall = self._conn.execute(
                "SELECT count(*), coalesce(sum(wall_seconds), 0) FROM skips WHERE hunt_id = ?",
                (hunt_id,)).fetchone()
        return int(n + skips), float(wall + skip_wall), float(measured)

    def hunt_skip_totals(self, hunt_id: int) -> tuple[int, float]:
        """(probes, probe wall seconds) stored by one hunt without a sample: those that failed
        (crashed, timed out, printed no metric) and candidates skipped before a probe (at 0 s), over
        every run of it. They are in `hunt_probe_totals` too."""
        with self._lock:
            n, wall = self._conn.execute(
                "SELECT count(*), coalesce(sum(wall_seconds), 0) FROM skips WHERE hunt_id = ?",
                (hunt_id,)).fetchone()
        return int(n), float(wall)

    def hunt_probe_spans(self, hunt_id: int) -> list[tuple[float | None, float]]:
        """(started_at, wall seconds) of every probe one hunt stored (samples and skips, every
        run of it); started_at is None for probes stored before schema 2."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT started_at, wall_seconds FROM samples WHERE hunt_id = ? "
                "UNION ALL SELECT started_at, wall_seconds FROM skips WHERE hunt_id = ?",
                (hunt_id, hunt_id)).fetchall()
        return [(None if s is None else float(s), float(w)) for s, w in rows]

    def hunt_samples_in_order(self, hunt_id: int) -> list[tuple[str, str, float]]:
        """(commit, patch ids as stored, tok/s) of one hunt's unprofiled samples of its main arm,
        in the order the probes started (insertion order where a start time is missing)."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT commit_sha, patch_ids, tok_s FROM samples WHERE hunt_id = ? AND arm = ?"
                " AND instrumented = 0 ORDER BY COALESCE(started_at, created_at), id", (hunt_id, Arm.MAIN)).fetchall()
        return [(str(c), str(p), float(v)) for c, p, v in rows]

    def sample_ids(self, key: SampleKey, *, instrumented: bool | None = False,
                   arm: str | None = None) -> list[int]:
        """Ids of the samples `samples()` returns, same order (for `iterations()`)."""
        where, params = _sample_filter(key, instrumented, arm)
        with self._lock:
            return [r[0] for r in self._conn.execute(
                f"SELECT id FROM samples WHERE {where} ORDER BY id", params)]

    def skips(self, key: SampleKey, *, hunt_id: int | None = None) -> list[str]:
        """Skip reasons stored under `key`, in insertion order (of one hunt, if given)."""
        where, params = _KEY_WHERE, list(_key_params(key))
        if hunt_id is not None:
            where += " AND hunt_id = ?"
            params.append(hunt_id)
        with self._lock:
            return [r[0] for r in self._conn.execute(
                f"SELECT reason FROM skips WHERE {where} ORDER BY id", params)]

    def skip_reasons_by_commit(self, hunt_id: int) -> dict[str, list[str]]:
        """Skip reasons one hunt stored, per commit sha, in insertion order."""
        with self._lock:
            rows = self._conn.execute("SELECT commit_sha, reason FROM skips WHERE hunt_id = ? ORDER BY id",
                                      (hunt_id,)).fetchall()
        reasons: dict[str, list[str]] = {}
        for sha, reason in rows:
            reasons.setdefault(sha, []).append(reason)
        return reasons

    # -- setup step --------------------------------------------------------------------------

    def add_setup(self, key: SampleKey, setup_hash: str, *, hunt_id: int | None, command: str,
                  ok: bool, reason: str | None, exit_code: int | None, seconds: float,
                  output_tail: str, log_path: str | None) -> int:
        """Store one setup-step run, committed at once."""
        with self._transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO setups(hunt_id, tree, patch_hash, setup_hash, env_fingerprint, command,"
                " ok, reason, exit_code, seconds, output_tail, log_path, created_at)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (hunt_id, key.tree, key.patch_hash, setup_hash, key.env_fingerprint, command,
                 int(ok), reason, exit_code, seconds, output_tail, log_path, time.time()))
            return int(cursor.lastrowid)

    def setups(self, key: SampleKey, setup_hash: str, *, hunt_id: int | None = None) -> list[dict]:
        """Setup runs of a tree (+ patch) with one setup, oldest first (of one hunt, if given)."""
        where = "tree = ? AND patch_hash IS ? AND setup_hash = ? AND env_fingerprint = ?"
        params: list[Any] = [key.tree, key.patch_hash, setup_hash, key.env_fingerprint]
        if hunt_id is not None:
            where += " AND hunt_id = ?"
            params.append(hunt_id)
        with self._lock:
            rows = self._conn.execute(
                f"SELECT ok, reason, exit_code, seconds, output_tail, log_path FROM setups"
                f" WHERE {where} ORDER BY id", params).fetchall()
        keys = ("ok", "reason", "exit_code", "seconds", "output_tail", "log_path")
        return [dict(zip(keys, r), ok=bool(r[0])) for r in rows]

    def iterations(self, sample_id: int) -> "pandas.DataFrame":
        """Per-iteration rows of one sample: column `iter`, then `ms`, `tokens`, counters."""
        import pandas as pd

        with self._lock:
            rows = self._iteration_rows([sample_id]).get(sample_id, ())
        frame = pd.DataFrame([dict(r) for r in rows])
        frame.insert(0, "iter", range(len(frame)))
        return frame

    def _iteration_rows(self, sample_ids: list[int]) -> dict[int, tuple[dict[str, Any], ...]]:
        result: dict[int, list[dict[str, Any]]] = {}
        for chunk in _chunks(sample_ids, 500):  # SQLite caps bound parameters per statement
            marks = ",".join("?" * len(chunk))
            for sid, i, name, value in self._conn.execute(
                    f"SELECT sample_id, iter, name, value FROM iterations "
                    f"WHERE sample_id IN ({marks}) ORDER BY sample_id, iter", chunk):
                rows = result.setdefault(sid, [])
                while len(rows) <= i:
                    rows.append({})
                rows[i][name] = value
        return {sid: tuple(rows) for sid, rows in result.items()}

    # -- hunts -------------------------------------------------------------------------------

    def start_hunt(self, *, kind: str, good: str, bad: str, config_hash: str,
                   env_fingerprint: str, settings: dict) -> int:
        """A new hunt id, or the id of the same unfinished hunt (resume after a kill)."""
        settings_json = json.dumps(settings, sort_keys=True, default=str)
        with self._transaction() as conn:
            row = conn.execute(
                "SELECT id FROM hunts WHERE kind = ? AND good = ? AND bad = ? AND config_hash = ?"
                " AND env_fingerprint = ? AND settings = ? AND finished_at IS NULL"
                " ORDER BY id DESC LIMIT 1",
                (kind, good, bad, config_hash, env_fingerprint, settings_json)).fetchone()
            if row:
                return int(row[0])
            cursor = conn.execute(
                "INSERT INTO hunts(kind, good, bad, config_hash, env_fingerprint, settings,"
                " started_at) VALUES (?,?,?,?,?,?,?)",
                (kind, good, bad, config_hash, env_fingerprint, settings_json, time.time()))
            return int(cursor.lastrowid)

    def rekey_hunt(self, hunt_id: int, config_hash: str) -> None:
        """The hunt's probe config hash is now `config_hash` (its probes were seen to import files
        outside the worktree, which the hash holds): the same command resumes it."""
        with self._transaction() as conn:
            conn.execute("UPDATE hunts SET config_hash = ? WHERE id = ?", (config_hash, hunt_id))

    def finish_hunt(self, hunt_id: int, report: dict) -> None:
        """Mark the hunt finished and keep its JSON report, stamped with the code that wrote it
        (`tool_version`, `tool_commit`) when the report does not carry them (an error report)."""
        stamped = {**tool_identity(), **report}
        with self._transaction() as conn:
            cursor = conn.execute("UPDATE hunts SET finished_at = ?, report = ? WHERE id = ?",
                                  (time.time(), dumps(stamped), hunt_id))
            if cursor.rowcount != 1:
                raise KeyError(f"no hunt {hunt_id} in store {self.path}")

    def hunts(self) -> "pandas.DataFrame":
        """One row per hunt: id, kind, good, bad, started/finished (UTC), verdict, samples, skips."""
        import pandas as pd

        with self._lock:
            frame = pd.read_sql_query(
                "SELECT h.id, h.kind, h.good, h.bad, h.config_hash, h.env_fingerprint,"
                " h.started_at, h.finished_at, json_extract(h.report, '$.verdict') AS verdict,"
                " (SELECT COUNT(*) FROM samples s WHERE s.hunt_id = h.id) AS samples,"
                " (SELECT COUNT(*) FROM skips k WHERE k.hunt_id = h.id) AS skips"
                " FROM hunts h ORDER BY h.id", self._conn)
        for column in ("started_at", "finished_at"):
            frame[column] = pd.to_datetime(frame[column], unit="s", utc=True)
        return frame

    def hunt_report(self, hunt_id: int) -> dict | None:
        """The JSON report of a finished hunt; None if unfinished or unknown."""
        with self._lock:
            row = self._conn.execute("SELECT report FROM hunts WHERE id = ?",
                                     (hunt_id,)).fetchone()
        return json.loads(row[0]) if row and row[0] is not None else None

    def last_hunt_id(self, *, finished: bool = False) -> int | None:
        """The newest hunt's id; `finished`: the newest with a report (a hunt that is running,
        or stopped before its end, has none)."""
        with self._lock:
            row = self._conn.execute("SELECT MAX(id) FROM hunts"
                                     + (" WHERE report IS NOT NULL" if finished else "")).fetchone()
        return None if row[0] is None else int(row[0])

    # -- what probes import from outside the worktree -----------------------------------------

    def outside_imports(self, imports_key: str) -> list[str]:
        """The files outside the worktree that probes of this config (`ProbeConfig.imports_key`)
        were seen to import, sorted."""
        with self._lock:
            try:
                rows = self._conn.execute("SELECT path FROM outside_imports WHERE config_hash = ? ORDER BY path",
                                          (imports_key,)).fetchall()
            except sqlite3.OperationalError:   # no such table: a store not yet opened by this version to write
                return []
        return [row[0] for row in rows]

    def add_outside_imports(self, imports_key: str, paths: Iterable[str]) -> None:
        with self._transaction() as conn:
            conn.executemany("INSERT OR IGNORE INTO outside_imports(config_hash, path) VALUES (?, ?)",
                             [(imports_key, path) for path in sorted(paths)])

    # -- what probes read of their worktree ----------------------------------------------------

    def footprints(self, config_key: str, env_fingerprint: str, trees: Iterable[str]) -> dict[str, dict]:
        """{tree: footprint JSON} of the probe config (`ProbeConfig.imports_key`) on this machine,
        for those of `trees` that have one."""
        wanted = sorted(set(trees))
        found: dict[str, dict] = {}
        with self._lock:
            try:
                for chunk in _chunks(wanted, 500):
                    rows = self._conn.execute(
                        "SELECT tree, footprint FROM footprints WHERE config_hash = ? AND env_fingerprint = ?"
                        f" AND tree IN ({','.join('?' * len(chunk))})", (config_key, env_fingerprint, *chunk)).fetchall()
                    found.update((tree, json.loads(text)) for tree, text in rows)
            except sqlite3.OperationalError:   # no such table: a store not yet opened by this version to write
                return {}
        return found

    def add_footprint(self, tree: str, config_key: str, env_fingerprint: str, footprint: dict) -> None:
        """Keep what a probe read at `tree` (a later record of the same tree replaces it)."""
        with self._transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO footprints(tree, config_hash, env_fingerprint, footprint, created_at)"
                         " VALUES (?, ?, ?, ?, ?)", (tree, config_key, env_fingerprint,
                                                     json.dumps(footprint, sort_keys=True, separators=(",", ":")),
                                                     time.time()))

    # -- nightly series and machine checks ---------------------------------------------------

    def series(self, *, config_hash: str, env_fingerprint: str | None = None) -> "pandas.DataFrame":
        """Per measured commit (plain commits, unprofiled samples): commit, tree, n,
        median_tok_s, first, last - ordered by first measurement (the nightly series)."""
        import pandas as pd

        # Only the main arm is evidence: shimmed runs and runs of a night flagged by the
        # hardware check ('flagged' arm) never enter the series.
        where, params = ("config_hash = ? AND patch_hash IS NULL AND instrumented = 0 AND arm = ?",
                         [config_hash, Arm.MAIN])
        if env_fingerprint is not None:
            where += " AND env_fingerprint = ?"
            params.append(env_fingerprint)
        with self._lock:
            raw = pd.read_sql_query(
                f"SELECT commit_sha AS 'commit', tree, tok_s, created_at FROM samples "
                f"WHERE {where} ORDER BY id", self._conn, params=params)
        columns = ["commit", "tree", "n", "median_tok_s", "first", "last"]
        if raw.empty:
            return pd.DataFrame(columns=columns)
        grouped = raw.groupby(["commit", "tree"], sort=False).agg(
            n=("tok_s", "size"), median_tok_s=("tok_s", "median"),
            first=("created_at", "min"), last=("created_at", "max")).reset_index()
        grouped = grouped.sort_values("first", kind="stable").reset_index(drop=True)
        for column in ("first", "last"):
            grouped[column] = pd.to_datetime(grouped[column], unit="s", utc=True)
        return grouped[columns]

    def record_machine_check(self, env_fingerprint: str, metrics: dict) -> None:
        """Keep one hardware sanity-check result (nightly / doctor)."""
        with self._transaction() as conn:
            conn.execute("INSERT INTO machine_checks(env_fingerprint, metrics, created_at)"
                         " VALUES (?,?,?)", (env_fingerprint, json.dumps(metrics), time.time()))

    def machine_checks(self, env_fingerprint: str) -> "pandas.DataFrame":
        """Past checks of this machine, oldest first: `created_at` (UTC) then one column per metric."""
        import pandas as pd

        with self._lock:
            rows = self._conn.execute(
                "SELECT created_at, metrics FROM machine_checks WHERE env_fingerprint = ?"
                " ORDER BY id", (env_fingerprint,)).fetchall()
        frame = pd.DataFrame([{"created_at": created, **json.loads(metrics)}
                              for created, metrics in rows])
        if frame.empty:
            return pd.DataFrame(columns=["created_at"])
        frame["created_at"] = pd.to_datetime(frame["created_at"], unit="s", utc=True)
        return frame


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT under the store's lock; ROLLBACK on any exception. A full disk
    raises DiskFull: the transaction is rolled back, every one committed before it stands."""

    def __init__(self, conn: sqlite3.Connection, lock: threading.RLock, path: Path):
        self._conn, self._lock, self._path = conn, lock, path

    def __enter__(self) -> sqlite3.Connection:
        self._lock.acquire()
        try:
            # IMMEDIATE takes the write lock up front: no deadlock upgrading a read lock.
            self._conn.execute("BEGIN IMMEDIATE")
        except BaseException:
            self._lock.release()
            raise
        return self._conn

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            try:
                self._conn.execute("ROLLBACK" if exc_type else "COMMIT")
            except sqlite3.Error as error:
                if exc_type is None and is_disk_full(error, self._path):
                    if self._conn.in_transaction:   # SQLite may have rolled it back itself
                        self._conn.execute("ROLLBACK")
                    raise DiskFull(self._path) from error
                if exc is None:
                    raise
                # the ROLLBACK after an error failed too (SQLite may have rolled back already)
            if exc is not None and is_disk_full(exc, self._path) and not isinstance(exc, DiskFull):
                raise DiskFull(self._path) from exc
        finally:
            self._lock.release()


def newer_schema(path: Path) -> int | None:
    """The schema of the store at `path` when a newer regressbisect wrote it, else None (also when
    it is no store or cannot be read): such a store is that version's to change or delete."""
    try:
        conn = sqlite3.connect(f"{Path(path).absolute().as_uri()}?mode=ro", uri=True)
        try:
            version = _schema_version(conn)
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    return version if version is not None and version > SCHEMA_VERSION else None


def _schema_version(conn: sqlite3.Connection) -> int | None:
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    try:
        return int(row[0]) if row else None
    except ValueError:
        return None


def store_files(path: Path) -> tuple[Path, ...]:
    """The store's file and SQLite's files beside it."""
    return (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm"))


def _key_params(key: SampleKey) -> tuple[Any, ...]:
    return (key.tree, key.patch_hash, key.config_hash, key.env_fingerprint)


def _sql_value(value: Any) -> Any:
    if value is None or isinstance(value, (int, float, str)):
        return value
    return json.dumps(value, default=str)  # a nested value in a row: keep it readable


def _chunks(items: list[int], size: int) -> Iterable[list[int]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]
