"""File tools: read, write, edit, glob, grep (oharness's tools for the file operations of
docs/reference/frame.md).

Rules they keep: paths are relative to the session's working directory and are resolved
with the permission engine's `canonical()` and opened with `open_decided()`
(no following a symlink that was not there when the path was decided, and a file whose
real path changed since is refused), so the checker and the executor agree; edit is an
exact string replacement that refuses a missing or ambiguous match; glob and grep skip
`.git`, skip whatever `ctx.hidden` names (and say how many they skipped), and grep
honours `.gitignore` files (pathspec's gitignore semantics) at every directory level.
Blocking file work runs in a worker thread so the loop keeps reading its stdin.
"""

from __future__ import annotations

import asyncio
import errno
import os
import re
from typing import Any

from .base import Tool, ToolContext, ToolFailure, ToolOutput, cap_text

READ_CAP_CHARS = 200_000
LIST_CAP = 1_000
GREP_MATCH_CAP = 500
BINARY_SNIFF = 8192


def _canonical(path: str, ctx: ToolContext) -> Any:
    """The path as the engine decided it; refused when it resolves differently now."""
    from metaharness.permissions import canonical
    from metaharness.permissions.paths import PathError

    try:
        now = canonical(path, ctx.cwd)
    except PathError as exc:
        raise ToolFailure(f"{path!r} cannot be used: {exc}") from None
    decided = ctx.decided_path(now.lexical)
    if decided is None:
        return now
    if decided.real != now.real:
        raise ToolFailure(f"{now.lexical} changed between the decision and its use (now {now.real}); nothing was done")
    return decided


def _open(canon: Any, flags: int) -> Any:
    from metaharness.permissions import PathChanged, open_decided

    try:
        fd = open_decided(canon, flags)
    except PathChanged as exc:
        raise ToolFailure(str(exc)) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ToolFailure(f"{canon.lexical} became a symbolic link after the call was decided; nothing was done") from None
        raise
    return os.fdopen(fd, "rb" if flags & (os.O_WRONLY | os.O_RDWR) == 0 else "wb")


def _read_text(canon: Any) -> str:
    path = canon.lexical
    try:
        with _open(canon, os.O_RDONLY) as handle:
            data = handle.read()
    except FileNotFoundError:
        raise ToolFailure(f"{path} does not exist") from None
    except IsADirectoryError:
        raise ToolFailure(f"{path} is a directory; use the glob tool to list it") from None
    except OSError as exc:
        raise ToolFailure(f"{path} could not be read: {exc.strerror or exc}") from None
    if b"\0" in data[:BINARY_SNIFF]:
        raise ToolFailure(f"{path} is a binary file ({len(data)} bytes)")
    return data.decode("utf-8", errors="replace")


def _write_text(canon: Any, content: str) -> int:
    path = canon.lexical
    data = content.encode("utf-8")
    try:
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        with _open(canon, os.O_WRONLY | os.O_CREAT | os.O_TRUNC) as handle:
            handle.write(data)
    except IsADirectoryError:
        raise ToolFailure(f"{path} is a directory") from None
    except OSError as exc:
        raise ToolFailure(f"{path} could not be written: {exc.strerror or exc}") from None
    return len(data)


class ReadTool(Tool):
    name = "read"
    description = "Read a text file. `offset` (first line, 1-based) and `limit` (line count) are optional."
    input_schema = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "file path, relative to the working directory"},
            "offset": {"type": "integer"},
            "limit": {"type": "integer"},
        },
        "required": ["path"],
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        canon = _canonical(args["path"], ctx)
        text = await asyncio.to_thread(_read_text, canon)
        offset, limit = args.get("offset"), args.get("limit")
        if offset is not None or limit is not None:
            lines = text.splitlines(keepends=True)
            start = max((offset or 1) - 1, 0)
            text = "".join(lines[start : start + limit if limit is not None else None])
        return ToolOutput(cap_text(text, READ_CAP_CHARS))


class WriteTool(Tool):
    name = "write"
    description = "Write a text file (created with its parent directories, or replaced)."
    input_schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"],
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        canon = _canonical(args["path"], ctx)
        size = await asyncio.to_thread(_write_text, canon, args["content"])
        return ToolOutput(f"wrote {size} bytes to {args['path']}")


class EditTool(Tool):
    name = "edit"
    description = (
        "Replace the exact text `old` with `new` in a file. `old` must occur exactly once; "
        "include enough surrounding text to make it unique."
    )
    input_schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}},
        "required": ["path", "old", "new"],
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        old, new = args["old"], args["new"]
        if old == "":
            raise ToolFailure("`old` is empty; give the exact text to replace")
        if old == new:
            raise ToolFailure("`old` and `new` are the same; nothing to change")
        canon = _canonical(args["path"], ctx)
        text = await asyncio.to_thread(_read_text, canon)
        count = text.count(old)
        if count == 0:
            raise ToolFailure(f"`old` does not occur in {args['path']}; nothing was changed")
        if count > 1:
            raise ToolFailure(
                f"`old` occurs {count} times in {args['path']}; include more context so it matches once"
            )
        await asyncio.to_thread(_write_text, canon, text.replace(old, new, 1))
        return ToolOutput(f"edited {args['path']}: replaced 1 occurrence")


