"""Config merge: defaults <- [tool.regressbisect] <- flags; bad values are one-line user errors."""
from __future__ import annotations

import dataclasses

import pytest

from regressbisect.config import ProbeConfig, build_config
from regressbisect.errors import ExitCode, UserError


def test_flags_override_pyproject_which_overrides_defaults():
    cfg = build_config({"cmd": "python b.py {tokens}", "tokens": 100, "min_effect": 0.03},
                       {"tokens": 200, "slots": None})
    assert cfg.probe.cmd == "python b.py {tokens}"
    assert cfg.probe.tokens == 200          # flag wins
    assert cfg.min_effect == 0.03           # pyproject wins over the default
    assert cfg.slots == 1                   # default (flag None = not given)


def test_config_hash_depends_on_what_a_sample_means_only():
    base = build_config({"cmd": "x {tokens}"}, {})
    assert base.probe.config_hash() == build_config({"cmd": "x {tokens}"}, {"timeout": 5.0, "min_effect": 0.05}).probe.config_hash()
    assert base.probe.config_hash() != build_config({"cmd": "x {tokens}"}, {"tokens": 8192}).probe.config_hash()
    assert base.probe.config_hash() != build_config({"cmd": "x {tokens}"}, {"env": {"A": "1"}}).probe.config_hash()


# A value for each ProbeConfig field other than its default; a field missing here fails the audit.
_OTHER_VALUE = {"cmd": "y {tokens}", "tokens": 8192, "env": {"A": "1"}, "timeout_s": 5.0,
                "metric_regex": r"([0-9.]+) items/s", "setup": "make", "venv": True,
                "setup_timeout_s": 60.0, "isolation_check": False, "lm_head_min_out": 2048,
                "concurrency": (2, 1), "inputs": (("/opt/build.sh", "0123456789abcdef"),),
                "imported": (("/home/me/lib/helper.py", "0123456789abcdef"),)}
_NOT_HASHED = {"timeout_s", "setup_timeout_s"}   # a run that finished within them is the same run


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(ProbeConfig)])
def test_every_probe_field_that_can_change_a_stored_value_is_in_the_config_hash(name):
    assert name in _OTHER_VALUE, f"classify the new ProbeConfig field {name!r}: hashed or not"
    base = ProbeConfig(cmd="x {tokens}")
    changed = dataclasses.replace(base, **{name: _OTHER_VALUE[name]})
    assert (changed.config_hash() == base.config_hash()) == (name in _NOT_HASHED)


def test_a_changed_metric_regex_or_lm_head_width_is_another_series():
    base = build_config({"cmd": "x {tokens}"}, {})
    assert base.probe.config_hash() != build_config({"cmd": "x {tokens}"},
                                                    {"metric_regex": r"([0-9.]+) items/s"}).probe.config_hash()
    assert base.probe.config_hash() != build_config({"cmd": "x {tokens}", "lm_head_min_out": 2048},
                                                    {}).probe.config_hash()
    assert base.unit == "tok/s" and base.probe.config_hash() == build_config(
        {"cmd": "x {tokens}"}, {"unit": "tokens/s"}).probe.config_hash()   # a label, not a value


def test_samples_taken_with_other_probes_beside_them_are_another_series():
    def hash_of(**flags):
        return build_config({"cmd": "x {tokens}"}, flags).probe.config_hash()

    alone = hash_of()
    assert len({alone, hash_of(slots=9), hash_of(slots=2), hash_of(overlap=3), hash_of(slots=3, overlap=1),
                hash_of(slots=1, overlap=3)}) == 5   # the last is overlap=3 again (slots 1 is the default)
    assert hash_of(slots=9, min_effect=0.05) == hash_of(slots=9)   # a search setting is not a sample's
    # a hunt that measures one candidate at a time (hunks, nightly's series) keys as one alone
    assert build_config({"cmd": "x {tokens}"}, {"slots": 4, "overlap": 2}).probe.alone().config_hash() == alone


