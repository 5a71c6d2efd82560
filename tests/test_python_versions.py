"""The package runs on every Python pyproject.toml admits: what a newer Python's standard library
gives is read through one shim with its backport declared."""
from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_toml_is_read_through_the_shim_whose_backport_is_declared_for_python_3_10():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    direct = []
    for path in sorted((ROOT / "regressbisect").rglob("*.py")):
        if path.name == "tomlread.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n.split(".")[0] in ("tomllib", "tomli") for n in names):
                direct.append(str(path.relative_to(ROOT)))
    assert direct == [], f"import TOML from regressbisect.tomlread (tomllib is 3.11+): {direct}"
    if pyproject["project"]["requires-python"].startswith(">=3.10"):
        assert any(d.replace(" ", "").startswith("tomli") and "python_version<'3.11'" in d.replace(" ", "")
                   for d in pyproject["project"]["dependencies"])
