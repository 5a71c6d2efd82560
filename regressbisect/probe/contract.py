"""The probe contract: everything the tool and a probe process agree on, in one place.

A probe is any command the user gives; the tool runs it once per sample (probe/runner.py). What
passes between them is only what this module names:

* the environment variables the tool sets in the probe (below, each with what it means);
* the lines the probe prints: one metrics line per measured run, and the counters shim's one
  line per process (parsed by probe/protocol.py, which `regressbisect.report` writes with);
* what the shim (probe/shim/sitecustomize.py, first on the probe's PYTHONPATH) records: the
  counters (probe/instrument.py) and the import record of the isolation check
  (probe/isolation.py);
* the window gate's socket talk of overlapped probes (probe/windows.py).

Standard library only, and nothing imported: the shim loads this file by path into every probe
process (where the package need not be importable), and `import regressbisect` imports it.
Code that plays a probe written by a user (the copyable workload/dflash/window.py, the scripts
of the repositories in regressbisect/testing/, the demo repository's trainer) spells the names
as a user would; tests/test_contract.py holds their spelling to this module's values, and no
other module of the package spells them.
"""

# -- environment variables the tool sets in every probe ----------------------------------------

ENV_PREFIX = "REGRESSBISECT_"
"""Every variable of the contract but MARKER_ENV starts so (the shim ignores them when it notes
which variables a program changed before importing torch)."""
MARKER_ENV = "REGRESSBISECT"
"""'1' in every probe: the program runs under the tool."""
TOKENS_ENV = "REGRESSBISECT_TOKENS"
"""The token budget of the measured stage (also `{tokens}` in the probe command); warm-up comes
before it and is not measured."""

# -- set when the hunt asks for them -----------------------------------------------------------

WINDOW_ENV = "REGRESSBISECT_WINDOW"
"""With `--overlap K` only: the path of the window gate's unix socket. A probe that wants its
measured window alone connects, sends the line WINDOW_OPEN, waits for the line WINDOW_GO,
measures, then sends WINDOW_CLOSE (or closes the connection, or exits)."""
WINDOW_OPEN = "open"
WINDOW_GO = "go"
WINDOW_CLOSE = "close"

INSTRUMENT_ENV = "REGRESSBISECT_INSTRUMENT"
"""'1' in an instrumented probe (the counters shim counts); any other value, or none, leaves the
counters off. The tool removes it from a probe that is not instrumented."""
INSTRUMENT_ON = "1"
LMHEAD_ENV = "REGRESSBISECT_LMHEAD_MIN_OUT"
"""Output width from which an F.linear call counts as an lm_head call (`lm_head_min_out`; unset:
DEFAULT_LMHEAD_MIN_OUT). Read at the first counted call, so a program may set it after start-up."""
DEFAULT_LMHEAD_MIN_OUT = 32768
WORK_ENV = "REGRESSBISECT_WORK"
"""'1' in a probe of the counting arm (with INSTRUMENT_ENV): the shim also counts the work of a
few optimizer steps (or of the measured window) exactly: FLOPs by op, calls per aten op, device
kernels on CUDA (probe/work.py). Its timings are never a source of tok/s. Removed otherwise."""
WORK_ON = "1"

IMPORTS_DIR_ENV = "REGRESSBISECT_IMPORTS_DIR"
"""Directory where each Python process of the probe writes its import record at exit (the
isolation check, on by default); set but empty: record nothing."""
PROJECT_MODULES_ENV = "REGRESSBISECT_PROJECT_MODULES"
"""Comma-separated module names (top-level or dotted) of the project whose files the import
record names."""
WATCH_ENV = "REGRESSBISECT_WATCH_MODULES"
"""Comma-separated third-party modules the import record says were imported or not, and which
variables the program changed before each was first imported (what a preload server may
preload: probe/preload.py)."""

WRITES_ENV = "REGRESSBISECT_RECORD_WRITES"
"""'1' when the hunt runs probes side by side (more than one lane, local executor): the import
record also lists the files each process opened for writing (an audit hook on `open`, the one
part of the recorder that runs while the probe measures). Removed otherwise."""
WRITES_ON = "1"

FOOTPRINT_ENV = "REGRESSBISECT_FOOTPRINT"
"""Set, with IMPORTS_DIR_ENV, in the first probe of each candidate of a commit hunt (its footprint
is not known yet): the candidate's worktree (its path, and its real path where they differ,
joined by os.pathsep). The import record then also holds what the process read of that worktree
(FOOTPRINT_KEY), from an audit hook on `open`, `import`, `os.listdir` and `os.scandir` (and the
programs it starts). Empty or unset otherwise: every other probe runs without that hook."""

PROBE_ENV = (MARKER_ENV, TOKENS_ENV, WINDOW_ENV, INSTRUMENT_ENV, LMHEAD_ENV, WORK_ENV, IMPORTS_DIR_ENV,
             PROJECT_MODULES_ENV, WATCH_ENV, WRITES_ENV, FOOTPRINT_ENV)