@pytest.mark.parametrize("table, flags, words", [
    ({}, {}, "no probe command"),
    ({"cmd": "x", "bogus": 1}, {}, "unknown key 'bogus'"),
    ({"cmd": "x", "tokens": "many"}, {}, "tokens"),
    ({"cmd": "x"}, {"min_effect": 5.0}, "--min-effect"),
    ({"cmd": "x"}, {"direction": "sideways"}, "--direction"),
    ({"cmd": "x"}, {"slots": 2, "slot_devices": ["0"]}, "--slot-devices"),
    ({"cmd": "x"}, {"tokens": 0}, "--tokens"),
    ({"cmd": "x"}, {"metric_regex": "([0-9"}, "--metric-regex '([0-9' is not a valid regex"),
    ({"cmd": "x", "metric_regex": r"[\d.]+ tok/s"}, {}, "exactly one group"),
    ({"cmd": "x"}, {"metric_regex": r"([\d.]+) (tok)/s"}, "it has 2"),
])
def test_bad_config_is_a_one_line_user_error(table, flags, words):
    with pytest.raises(UserError) as info:
        build_config(table, flags)
    assert words in info.value.message
    assert "\n" not in info.value.message
    assert info.value.exit_code == ExitCode.USER_ERROR


def test_every_default_read_by_several_modules_comes_from_config():
    """The search's, the change-point detector's, nightly's and the CLI's defaults are config's."""
    import inspect

    from regressbisect import config
    from regressbisect.cli.nightly_cmd import nightly
    from regressbisect.hunts.nightly import NightlySettings
    from regressbisect.search import settings
    from regressbisect.search.bisect import SearchSettings
    from regressbisect.search.changepoints import ChangePointSettings

    hunt = config.HuntConfig(probe=config.ProbeConfig(cmd="true"))
    search = SearchSettings()
    assert (hunt.min_effect, hunt.direction, hunt.max_samples) == (config.MIN_EFFECT, config.DIRECTION,
                                                                   config.MAX_SAMPLES)
    assert (search.min_effect, search.direction, search.max_samples) == (config.MIN_EFFECT, config.DIRECTION,
                                                                         config.MAX_SAMPLES)
    assert settings.DIRECTIONS is config.DIRECTIONS
    assert ChangePointSettings() == ChangePointSettings(min_magnitude=config.CHANGE_MIN_MAGNITUDE,
                                                        alpha=config.CHANGE_ALPHA)
    night = NightlySettings()
    assert (night.branch, night.samples_per_commit, night.max_new, night.lookback) == (
        config.NIGHTLY_BRANCH, config.NIGHTLY_SAMPLES_PER_COMMIT, config.NIGHTLY_MAX_NEW, config.NIGHTLY_LOOKBACK)
    cli = {name: p.default for name, p in inspect.signature(nightly).parameters.items()}
    assert (cli["branch"], cli["samples"], cli["max_new"], cli["lookback"], cli["min_magnitude"], cli["alpha"]) == (
        night.branch, night.samples_per_commit, night.max_new, night.lookback,
        ChangePointSettings().min_magnitude, ChangePointSettings().alpha)


# -- one definition per setting: a new setting is one knob(...) field, and these tests ------------
INTERNAL_FIELDS = {("probe", "concurrency"), ("probe", "inputs"), ("probe", "imported"), ("hunt", "probe"),
                   ("hunt", "tokens_auto")}
"""Config fields that are not user settings: set by the hunt, never by a key or a flag."""


def test_every_config_field_is_a_setting_with_a_pyproject_key_and_a_panel():
    from regressbisect.config import PANELS, SETTINGS, HuntConfig, SlurmConfig, _PYPROJECT_KEYS, _SLURM_KEYS

    fields = {(part, f.name) for part, cls in (("probe", ProbeConfig), ("hunt", HuntConfig), ("slurm", SlurmConfig))
              for f in dataclasses.fields(cls)}
    assert {(s.part, s.field) for s in SETTINGS} == fields - INTERNAL_FIELDS
    for setting in SETTINGS:
        keys = _SLURM_KEYS if setting.part == "slurm" else _PYPROJECT_KEYS
        assert setting.key in keys, setting
        assert setting.knob.panel in PANELS, setting


def test_every_flag_of_a_setting_is_generated_on_the_commands_that_take_it_in_its_panel():
    import typer.main

    from regressbisect.cli import app
    from regressbisect.config import HUNT_COMMANDS, SETTINGS

    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    for name in HUNT_COMMANDS:
        options = {opt: param for param in commands[name].params for opt in param.opts}
        for setting in (s for s in SETTINGS if s.flag):
            if name not in setting.knob.commands:
                assert setting.flag not in options, (name, setting.flag)
                continue
            param = options[setting.flag]
            assert param.rich_help_panel == setting.knob.panel, (name, setting.flag)
            assert param.default is None, "None = not given: the pyproject key or the field's default applies"
            assert "[" not in param.help.replace("\\[", ""), "Rich markup in a help text is escaped"


