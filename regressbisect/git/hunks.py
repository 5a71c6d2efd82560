"""Uncommitted changes as immutable hunks with stable ids, and a subset of them as a patch.

Context size: the diff is taken with `-U0` (no context lines) and applied with
`git apply --unidiff-zero` (APPLY_ARGS). With context, two nearby hunks would each carry the
other's *old* lines as context, so applying one without the other could work while applying
both in some other order of subsets would not; with zero context every hunk touches only its
own lines, `git diff -U0` keeps hunks apart by at least one unchanged line, and ANY subset
applies. `git apply` positions a hunk by its *new* start line (the position in the file as
patched so far), so `build_patch` recomputes the new start of every hunk from the old start
plus the line delta of the hunks of the subset that precede it in the same file.

Renames are turned off (`--no-renames`): a renamed file is a delete-file hunk plus an
add-file hunk, which are independent. A file's mode change (chmod +x) is its own hunk.
New, deleted and binary files are one hunk per file, and so is a type change (file <->
symlink), which git writes as a delete and an add of one path. A submodule moved from one
commit to another is a hunk of its own (kind 'submodule'): `git apply` leaves a submodule where
it is, so the worktree checks it out at the new commit instead (`submodule_moves` splits it off a
patch). A submodule added or removed is no hunk: in a commit's diff it stops the hunt (no subset
could be built as the commit is), in the work tree's it is left out with a warning, as are
changes inside a submodule's checkout.

Text is decoded as UTF-8 with `surrogateescape`, so files in any encoding (and CRLF line
ends) travel byte-exact: encode a patch with `encode_patch` (not plain `.encode()`).

The diff is parsed here rather than by `unidiff`, which leaves git's C-quoted paths quoted and
shows mode, type and binary changes only as raw headers (docs/design.md).

The user's repository is only read: every git call sets GIT_OPTIONAL_LOCKS=0 (no index
refresh is written back) and untracked files are diffed with `git diff --no-index` against
/dev/null (no `git add -N`, no temporary index).
"""
from __future__ import annotations

import ast
import hashlib
import re
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Literal, Sequence

from regressbisect.errors import UserError, warn
from regressbisect.git.history import GitFailed, run_git

APPLY_ARGS: tuple[str, ...] = ("--unidiff-zero", "--whitespace=nowarn")
"""Arguments `git apply` needs for a patch made by `build_patch` (zero-context hunks)."""

TEXT_ERRORS = "surrogateescape"
"""How hunk text is decoded from git's bytes and must be encoded back (see `encode_patch`)."""

_DIFF_ARGS = ("--binary", "--no-color", "--no-ext-diff", "--no-textconv", "-U0",
              "--no-renames", "--src-prefix=a/", "--dst-prefix=b/", "--ignore-submodules=none")

_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_EXCERPT_LINES = 8
_SUBMODULE_MODE = "160000"


HunkKind = Literal["modify", "add-file", "delete-file", "binary", "mode", "type-change", "submodule"]
"""What a hunk changes (`Hunk.kind`; the report's `hunks[].kind`)."""


@dataclass(frozen=True)
class Hunk:
    """One independently applicable piece of the uncommitted change."""

    id: str
    """Stable id: hash of (kind, file, hunk body without line numbers); identical bodies in one
    file are told apart by their order. Unchanged across runs while the change is the same."""
    file: str
    """Path relative to the repository root."""
    old_start: int
    """First old line (as in the @@ header: for a pure insertion, the line it follows)."""
    old_len: int
    """Number of old lines replaced (0 for a pure insertion)."""
    new_start: int
    """First new line, as in the full diff (for a pure deletion, the new line it follows)."""
    new_len: int
    """Number of new lines (0 for a pure deletion)."""
    lines: tuple[int, int]
    """New-file line range it touches (for a pure deletion: the line after the cut, at least
    1; for a deleted file: the old file's range; (0, 0) for binary, mode-only and submodule
    changes)."""
    function: str | None
    """Enclosing Python function/class, qualified ("Trainer.step", "train.inner"), found with
    `ast` on the new file (the old file for pure deletions); None at top level or non-Python."""
    header: str
    """The file's diff header for this hunk alone (diff --git, mode and ---/+++ lines)."""
    text: str
    """The hunk: @@ line and body (binary: the GIT binary patch; mode-only: empty)."""
    excerpt: str
    """Up to 8 changed lines, for reports."""
    kind: HunkKind
    """'modify' | 'add-file' | 'delete-file' | 'binary' | 'mode' (chmod only) |
    'type-change' (a file became a symlink or back: delete + add of one path) |
    'submodule' (a submodule moved to another commit: the excerpt names both)."""

    @property
    def body(self) -> str:
        """The hunk text without its @@ line (what build_patch re-heads)."""
        if self.kind == "modify":
            return self.text.split("\n", 1)[1] if "\n" in self.text else ""
        return self.text


