"""Git's alias table as git would read it for one working directory (docs/reference/permissions.md,
"Git by another name").

What belongs here: finding the repository of a directory, the configuration files git reads and
their order, a parser of git's config syntax sufficient for `[alias]` entries and includes, and a
cache of parsed files. Nothing of the shell analysis: the git wrapper (wrappers.py) asks `aliases`
for the table and expands what it finds.

Rules this module keeps:
* toward denying when unsure: a config file that exists but cannot be read or parsed, an include
  nested too deep, an include whose condition cannot be evaluated (`hasconfig:`), configuration
  from `GIT_CONFIG_PARAMETERS` — the table says so (`unknown`, or the names in `uncertain`), and
  the wrapper makes the git command's program unknown;
* a missing file or include is no error (git skips it too);
* later definitions win: files in git's order (system, global — XDG then ~/.gitconfig —, the
  repository's, the worktree's), then `GIT_CONFIG_COUNT`'s; the wrapper lets `-c` win over all;
* each file is parsed once per (path, mode, mtime_ns, size, inode): a decision stats the files,
  it does not read them again; every stat and variable is witnessed (paths.file_stamp,
  paths.environment), so a kept decision stands while none of them changes.

Not compiled (setup.py's COMPILED): it reads the disk and the process environment.
"""

from __future__ import annotations

import os
import re
import stat
from typing import Mapping, NamedTuple

from ..paths import environment, file_stamp

__all__ = ["AliasTable", "aliases", "parse_config"]

MAX_INCLUDE_DEPTH = 10  # git's own limit


class AliasTable(NamedTuple):
    values: dict[str, str | None]  # casefolded alias name → value (None: a key without `=`)
    uncertain: frozenset[str]  # names an include git may or may not read defines
    unknown: str | None  # why any name may be an alias (the table cannot be read)
    top: str  # where git runs a `!` alias: the top of the working tree (else the directory it runs in)


class _Entry(NamedTuple):
    """One item of a parsed file: an alias definition or an include."""

    kind: str  # "alias" | "include"
    name: str  # alias name, or the include's condition ("" = unconditional)
    value: str | None


class _Parsed(NamedTuple):
    entries: list[_Entry]
    error: str | None


class ConfigSyntaxError(ValueError):
    pass


_KEY_CHARS = re.compile(r"[A-Za-z0-9-]")
_SPACE = " \t\n\r"  # git's isspace (sane-ctype.h), not Python's
_ESCAPES = {"t": "\t", "b": "\b", "n": "\n", "\\": "\\", '"': '"'}


def parse_config(text: str) -> list[tuple[str, str | None]]:
    """Every `section.key` (section and key lowercased, subsection kept) and its value, in order,
    as git's config parser (config.c: git_parse_source, get_base_var, get_value, parse_value)
    reads them. Raises ConfigSyntaxError where git reports a bad config line."""
    text = text.replace("\r\n", "\n")
    if text.startswith("\ufeff"):
        text = text[1:]
    items: list[tuple[str, str | None]] = []
    section = ""
    pos, end = 0, len(text)
    while pos < end:
        char = text[pos]
        pos += 1
        if char in _SPACE:
            continue
        if char in "#;":
            newline = text.find("\n", pos)
            pos = end if newline < 0 else newline
            continue
        if char == "[":
            section, pos = _section(text, pos)
            continue
        if not char.isascii() or not char.isalpha():
            raise ConfigSyntaxError(f"bad config line near {text[pos - 1:pos + 20]!r}")
        start = pos - 1
        while pos < end and _KEY_CHARS.match(text[pos]):
            pos += 1
        key = section + "." + text[start:pos].lower() if section else text[start:pos].lower()
        while pos < end and text[pos] in " \t":
            pos += 1
        if pos >= end or text[pos] == "\n":
            items.append((key, None))
            continue
        if text[pos] != "=":
            raise ConfigSyntaxError(f"bad config line near {text[start:pos + 20]!r}")
        value, pos = _value(text, pos + 1)
        items.append((key, value))
    return items


def _section(text: str, pos: int) -> tuple[str, int]:
    """`[name]`, `[name "sub"]` (sub verbatim, `\\x` is x) or `[name.sub]` (lowercased)."""
    start = pos
    while pos < len(text):
        char = text[pos]
        pos += 1
        if char == "]":
            name = text[start:pos - 1].lower()
            if name:
                return name, pos
            break
        if char in _SPACE:
            name = text[start:pos - 1].lower()
            while pos < len(text) and text[pos] in " \t\r":
                pos += 1
            if pos >= len(text) or text[pos] != '"':
                break
            pos += 1
            sub: list[str] = []
            while pos < len(text) and text[pos] != '"':
                if text[pos] == "\n":
                    raise ConfigSyntaxError("newline in a subsection name")
                if text[pos] == "\\":
                    pos += 1
                if pos < len(text):
                    sub.append(text[pos])
                pos += 1
            if text[pos + 1:pos + 2] != "]" or not name:
                break
            return name + "." + "".join(sub), pos + 2
        if not (char.isascii() and (char.isalnum() or char in "-.")):
            break
    raise ConfigSyntaxError(f"bad section header near {text[start - 1:start + 20]!r}")


