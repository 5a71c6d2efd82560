"""Flags shared by the commands that hunt (run, hunks, nightly)."""
from __future__ import annotations

import functools
import inspect
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Callable, Optional, Sequence

import typer

from regressbisect.errors import UserError

if TYPE_CHECKING:
    from regressbisect.config import Setting
    from regressbisect.git.history import History
    from regressbisect.hunts.common import HuntOutcome

Repo = Annotated[Path, typer.Option("--repo", "-C", help="The git repository to hunt in (default: current directory).")]
def _token_budget(value: str | None) -> str | None:
    """--tokens is a positive integer or 'auto': anything else is a usage error at parse time."""
    if value is None or value.strip().lower() == "auto" or (value.strip().isdigit() and int(value) > 0):
        return value
    raise typer.BadParameter(f"must be a positive integer or 'auto', got {value!r}")


JsonOut = Annotated[Optional[Path], typer.Option("--json", help="Write the JSON report here.")]
StorePath = Annotated[Optional[Path], typer.Option("--store", help="SQLite store of samples (default: <git dir>/regressbisect/store.sqlite).")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress output; only the final report.")]


def reflowed(text: str) -> str:
    """Help text whose paragraphs wrap to the terminal: the line breaks inside each paragraph of
    the docstring-shaped `text` joined (Typer keeps them after the first paragraph)."""
    return "\n\n".join(" ".join(paragraph.split()) for paragraph in inspect.cleandoc(text).split("\n\n"))


def finish(outcome: "HuntOutcome", json_out: Path | None, history: "History", store: Path | None) -> None:
    """The end of `run` and `hunks`: the summary, then the --json report, then the verdict's exit
    code. A report that cannot be written now costs one line, never the answer or its code: the
    store keeps the report, and `report --json` writes it again."""
    import sys

    from regressbisect.render import render_summary
    from regressbisect.render.outputs import write_text, written_after_work
    from regressbisect.jsonio import dumps

    print(render_summary(outcome.report))
    sys.stdout.flush()
    if json_out is not None:
        again = f"regressbisect report -C {history.root} {outcome.hunt_id} --json FILE"
        if store is not None:
            again += f" --store {store}"
        written_after_work("--json", json_out, lambda: write_text(json_out, dumps(outcome.report)),
                           kept=f"the report is stored: `{again}` writes it")
    raise typer.Exit(int(outcome.exit_code))


REVISION_OPTIONS = ("--commit", "--base")
"""The options of a hunting command that name a revision (`hunks`), beside its arguments (`run`'s GOOD BAD)."""


def without_revisions(command_line: Sequence[str]) -> list[str]:
    """The user's command line (`regressbisect CMD ...`) less the revisions it names: the command's
    arguments and its REVISION_OPTIONS. A hunt's follow-up command adds the commits they resolved
    to instead (hunts/common.continue_command): once a commit lands, 'HEAD~2' names another one.
    Which words are option values is the command's own grammar (its click parameters)."""
    from regressbisect.cli import app

    if len(command_line) < 2:
        return list(command_line)
    program, name, *words = command_line
    command = typer.main.get_command(app).commands[name]   # type: ignore[attr-defined]
    takes_value = {opt for p in command.params if p.param_type_name == "option" and not p.is_flag
                   and not p.count for opt in p.opts}

    def value_follows(word: str) -> bool:
        if word.startswith("--"):
            return "=" not in word and word in takes_value
        # a cluster of short options (-qC DIR): the first that takes a value takes the rest of
        # the word, or the next word when it ends the cluster
        first = next((i for i, ch in enumerate(word[1:], 1) if f"-{ch}" in takes_value), None)
        return first == len(word) - 1

    out, rest = [program, name], iter(words)
    for word in rest:
        if word == "--":
            break                         # arguments only from here
        if not word.startswith("-") or word == "-":
            continue                      # an argument
        value = [next(rest, "")] if value_follows(word) else []
        if word.partition("=")[0] not in REVISION_OPTIONS:
            out += [word, *value]
    return out


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


# -- the flags of the settings, generated from their one definition (config.SETTINGS) -----------
def _option(setting: "Setting", panel: bool = True) -> object:
    """The Annotated Typer option of one setting: its flag, its help (Rich markup escaped: help
    texts name [tool.regressbisect]) and, on the hunt commands, its help panel."""
    kind = setting.kind
    flag_type: object = {dict: list[str], list: list[str]}.get(kind, kind)
    extra: dict[str, object] = {}
    if setting.key == "tokens":  # a number or 'auto' (config._split_auto_tokens)
        flag_type, extra["callback"] = str, _token_budget
    decls = [f"{setting.flag}/--no-{setting.flag[2:]}" if kind is bool else setting.flag]
    if panel:
        extra["rich_help_panel"] = setting.knob.panel
    return Annotated[Optional[flag_type], typer.Option(*decls, help=setting.help.replace("[", "\\["), **extra)]


def _parameter(setting: "Setting") -> str:
    return setting.flag.lstrip("-").replace("-", "_")


def _flag_value(setting: "Setting", value: object) -> object:
    """A flag's value as build_config takes it: None = not given."""
    if setting.kind is dict:
        return parse_env(value)  # type: ignore[arg-type]
    if setting.kind is list:
        return tuple(value) if value else None  # type: ignore[arg-type]
    return value


def hunt_options(command_name: str) -> Callable[[Callable], Callable]:
    """Give a hunting command (run, hunks, nightly) the flag of every setting it takes
    (config.SETTINGS, Knob.commands); it receives them as `flags`, build_config's flags (None = not
    given, the slurm ones nested under 'slurm'). Typer needs each option as a parameter of the
    command's signature: this adds them there once instead of in every command."""
    from regressbisect.config import PANELS, SETTINGS

    taken = sorted((s for s in SETTINGS if s.flag and command_name in s.knob.commands),
                   key=lambda s: PANELS.index(s.knob.panel))  # stable: field order within a panel

    def decorate(command: Callable) -> Callable:
        signature = inspect.signature(command, eval_str=True)   # the command's own annotations, resolved

        @functools.wraps(command)
        def wrapper(*args: object, **kwargs: object) -> object:
            flags: dict[str, object] = {"slurm": {}}
            for setting in taken:
                value = _flag_value(setting, kwargs.pop(_parameter(setting)))
                if setting.part == "slurm":
                    flags["slurm"][setting.key] = value  # type: ignore[index]
                else:
                    flags[setting.key] = value
            return command(*args, flags=flags, **kwargs)

        own = [p for p in signature.parameters.values() if p.name != "flags"]
        added = [inspect.Parameter(_parameter(s), inspect.Parameter.KEYWORD_ONLY, default=None,
                                   annotation=_option(s)) for s in taken]
        wrapper.__signature__ = signature.replace(parameters=own + added)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in own + added}
        return wrapper
    return decorate


def _setting(key: str) -> "Setting":
    from regressbisect.config import SETTINGS
    return next(s for s in SETTINGS if s.key == key and s.part != "slurm")


# Options of the commands that are not hunts (demo, doctor): the same flags, without panels.
Tokens, Timeout, Env, Slots, Instrument = (_option(_setting(key), panel=False)
                                           for key in ("tokens", "timeout", "env", "slots", "instrument"))


def parse_demo_tokens(value: str | None) -> int | str | None:
    """`demo --tokens`: a number or 'auto' written into the demo's pyproject (None: its default)."""
    if value is None or value.strip().lower() == "auto":
        return None if value is None else "auto"
    try:
        return int(value)
    except ValueError:
        raise UserError(f"--tokens must be a positive integer or 'auto', got {value!r}") from None
