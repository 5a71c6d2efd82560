"""Every relative Markdown link of README.md, DEVELOPING.md, CHANGELOG.md, scripts/README.md and
docs/ points to a file that exists and, with an anchor, to a heading of that file (GitHub's
slugs), so moving a section cannot leave a dead link."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def _pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "DEVELOPING.md", ROOT / "CHANGELOG.md", ROOT / "scripts" / "README.md",
            *sorted((ROOT / "docs").rglob("*.md"))]


def _prose(text: str) -> list[str]:
    """The lines outside fenced code blocks (a `# comment` in a shell block is no heading)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lowercase, markup and punctuation dropped but '-' and '_',
    each space a '-'."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading's slug, with GitHub's -1, -2 ... for repeats."""
    seen: dict[str, int] = {}
    out = set()
    for line in _prose(page.read_text()):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        out.add(base if count == 0 else f"{base}-{count}")
        seen[base] = count + 1
    return out


def dead_links() -> list[str]:
    dead = []
    for page in _pages():
        for line in _prose(page.read_text()):
            for target in LINK.findall(line):
                if re.match(r"[a-z]+:", target):        # http:, https:, mailto:
                    continue
                path, _, anchor = target.partition("#")
                where = (page.parent / path).resolve() if path else page
                name = f"{page.relative_to(ROOT)}: {target}"
                if not where.exists():
                    dead.append(f"{name} (no such file)")
                elif anchor and where.suffix == ".md" and anchor not in anchors(where):
                    dead.append(f"{name} (no such heading)")
    return dead


def test_slug_follows_githubs_rules():
    assert slug("5. Start-ups side by side, windows alone (`--overlap`)") == \
        "5-start-ups-side-by-side-windows-alone---overlap"
    assert slug("Runs far off their level (`search/interference.py`, `SearchSettings.read_interference`)") == \
        "runs-far-off-their-level-searchinterferencepy-searchsettingsread_interference"


def test_every_relative_link_in_the_docs_reaches_its_file_and_heading():
    assert dead_links() == []