# -- collection -----------------------------------------------------------------------------


def collect_hunks(repo_root: Path, base: str = "HEAD", *,
                  include_untracked: bool = False, target: str | None = None) -> list[Hunk]:
    """Staged + unstaged changes of the work tree against `base` (+ untracked files on request);
    with `target`, the changes of commit `target` against commit `base` instead (`hunks --commit`:
    the work tree is not read at all).

    Raises UserError (exit 1) when there is nothing: a hunt over no hunks has nothing to find.
    """
    repo_root = _check_base(Path(repo_root), base)
    if target is not None:
        sections = list(_split_sections(run_git(repo_root, "diff", *_DIFF_ARGS, base, target, "--").stdout))
        for section in sections:
            if _is_submodule(section) and _moved_submodule(section) is None:
                raise UserError(f"commit {target[:10]} adds or removes the submodule {section.path}, which no "
                                f"hunk can hold, so its hunks cannot be measured as the commit is: no hunk "
                                f"verdict (hunt the commit as a whole, or split it)")
        hunks = _merge_type_changes([h for section in sections for h in _section_hunks(repo_root, base, section, target)])
        if not hunks:
            raise UserError(f"commit {target[:10]} changes nothing against {base[:10]} (nothing to bisect)")
        return sorted(_with_stable_ids(hunks), key=_file_order)
    raw = run_git(repo_root, "diff", *_DIFF_ARGS, base, "--").stdout
    sections = list(_split_sections(raw))
    untracked = untracked_files(repo_root)
    if include_untracked:
        for path in untracked:
            proc = run_git(repo_root, "diff", "--no-index", *_DIFF_ARGS, "--", "/dev/null", path,
                           check=False)
            if proc.returncode not in (0, 1):  # --no-index exits 1 when the files differ
                raise GitFailed(("diff", "--no-index", path), proc.returncode,
                                proc.stderr.decode(errors="replace"))
            sections.extend(_split_sections(proc.stdout))
    hunks: list[Hunk] = []
    for section in sections:
        hunks.extend(_section_hunks(repo_root, base, section))
    hunks = _merge_type_changes(hunks)
    if not hunks:
        message = (f"no uncommitted changes against {base} (nothing to bisect; commit range? "
                   "use `regressbisect run`)")
        if untracked and not include_untracked:
            message += f"; {len(untracked)} untracked file(s) left out by --tracked-only"
        raise UserError(message)
    return sorted(_with_stable_ids(hunks), key=_file_order)


def files_under(repo_root: Path, base: str, paths: Sequence[str], *, include_untracked: bool = False,
                target: str | None = None) -> set[str]:
    """The files of `collect_hunks`' diff (same `base`, `target`, `include_untracked`) that git's
    pathspecs `paths` match, from the top of the work tree, as `Hunk.file` names them: git's own
    matching (`git diff --name-only BASE [TARGET] -- PATHS`, untracked files by `git ls-files
    --others -- PATHS`), so a directory, a file, a glob or `:(exclude)` magic mean what they mean
    to git. UserError when git refuses a pathspec (outside the repository, bad magic)."""
    def names(*args: str) -> set[str]:
        proc = run_git(repo_root, *args, "--", *paths, check=False)
        if proc.returncode != 0:
            raise UserError(f"git cannot read the paths {' '.join(paths)}: "
                            f"{proc.stderr.decode(errors='replace').strip()}")
        return {p.decode("utf-8", errors=TEXT_ERRORS) for p in proc.stdout.split(b"\0") if p}

    found = names("diff", "--name-only", "-z", "--no-renames", "--ignore-submodules=none", base,
                  *([target] if target is not None else []))
    if include_untracked and target is None:
        found |= names("ls-files", "--others", "--exclude-standard", "-z")
    return found