def _value(text: str, pos: int) -> tuple[str, int]:
    """A value after `=`, to the end of its (possibly continued) line."""
    out: list[str] = []
    quote = comment = False
    space = 0
    length = 0  # characters of the value so far (git counts spaces only after the first)
    while True:
        char = text[pos] if pos < len(text) else "\n"
        pos += 1
        if char == "\n":
            if quote:
                raise ConfigSyntaxError("unterminated quote in a value")
            return "".join(out), pos
        if comment:
            continue
        if char in _SPACE and not quote:
            if length:
                space += 1
            continue
        if not quote and char in "#;":
            comment = True
            continue
        if space:
            out.append(" " * space)
            length += space
            space = 0
        if char == "\\":
            escaped = text[pos] if pos < len(text) else "\n"
            pos += 1
            if escaped == "\n":
                continue  # a continued line
            if escaped not in _ESCAPES:
                raise ConfigSyntaxError(f"bad escape \\{escaped} in a value")
            out.append(_ESCAPES[escaped])
            length += 1
        elif char == '"':
            quote = not quote
        else:
            out.append(char)
            length += 1


def _entries(items: list[tuple[str, str | None]]) -> list[_Entry]:
    """The items the alias table needs: `alias.NAME`, `alias.NAME.command` (the subsection form
    newer git reads; an older git ignores it — over-reading is toward denying), and includes."""
    entries: list[_Entry] = []
    for key, value in items:
        section, _, rest = key.partition(".")
        if section == "alias":
            sub, dot, name = rest.rpartition(".")
            if not dot:
                entries.append(_Entry("alias", name.casefold(), value))
            elif name == "command":
                entries.append(_Entry("alias", sub.casefold(), value))
        elif section == "include" and rest == "path":
            entries.append(_Entry("include", "", value))
        elif section == "includeif" and rest.endswith(".path"):
            entries.append(_Entry("include", rest[: -len(".path")], value))
        elif key == "extensions.worktreeconfig":
            entries.append(_Entry("worktree", "", value))
    return entries


_PARSED: dict[str, tuple[tuple[int, int, int, int], _Parsed]] = {}


def _parsed(path: str) -> _Parsed | None:
    """The file's entries (None: no such file), parsed once per version of it."""
    stamp = file_stamp(path)
    if stamp is None:
        return None
    kept = _PARSED.get(path)
    if kept is not None and kept[0] == stamp:
        return kept[1]
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8", "surrogateescape")
        parsed = _Parsed(_entries(parse_config(text)), None)
    except ConfigSyntaxError as error:
        parsed = _Parsed([], f"{path} does not parse: {error}")
    except OSError as error:
        parsed = _Parsed([], f"cannot read {path}: {error.strerror}")
    if len(_PARSED) > 256:
        _PARSED.clear()
    _PARSED[path] = (stamp, parsed)
    return parsed


class _Repo(NamedTuple):
    gitdir: str  # the repository's own directory (a worktree's: .git/worktrees/NAME)
    commondir: str  # where its config lives
    top: str | None  # the directory holding `.git` (None: a bare repository, or one named by --git-dir)


def find_repository(cwd: str, git_dir: str | None) -> _Repo | None:
    """The repository git finds from `cwd` (or `git_dir`, from --git-dir/GIT_DIR): the first
    ancestor with a `.git` directory or `gitdir:` file, or that is itself a git directory."""
    gitdir: str | None = None
    top: str | None = None
    if git_dir is not None:
        gitdir = os.path.normpath(os.path.join(cwd, git_dir))
    else:
        current = os.path.normpath(cwd)
        while gitdir is None:
            dot_git = os.path.join(current, ".git")
            mode = _mode(dot_git)
            if stat.S_ISDIR(mode):
                gitdir, top = dot_git, current
            elif stat.S_ISREG(mode):
                gitdir, top = _gitdir_file(dot_git), current
            elif all(_mode(os.path.join(current, part)) for part in ("HEAD", "objects", "refs")):
                gitdir = current  # a bare repository, or the inside of .git
            parent = os.path.dirname(current)
            if gitdir is None and parent == current:
                return None
            current = parent
    commondir = gitdir
    try:
        if file_stamp(os.path.join(gitdir, "commondir")) is None:
            raise FileNotFoundError
        with open(os.path.join(gitdir, "commondir"), encoding="utf-8", errors="surrogateescape") as handle:
            commondir = os.path.normpath(os.path.join(gitdir, handle.read().strip()))
    except OSError:
        pass
    return _Repo(gitdir, commondir, top)


