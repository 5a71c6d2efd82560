"""A real git repository whose speed lives in a compiled C extension (setuptools Extension).

`fastmod.c` returns SPEED from C; one commit of the history changes it (the slowdown is in
the C source). `bench.py` imports the compiled `fastmod` and prints SPEED times seeded
lognormal noise (the scheme of benchrepo.py), so the hunt's answer depends only on which
build of `fastmod` the probe imported. Nothing is compiled at commit time: a worktree holds
only sources until a setup step builds it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from regressbisect.testing.benchrepo import BENCH
from regressbisect.testing.gitrepo import make_repo

C_SOURCE = '''\
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define SPEED {speed!r}

static PyObject *speed(PyObject *self, PyObject *args) {{
    return PyFloat_FromDouble(SPEED);
}}

static PyMethodDef methods[] = {{
    {{"speed", speed, METH_NOARGS, "tok/s of this build"}},
    {{NULL, NULL, 0, NULL}}
}};

static struct PyModuleDef module = {{PyModuleDef_HEAD_INIT, "fastmod", NULL, -1, methods}};

PyMODINIT_FUNC PyInit_fastmod(void) {{ return PyModule_Create(&module); }}
'''

SETUP_PY = '''\
from setuptools import Extension, setup

setup(name="fastmod", version="0.1", ext_modules=[Extension("fastmod", ["fastmod.c"])],
      py_modules=[])
'''

BENCH_C = BENCH.replace("from speed import SPEED", "import fastmod\nSPEED = fastmod.speed()")

GITIGNORE = "build/\n*.so\n*.egg-info/\n"


def make_cext_repo(path: Path, speeds: Sequence[float]) -> list[str]:
    """One commit per speed; commits that keep the speed touch an unrelated file instead."""
    commits: list[dict[str, str]] = []
    previous = None
    for i, speed in enumerate(speeds):
        files: dict[str, str] = {}
        if i == 0:
            files.update({"bench.py": BENCH_C, "setup.py": SETUP_PY, ".gitignore": GITIGNORE})
        if speed != previous:
            files["fastmod.c"] = C_SOURCE.format(speed=float(speed))
        else:
            files[f"notes/n{i}.txt"] = f"harmless change {i}\n"
        commits.append(files)
        previous = speed
    messages = [f"C: speed {s}" if i == 0 or s != speeds[i - 1] else f"harmless {i}"
                for i, s in enumerate(speeds)]
    return make_repo(path, commits, messages)