def _file_order(hunk: Hunk) -> tuple[str, int, int]:
    return (hunk.file, _KIND_ORDER[hunk.kind], hunk.old_start)


def _merge_type_changes(hunks: list[Hunk]) -> list[Hunk]:
    """A file that became a symlink (or back) is a delete + an add of one path in git's diff.

    The add does not apply without the delete ("already exists"), so the two are one hunk.
    """
    out: list[Hunk] = []
    for hunk in hunks:
        previous = out[-1] if out else None
        if (previous is not None and previous.kind == "delete-file" and hunk.file == previous.file
                and hunk.kind in ("add-file", "binary")):
            out[-1] = replace(hunk, kind="type-change", header=previous.header,
                              text=previous.text + hunk.header + hunk.text,
                              excerpt=f"type change of {hunk.file}\n{hunk.excerpt}")
        else:
            out.append(hunk)
    return out


def _check_base(repo_root: Path, base: str) -> Path:
    """The work tree's top directory (git paths are relative to it); UserError if unusable."""
    if not repo_root.is_dir():
        raise UserError(f"not a git repository: {repo_root}")
    top = run_git(repo_root, "rev-parse", "--show-toplevel", check=False)
    if top.returncode != 0 or not top.stdout.strip():
        raise UserError(f"not a git repository (or a bare one): {repo_root}")
    if run_git(repo_root, "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}",
               check=False).returncode != 0:
        raise UserError(f"unknown revision {base!r} (no commit by that name)")
    return Path(top.stdout.decode("utf-8", errors=TEXT_ERRORS).strip())


def untracked_files(repo_root: Path) -> list[str]:
    out = run_git(repo_root, "ls-files", "--others", "--exclude-standard", "-z").stdout
    return sorted(p.decode(errors=TEXT_ERRORS) for p in out.split(b"\0") if p)


@dataclass(frozen=True)
class _Section:
    """The diff of one file: header lines and the rest, as text."""

    path: str
    header: list[str]     # 'diff --git' .. '+++' (or to the binary marker), without newlines
    rest: list[str]       # hunks (or the binary patch), lines without their newline

    def header_value(self, prefix: str) -> str | None:
        for line in self.header:
            if line.startswith(prefix):
                return line[len(prefix):]
        return None


def _split_sections(raw: bytes | str) -> Iterable[_Section]:
    """Split `git diff` output (or a patch of `build_patch`) into per-file sections.

    Split on b"\\n" only: str.splitlines would also cut at \\r, \\f, \\x1c ... inside a line.
    """
    text = raw if isinstance(raw, str) else raw.decode("utf-8", errors=TEXT_ERRORS)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    starts = [i for i, line in enumerate(lines) if line.startswith("diff --git ")]
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        block = lines[start:end]
        cut = next((i for i, line in enumerate(block)
                    if line.startswith("@@ ") or line == "GIT binary patch"
                    or line.startswith("Binary files ")), len(block))
        yield _Section(_path_of(block[0]), block[:cut], block[cut:])


def _path_of(diff_line: str) -> str:
    """The path of a 'diff --git a/P b/P' line (both sides are equal without renames)."""
    rest = diff_line[len("diff --git "):]
    if rest.startswith('"'):
        return _unquote_c(rest[: _quoted_end(rest) + 1])[2:]
    # 'a/P b/P': both halves have the same length, so the split is unambiguous.
    half = (len(rest) - 1) // 2
    return rest[2:half]


def _quoted_end(s: str) -> int:
    i = 1
    while s[i] != '"':
        i += 2 if s[i] == "\\" else 1
    return i


def _unquote_c(quoted: str) -> str:
    """Undo git's C-style path quoting ("a/t\\303\\251st" -> a/tést)."""
    body = quoted[1:-1]
    out = bytearray()
    escapes = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out += ch.encode("utf-8", errors=TEXT_ERRORS)
            i += 1
        elif body[i + 1] in escapes:
            out.append(escapes[body[i + 1]])
            i += 2
        else:
            out.append(int(body[i + 1:i + 4], 8))
            i += 4
    return out.decode("utf-8", errors=TEXT_ERRORS)


