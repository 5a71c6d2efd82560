"""Rendering of a report (docs/report-schema.md): one job per module.

- text.py: terminal table and end-of-hunt summary;
- markdown.py: a CI comment;
- plots.py: matplotlib PNGs;
- html.py: one self-contained page (plots inlined);
- facts.py: the formatted facts all of them share, so every format tells the same story;
- report_json.py: the JSON report itself: the header (schema, tool version) and the commit and
  nightly reports' definitions; report_hunks.py: the hunk report's and a drill's; report_parts.py:
  their nested parts (one frozen dataclass each) and how a part is written as JSON;
- report_load.py: a JSON report read back into its typed report, an old schema migrated once (the
  renderers read only typed reports);
- progress.py: the live terminal display while a hunt runs.
"""
from __future__ import annotations

import importlib

_RENDERERS = {"render_html": "html", "render_markdown": "markdown", "render_plots": "plots",
              "render_summary": "text", "render_table": "text"}
__all__ = list(_RENDERERS)


def __getattr__(name: str):
    """Renderers load on first use: report_json.py and progress.py live here too, and the store
    and every hunt import them without wanting matplotlib."""
    if name not in _RENDERERS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_RENDERERS[name]}"), name)
