"""A program CI installs but this machine lacks: .ci/run installs Chromium (apt-get), uv (pip, the
test extra) and a one-node Slurm, so a test that needs one fails in CI (CI=true) with the reason,
rather than skipping and testing nothing; elsewhere it skips. Hardware CI cannot have (a GPU) is
a plain skip, not this."""
from __future__ import annotations

import os
from typing import NoReturn

import pytest


def missing(reason: str) -> NoReturn:
    __tracebackhide__ = True      # a skip names the test's line, not this one
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI (CI=true) must have it: see .ci/run's output", pytrace=False)
    pytest.skip(reason)
