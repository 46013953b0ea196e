"""What of a working tree git reaches: the tracked paths (`.git/index`) and the ignored ones.

What belongs here: finding the repository of a directory (`.git` a directory, or a file
`gitdir: …` for a worktree or a submodule), reading its index (versions 2, 3 and 4), deciding
whether an untracked path is ignored (`.gitignore` files from the root down, `.git/info/exclude`,
the global excludes file), and with these the answer of `reaches_denied`: does a git operation
whose reach is "tracked" (a content view: `git diff`, `git show`, `git log -p`, `git grep`) or
"added" (tracked, or untracked and not ignored: `git add .`, `git stash -u`) reach an entry a
Read deny rule matches? Which operation reaches what is data (data/wrappers.toml `git.reads`).

Rules it keeps (deny is a boundary nothing reopens):
* whatever this module cannot read with certainty is no answer (`view_of` gives no view) and the
  caller walks every entry of the tree, as for any recursive reader: no `.git`, an index it
  cannot parse (unknown version, a required extension such as a split or sparse index, a bad
  length), a repository whose work tree is moved (`core.worktree`, `core.bare`, an `include` in
  its config), git's environment variables set in this process;
* an ignore source it cannot resolve (`core.excludesFile` with an unknown value, a global config
  with an `include`) is left out: fewer ignored paths, so more reached ones;
* a tracked symlink is reached as the link (git stores and prints the link's text, not its
  target's content); a submodule's directory (a gitlink) is reached as every entry under it.
The index, the ignore files and the configs are cached per (path, paths.file_stamp).
"""

from __future__ import annotations

import os
import struct
from typing import Callable, Iterator

from .paths import file_stamp

__all__ = ["GitView", "view_of", "read_index", "UnreadableIndex"]

#: Variables that move git's repository, index, work tree or configuration away from what the
#: files under the directory say: with one set, this module does not answer.
_GIT_ENVIRONMENT = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_CONFIG",
                    "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_COUNT",
                    "GIT_CONFIG_PARAMETERS", "GIT_NAMESPACE")
#: An index longer than this is not read (its parse alone would slow a decision): no answer.
INDEX_ENTRY_LIMIT = 500_000
_GITLINK, _SYMLINK, _SPARSE_DIRECTORY = 0o160000, 0o120000, 0o040000
_MODE_TYPE = 0o170000


class UnreadableIndex(ValueError):
    """The index cannot be read with certainty."""


_cache: dict[tuple[str, str], tuple[tuple[int, int, int, int], object]] = {}


def _cached(kind: str, path: str, build: Callable[[bytes], object]) -> object:
    """`build` of the file's bytes, kept while its stat (paths.file_stamp: mode, mtime, size,
    inode — a file replaced by a rename is another) stays; None for a missing file (a build's
    UnreadableIndex propagates, and is not kept)."""
    key = file_stamp(path)
    if key is None:
        return None
    got = _cache.get((kind, path))
    if got is not None and got[0] == key:
        return got[1]
    with open(path, "rb") as f:
        data = f.read()
    value = build(data)
    if len(_cache) > 256:
        _cache.clear()
    _cache[(kind, path)] = (key, value)
    return value


def read_index(data: bytes, hash_size: int = 20) -> dict[str, int]:
    """The entries of an index file's bytes, path → mode (every stage of a conflicted path is
    one entry). Raises UnreadableIndex for what cannot be read with certainty."""
    if len(data) < 12 + hash_size or data[:4] != b"DIRC":
        raise UnreadableIndex("not an index")
    version, count = struct.unpack_from(">II", data, 4)
    if version not in (2, 3, 4):
        raise UnreadableIndex(f"index version {version}")
    if count > INDEX_ENTRY_LIMIT:
        raise UnreadableIndex(f"{count} entries")
    end = len(data) - hash_size
    offset = 12
    modes: dict[str, int] = {}
    previous = b""
    fixed = 40 + hash_size  # ctime, mtime, dev, ino, mode, uid, gid, size; then the object name
    try:
        for _ in range(count):
            start = offset
            mode = struct.unpack_from(">I", data, offset + 24)[0]
            flags = struct.unpack_from(">H", data, offset + fixed)[0]
            offset += fixed + 2
            if flags & 0x4000:
                if version < 3:
                    raise UnreadableIndex("an extended entry in a version 2 index")
                offset += 2
            if version == 4:
                # the name is the previous one less its last N bytes, then a NUL-ended suffix
                byte = data[offset]
                offset += 1
                strip = byte & 0x7F
                while byte & 0x80:
                    byte = data[offset]
                    offset += 1
                    strip = ((strip + 1) << 7) | (byte & 0x7F)
                if strip > len(previous):
                    raise UnreadableIndex("a prefix longer than the previous name")
                nul = data.index(b"\0", offset, end)
                name = previous[: len(previous) - strip] + data[offset:nul]
                offset = nul + 1
            else:
                nul = data.index(b"\0", offset, end)
                name = data[offset:nul]
                offset = start + ((nul - start + 8) & ~7)  # 1 to 8 NULs pad the entry to 8 bytes
            if offset > end or not name:
                raise UnreadableIndex("an entry past the end")
            if mode & _MODE_TYPE == _SPARSE_DIRECTORY:
                raise UnreadableIndex("a sparse index")
            modes[os.fsdecode(name)] = mode
            previous = name
        while offset < end:  # extensions: a lower-case signature is one git requires to understand
            signature = data[offset:offset + 4]
            size = struct.unpack_from(">I", data, offset + 4)[0]
            if not signature[:1].isupper():
                raise UnreadableIndex(f"the index extension {signature!r}")
            offset += 8 + size
        if offset != end:
            raise UnreadableIndex("extensions past the end")
    except (struct.error, IndexError, ValueError) as exc:
        raise UnreadableIndex(str(exc)) from exc
    return modes