class GlobTool(Tool):
    name = "glob"
    description = (
        "List a directory (no `pattern`), or find paths under it matching a glob `pattern` "
        "such as `**/*.py`. Directories end with `/`."
    )
    input_schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "pattern": {"type": "string"}},
        "required": ["path"],
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        root = ctx.resolve(args["path"])
        if not os.path.isdir(root):
            raise ToolFailure(f"{args['path']} is not a directory")
        return await asyncio.to_thread(_glob, root, args.get("pattern"), ctx)


def _glob(root: str, pattern: str | None, ctx: ToolContext) -> ToolOutput:
    from pathlib import Path

    base = Path(root)
    if pattern:
        candidates = base.glob(pattern)
    else:
        candidates = base.iterdir()
    entries: list[str] = []
    skipped = 0
    for found in candidates:
        rel = found.relative_to(base)
        if ".git" in rel.parts:
            continue
        if ctx.hidden(str(found)):
            skipped += 1
            continue
        entries.append(str(rel) + ("/" if found.is_dir() else ""))
    entries.sort()
    lines = entries[:LIST_CAP]
    if len(entries) > LIST_CAP:
        lines.append(f"[{len(entries) - LIST_CAP} more entries not shown]")
    if skipped:
        lines.append(f"[skipped {skipped} path(s) that the permission rules keep from being read]")
    return ToolOutput("\n".join(lines) if lines else "(no entries)")


class GrepTool(Tool):
    name = "grep"
    description = (
        "Search files under `path` for a regular expression (Python syntax), honouring .gitignore. "
        "Prints `file:line:text` per match. `glob` limits the file names searched."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string"},
            "path": {"type": "string"},
            "glob": {"type": "string", "description": "only files whose name matches, e.g. *.py"},
            "ignore_case": {"type": "boolean"},
        },
        "required": ["pattern", "path"],
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        try:
            regex = re.compile(args["pattern"], re.IGNORECASE if args.get("ignore_case") else 0)
        except re.error as exc:
            raise ToolFailure(f"the pattern is not a valid regular expression: {exc}") from None
        root = ctx.resolve(args["path"])
        if not os.path.exists(root):
            raise ToolFailure(f"{args['path']} does not exist")
        return await asyncio.to_thread(_grep, regex, root, args.get("glob"), ctx)


def _gitignore_spec(directory: str) -> Any:
    import pathspec

    try:
        with open(os.path.join(directory, ".gitignore"), encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    return pathspec.GitIgnoreSpec.from_lines(lines)


def _ignored(specs: list[tuple[str, Any]], path: str, is_dir: bool) -> bool:
    """Apply every .gitignore from the root down; a later (deeper) file's verdict wins."""
    verdict = False
    for base, spec in specs:
        rel = os.path.relpath(path, base) + ("/" if is_dir else "")
        result = spec.check_file(rel)
        if result.include is not None:
            verdict = bool(result.include)
    return verdict


def _grep(regex: re.Pattern[str], root: str, name_glob: str | None, ctx: ToolContext) -> ToolOutput:
    import fnmatch

    matches: list[str] = []
    skipped = 0
    total = 0
    display_base = ctx.cwd

    def search_file(path: str) -> None:
        nonlocal total
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            return
        if b"\0" in data[:BINARY_SNIFF]:
            return
        shown = os.path.relpath(path, display_base)
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if regex.search(line):
                total += 1
                if len(matches) < GREP_MATCH_CAP:
                    matches.append(f"{shown}:{number}:{line[:500]}")

    if os.path.isfile(root):
        if ctx.hidden(root):
            raise ToolFailure(f"{root} is kept from being read by the permission rules")
        search_file(root)
    else:
        # A .gitignore above the searched directory (up to the repository top) still applies.
        specs: list[tuple[str, Any]] = []
        ancestors = []
        probe = os.path.dirname(root)
        while probe and probe != os.path.dirname(probe):
            ancestors.append(probe)
            if os.path.isdir(os.path.join(probe, ".git")):
                break
            probe = os.path.dirname(probe)
        else:
            ancestors = []
        for directory in reversed(ancestors):
            spec = _gitignore_spec(directory)
            if spec is not None:
                specs.append((directory, spec))

        def walk(directory: str, inherited: list[tuple[str, Any]]) -> None:
            nonlocal skipped
            own = _gitignore_spec(directory)
            active = inherited + [(directory, own)] if own is not None else inherited
            try:
                entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
            except OSError:
                return
            for entry in entries:
                if entry.name == ".git":
                    continue
                is_dir = entry.is_dir(follow_symlinks=False)
                if _ignored(active, entry.path, is_dir):
                    continue
                if ctx.hidden(entry.path):
                    skipped += 1
                    continue
                if is_dir:
                    walk(entry.path, active)
                elif entry.is_file() and (name_glob is None or fnmatch.fnmatch(entry.name, name_glob)):
                    search_file(entry.path)

        walk(root, specs)
    lines = matches or ["(no matches)"]
    if total > len(matches):
        lines.append(f"[{total - len(matches)} more matches not shown]")
    if skipped:
        lines.append(f"[skipped {skipped} path(s) that the permission rules keep from being read]")
    return ToolOutput(cap_text("\n".join(lines)))