"""Every variable of the contract. Besides them the runner sets PYTHONUNBUFFERED=1 (a line must
not sit in a buffer when a probe is killed), puts the shim's directory first on PYTHONPATH when
the shim has a job, and a slot's CUDA_VISIBLE_DEVICES (and its venv's PATH and VIRTUAL_ENV)."""

# -- the lines a probe prints -------------------------------------------------------------------

PREFIX = "@regressbisect "
"""Start of a metrics line, one per measured run, on stdout or stderr; a launcher's tag before it
(`[rank1]:`) is accepted. The rest of the line is one JSON object:
{"v": 1, "tokens": T, "seconds": S, "tok_s": T/S, "iters": [{"ms": ..., "tokens": ..., ...}]}.
`tokens` and `seconds` (of the measured stage) are required numbers; `tok_s` defaults to
tokens/seconds; `iters` (optional) are per-iteration rows: ROW_FIELDS and counters; any other key
is kept in the record."""
VERSION_KEY = "v"
"""The metrics line's version field. A line without it is version 1 (lines printed before the
field existed); a version this tool does not know stops the hunt with one line."""
METRICS_VERSION = 1
"""The version of the metrics line this tool writes and reads."""
ROW_FIELDS = frozenset({"ms", "tokens", "iter", "step", "seconds", "tok_s"})
"""Keys of a per-iteration row that are measurements or indices, not counters."""

# -- what the shim records ----------------------------------------------------------------------

COUNTERS_PREFIX = "@regressbisect-counters "
"""Start of the counters line the shim prints at exit, one per process that counted anything:
{"rank": RANK, "pid": PID, "iters": [{COUNTER_NAMES...}, ...]}, one row per optimizer step.
Written and read by the same installation, so it carries no version."""
COUNTER_NAMES = ("lm_head_calls", "create_block_mask_calls", "create_block_mask_ms", "host_syncs")
"""The shim's counters per optimizer step (docs/design.md, "Counters")."""
WORK_KEY = "work"
"""In the counting arm, the counters line also carries WORK_KEY: [rows], one per counted step
(window, run), and WORK_UNIT_KEY: one of WORK_UNITS. A row's keys: `calls`, `flops`, `arm_ms`
(wall of the row in the counting arm, for shares only), `kernels` (CUDA only), `calls:<op>`,
`flops:<op>`, `width:<op>@<N>` (matmul calls by output width) and the COUNTER_NAMES."""
WORK_UNIT_KEY = "work_unit"
WORK_UNITS = ("step", "window", "run")
"""What a work row covers: an optimizer step (WORK_SKIP_STEPS skipped, then up to WORK_STEPS), the
measured window `regressbisect.report(tokens, seconds)` reported (a program with no optimizer),
or the whole process (neither)."""
WORK_WAY_KEY = "work_way"
WORK_WAYS = ("dispatch", "graph+profiler")
"""How the counting arm counted a process (probe/work.py): a dispatch mode over the ops the program
runs (an eager program), or, from its first torch.compile call on (a compiled step, a higher-order
op such as flex_attention or torch.cond, which compile themselves), the graphs dynamo captured and
a profiler per counted step. Row keys of the second way: `graphs` and `graphs:<compiled
function>` (graph calls), `calls:<op>` (graph nodes times graph calls), `graph_breaks` and
`break:<reason>` (the process's so far, not per row), `cpu_ops:<aten op>` (the profiler's
outermost ops), `syncs`, `flops:<op>` (only where the profiler has a formula), `uncounted:<op>`
(higher-order ops: no formula) and, on CUDA, `kernels:<name family>`."""
WORK_SKIP_STEPS = 1
WORK_STEPS = 3
WORK_PREFIX = "work."
"""The parent keeps the work counts in Sample.counters under this prefix (probe/protocol.py);
`work.unit` is WORK_UNITS' index, `work.way` WORK_WAYS'."""
IMPORT_RECORD_SUFFIX = ".rec"
"""The import record, `<pid>.rec` in IMPORTS_DIR_ENV's directory, one per Python process: a
Python literal (no json import in a probe that has none) of {"pid", "rank", "modules": {name:
file} of the project's modules and `__main__`, "watched": [WATCH_ENV's modules imported],
"env_before_import": {watched module: [variables changed before its first import]}, "read":
[absolute files of the modules imported by name from a sys.path directory, and of `__main__`,
but the interpreter's own (under its prefixes, site-packages, dist-packages) and the tool's],
"written": [absolute paths opened for writing, with WRITES_ENV; else empty]}. The parent keeps
what lies outside the worktree. With FOOTPRINT_ENV, also FOOTPRINT_KEY: {"opened": [files of the
worktree opened for reading, or tried], "listed": [its directories listed by the program, not by
the import system], "probed": [where a module the process imported, or tried to, would be found
in the worktree's import directories: `m.py`, `m/__init__.py`, `m`], "modules": [files of the
worktree's modules loaded], "spawned": [{"cwd", "argv": [program, arg...], "recorded": whether its
environment keeps the recorder} of each program started], "overflow": true when it opened more of
the worktree's files, or started more programs, than it keeps}, absolute paths."""
FOOTPRINT_KEY = "footprint"
