"""The probe contract has one home (regressbisect/probe/contract.py): no other module of the
package spells its variables, and the standalone copies of it say what the contract says."""
from __future__ import annotations

import re
from pathlib import Path

from regressbisect.probe import contract

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "regressbisect"

# A contract variable spelled as a whole string literal ("REGRESSBISECT_TOKENS") or used in a shell
# command (${REGRESSBISECT_TOKENS}): what reading or setting it looks like. Prose that names a
# variable (docstrings, help texts) is not a definition.
SPELLED = re.compile(r"""(["'])(REGRESSBISECT\w*)\1|\$\{?(REGRESSBISECT\w*)""")

PLAYS_A_USER = ("workload/dflash/", "testing/")
"""Code that plays a probe written by a user, which spells the names as a user would: the
reference trainer (copied without regressbisect into the demo repository) and the scripts of
the test repositories."""


def spelled_names(path: Path) -> list[str]:
    return [m.group(2) or m.group(3) for m in SPELLED.finditer(path.read_text(encoding="utf-8"))]


def _relative(path: Path) -> str:
    return path.relative_to(PACKAGE_DIR).as_posix()


def test_no_module_but_the_contract_spells_a_probe_variable():
    spelled = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        name = _relative(path)
        if name == "probe/contract.py" or name.startswith(PLAYS_A_USER):
            continue
        spelled += [f"{name}: {variable}" for variable in spelled_names(path)]
    assert spelled == []


def test_code_that_plays_a_user_spells_only_the_contracts_variables():
    known = set(contract.PROBE_ENV)
    unknown = [f"{_relative(path)}: {variable}"
               for path in sorted(PACKAGE_DIR.rglob("*.py")) if _relative(path).startswith(PLAYS_A_USER)
               for variable in spelled_names(path) if variable not in known]
    assert unknown == []


def test_the_check_finds_a_spelled_variable(tmp_path):
    """The grep itself can fail: the forms code reads and sets a variable in are caught."""
    probe = tmp_path / "probe.py"
    probe.write_text('os.environ["REGRESSBISECT_TOKENS"]\nenv = {\'REGRESSBISECT\': "1"}\n'
                     'cmd = "echo ${REGRESSBISECT_WINDOW:-none} $REGRESSBISECT_INSTRUMENT"\n'
                     '"""Prose naming REGRESSBISECT_TOKENS is no definition."""\n')
    assert spelled_names(probe) == ["REGRESSBISECT_TOKENS", "REGRESSBISECT", "REGRESSBISECT_WINDOW",
                                    "REGRESSBISECT_INSTRUMENT"]


def test_the_standalone_trainers_copies_are_the_contracts_values():
    """The reference trainer runs without the package (the demo repository copies it), so it keeps
    its own copies of what it needs of the contract."""
    from regressbisect.workload.dflash import counters, launch, window

    assert window.WINDOW_ENV == contract.WINDOW_ENV
    assert launch.TOKENS_ENV == contract.TOKENS_ENV
    assert launch.LMHEAD_ENV == contract.LMHEAD_ENV
    assert counters.COUNTER_KEYS == contract.COUNTER_NAMES
    train = (PACKAGE_DIR / "workload" / "dflash" / "train.py").read_text(encoding="utf-8")
    assert f'print("{contract.PREFIX}" + ' in train
    sent = (PACKAGE_DIR / "workload" / "dflash" / "window.py").read_text(encoding="utf-8")
    for word in (contract.WINDOW_OPEN, contract.WINDOW_CLOSE):
        assert f'b"{word}\\n"' in sent


def test_every_variable_the_contract_names_starts_with_its_prefix():
    assert [v for v in contract.PROBE_ENV if v != contract.MARKER_ENV and not v.startswith(contract.ENV_PREFIX)] == []
    assert len(set(contract.PROBE_ENV)) == len(contract.PROBE_ENV)