def _config_lines(data: bytes) -> list[tuple[str, str, str]]:
    """(section with subsection, lower-cased key, value) of a git config file, read by the one
    parser of git's config syntax (shell/gitconfig.py, checked against git's own): a line that only
    looks like a section or a key — inside a continued value, say — is not one. An entry of an
    `[include]`/`[includeIf …]` section is kept as a key `include` so the caller sees it; a file git
    would refuse to read is one too (no answer)."""
    from .shell.gitconfig import ConfigSyntaxError, parse_config

    try:
        items = parse_config(data.decode("utf-8", "surrogateescape"))
    except ConfigSyntaxError:
        return [("", "include", "")]
    found: list[tuple[str, str, str]] = []
    for name, value in items:
        section, _, key = name.rpartition(".")
        if section.split(".", 1)[0] in ("include", "includeif"):
            found.append((section, "include", ""))
        else:
            found.append((section, key, "true" if value is None else value))
    return found


def _config(path: str) -> list[tuple[str, str, str]]:
    try:
        got = _cached("config", path, _config_lines)
    except OSError:
        return [("", "include", "")]  # there but unreadable: unknown, like an include
    return got if isinstance(got, list) else []


def _excludes_value(value: str, home: str) -> str | None:
    """The path `core.excludesFile = value` names, or None when it is not a plain one."""
    if value.startswith('"') and value.endswith('"') and len(value) >= 2:
        value = value[1:-1]
    if not value or any(mark in value for mark in ('"', "\\", "%(", "$", ";", "#")):
        return None
    if value.startswith("~/"):
        return os.path.join(home, value[2:])
    return value if value.startswith("/") else None


def _global_excludes(repo_configs: list[list[tuple[str, str, str]]]) -> str | None:
    """The global excludes file git reads, "" for none, None when it cannot be known (an include
    in a config, a value this module cannot resolve)."""
    home = os.environ.get("HOME", "")
    xdg = os.environ.get("XDG_CONFIG_HOME") or (os.path.join(home, ".config") if home else "")
    user = [_config(path) for path in ("/etc/gitconfig", os.path.join(xdg, "git", "config") if xdg else "",
                                       os.path.join(home, ".gitconfig") if home else "") if path]
    value: str | None = ""
    chosen = False
    for config in user + repo_configs:  # the last setting wins, the repository's last of all
        for section, key, raw in config:
            if key == "include":
                return None
            if section == "core" and key == "excludesfile":
                value, chosen = _excludes_value(raw, home), True
    if chosen:
        return value
    return os.path.join(xdg, "git", "ignore") if xdg else ""


def _ignore_spec(path: str) -> object:
    """The patterns of one ignore file (a GitIgnoreSpec), None when there is none."""
    from pathspec import GitIgnoreSpec

    try:
        return _cached("ignore", path, lambda data: GitIgnoreSpec.from_lines(
            data.decode("utf-8", "surrogateescape").splitlines()))
    except OSError:
        return None  # not there or unreadable: git reads no patterns from it either


def _decides(spec: object, rel: str) -> bool | None:
    """Whether one ignore file ignores `rel` (True), re-includes it (False) or says nothing."""
    if spec is None:
        return None
    return spec.check_file(rel).include  # type: ignore[attr-defined]


