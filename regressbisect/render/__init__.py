"""Rendering of a JSON report (docs/report-schema.md): one job per module.

- text.py: terminal table and end-of-hunt summary;
- markdown.py: a CI comment;
- plots.py: matplotlib PNGs;
- html.py: one self-contained page (plots inlined);
- facts.py: the formatted facts all of them share, so every format tells the same story.
"""
from __future__ import annotations

from regressbisect.render.html import render_html
from regressbisect.render.markdown import render_markdown
from regressbisect.render.plots import render_plots
from regressbisect.render.text import render_summary, render_table

__all__ = ["render_html", "render_markdown", "render_plots", "render_summary", "render_table"]