def _mode(path: str) -> int:
    """The file's mode (0: none), witnessed."""
    stamp = file_stamp(path)
    return stamp[0] if stamp is not None and stamp[0] > 0 else 0


def _gitdir_file(path: str) -> str:
    """The repository a `.git` file names (`gitdir: PATH`, relative to the file's directory);
    an unreadable one names a directory that does not exist (its config reads as missing)."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as handle:
            first = handle.readline().strip()
    except OSError:
        first = ""
    target = first[len("gitdir:"):].strip() if first.startswith("gitdir:") else os.devnull + "/none"
    return os.path.normpath(os.path.join(os.path.dirname(path), target))


def _glob(pattern: str, icase: bool) -> re.Pattern[str]:
    """git's wildmatch with WM_PATHNAME: `*`, `?` and classes stay within a path component, `**/`
    spans directories."""
    out: list[str] = []
    pos = 0
    while pos < len(pattern):
        if pattern.startswith("**/", pos):
            out.append("(?:.*/)?")
            pos += 3
        elif pattern.startswith("**", pos):
            out.append(".*")
            pos += 2
        elif pattern[pos] == "*":
            out.append("[^/]*")
            pos += 1
        elif pattern[pos] == "?":
            out.append("[^/]")
            pos += 1
        elif pattern[pos] == "[" and "]" in pattern[pos + 2:]:
            close = pattern.index("]", pos + 2)
            body = pattern[pos + 1:close]
            body = "^" + body[1:] if body[:1] in "!^" and body else body
            out.append("[" + body.replace("\\", "\\\\") + "]")
            pos = close + 1
        else:
            if pattern[pos] == "\\" and pos + 1 < len(pattern):
                pos += 1
            out.append(re.escape(pattern[pos]))
            pos += 1
    return re.compile("".join(out), re.IGNORECASE if icase else 0)


class _Reader:
    """One reading of the table: the files in order, includes followed."""

    def __init__(self, home: str | None, repo: _Repo | None) -> None:
        self.home = home
        self.repo = repo
        self.values: dict[str, str | None] = {}
        self.uncertain: set[str] = set()
        self.unknown: str | None = None
        self.worktree_config = False

    def read(self, path: str, depth: int = 0, certain: bool = True) -> None:
        if depth > MAX_INCLUDE_DEPTH:
            self.unknown = self.unknown or f"git config includes nested deeper than {MAX_INCLUDE_DEPTH}"
            return
        parsed = _parsed(path)
        if parsed is None:
            return
        if parsed.error is not None:
            self.unknown = self.unknown or parsed.error
            return
        for entry in parsed.entries:
            if entry.kind == "alias":
                if certain:
                    self.values[entry.name] = entry.value
                    self.uncertain.discard(entry.name)
                else:
                    self.uncertain.add(entry.name)
            elif entry.kind == "worktree":
                self.worktree_config = (entry.value or "true").lower() in ("true", "yes", "on", "1")
            elif entry.value is not None:
                applies = self._condition(entry.name, path) if entry.name else True
                target = self._include_path(entry.value, path)
                if target is None:
                    self.unknown = self.unknown or f"an include of {path} under an unknown HOME"
                elif applies is not False:
                    self.read(target, depth + 1, certain and applies is True)

    def _include_path(self, value: str, including: str) -> str | None:
        if value.startswith("~/"):
            return os.path.join(self.home, value[2:]) if self.home else None
        return os.path.normpath(os.path.join(os.path.dirname(including), value))

    def _condition(self, condition: str, including: str) -> bool | None:
        """Whether an `includeIf` applies: True, False, or None (cannot tell)."""
        kind, _, pattern = condition.partition(":")
        if kind in ("gitdir", "gitdir/i"):
            if self.repo is None:
                return False
            if pattern.startswith("~/"):
                if not self.home:
                    return None
                pattern = os.path.join(self.home, pattern[2:])
            elif pattern.startswith("./"):
                pattern = os.path.join(os.path.dirname(including), pattern[2:])
            if not pattern.startswith("/"):
                pattern = "**/" + pattern
            if pattern.endswith("/"):
                pattern += "**"
            regex = _glob(pattern, kind == "gitdir/i")
            texts = {self.repo.gitdir, os.path.realpath(self.repo.gitdir)}
            return any(regex.fullmatch(text) for text in texts)
        if kind == "onbranch":
            branch = self._branch()
            if branch is None:
                return False
            if pattern.endswith("/"):
                pattern += "**"
            return _glob(pattern, False).fullmatch(branch) is not None
        if kind == "hasconfig":
            return None
        return False  # a condition git does not know: never true

    def _branch(self) -> str | None:
        if self.repo is None:
            return None
        file_stamp(os.path.join(self.repo.gitdir, "HEAD"))  # witnessed: a checkout changes it
        try:
            with open(os.path.join(self.repo.gitdir, "HEAD"), encoding="utf-8", errors="surrogateescape") as handle:
                head = handle.read().strip()
        except OSError:
            return None
        return head[len("ref: refs/heads/"):] if head.startswith("ref: refs/heads/") else None


def _truthy(value: str | None) -> bool:
    return value is not None and value.lower() in ("1", "true", "yes", "on")


class _Environ:
    """The variables git reads: the command's own assignments, else the process's (witnessed)."""

    def __init__(self, assigned: Mapping[str, str]) -> None:
        self.assigned = assigned

    def get(self, name: str) -> str | None:
        return self.assigned[name] if name in self.assigned else environment(name)


def aliases(cwd: str, home: str | None, assigned: Mapping[str, str], git_dir: str | None = None,
            work_tree: str | None = None) -> AliasTable:
    """The alias table git reads in `cwd` with HOME `home`, the command's own assignments
    `assigned` (else the process's variables); `git_dir`, `work_tree` from --git-dir and
    --work-tree (relative to `cwd`)."""
    environ = _Environ(assigned)
    if git_dir is None:
        git_dir = environ.get("GIT_DIR") or None
    if work_tree is None:
        work_tree = environ.get("GIT_WORK_TREE") or None
    repo = find_repository(cwd, git_dir)
    top = os.path.normpath(os.path.join(cwd, work_tree)) if work_tree else repo.top if repo and repo.top else cwd
    reader = _Reader(home, repo)
    if not _truthy(environ.get("GIT_CONFIG_NOSYSTEM")):
        reader.read(environ.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig")
    global_file = environ.get("GIT_CONFIG_GLOBAL")
    if global_file is not None:
        if global_file:
            reader.read(os.path.join(cwd, global_file))
    else:
        xdg = environ.get("XDG_CONFIG_HOME") or (os.path.join(home, ".config") if home else None)
        if xdg is None:
            reader.unknown = reader.unknown or "HOME unknown: the global git config cannot be read"
        else:
            reader.read(os.path.join(xdg, "git", "config"))
            reader.read(os.path.join(home, ".gitconfig") if home else os.devnull + "/none")
    if repo is not None:
        reader.read(os.path.join(repo.commondir, "config"))
        if reader.worktree_config:
            reader.read(os.path.join(repo.gitdir, "config.worktree"))
    _from_environment(reader, environ)
    return AliasTable(reader.values, frozenset(reader.uncertain), reader.unknown, top)


def _from_environment(reader: _Reader, environ: _Environ) -> None:
    """`GIT_CONFIG_COUNT` with `GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n` (read), and
    `GIT_CONFIG_PARAMETERS` (`-c` handed down by a parent git: not read, unknown if it names an
    alias)."""
    if "alias" in (environ.get("GIT_CONFIG_PARAMETERS") or "").casefold():
        reader.unknown = reader.unknown or "git alias from GIT_CONFIG_PARAMETERS"
    count_text = environ.get("GIT_CONFIG_COUNT")
    if not count_text:
        return
    try:
        count = int(count_text)
    except ValueError:
        count = -1
    if count < 0 or count > 1000:
        reader.unknown = reader.unknown or "GIT_CONFIG_COUNT is not a count"
        return
    for number in range(count):
        key = environ.get(f"GIT_CONFIG_KEY_{number}")
        value = environ.get(f"GIT_CONFIG_VALUE_{number}")
        if key is None or value is None:
            reader.unknown = reader.unknown or f"GIT_CONFIG_KEY_{number} or GIT_CONFIG_VALUE_{number} missing"
            return
        for entry in _entries([(_env_key(key), value)]):
            if entry.kind == "alias":
                reader.values[entry.name] = entry.value
                reader.uncertain.discard(entry.name)


def _env_key(key: str) -> str:
    """A key as git canonicalises it: section and last part lowercased, a subsection kept."""
    section, _, rest = key.partition(".")
    middle, dot, last = rest.rpartition(".")
    return section.lower() + "." + (middle + dot if dot else "") + last.lower()
