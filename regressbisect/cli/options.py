"""Flags shared by the commands that hunt (run, hunks, nightly)."""
from __future__ import annotations

import functools
import inspect
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Callable, Optional

import typer

from regressbisect.errors import UserError

if TYPE_CHECKING:
    from regressbisect.git.history import History
    from regressbisect.hunts.common import HuntOutcome

Repo = Annotated[Path, typer.Option("--repo", "-C", help="The git repository to hunt in (default: current directory).")]
Cmd = Annotated[Optional[str], typer.Option("--cmd", help="Probe command run in each candidate's worktree; {tokens} is replaced by the budget. Default: cmd in \\[tool.regressbisect] of pyproject.toml.")]
def _token_budget(value: str | None) -> str | None:
    """--tokens is a positive integer or 'auto': anything else is a usage error at parse time."""
    if value is None or value.strip().lower() == "auto" or (value.strip().isdigit() and int(value) > 0):
        return value
    raise typer.BadParameter(f"must be a positive integer or 'auto', got {value!r}")


Tokens = Annotated[Optional[str], typer.Option("--tokens", callback=_token_budget, help="Token budget of one measured run (also REGRESSBISECT_TOKENS), or 'auto'. Default: auto (run picks it from pilot probes of GOOD, starting at 4096; docs/cost.md).")]
SharedCaches = Annotated[Optional[bool], typer.Option("--shared-caches/--no-shared-caches", help="Point the inductor/triton/torch-extensions cache variables the user has not set at one directory beside the store, shared by all slots. Default on.")]
Preload = Annotated[Optional[str], typer.Option("--preload", help="'auto' (default): fork plain Python probes from a per-slot server that imported torch once; 'off': a fresh process per probe; or modules to preload, comma-separated (docs/cost.md).")]
Overlap = Annotated[Optional[int], typer.Option("--overlap", help="Probes of a slot run at once: start-ups side by side, measured windows one at a time with the others stopped; for probes that open their window through REGRESSBISECT_WINDOW (docs/cost.md). Default 1 (off).")]
Timeout = Annotated[Optional[float], typer.Option("--timeout", help="Seconds before a probe's process group is killed and the run is skipped. Default 600.")]
MetricRegex = Annotated[Optional[str], typer.Option("--metric-regex", help="Regex whose group 1 is the metric (higher is better), for probes that print no '@regressbisect {...}' line.")]
Unit = Annotated[Optional[str], typer.Option("--unit", help="Unit of the metric in reports. Default: tok/s, or for --metric-regex the unit written after its number ('([0-9.]+) req/s' -> req/s), else units/s.")]
Env = Annotated[Optional[list[str]], typer.Option("--env", help="KEY=VALUE added to the probe's environment (repeatable).")]
MinEffect = Annotated[Optional[float], typer.Option("--min-effect", help="Relative step below which a change is not a culprit (0.02 = 2%). Default 0.02.")]
Direction = Annotated[Optional[str], typer.Option("--direction", help="Culprits of: 'slower' (default), 'faster', or 'both'.")]
MaxSamples = Annotated[Optional[int], typer.Option("--max-samples", help="Cap of samples per candidate; undecided at the cap = UNSURE. Default 96.")]
Slots = Annotated[Optional[int], typer.Option("--slots", help="Candidates measured at once, each in its own worktree and GPUs. Default 1.")]
SlotDevices = Annotated[Optional[list[str]], typer.Option("--slot-devices", help="CUDA_VISIBLE_DEVICES for one slot (repeat once per slot). Default: split visible GPUs evenly.")]
Instrument = Annotated[Optional[str], typer.Option("--instrument", help="'auto' (measure the counters shim's overhead first), 'separate' (counters always in separate runs), 'off'.")]
IsolationCheck = Annotated[Optional[bool], typer.Option("--isolation-check/--no-isolation-check", help="Stop when a probe imports the project from anywhere but its worktree (default on; off for probes that are not Python, or isolation_check = false in \\[tool.regressbisect]). See docs/isolation.md.")]
JsonOut = Annotated[Optional[Path], typer.Option("--json", help="Write the JSON report here.")]
StorePath = Annotated[Optional[Path], typer.Option("--store", help="SQLite store of samples (default: <git dir>/regressbisect/store.sqlite).")]
Executor = Annotated[Optional[str], typer.Option("--executor", help="Where probes run: 'local' (this machine, default) or 'slurm' (one Slurm job per probe; settings in \\[tool.regressbisect.slurm], docs/cluster.md).")]
SlurmPartition = Annotated[Optional[str], typer.Option("--slurm-partition", help="Slurm partition of the probe jobs.")]
SlurmAccount = Annotated[Optional[str], typer.Option("--slurm-account", help="Slurm account charged for the probe jobs.")]
SlurmQos = Annotated[Optional[str], typer.Option("--slurm-qos", help="Slurm QOS of the probe jobs.")]
SlurmGpus = Annotated[Optional[int], typer.Option("--slurm-gpus", help="GPUs per probe job (one node); Slurm pins them. Default 0.")]
SlurmCpus = Annotated[Optional[int], typer.Option("--slurm-cpus", help="CPUs per probe job. Default 1.")]
SlurmMem = Annotated[Optional[str], typer.Option("--slurm-mem", help="Memory per probe job, sbatch syntax (e.g. 64G).")]
SlurmTime = Annotated[Optional[int], typer.Option("--slurm-time", help="Time limit of a probe job in minutes. Default: --timeout + 5 min.")]
SlurmConstraint = Annotated[Optional[str], typer.Option("--slurm-constraint", help="Node features every probe job needs (pins one node type).")]
SlurmSbatchArg = Annotated[Optional[list[str]], typer.Option("--slurm-sbatch-arg", help="Extra sbatch argument, '--name=value' or '--flag' (repeatable).")]
SlurmSharedDir = Annotated[Optional[str], typer.Option("--slurm-shared-dir", help="Directory the nodes share, for worktrees and job files. Default: inside the git dir.")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress output; only the final report.")]


def finish(outcome: "HuntOutcome", json_out: Path | None, history: "History", store: Path | None) -> None:
    """The end of `run` and `hunks`: the summary, then the --json report, then the verdict's exit
    code. A report that cannot be written now costs one line, never the answer or its code: the
    store keeps the report, and `report --json` writes it again."""
    import sys

    from regressbisect.render import render_summary
    from regressbisect.render.outputs import write_text, written_after_work
    from regressbisect.render.report_json import dumps

    print(render_summary(outcome.report))
    sys.stdout.flush()
    if json_out is not None:
        again = f"regressbisect report -C {history.root} {outcome.hunt_id} --json FILE"
        if store is not None:
            again += f" --store {store}"
        written_after_work("--json", json_out, lambda: write_text(json_out, dumps(outcome.report)),
                           kept=f"the report is stored: `{again}` writes it")
    raise typer.Exit(int(outcome.exit_code))


def parse_env(pairs: list[str] | None) -> dict[str, str] | None:
    if not pairs:
        return None
    env: dict[str, str] = {}
    for pair in pairs:
        if "=" not in pair or pair.startswith("="):
            raise UserError(f"--env expects KEY=VALUE, got {pair!r}")
        key, value = pair.split("=", 1)
        env[key] = value
    return env


# -- per-candidate setup step, slot virtualenvs, busy-machine guard ---------------------------
Setup = Annotated[Optional[str], typer.Option("--setup", help="Command run in each candidate's worktree after checkout, before its first probe (e.g. 'python setup.py build_ext --inplace'); a failure skips the candidate. Default: setup in \\[tool.regressbisect]. See docs/setup.md.")]
Venv = Annotated[Optional[bool], typer.Option("--venv/--no-venv", help="One virtualenv per slot (your packages visible), activated for setup and probe: installs never leak. Default off.")]
SetupTimeout = Annotated[Optional[float], typer.Option("--setup-timeout", help="Seconds before a setup command is killed and the candidate skipped. Default 1800.")]
BuildCheck = Annotated[Optional[bool], typer.Option("--build-check/--no-build-check", help="Stop before the first probe when the project declares compiled extension modules (setup.py ext_modules, a compiling build backend) and no --setup builds them. Default on; off measures the candidates as they are. See docs/setup.md.")]
CompileWorkers = Annotated[Optional[bool], typer.Option("--compile-workers/--no-compile-workers", help="Let torch.compile start its pool of compile worker processes in every probe. Default off: TORCHINDUCTOR_COMPILE_THREADS=1 unless set (a warm cache leaves the pool little to do; docs/cost.md).")]
BusyCheck = Annotated[Optional[bool], typer.Option("--busy-check/--no-busy-check", help="Measure other processes' CPU/GPU load during every sample; re-take samples taken under contention. Default on.")]
BusyCpus = Annotated[Optional[float], typer.Option("--busy-cpus", help="Other load in CPUs that a sample tolerates (also at least --busy-share of the cores). Default 0.5. See docs/contention.md.")]
BusyShare = Annotated[Optional[float], typer.Option("--busy-share", help="Share of the machine's cores other processes may use during a sample. Default 0.10.")]
MaxWait = Annotated[Optional[float], typer.Option("--max-wait", help="Seconds to wait for a quiet machine before re-taking a contended sample; then exit 8. Default 600.")]


_SHARED_OPTIONS: tuple[tuple[str, object, str], ...] = (
    ("setup", Setup, "setup"), ("venv", Venv, "venv"), ("setup_timeout", SetupTimeout, "setup_timeout"),
    ("build_check", BuildCheck, "build_check"),
    ("busy_check", BusyCheck, "busy_check"), ("busy_cpus", BusyCpus, "busy_cpus"),
    ("busy_share", BusyShare, "busy_share"), ("max_wait", MaxWait, "max_wait"), ("preload", Preload, "preload"),
    ("overlap", Overlap, "overlap"), ("shared_caches", SharedCaches, "shared_caches"),
    ("compile_workers", CompileWorkers, "compile_workers"),
    ("slurm_partition", SlurmPartition, "slurm.partition"), ("slurm_account", SlurmAccount, "slurm.account"),
    ("slurm_qos", SlurmQos, "slurm.qos"), ("slurm_gpus", SlurmGpus, "slurm.gpus_per_probe"),
    ("slurm_cpus", SlurmCpus, "slurm.cpus_per_probe"), ("slurm_mem", SlurmMem, "slurm.mem"),
    ("slurm_time", SlurmTime, "slurm.time_limit_min"), ("slurm_constraint", SlurmConstraint, "slurm.constraint"),
    ("slurm_sbatch_arg", SlurmSbatchArg, "slurm.sbatch_args"), ("slurm_shared_dir", SlurmSharedDir, "slurm.shared_dir"),
)
"""(parameter, option, key in [tool.regressbisect]: 'slurm.<key>' is one of its slurm table)."""


def measurement_options(command: Callable) -> Callable:
    """Give a hunting command (run, hunks, nightly) the setup, busy-machine, --preload, --overlap
    and --slurm-* options; it receives them as `shared`, build_config's flags (None = not given,
    the slurm ones nested under 'slurm'). Typer needs each option as a parameter of the command's
    signature: this adds them there once instead of in every command."""
    signature = inspect.signature(command, eval_str=True)   # the command's own annotations, resolved

    @functools.wraps(command)
    def wrapper(*args: object, **kwargs: object) -> object:
        shared: dict[str, object] = {"slurm": {}}
        for name, _, key in _SHARED_OPTIONS:
            value = kwargs.pop(name)
            if key == "slurm.sbatch_args":
                value = tuple(value) if value else None
            table, _, slurm_key = key.partition(".")
            if slurm_key:
                shared["slurm"][slurm_key] = value  # type: ignore[index]
            else:
                shared[table] = value
        return command(*args, shared=shared, **kwargs)

    own = [p for p in signature.parameters.values() if p.name != "shared"]
    added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=option)
             for name, option, _ in _SHARED_OPTIONS]
    wrapper.__signature__ = signature.replace(parameters=own + added)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in own + added}
    return wrapper


def parse_demo_tokens(value: str | None) -> int | str | None:
    """`demo --tokens`: a number or 'auto' written into the demo's pyproject (None: its default)."""
    if value is None or value.strip().lower() == "auto":
        return None if value is None else "auto"
    try:
        return int(value)
    except ValueError:
        raise UserError(f"--tokens must be a positive integer or 'auto', got {value!r}") from None