def test_readme_key_table_is_the_generated_one():
    from pathlib import Path

    from regressbisect.config import settings_markdown

    readme = (Path(__file__).resolve().parents[1] / "docs" / "configuration.md").read_text()
    assert settings_markdown() in readme, (
        "docs/configuration.md's settings table is stale: replace it with the output of "
        "python -c 'from regressbisect.config import settings_markdown; print(settings_markdown())'")


# -- a search setting is a knob(search=...): the hunts' search settings and resume keys come from it --
SEARCH_HUNTS = ("run", "hunks")


def _another_value(setting):
    """A value of a hunt setting other than its default (None: none that this test can make)."""
    default = setting.default
    if setting.knob.choices:
        return next(c for c in setting.knob.choices if c != default)
    if isinstance(default, bool):
        return not default
    if isinstance(default, (int, float)):
        return default + 1 if isinstance(default, int) else default / 2
    return 0.05 if default is None and setting.kind is float else None


def test_each_search_knob_is_a_search_settings_field_with_the_same_default():
    from regressbisect.config import SETTINGS
    from regressbisect.search.bisect import SearchSettings

    fields = {f.name: f.default for f in dataclasses.fields(SearchSettings)}
    knobs = [s for s in SETTINGS if s.knob.search is not None]
    assert knobs
    for setting in knobs:
        assert setting.part == "hunt", setting
        assert fields.get(setting.knob.search, dataclasses.MISSING) == setting.default, setting


@pytest.mark.parametrize("command", SEARCH_HUNTS)
def test_every_setting_that_changes_a_hunts_search_changes_its_resume_key(command):
    """A stored hunt resumes only under the same settings: a config value the search reads and the
    key left out would resume a hunt decided under another value."""
    from regressbisect.config import SETTINGS, HuntConfig
    from regressbisect.hunts import commits, hunks
    from regressbisect.search.bisect import SearchSettings

    stored_settings = {"run": commits.stored_settings, "hunks": hunks.stored_settings}[command]
    base = HuntConfig(probe=ProbeConfig(cmd="x {tokens}"))
    read = set()
    for setting in (s for s in SETTINGS if s.part == "hunt"):
        value = _another_value(setting)
        if value is None:
            continue
        try:
            changed = dataclasses.replace(base, **{setting.field: value})
        except UserError:   # a value that needs others beside it (--executor slurm)
            continue
        if SearchSettings.of(changed, command) != SearchSettings.of(base, command):
            read.add(setting.field)
            assert stored_settings(changed) != stored_settings(base), setting.field
    # a setting keyed only when set (added after hunts were stored) is in the key once it differs
    keyed_when_set = {s.field for s in SETTINGS if s.knob.keyed_when_set}
    assert read - keyed_when_set == set(base.search_key(command))
    assert read - keyed_when_set <= set(stored_settings(base))


def test_the_hunts_build_their_search_settings_from_the_config_only():
    """SearchSettings(...) by hand in a hunt is a setting the resume key may not have."""
    from pathlib import Path

    hunts = Path(__file__).resolve().parents[1] / "regressbisect" / "hunts"
    for path in hunts.glob("*.py"):
        assert "SearchSettings(" not in path.read_text(), f"{path.name}: use SearchSettings.of(config, command)"


def test_direction_and_executor_from_pyproject_or_a_flag_are_members_written_as_their_words():
    """The config holds members whatever layer gave the word; every place the value is written
    (the resume key's JSON, another hunt's flags) writes the word, as before they were enums."""
    import json

    from regressbisect.config import Direction, Executor, run_flags

    cfg = build_config({"cmd": "x {tokens}", "direction": "both"}, {"executor": "local"})
    assert cfg.direction is Direction.BOTH and cfg.executor is Executor.LOCAL
    assert build_config({"cmd": "x {tokens}"}, {"direction": "faster"}).direction is Direction.FASTER
    assert json.dumps(cfg.search_key("run"), sort_keys=True) == json.dumps(
        {k: (v.value if k == "direction" else v) for k, v in cfg.search_key("run").items()}, sort_keys=True)
    flags = run_flags(cfg)
    assert flags[flags.index("--direction") + 1] == "both" and type(flags[flags.index("--direction") + 1]) is str


def test_a_flag_reaches_its_setting_through_the_generated_options(tmp_path, monkeypatch):
    """Every generated flag lands in build_config's flags under its pyproject key."""
    from regressbisect.cli import options
    from regressbisect.config import SETTINGS

    seen: dict = {}

    @options.hunt_options("run")
    def command(flags: dict | None = None) -> None:
        seen.update(flags or {})

    taken = [s for s in SETTINGS if s.flag and "run" in s.knob.commands]
    command(**{options._parameter(s): None for s in taken})
    assert set(seen) - {"slurm"} == {s.key for s in taken if s.part != "slurm"}
    assert set(seen["slurm"]) == {s.key for s in taken if s.part == "slurm"}


