"""The demo repository: a scripted history of the reference trainer with real regressions.

script.py holds the script (data), build.py builds the repository; `regressbisect demo` runs it."""
from regressbisect.workload.demo.build import (DemoCulprit, DemoRepo, DiffSummary, add_multirank_branch,
                                               build_demo_repo, history_lines, history_table)

__all__ = ["DemoCulprit", "DemoRepo", "DiffSummary", "add_multirank_branch", "build_demo_repo",
           "history_lines", "history_table"]