def _section_hunks(repo_root: Path, base: str, section: _Section, target: str | None = None) -> list[Hunk]:
    """The hunks of one file's section (ids are filled in later); the new file is the work
    tree's, or commit `target`'s."""
    if _is_submodule(section):
        return _submodule_hunks(section)
    diff_line = section.header[0]
    is_binary = bool(section.rest) and (section.rest[0] == "GIT binary patch"
                                        or section.rest[0].startswith("Binary files "))
    new_file = section.header_value("new file mode ") is not None
    deleted = section.header_value("deleted file mode ") is not None

    if is_binary or new_file or deleted:
        # One hunk for the whole file: its full header (index line included: a binary patch
        # is checked against the preimage blob) and everything after it.
        kind = "binary" if is_binary else ("add-file" if new_file else "delete-file")
        text = _join(section.rest)
        header = _join(section.header)
        old_len = new_len = 0
        if section.rest and not is_binary:
            m = _HUNK_HEADER.match(section.rest[0])
            assert m is not None, section.rest[0]
            old_len, new_len = _count(m.group(2)), _count(m.group(4))
        if kind == "add-file":
            lines = (1, max(new_len, 1))
        elif kind == "delete-file":
            lines = (1, max(old_len, 1))
        else:
            lines = (0, 0)
        changed = [ln for ln in section.rest[1:] if ln[:1] in "+-"] if not is_binary else []
        excerpt = _excerpt(changed) if changed else f"{kind} {section.path}"
        function = None
        return [Hunk(id="", file=section.path, old_start=0 if new_file else 1, old_len=old_len,
                     new_start=0 if deleted else 1, new_len=new_len, lines=lines,
                     function=function, header=header, text=text, excerpt=excerpt, kind=kind)]

    hunks: list[Hunk] = []
    old_mode, new_mode = section.header_value("old mode "), section.header_value("new mode ")
    if old_mode is not None and new_mode is not None:
        header = _join([diff_line, f"old mode {old_mode}", f"new mode {new_mode}"])
        hunks.append(Hunk(id="", file=section.path, old_start=0, old_len=0, new_start=0,
                          new_len=0, lines=(0, 0), function=None, header=header, text="",
                          excerpt=f"mode {old_mode} -> {new_mode}", kind="mode"))
    content_header = _join([diff_line] + [ln for ln in section.header
                                          if ln.startswith(("--- ", "+++ "))])
    new_tree = old_tree = None  # parsed lazily: only Python files with hunks need them
    for text_lines in _hunk_blocks(section.rest):
        m = _HUNK_HEADER.match(text_lines[0])
        assert m is not None, text_lines[0]
        old_start, old_len = int(m.group(1)), _count(m.group(2))
        new_start, new_len = int(m.group(3)), _count(m.group(4))
        if new_len:
            lines = (new_start, new_start + new_len - 1)
        else:
            lines = (max(new_start + 1, 1),) * 2
        function = None
        if section.path.endswith(".py"):
            if new_len:
                if new_tree is None:
                    new_tree = _FunctionIndex(_read_worktree(repo_root, section.path) if target is None
                                              else _read_blob(repo_root, target, section.path))
                function = new_tree.enclosing(*lines)
            else:
                if old_tree is None:
                    old_tree = _FunctionIndex(_read_blob(repo_root, base, section.path))
                function = old_tree.enclosing(old_start, old_start + old_len - 1)
        changed = [ln for ln in text_lines[1:] if ln[:1] in "+-"]
        hunks.append(Hunk(id="", file=section.path, old_start=old_start, old_len=old_len,
                          new_start=new_start, new_len=new_len, lines=lines, function=function,
                          header=content_header, text=_join(text_lines), excerpt=_excerpt(changed),
                          kind="modify"))
    return hunks


def _is_submodule(section: _Section) -> bool:
    """Whether either side of the section is a submodule (a gitlink, mode 160000)."""
    modes = [section.header_value(p) for p in ("old mode ", "new mode ", "new file mode ",
                                                "deleted file mode ")]
    index_mode = (section.header_value("index ") or "").split(" ")[1:]
    return _SUBMODULE_MODE in modes or _SUBMODULE_MODE in index_mode