def test_each_settings_own_rule_rejects_a_bad_value_in_one_line_naming_its_flag():
    from regressbisect.config import SETTINGS, HuntConfig, SlurmConfig

    ruled = [s for s in SETTINGS if s.knob.minimum is not None or s.knob.choices is not None]
    assert {s.key for s in ruled} >= {"tokens", "timeout", "max_samples", "slots", "direction", "overlap",
                                      "executor", "cpus_per_probe"}
    for setting in ruled:
        bad = "nonsense" if setting.knob.choices else setting.knob.minimum - (0 if setting.knob.above else 1)
        make = {"probe": lambda **kw: ProbeConfig(cmd="x", **kw), "slurm": SlurmConfig,
                "hunt": lambda **kw: HuntConfig(ProbeConfig(cmd="x"), **kw)}[setting.part]
        with pytest.raises(UserError) as raised:
            make(**{setting.field: bad})
        name = f"slurm {setting.key}" if setting.part == "slurm" else setting.flag
        assert str(raised.value).startswith(f"{name} must ") and "\n" not in str(raised.value)


def test_the_files_outside_the_worktree_a_command_reads_are_in_the_config_hash(tmp_path, monkeypatch):
    from regressbisect.config import command_inputs

    build, log, data = tmp_path / "build.sh", tmp_path / "build.log", tmp_path / "cfg.yaml"
    for path in (build, log, data):
        path.write_text("1\n")
    (tmp_path / "bench.py").write_text("")
    monkeypatch.chdir(tmp_path)   # a relative path names the worktree's file, wherever the hunt starts
    setup = f"sh {build} > {log} 2>&1 && tee -a {log} < {data}; CFG={data} make --opt=x bench.py {tmp_path}"
    assert [path for path, _ in command_inputs("python bench.py", setup)] == [str(build), str(data)]
    config = build_config({"cmd": "python bench.py", "setup": setup}, {})
    assert build_config({"cmd": "python bench.py", "setup": setup}, {}).probe.config_hash() == config.probe.config_hash()
    log.write_text("2\n")   # the command's own output
    assert build_config({"cmd": "python bench.py", "setup": setup}, {}).probe.config_hash() == config.probe.config_hash()
    build.write_text("2\n")
    assert build_config({"cmd": "python bench.py", "setup": setup}, {}).probe.config_hash() != config.probe.config_hash()
    assert dataclasses.replace(config.probe, tokens=1).inputs == config.probe.inputs   # read once
    # Commands that name no such file keep the hash they always had.
    assert ProbeConfig(cmd="x {tokens}", setup="make").config_hash() == "11005b833a287cc9"


def test_the_imported_files_are_stored_under_the_config_without_them_its_company_or_budget():
    base = ProbeConfig(cmd="x {tokens}")
    seen = dataclasses.replace(base, imported=(("/home/me/lib/helper.py", "0123456789abcdef"),))
    assert seen.config_hash() != base.config_hash()
    assert seen.imports_key() == base.imports_key() == dataclasses.replace(
        base, concurrency=(3, 2), tokens=65536).imports_key()
    assert base.imports_key() != dataclasses.replace(base, cmd="y {tokens}").imports_key()


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_every_setting_that_takes_a_number_rejects_nan_and_inf_in_one_line_naming_it(value):
    from regressbisect.config import SETTINGS, HuntConfig, SlurmConfig

    numbers = [s for s in SETTINGS if s.kind is float]
    assert {s.key for s in numbers} >= {"timeout", "setup_timeout", "min_effect", "busy_cpus", "busy_share",
                                        "busy_gpu", "max_wait", "overhead_limit", "poll_s"}
    for setting in numbers:
        make = {"probe": lambda **kw: ProbeConfig(cmd="x", **kw), "slurm": SlurmConfig,
                "hunt": lambda **kw: HuntConfig(ProbeConfig(cmd="x"), **kw)}[setting.part]
        with pytest.raises(UserError) as raised:
            make(**{setting.field: value})
        name = (f"slurm {setting.key}" if setting.part == "slurm"
                else setting.flag or f"{setting.key} in [tool.regressbisect]")
        assert str(raised.value) == f"{name} must be a finite number, got {value}"