class GitView:
    """One repository as git sees it: its work tree's top, its tracked paths and its ignores."""

    def __init__(self, top: str, modes: dict[str, int], excludes: list[object]) -> None:
        self.top = top
        self.modes = modes
        self.excludes = excludes  # info/exclude, then the global file: lowest precedence last
        self._specs: dict[str, object] = {}  # directory → its .gitignore, read once per view

    def _gitignore(self, directory: str) -> object:
        if directory not in self._specs:
            self._specs[directory] = _ignore_spec(os.path.join(self.top, directory, ".gitignore"))
        return self._specs[directory]

    def excluded(self, rel: str, is_dir: bool) -> bool:
        """Whether git's ignore rules exclude `rel` itself (its directories not looked at): the
        deepest `.gitignore` that says anything decides, then info/exclude, then the global file."""
        parts = rel.split("/")
        for depth in range(len(parts) - 1, -1, -1):
            spec = self._gitignore("/".join(parts[:depth]))
            said = _decides(spec, "/".join(parts[depth:]) + ("/" if is_dir else ""))
            if said is not None:
                return said
        for spec in self.excludes:
            said = _decides(spec, rel + ("/" if is_dir else ""))
            if said is not None:
                return said
        return False

    def ignored(self, rel: str, is_dir: bool) -> bool:
        """git's rule: a path in an excluded directory is ignored, whatever re-includes it."""
        parts = rel.split("/")
        return any(self.excluded("/".join(parts[:depth]), True) for depth in range(1, len(parts))) or \
            self.excluded(rel, is_dir)

    def _tracked_under(self, scope: str) -> Iterator[tuple[str, int]]:
        prefix = "" if scope == "." else scope + "/"
        for rel, mode in self.modes.items():
            if rel.startswith(prefix):
                yield rel, mode

    def reaches_denied(self, scope: str, reach: str, matches: Callable[[str], bool], limit: int,
                       walk_all: Callable[[str], bool]) -> bool:
        """Whether an operation of `reach` ("tracked" or "added") over the directory `scope`
        (absolute, real, under the top) reaches an entry `matches` accepts; `walk_all` is the
        answer for a tree whose reach is unknown (a submodule's)."""
        rel_scope = os.path.relpath(scope, self.top)
        for rel, mode in self._tracked_under(rel_scope):
            path = os.path.join(self.top, rel)
            if matches(path):  # a rule matching a directory matches the paths under it too
                return True
            if mode & _MODE_TYPE == _GITLINK and walk_all(path):
                return True
        if reach == "tracked":
            return False
        if rel_scope != "." and self.ignored(rel_scope, True):
            return False  # an ignored directory's untracked files are never added
        return self._untracked_reaches(rel_scope, matches, limit)

    def _untracked_reaches(self, rel_scope: str, matches: Callable[[str], bool], limit: int) -> bool:
        """The untracked, not ignored entries under the scope: does `matches` accept one? Ignored
        directories are not entered; past `limit` entries the answer is yes."""
        seen = 0
        stack = [rel_scope]
        while stack:
            directory = stack.pop()
            try:
                with os.scandir(os.path.join(self.top, directory)) as entries:
                    for entry in entries:
                        seen += 1
                        if seen > limit:
                            return True
                        if entry.name == ".git":
                            continue  # git never adds a repository's own files
                        rel = entry.name if directory == "." else directory + "/" + entry.name
                        if entry.is_dir(follow_symlinks=False):
                            if not self.excluded(rel, True):
                                stack.append(rel)  # an excluded one git never enters; its tracked files are in the index
                        elif matches(entry.path) and rel not in self.modes and not self.excluded(rel, False):
                            return True
            except OSError:
                continue
        return False


def _repository(start: str) -> tuple[str, str] | None:
    """(work tree top, path of its `.git`) of the repository `start` is in, None for none."""
    here = start
    while True:
        dot_git = os.path.join(here, ".git")
        if os.path.lexists(dot_git):
            return here, dot_git
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def _git_dirs(dot_git: str) -> tuple[str, str] | None:
    """(git directory, common directory) of a `.git` directory or `gitdir: …` file."""
    if os.path.isdir(dot_git):
        return dot_git, dot_git
    try:
        with open(dot_git, encoding="utf-8") as f:
            text = f.read().strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith("gitdir:"):
        return None
    git_dir = os.path.normpath(os.path.join(os.path.dirname(dot_git), text[len("gitdir:"):].strip()))
    try:
        with open(os.path.join(git_dir, "commondir"), encoding="utf-8") as f:
            common = os.path.normpath(os.path.join(git_dir, f.read().strip()))
    except FileNotFoundError:
        common = git_dir
    except (OSError, UnicodeDecodeError):
        return None
    return (git_dir, common) if os.path.isdir(git_dir) else None


def view_of(directory: str) -> tuple[str, GitView | None]:
    """(the work tree's top, or `directory` when there is no repository; the repository as git
    sees it, or None when this module cannot be sure of it)."""
    if any(name in os.environ for name in _GIT_ENVIRONMENT):
        return directory, None
    found = _repository(directory)
    if found is None:
        return directory, None
    top, dot_git = found
    dirs = _git_dirs(dot_git)
    if dirs is None:
        return top, None
    git_dir, common = dirs
    configs = [_config(os.path.join(common, "config"))]
    if git_dir != common:
        configs.append(_config(os.path.join(git_dir, "config.worktree")))
    hash_size = 20
    for config in configs:
        for section, key, value in config:
            if key == "include" or (section == "core" and key == "worktree") or \
                    (section == "core" and key == "bare" and value.lower() in ("true", "yes", "on", "1")):
                return top, None
            if section == "extensions" and key == "objectformat":
                if value.lower() != "sha256":
                    return top, None
                hash_size = 32
    try:
        index = _cached("index", os.path.join(git_dir, "index"), lambda data: read_index(data, hash_size))
    except (OSError, UnreadableIndex):
        return top, None
    modes = index if isinstance(index, dict) else {}  # no index file: nothing is tracked yet
    excludes = [_ignore_spec(os.path.join(common, "info", "exclude"))]
    global_file = _global_excludes(configs)
    if global_file:
        excludes.append(_ignore_spec(global_file))
    return top, GitView(top, modes, excludes)
