"""Path canonicalisation, path patterns and containment (docs/reference/permissions.md).

Rules this module keeps:
* one function, `canonical`, gives both spellings of a path (lexical and real); the engine and
  every file tool use it, so the checker and the executor never disagree about a path;
* containment compares path components, never string prefixes;
* a pattern matches a path if it matches the path or any of its ancestors (a rule on a directory
  covers everything beneath it); deny/ask compare case-insensitively, allow exactly;
* a file tool opens a decided path with `open_decided` (opened.py), never by its text again;
* what a decision reads of the filesystem is witnessed (`Witness`): every `canonical` is
  recorded with its answer, so the decision can be kept and handed out again while every one
  of them still answers the same (decision.py); so are `is_directory`, `file_stamp` (a file's
  stat: git's config files, read by shell/gitconfig.py) and `environment` (a variable of the
  process); any other read of the disk (a directory walk) calls `unwitnessed_read`, and that
  decision is never kept.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from functools import lru_cache

__all__ = [
    "CanonicalPath",
    "PathPattern",
    "PathError",
    "canonical",
    "compile_path_pattern",
    "is_inside",
    "escape_glob",
    "open_decided",
    "PathChanged",
    "Witness",
    "unwitnessed_read",
    "is_directory",
    "file_stamp",
    "environment",
]


class PathError(ValueError):
    """A path the engine refuses to interpret (NUL byte)."""


@dataclass(frozen=True, slots=True)
class CanonicalPath:
    lexical: str
    real: str

    @property
    def spellings(self) -> tuple[str, ...]:
        return (self.lexical,) if self.lexical == self.real else (self.lexical, self.real)


def expand_home(path: str, home: str | None) -> str:
    if home is None:
        return os.path.expanduser(path)
    if path == "~":
        return home
    if path.startswith("~/"):
        return home.rstrip("/") + path[1:]
    return path


# /proc's links name the process that follows them — the command's, never the engine's: its own
# working directory and root are the call's (`/proc/self/cwd/x` is `x`); another process's (a
# number, `$$` once expanded) cannot be known here.
_PROC_LINK = re.compile(r"/proc/(self|thread-self|[^/]+)(?:/task/[^/]+)?/(cwd|root)(?=/|$)")


def _resolve(path: str, cwd: str, home: str | None) -> CanonicalPath:
    joined = os.path.join(cwd, expand_home(path, home))
    lexical = os.path.normpath(joined)
    while (link := _PROC_LINK.match(lexical)) is not None:  # from the root only: `~/proc/self` is a directory
        if link.group(1) not in ("self", "thread-self"):
            raise PathError(f"{link.group(0)} names another process's directory")
        here = cwd if link.group(2) == "cwd" else "/"
        lexical = joined = os.path.normpath(here + "/" + lexical[link.end():])
    try:
        # the real path from the path as written: `a/../x` with `a` a link is not `x`
        return CanonicalPath(lexical, os.path.realpath(joined))
    except OSError as exc:  # a link the engine may not follow (another user's /proc entry)
        raise PathError(f"{lexical} cannot be resolved: {exc.strerror}") from None


def canonical(path: str, cwd: str, home: str | None = None) -> CanonicalPath:
    """Both spellings of `p` resolved against `cwd`; PathError where that cannot be done (a NUL
    byte, another process's /proc directory, a link the engine may not follow)."""
    if "\x00" in path or "\x00" in cwd:
        raise PathError("path contains a NUL byte")
    answer = _resolve(path, cwd, home)
    witness = _watching.witness
    if witness is not None:
        witness.saw((path, cwd, home), answer)
    return answer


class Witness:
    """What one decision read of the filesystem: each `canonical` (arguments → answer), and
    whether it read the disk any other way (then it cannot be checked again: not `replayable`).
    Used as a context manager around the decision (one per thread); a witness inside another
    hands what it saw to the one around it when it ends."""

    __slots__ = ("reads", "dirs", "files", "env", "replayable", "_outer")

    def __init__(self) -> None:
        self.reads: dict[tuple[str, str, str | None], CanonicalPath] = {}
        self.dirs: dict[str, bool] = {}  # `is_directory` answers
        self.files: dict[str, tuple[int, int, int, int] | None] = {}  # `file_stamp` answers
        self.env: dict[str, str | None] = {}  # `environment` answers
        self.replayable = True
        self._outer: Witness | None = None

    def saw(self, key: tuple[str, str, str | None], answer: CanonicalPath) -> None:
        if self.reads.setdefault(key, answer) != answer:
            self.replayable = False  # the disk changed during the decision

    def __enter__(self) -> "Witness":
        self._outer, _watching.witness = _watching.witness, self
        return self

    def __exit__(self, *_exc: object) -> None:
        outer = _watching.witness = self._outer
        self._outer = None
        if outer is not None:  # what a nested decision read, the one around it read too
            for key, answer in self.reads.items():
                outer.saw(key, answer)
            for path, is_dir in self.dirs.items():
                if outer.dirs.setdefault(path, is_dir) != is_dir:
                    outer.replayable = False
            for path, stamp in self.files.items():
                if outer.files.setdefault(path, stamp) != stamp:
                    outer.replayable = False
            for name, value in self.env.items():
                if outer.env.setdefault(name, value) != value:
                    outer.replayable = False
            outer.replayable = outer.replayable and self.replayable

    def still_holds(self) -> bool:
        """Every read answers now what it answered then (read without a witness)."""
        for (path, cwd, home), answer in self.reads.items():
            try:
                if _resolve(path, cwd, home) != answer:
                    return False
            except PathError:
                return False
        for path, is_dir in self.dirs.items():
            if os.path.isdir(path) != is_dir:
                return False
        for path, stamp in self.files.items():
            if _file_stamp(path) != stamp:
                return False
        for name, value in self.env.items():
            if os.environ.get(name) != value:
                return False
        return True


class _Watching(threading.local):
    witness: Witness | None = None


_watching = _Watching()


def is_directory(path: str) -> bool:
    """Whether `path` is a directory now, witnessed (a kept decision checks it again)."""
    witness = _watching.witness
    if witness is None:
        return os.path.isdir(path)
    known = witness.dirs.get(path)
    if known is None:
        known = witness.dirs[path] = os.path.isdir(path)
    return known


def file_stamp(path: str) -> tuple[int, int, int, int] | None:
    """The file at `path` now — (mode, mtime_ns, size, inode); None when there is none; mode -1
    and the error number when it cannot be looked at — witnessed (a kept decision checks it again)."""
    stamp = _file_stamp(path)
    witness = _watching.witness
    if witness is not None and witness.files.setdefault(path, stamp) != stamp:
        witness.replayable = False
    return stamp


def _file_stamp(path: str) -> tuple[int, int, int, int] | None:
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as error:
        return (-1, error.errno or 0, 0, 0)
    return (info.st_mode, info.st_mtime_ns, info.st_size, info.st_ino)


def environment(name: str) -> str | None:
    """The process environment's `name`, witnessed (a kept decision checks it again)."""
    value = os.environ.get(name)
    witness = _watching.witness
    if witness is not None and witness.env.setdefault(name, value) != value:
        witness.replayable = False
    return value


def unwitnessed_read() -> None:
    """The decision under way read the disk other than through `canonical`: it is not kept."""
    witness = _watching.witness
    if witness is not None:
        witness.replayable = False


def is_inside(path: str, root: str) -> bool:
    """Component-wise containment of normalised absolute paths: `/w/proj-evil` is not inside `/w/proj`."""
    path, root = os.path.normpath(path), os.path.normpath(root)
    return path == root or root == "/" or path.startswith(root + "/")


def escape_glob(text: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


def _glob_to_regex(glob: str) -> str:
    """gitignore wildcards without negation: `*` within a component, `**` any components."""
    out: list[str] = []
    parts = glob.split("/")
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            # `a/**` covers everything beneath a; `**/b` any depth; `a/**/b` zero or more dirs.
            out.append(".*" if last else "(?:[^/]*/)*")
            continue
        pos = 0
        piece = []
        while pos < len(part):
            char = part[pos]
            if char == "\\" and pos + 1 < len(part):
                piece.append(re.escape(part[pos + 1]))
                pos += 2
                continue
            if char == "*":
                piece.append("[^/]*")
            elif char == "?":
                piece.append("[^/]")
            elif char == "[":
                close = part.find("]", pos + 2)
                if close == -1:
                    piece.append(re.escape(char))
                else:
                    body = part[pos + 1 : close]
                    if body.startswith("!"):
                        body = "^" + body[1:]
                    piece.append("[" + body.replace("\\", "\\\\") + "]")
                    pos = close + 1
                    continue
            else:
                piece.append(re.escape(char))
            pos += 1
        out.append("".join(piece) + ("" if last else "/"))
    return "".join(out)


@dataclass(frozen=True, slots=True)
class PathPattern:
    """A compiled `Read`/`Write` specifier: either anchored at a directory, or any-depth."""

    source: str
    anchor: str | None  # absolute directory, or None = match any component at any depth
    regex: re.Pattern[str]
    first: str | None = None  # literal first component below the anchor (case-folded if broad)
    broad: bool = False

    def matches(self, path: str) -> bool:
        """`path` (absolute, normalised) or one of its ancestors matches."""
        if self.first is not None and self.anchor is not None and self.anchor != "/":
            # Cheap necessary condition: the first component below the anchor is literal.
            if not path.startswith(self.anchor + "/"):
                return False
            head = path[len(self.anchor) + 1 :].split("/", 1)[0]
            if (head.casefold() if self.broad else head) != self.first:
                return False
        if self.anchor is None:
            return any(self.regex.fullmatch(part) for part in path.split("/") if part)
        if self.anchor == "/":
            rel = path.lstrip("/")
        elif path == self.anchor:
            rel = ""
        elif path.startswith(self.anchor + "/"):
            rel = path[len(self.anchor) + 1 :]
        else:
            return False
        if self.regex.fullmatch(rel):
            return True
        parts = rel.split("/") if rel else []
        for end in range(len(parts) - 1, 0, -1):
            if self.regex.fullmatch("/".join(parts[:end])):
                return True
        return False


@lru_cache(maxsize=4096)
def compile_path_pattern(spec: str, *, project_root: str, home: str, broad: bool) -> PathPattern:
    """Compile a path specifier and its anchoring: "/" project root, "~/" home, bare = any depth.
    `broad` = deny/ask (case-insensitive)."""
    flags = re.IGNORECASE if broad else 0
    body = spec
    anchor: str | None
    if body.startswith("//"):
        anchor, body = "/", body[2:]
    elif body == "~" or body.startswith("~/"):
        anchor, body = home, body[2:]
    elif body.startswith("/"):
        anchor, body = project_root, body[1:]
    elif body.startswith("./"):
        anchor, body = project_root, body[2:]
    elif "/" in body.rstrip("/"):
        anchor = project_root
    else:
        anchor = None if broad else project_root
    body = body.rstrip("/")
    if anchor is not None and body in ("", "**"):
        regex = re.compile(".*", flags)
    else:
        regex = re.compile(_glob_to_regex(body), flags)
    if anchor is None and "**" in body:
        anchor = project_root  # a bare `**` has no component to match; treat it as rooted
    head = body.split("/", 1)[0]
    first = None
    if anchor is not None and head and not re.search(r"[*?\[\]\\]", head):
        first = head.casefold() if broad else head
    return PathPattern(spec, anchor, regex, first, broad)


# Opening a decided path lives in opened.py: its error is an OSError, a class mypyc cannot
# compile (setup.py compiles this module). Named here too, where file tools have always found it.
from .opened import PathChanged, open_decided  # noqa: E402