def _moved_submodule(section: _Section) -> tuple[str, str, bool] | None:
    """(old commit, new commit, whether its checkout has changes of its own) of a submodule that
    is one on both sides; None for one added, removed, or that became a file or came from one."""
    if (section.header_value("index ") or "").split(" ")[1:] != [_SUBMODULE_MODE]:
        return None
    old = [ln[len("-Subproject commit "):] for ln in section.rest if ln.startswith("-Subproject commit ")]
    new = [ln[len("+Subproject commit "):] for ln in section.rest if ln.startswith("+Subproject commit ")]
    if len(old) != 1 or len(new) != 1:
        return None
    return old[0], new[0].removesuffix("-dirty"), new[0].endswith("-dirty")


def _submodule_hunks(section: _Section) -> list[Hunk]:
    """A submodule moved to another commit: one hunk, with which the worktree checks it out at the
    new commit. Changes inside its checkout (git's '-dirty'), a submodule added or removed: left
    out, with a warning (in a commit's diff, collect_hunks stopped at the latter already)."""
    moved = _moved_submodule(section)
    if moved is None:
        warn(f"the submodule {section.path} is added or removed: left out of the hunks", None)
        return []
    old, new, dirty = moved
    if dirty:
        warn(f"changes inside the submodule {section.path}'s checkout are left out of the hunks "
             f"(commit them there to hunt them as its move)", None)
    if old == new:
        return []
    text = _join(["@@ -1 +1 @@", f"-Subproject commit {old}", f"+Subproject commit {new}"])
    return [Hunk(id="", file=section.path, old_start=1, old_len=1, new_start=1, new_len=1, lines=(0, 0),
                 function=None, header=_join(section.header), text=text,
                 excerpt=f"the submodule {section.path} moved {old[:10]}..{new[:10]}", kind="submodule")]


def submodule_moves(patch: str) -> tuple[dict[str, str], str]:
    """A patch of `build_patch` split in two: the submodules it moves (path -> the commit to check
    out there) and the rest, for `git apply`, which writes files only and leaves a submodule where
    it is (git/worktrees.py checks the moved ones out)."""
    moves: dict[str, str] = {}
    rest: list[str] = []
    for section in _split_sections(patch):
        moved = _moved_submodule(section) if _is_submodule(section) else None
        if moved is not None:
            moves[section.path] = moved[1]
        else:
            rest.append(_join(section.header + section.rest))
    return moves, "".join(rest)


def _hunk_blocks(rest: list[str]) -> Iterable[list[str]]:
    block: list[str] = []
    for line in rest:
        if line.startswith("@@ ") and block:
            yield block
            block = []
        block.append(line)
    if block:
        yield block


def _count(group: str | None) -> int:
    return 1 if group is None else int(group)


def _join(lines: Sequence[str]) -> str:
    return "".join(line + "\n" for line in lines)


def _excerpt(changed: Sequence[str]) -> str:
    shown = [ln.rstrip("\r") for ln in changed[:_EXCERPT_LINES]]
    if len(changed) > _EXCERPT_LINES:
        shown.append(f"... ({len(changed) - _EXCERPT_LINES} more changed lines)")
    return "\n".join(shown)


def _read_worktree(repo_root: Path, path: str) -> str:
    try:
        return (repo_root / path).read_bytes().decode("utf-8", errors=TEXT_ERRORS)
    except OSError:
        return ""


def _read_blob(repo_root: Path, base: str, path: str) -> str:
    proc = run_git(repo_root, "show", f"{base}:{path}", check=False)
    return proc.stdout.decode("utf-8", errors=TEXT_ERRORS) if proc.returncode == 0 else ""


class _FunctionIndex:
    """Innermost enclosing def/class of a line range, from the file's `ast`."""

    def __init__(self, source: str):
        self.scopes: list[tuple[int, int, str]] = []  # (first line, last line, qualified name)
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):  # a half-edited file: no function names, no failure
            return
        self._walk(tree, "")

    def _walk(self, node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                first = min([child.lineno] + [d.lineno for d in child.decorator_list])
                self.scopes.append((first, child.end_lineno or child.lineno, name))
                self._walk(child, name + ".")
            else:
                self._walk(child, prefix)

    def enclosing(self, first: int, last: int) -> str | None:
        best: tuple[int, int, str] | None = None
        for scope in self.scopes:
            if scope[0] <= first and last <= scope[1]:
                if best is None or scope[1] - scope[0] <= best[1] - best[0]:
                    best = scope
        return best[2] if best else None


def _with_stable_ids(hunks: list[Hunk]) -> list[Hunk]:
    """Give every hunk its id: hash of kind, file and body; repeats numbered in file order."""
    seen: Counter[tuple[str, str, str]] = Counter()
    out = []
    for hunk in hunks:
        # The @@ line carries line numbers (they move when an earlier hunk changes): hash the
        # body only. Mode hunks are identified by their mode lines.
        body = hunk.header.split("\n", 1)[1] if hunk.kind == "mode" else hunk.body
        key = (hunk.kind, hunk.file, body)
        occurrence = seen[key]
        seen[key] += 1
        digest = hashlib.sha1("\0".join([*key, str(occurrence)]).encode(
            "utf-8", errors=TEXT_ERRORS)).hexdigest()[:12]
        out.append(replace(hunk, id=digest))
    return out


# -- patches --------------------------------------------------------------------------------


_KIND_ORDER = {"delete-file": 0, "type-change": 0, "mode": 1, "modify": 2, "add-file": 3,
               "binary": 3, "submodule": 3}


def build_patch(hunks: Sequence[Hunk]) -> str:
    """A patch of a subset of one collection's hunks that `git apply *APPLY_ARGS` applies to base.

    Files in path order; within a file the hunks in line order, each re-headed with the new
    start it has when only this subset is applied. Empty string for an empty subset.
    """
    if len({h.id for h in hunks}) != len(hunks):
        raise ValueError("build_patch: duplicate hunks")
    by_file: dict[str, list[Hunk]] = {}
    for hunk in sorted(hunks, key=_file_order):
        by_file.setdefault(hunk.file, []).append(hunk)
    out: list[str] = []
    for file_hunks in by_file.values():
        mode = [h for h in file_hunks if h.kind == "mode"]
        content = [h for h in file_hunks if h.kind == "modify"]
        for whole in (h for h in file_hunks if h.kind not in ("mode", "modify")):
            out.append(whole.header + whole.text)
        if not mode and not content:
            continue
        if content:
            # One header for the file: 'diff --git', the mode lines if the mode hunk is in the
            # subset, then ---/+++.
            first, *file_lines = content[0].header.split("\n")
            mode_lines = mode[0].header.split("\n")[1:3] if mode else []
            out.append(_join([first, *mode_lines]) + "\n".join(file_lines))
            out.extend(_reheaded(content))
        else:
            out.append(mode[0].header)
    return "".join(out)


def _reheaded(content: Sequence[Hunk]) -> list[str]:
    """Hunk texts with @@ lines recounted for this subset (old numbers stay valid)."""
    delta = 0  # lines added minus removed by the subset's earlier hunks in this file
    out = []
    for hunk in content:
        if hunk.old_len == 0:        # insertion after old line old_start
            new_start = hunk.old_start + delta + 1
        elif hunk.new_len == 0:      # deletion: git names the new line before the cut
            new_start = hunk.old_start + delta - 1
        else:
            new_start = hunk.old_start + delta
        out.append(f"@@ -{hunk.old_start},{hunk.old_len} +{new_start},{hunk.new_len} @@\n"
                   + hunk.body)
        delta += hunk.new_len - hunk.old_len
    return out


def encode_patch(patch: str) -> bytes:
    """The bytes to feed `git apply` (undoes the surrogateescape decoding byte-exact)."""
    return patch.encode("utf-8", errors=TEXT_ERRORS)


# -- grouping -------------------------------------------------------------------------------


def group_hunks(hunks: Sequence[Hunk]) -> list[list[list[str]]]:
    """Coarse-to-fine partitions of the hunk ids for ddmin.

    Level 0: one group per file; level 1: per (file, enclosing function/class; top-level code
    of a file is one group); level 2: single hunks. Groups keep file and line order.
    """
    ordered = sorted(hunks, key=_file_order)
    by_file: dict[str, list[str]] = {}
    by_function: dict[tuple[str, str | None], list[str]] = {}
    for hunk in ordered:
        by_file.setdefault(hunk.file, []).append(hunk.id)
        by_function.setdefault((hunk.file, hunk.function), []).append(hunk.id)
    return [list(by_file.values()), list(by_function.values()), [[h.id] for h in ordered]]
