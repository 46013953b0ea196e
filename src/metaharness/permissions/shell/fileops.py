"""File operands and code-running marks of simple commands (docs/reference/permissions.md).

What belongs here: which operands of a known file command are read and which are written (per
`data/filecommands.toml`, options with their values parsed as getopt does: clusters, attached
values, GNU long-option abbreviations), the special readers and writers (`dd`, `tar`, `find`,
`git checkout`/`restore`, git's readers of file content: `git.reads` in data/wrappers.toml, each
read carrying its operation's reach — which entries git's own files say it covers is decided at
match time, gitreach.py), links that make a later write land elsewhere, and the unprovable marks
of interpreters and other programs that run code their arguments do not show.

Rules this module keeps:
* an option that takes a path is bound to its value wherever getopt would bind it (`-t DIR`,
  `-vtDIR`, `--target-directory=DIR`, `--targ DIR`): a write target is never read as an operand
  of another kind or lost;
* where an operand may or may not be a path (`git checkout NAME`), it is a path for deny
  (`deny_only`), never silently nothing;
* a git object name `REV:PATH` is a read of PATH under the repository root, tried under the
  working directory and each of its ancestors (the engine does not look for the root);
* a link created by the call is a write of its target, for deny: a later write through it in the
  same call reaches the target;
* an interpreter whose program does not come from a file it names (`-c`, `-e` in any cluster, a
  here-string, a here-document, a pipe, `/dev/stdin`) is unprovable.
"""

from __future__ import annotations

import os
import re

from . import _lazy
from .entries import entry_set
from ..paths import unwitnessed_read
from .interpreters import code_flags, code_of, program_spec
from .model import Cmd, PathRef
from .walk import State
from .words import SAFE_ASSIGNMENTS, Word, parse_word, static_word

__all__ = ["file_operands", "mark_unprovable"]

# The interpreters, their code options and stdin forms: data/interpreters.toml (interpreters.py).


_OPTION_SETS: dict[int, tuple] = {}
_OPTION_KEYS = ("read_opts", "write_opts", "target_opts", "at_read_opts", "base_dir_opts")
_FLAG_KEYS = ("recursive_opts", "inplace_opts", "inplace_unless_opts", "all_operands_opts", "link_opts")


def _option_sets(spec: dict) -> tuple[dict[str, set[str]], set[str], tuple[str, ...]]:
    """(path options by kind, every option that takes a value, every long option named) of a
    file-command entry, built once per entry object (kept in the memo so its id is not reused)."""
    got = _OPTION_SETS.get(id(spec))
    if got is None or got[0] is not spec:
        path_opts = {key: set(spec.get(key, [])) for key in _OPTION_KEYS}
        value_opts = set(spec.get("value_opts", [])) | set(spec.get("pattern_opts", []))
        all_value = value_opts.union(*path_opts.values())
        named = all_value.union(*(set(spec.get(key, [])) for key in _FLAG_KEYS))
        longs = tuple(sorted(option for option in named if option.startswith("--")))
        got = _OPTION_SETS[id(spec)] = (spec, path_opts, all_value, longs)
    return got[1], got[2], got[3]


def _long_names(name: str, longs: tuple[str, ...], all_value: set[str]) -> list[str]:
    """GNU getopt accepts any unambiguous prefix of a long option (`--targ` for
    `--target-directory`). A prefix of several is refused by getopt (nothing runs), so taking it
    as all of them only ever over-approximates; the value-taking ones come first."""
    if name in longs or len(name) < 3:
        return [name]
    hits = [option for option in longs if option.startswith(name)]
    return sorted(hits, key=lambda option: option not in all_value) if hits else [name]


def _operands(words: list[Word], spec: dict) -> tuple[list[Word], dict[str, list[Word]], set[str]]:
    """Split into operands and option values, per the file-command table entry, the way getopt
    binds them: `-t DIR`, `-tDIR`, a value-taking letter anywhere in a cluster (`-vt DIR`),
    `--opt=VAL`, `--opt VAL` and abbreviations of long options."""
    path_opts, all_value, longs = _option_sets(spec)
    pattern_opts = spec.get("pattern_opts", ())
    operands: list[Word] = []
    values: dict[str, list[Word]] = {key: [] for key in path_opts}
    values["pattern"] = []
    flags: set[str] = set()
    index = 0
    after_dd = False

    def bind(name: str, val: Word | None) -> None:
        flags.add(name)
        if val is None:
            return
        for key, names in path_opts.items():
            if name in names:
                values[key].append(val)
        if name in pattern_opts:
            values["pattern"].append(val)

    while index < len(words):
        word = words[index]
        value = word.deny_value
        if after_dd or value is None or not value.startswith("-") or value == "-":
            operands.append(word)
            index += 1
            continue
        if value == "--":
            after_dd = True
            index += 1
            continue
        index += 1
        if value.startswith("--"):
            name, equals, attached = value.partition("=")
            names = _long_names(name, longs, all_value)
            if names[0] in all_value:
                if equals:
                    val: Word | None = static_word(attached)
                else:
                    val = words[index] if index < len(words) else None
                    index += 1
                for option_name in names:
                    bind(option_name, val if option_name in all_value else None)
            else:
                flags.update(names)
            continue
        if value in all_value:  # a listed option spelled whole, short or single-dash long (`-in F`)
            bind(value, words[index] if index < len(words) else None)
            index += 1
            continue
        letters = value[1:]
        for key, letter in enumerate(letters):
            name = "-" + letter
            if name in all_value:
                rest = letters[key + 1 :]
                if rest:
                    bind(name, static_word(rest))
                else:
                    bind(name, words[index] if index < len(words) else None)
                    index += 1
                break
            flags.add(name)
        flags.add(value)
    return operands, values, flags


def based(cwd: str | None, directory: Word | None) -> str | None:
    """The directory a base-directory option (`-C DIR`, `--directory=DIR`, `--chdir DIR`) makes
    later operands relative to; None (unknown: every operand a possible match) when dynamic."""
    if directory is None or directory.deny_value is None or directory.value is None:
        return None
    value = directory.deny_value
    if value.startswith("/"):
        return os.path.normpath(value)
    return os.path.normpath(os.path.join(cwd, value)) if cwd is not None else None


def _rebase(cmd: Cmd, start: int, directories: list[Word]) -> None:
    """Every operand path added since `start` also resolved against each base directory: the
    option applies to the operands after it, and keeping the working-directory reading too only
    ever over-matches (deny holds whichever way the operand lands)."""
    for ref in cmd.paths[start:]:
        if ref.via != "operand" or ref.is_absolute:
            continue
        for directory in directories:
            cmd.paths.append(PathRef(ref.access, ref.word, based(cmd.cwd, directory), ref.via, cmd,
                                     recursive=ref.recursive, removal=ref.removal, deny_only=ref.deny_only,
                                     guess=ref.guess, reach=ref.reach, repo_wide=ref.repo_wide))


def _select(operands: list[Word], how: str | None) -> list[Word]:
    if not how or how == "none" or not operands:
        return []
    return {
        "all": operands, "first": operands[:1], "second": operands[1:2], "rest": operands[1:],
        "last": operands[-1:], "all_but_last": operands[:-1], "after_first": operands[1:],
    }.get(how, [])


def _data_operands(cmd: Cmd) -> bool:
    """Whether every operand of `cmd` is data, per data/dataoperands.toml."""
    spec = _lazy("DATAOPERANDS").get(cmd.basename)
    if spec is None or cmd.env_marks or any(not SAFE_ASSIGNMENTS(name) or not word.static for name, word in cmd.assigns):
        return False  # `PATH=… echo`, `BASH_ENV=… printf`: what runs is not the table's program
    values = [word.deny_value for word in cmd.words[1:]]
    if not (spec.get("runs_opts") or spec.get("only_opts") or spec.get("subcommands")):
        return True  # no option of the program runs anything: a dynamic word is data too
    texts = [value for value in values if value is not None]
    if len(texts) != len(values):
        return False  # a dynamic word may be the option that runs something
    runs = spec.get("runs_opts", ())
    if any(text.split("=", 1)[0] in runs or (text[:2] in runs and not text.startswith("--")) for text in texts):
        return False
    only = spec.get("only_opts")
    if only is not None and not any(text in only for text in texts[:2]):
        return False
    subcommands = spec.get("subcommands")
    if subcommands is not None:
        global_value_options = entry_set(_lazy("OPTIONS")["git"], "global_value") if cmd.basename == "git" else frozenset()
        index = 0
        while index < len(texts) and texts[index].startswith("-"):
            if texts[index] in ("-c", "--config-env") or texts[index].startswith(("-c", "--config-env", "--exec-path")):
                return False  # a config value may name a program (`core.pager`, an alias)
            index += 2 if texts[index] in global_value_options else 1
        return index < len(texts) and texts[index] in subcommands
    return True


def file_operands(cmd: Cmd, state: State) -> None:
    """The read and write path subjects of one simple command."""
    base = cmd.basename
    if base is None:
        return
    if cmd.inner is None and _data_operands(cmd):
        cmd.data_operands = True
    table = _lazy("FILECOMMANDS")
    spec = table.get(base)
    if spec is None:
        if base == "find":
            _find_paths(cmd)
        elif base == "git":
            _git_paths(cmd)
        elif cmd.inner is None and cmd.wrapper is None and not cmd.data_operands:
            _tail_operands(cmd, state, table)
            _possible_reads(cmd)
        return
    words = cmd.words[1:]
    if spec.get("kind") == "dd":
        for word in words:
            value = word.deny_value
            if value is not None and value.startswith("of="):
                cmd.paths.append(PathRef("write", parse_word(word.text[3:], state.home), cmd.cwd, "operand", cmd))
            elif value is not None and value.startswith("if="):
                cmd.paths.append(PathRef("read", parse_word(word.text[3:], state.home), cmd.cwd, "operand", cmd))
            elif value is None:
                cmd.paths.append(PathRef("write", word, cmd.cwd, "operand", cmd))
        return
    if spec.get("kind") == "tar":
        _tar_paths(cmd, words)
        return
    start = len(cmd.paths)
    script_args: list[Word] = []
    if spec.get("script_args"):
        words, script_args = _script_args(words, spec)
    operands, values, flags = _operands(words, spec)
    has_pattern_opt = bool(values.get("pattern")) or bool(flags & entry_set(spec, "script_opts"))
    reads_how = spec.get("reads")
    if reads_how == "after_first" and has_pattern_opt:
        reads_how = "all"  # `sed -f SCRIPT FILE`, `grep -e P FILE`: no operand is the script
    recursive = bool(spec.get("recursive")) or bool(flags & entry_set(spec, "recursive_opts"))
    keep = entry_set(spec, "inplace_unless_opts") if "inplace_unless_opts" in spec else None
    inplace = bool(flags & entry_set(spec, "inplace_opts")) or (keep is not None and not flags & keep)
    target = values.get("target_opts") or []
    write_how = spec.get("writes")
    if write_how and flags & entry_set(spec, "all_operands_opts"):
        write_how = "all"  # `chmod --reference=R FILE`: no mode operand
    if target:
        # `cp -t DIR a b`: every operand is a source, DIR the destination.
        reads_how = "all" if reads_how else None
        write_how = "all" if base == "mv" else None
    removal = bool(spec.get("removal"))
    for word in _select(operands, reads_how):
        if inplace:
            cmd.paths.append(PathRef("write", word, cmd.cwd, "operand", cmd))
        else:
            cmd.paths.append(PathRef("read", word, cmd.cwd, "operand", cmd, recursive=recursive))
    for word in _select(operands, write_how):
        rem = removal or (bool(spec.get("removal_sources")) and (word is not operands[-1] or bool(target)))
        cmd.paths.append(PathRef("write", word, cmd.cwd, "operand", cmd, removal=rem))
    for word in target:
        cmd.paths.append(PathRef("write", word, cmd.cwd, "operand", cmd))
    for word in values.get("read_opts", []):
        cmd.paths.append(PathRef("read", word, cmd.cwd, "operand", cmd))
    for word in values.get("write_opts", []):
        cmd.paths.append(PathRef("write", word, cmd.cwd, "operand", cmd))
    if spec.get("url_reads"):
        for word in operands:  # `curl file:///x`, `curl "file://$PWD/x"`: a read of the path
            if "file://" in word.text.lower():
                at = word.text.lower().find("file://")
                path = parse_word(word.text[:at] + word.text[at + 7:].removeprefix("localhost"), state.home)
                cmd.paths.append(PathRef("read", path, cmd.cwd, "operand", cmd))
    for word in values.get("at_read_opts", []):
        value = word.deny_value
        if value is None:
            continue
        at_index = value.find("@")
        if at_index != -1:
            cmd.paths.append(PathRef("read", static_word(value[at_index + 1 :]), cmd.cwd, "operand", cmd))
    if base in ("grep", "egrep", "fgrep", "rg", "ag") and recursive and not _select(operands, reads_how):
        cmd.paths.append(PathRef("read", static_word("."), cmd.cwd, "operand", cmd, recursive=True))
    if spec.get("links") or flags & entry_set(spec, "link_opts"):
        _link_targets(cmd, _select(operands, reads_how) if not target else operands,
                      target[0] if target else (operands[-1] if len(operands) > 1 else None),
                      symbolic="-s" in flags or "--symbolic" in flags or "--symbolic-link" in flags or base != "ln")
    if values.get("base_dir_opts"):
        _rebase(cmd, start, values["base_dir_opts"])
    if script_args:
        _possible_reads(cmd, script_args)
    if spec.get("dir_dest"):
        sources = operands if target else operands[:-1]  # `-t DIR`: every operand is a source
        destination = target[-1] if target else (operands[-1] if len(operands) > 1 else None)
        if destination is not None:
            _into_directory(cmd, sources, destination, recursive=recursive, contents=base == "rsync")


#: A recursive copy's source tree is walked for the names it writes up to this many entries
#: (the recursive reader's walk has the same kind of bound); past it the names are not added.
COPY_WALK_LIMIT = 2_000


def _into_directory(cmd: Cmd, sources: list[Word], destination: Word, *, recursive: bool, contents: bool) -> None:
    """`cp/mv/install/ln/rsync SRC… DIR` writes DIR/<basename of each SRC> (a recursive copy:
    every entry of the source tree under it). Where DIR is a directory now, those are writes
    like any other (deny rules, protected paths, the gate); where it is not (yet), they are
    writes for deny only — the call may make DIR before the copy runs."""
    dest = destination.deny_value
    if dest is None or destination.value is None:
        return  # a dynamic destination is already a dynamic write
    dest_dir = dest if dest.startswith("/") else (os.path.join(cmd.cwd, dest) if cmd.cwd else None)
    is_dir = dest_dir is not None and os.path.isdir(dest_dir)
    cmd.read_disk = True  # what it writes depends on the disk as it is now (subjects.analysis_of)
    unwitnessed_read()  # ... and so does the decision (decision.py keeps none that read it)
    budget = COPY_WALK_LIMIT
    for source in sources:
        value = source.deny_value
        if value is None or source.value is None:
            cmd.paths.append(PathRef("write", source, cmd.cwd, "operand", cmd, deny_only=not is_dir))
            continue
        # rsync `SRC/` copies the contents of SRC, not SRC itself.
        name = "" if contents and value.endswith("/") else os.path.basename(value.rstrip("/"))
        if not name and not (contents and value.endswith("/")):
            continue
        landed = os.path.join(dest, name) if name else dest
        if name:
            cmd.paths.append(PathRef("write", static_word(landed), cmd.cwd, "operand", cmd, deny_only=not is_dir))
        if not recursive:
            continue
        tree = value if value.startswith("/") else (os.path.join(cmd.cwd, value) if cmd.cwd else None)
        if tree is None or not os.path.isdir(tree) or os.path.islink(tree.rstrip("/")):
            continue
        for root, dirs, files in os.walk(tree):
            for entry in dirs + files:
                if budget <= 0:
                    # past the bound, what is left is a write somewhere under the destination
                    # (toward denying: a deny rule anywhere below it holds)
                    beyond = f"{landed.rstrip('/')}/"
                    cmd.paths.append(PathRef("write", Word(beyond + "<more>", None, None, re.escape(beyond) + ".*",
                                                           False), cmd.cwd, "operand", cmd, deny_only=not is_dir))
                    return
                budget -= 1
                relative = os.path.relpath(os.path.join(root, entry), tree)
                cmd.paths.append(PathRef("write", static_word(os.path.join(landed, relative)), cmd.cwd, "operand", cmd,
                                         deny_only=not is_dir))


def _link_targets(cmd: Cmd, sources: list[Word], link: Word | None, *, symbolic: bool) -> None:
    """`ln [-s] TARGET LINK`, `cp -s/-l`: a write through LINK later in the call lands on TARGET,
    which the path rules cannot see then (the link does not exist yet). So the target counts as
    written, for deny (deny holds whatever the spelling)."""
    for word in sources:
        cmd.paths.append(PathRef("write", word, cmd.cwd, "operand", cmd, deny_only=True))
        value = word.deny_value
        if symbolic and value is not None and not value.startswith(("/", "~")) and link is not None and link.deny_value:
            # a relative symlink target is resolved from the link's directory
            base_dir = os.path.dirname(link.deny_value)
            if base_dir:
                joined = static_word(os.path.join(base_dir, value)) if word.value is not None else word
                cmd.paths.append(PathRef("write", joined, cmd.cwd, "operand", cmd, deny_only=True))


def _tail_operands(cmd: Cmd, state: State, table: dict) -> None:
    """The backstop for programs that run their arguments and are not in the wrapper table: a
    tail of the words that starts with a known file command gives that command's paths, for deny
    (over-matching is the intended side, like the tail match of Bash patterns)."""
    words = cmd.words
    for position in range(1, len(words)):
        value = words[position].deny_value
        if value is None or words[position].value is None or value.startswith("-"):
            continue
        if value.rsplit("/", 1)[-1] in table:
            tail = Cmd(words[position:], cwd=cmd.cwd)
            file_operands(tail, state)
            for ref in tail.paths:
                ref.deny_only = True
                ref.owner = cmd
                cmd.paths.append(ref)
            return


def _script_args(words: list[Word], spec: dict) -> tuple[list[Word], list[Word]]:
    """(the interpreter's own words, its program's arguments): the words after the script file, or
    after a `program_opts` option's module (`python3 -m zipfile -c out.zip dir`: `-c out.zip dir`,
    never python's `-c`), or after the code a `code_opts` option gives (`python3 -c CODE secret/`:
    the code may open its arguments as a script may)."""
    value_opts = entry_set(spec, "value_opts")
    code_opts = entry_set(spec, "code_opts")
    program_opts = entry_set(spec, "program_opts")
    index = 0
    while index < len(words):
        value = words[index].deny_value
        if value is None:
            return words, []
        if value == "--":
            return words, words[index + 2 :]
        if not value.startswith("-") or value == "-":
            return words, words[index + 1 :]
        if value in code_opts:
            return words, words[index + 2 :]
        if value.split("=", 1)[0] in code_opts:
            return words, words[index + 1 :]
        if value in program_opts:
            return words[: index + 2], words[index + 2 :]
        if not value.startswith("--") and len(value) > 2:
            for position, letter in enumerate(value[1:]):
                if "-" + letter in code_opts:
                    return words, []
                if "-" + letter in program_opts:
                    attached = position + 2 < len(value)
                    cut = index + (1 if attached else 2)
                    return words[:cut], words[cut:]
                if "-" + letter in value_opts:
                    break
        index += 2 if value in value_opts else 1
    return words, []


def _possible_reads(cmd: Cmd, words: list[Word] | None = None) -> None:
    """A program the table does not know may read what its operands name (`bat secret/key`,
    `tool --config=secret/key`): each static operand, and each `--option=VALUE`'s value, is a
    possible read, for deny (a match is only `maybe`: the word may name no file). An operand that
    is a directory may be read whole (`somearchiver dir/`, issue 24): it is a recursive read, so a
    `Read` deny rule matching an entry under it gives `maybe` too (match._walk_for_denied) — unless
    the program only looks at names and metadata (`NAMES_ONLY`: `ls`, `du`, `tree`, `cd`, …)."""
    recursive = cmd.basename not in NAMES_ONLY
    for word in cmd.words[1:] if words is None else words:
        value = word.deny_value
        if value is None or word.value is None or not value or value == "-":
            continue
        if value.startswith("-"):
            name, equals, attached = value.partition("=")
            if not (equals and attached and name.startswith("--")):
                continue
            word = static_word(attached)
        cmd.paths.append(PathRef("read", word, cmd.cwd, "operand", cmd, recursive=recursive, deny_only=True, guess=True))


#: Programs the file table does not know that look at a directory operand's names or metadata,
#: never at the contents of the files under it: their operands are possible reads, not recursive.
NAMES_ONLY = frozenset({
    "ls", "dir", "vdir", "du", "tree", "stat", "realpath", "readlink", "namei", "cd", "pushd", "popd", "test", "[",
    "[[", "mkdir", "basename", "dirname", "pwd", "df", "exa", "eza", "lsd", "fd", "fdfind", "ncdu", "mountpoint",
    "findmnt", "lsattr", "getfacl", "getfattr", "ls-files",
})


def _find_starts(args: list[Word]) -> list[Word]:
    """find's start points: the operands before its expression (`.` when there are none)."""
    starts: list[Word] = []
    for word in args:
        value = word.deny_value
        if value is not None and (value.startswith("-") or value in ("(", "!", ")")):
            break
        starts.append(word)
    return starts or [static_word(".")]


def _find_paths(cmd: Cmd) -> None:
    starts = _find_starts(cmd.words[1:])
    delete = any(word.deny_value == "-delete" for word in cmd.words)
    for word in starts:
        if delete:
            cmd.paths.append(PathRef("write", word, cmd.cwd, "operand", cmd, removal=True))
        else:
            cmd.paths.append(PathRef("read", word, cmd.cwd, "operand", cmd))
    for index, word in enumerate(cmd.words[:-1]):
        if word.deny_value in _FIND_WRITES:  # `-fprint FILE`, `-fprintf FILE FORMAT`, `-fls FILE`
            cmd.paths.append(PathRef("write", cmd.words[index + 1], cmd.cwd, "operand", cmd))


_FIND_WRITES = {"-fprint", "-fprint0", "-fprintf", "-fls"}


def _git_paths(cmd: Cmd) -> None:
    words = [word for word in cmd.words[1:]]
    # skip global options
    index = 0
    global_value_options = entry_set(_lazy("OPTIONS")["git"], "global_value")
    unknown_globals = entry_set(_lazy("WRAPPERS")["git"].get("reads", {}), "reach_unknown_globals")
    directories: list[Word] = []
    # git's own files say what it reaches unless the repository, index or config is moved
    followed = not cmd.env_marks and not any(name.startswith("GIT_") for name, _ in cmd.assigns)
    while index < len(words) and (words[index].deny_value or "").startswith("-"):
        if words[index].deny_value == "-C" and index + 1 < len(words):
            directories.append(words[index + 1])  # `git -C DIR checkout -- F`: F is DIR/F
        if (words[index].deny_value or "").partition("=")[0] in unknown_globals:
            followed = False
        index += 2 if words[index].deny_value in global_value_options else 1
    if index >= len(words):
        return
    start = len(cmd.paths)
    _git_sub_paths(cmd, words[index].deny_value, words[index + 1 :], followed)
    if directories:
        _rebase(cmd, start, directories)


def _git_sub_paths(cmd: Cmd, sub: str | None, rest: list[Word], followed: bool) -> None:
    if sub is None:
        return
    sub = sub
    if sub == "clone":
        ops = [word for word in rest if not (word.deny_value or "x").startswith("-")]
        if len(ops) >= 2:
            cmd.paths.append(PathRef("write", ops[1], cmd.cwd, "operand", cmd))
    elif sub in ("checkout", "restore"):
        if any(word.deny_value == "--" for word in rest):
            after = rest[[word.deny_value for word in rest].index("--") + 1 :]
            for word in after:
                cmd.paths.append(PathRef("write", word, cmd.cwd, "operand", cmd))
        elif sub == "restore":
            for word in rest:
                if not (word.deny_value or "x").startswith("-"):
                    cmd.paths.append(PathRef("write", word, cmd.cwd, "operand", cmd))
        else:
            # `git checkout NAME…` (`-p` included): each NAME may be a branch or a path that is
            # overwritten; for deny it is a path.
            for word in rest:
                if not (word.deny_value or "x").startswith("-"):
                    cmd.paths.append(PathRef("write", word, cmd.cwd, "operand", cmd, deny_only=True))
    elif sub == "checkout-index":
        for word in rest:
            if not (word.deny_value or "x").startswith("-"):
                cmd.paths.append(PathRef("write", word, cmd.cwd, "operand", cmd))
    reads = _lazy("WRAPPERS")["git"].get("reads", {})
    if sub in reads.get("operands", ()):
        _git_reads(cmd, sub, rest, reads, followed)


def _git_roots(cwd: str | None) -> list[str | None]:
    """Where the repository root may be: the working directory or one of its ancestors (unknown,
    None, when the working directory is)."""
    if cwd is None:
        return [None]
    roots: list[str | None] = []
    here = os.path.normpath(cwd)
    while True:
        roots.append(here)
        parent = os.path.dirname(here)
        if parent == here:
            return roots
        here = parent


def _git_path(cmd: Cmd, word: Word, path: str, *, rooted: bool, guess: bool, reach: str = "") -> None:
    """A read of `path` that a git operand names: relative to the working directory, or (`rooted`:
    an object name's PATH, a `:(top)` or `:/` pathspec) to the repository root, wherever it is;
    `reach`: what of a directory's entries the operation reaches (PathRef.reach)."""
    if word.value is None:
        # a dynamic part: the path cannot be known statically, a possible match of every Read rule
        cmd.paths.append(PathRef("read", word, None, "operand", cmd, recursive=True, deny_only=True))
        return
    target = static_word(path or ".")
    if path.startswith(("./", "../")) or path in (".", ".."):
        rooted = False  # `HEAD:./key`: relative to the working directory
    for root in _git_roots(cmd.cwd) if rooted else [cmd.cwd]:
        cmd.paths.append(PathRef("read", target, root, "operand", cmd, recursive=True, deny_only=True, guess=guess,
                                 reach=reach))


def _git_pathspec(value: str) -> tuple[str, bool]:
    """(the path, whether it is relative to the root) of a pathspec: magic (`:(top)P`, `:/P`, `:!P`)
    taken off — an excluded path counts too (over-matching)."""
    if value.startswith(":("):
        magic, _, path = value[2:].partition(")")
        return path, "top" in magic.split(",")
    if value.startswith(":") and len(value) > 1 and value[1] in "/!^":
        path = value[2:] if value[1] == "/" or value[2:3] != "/" else value[3:]
        return path, value[1] == "/" or value[2:3] == "/"
    return value, False


#: The reaches of a git operation, narrowest first ("" — every entry — is as wide as "all").
_REACH_WIDTH = {"tracked": 0, "added": 1, "all": 2, "": 2}


def _git_option_names(words: list[Word]) -> set[str]:
    """The options given before `--`: a long one by its name, a short cluster as each of its
    letters too (`-am` is `-a` and `-m`; over-matching a value's letters)."""
    names: set[str] = set()
    for word in words:
        value = word.deny_value
        if value == "--":
            break
        if value is not None and value.startswith("-") and value != "-":
            name = value.partition("=")[0]
            names.add(name)
            if not name.startswith("--"):
                names.update("-" + letter for letter in name[1:])
    return names


def _git_reads(cmd: Cmd, sub: str, rest: list[Word], reads: dict, followed: bool) -> None:
    """Git reading file content (data/wrappers.toml `git.reads`): each operand a read — an object
    name `REV:PATH`/`:PATH`/`:N:PATH` of PATH under the repository root, a pathspec after `--` of
    its path, a bare operand (it may be a revision) a possible one — and the whole tree for the
    operations and options that read it (a recursive possible read). Pathspecs and the whole tree
    carry the operation's reach (tracked, added, all); object names read history as today."""
    operation, words = sub, rest
    verbs = reads.get("verbs", {}).get(sub)
    if verbs is not None:
        verb = rest[0].deny_value if rest else None
        if rest and verb is not None and not verb.startswith("-"):
            if verb not in verbs:
                return  # `git stash list`, `git stash pop`: no file content is read
            operation, words = f"{sub} {verb}", rest[1:]
        else:
            operation = f"{sub} {verbs[0]}"  # `git stash -u`: the first verb (a dynamic word may be it too)
    given = _git_option_names(words)
    patch = bool(given.intersection(reads.get("whole_opts", {}).get(operation, ())))
    names_only = bool(given.intersection(reads.get("no_content_opts", {}).get(operation, ())))
    whole = patch or (operation in reads.get("whole", ()) and not names_only)
    widened = [reach for option, reach in reads.get("reach_opts", {}).get(operation, {}).items() if option in given]
    reach = max(widened, key=_REACH_WIDTH.__getitem__) if widened else reads.get("reach", {}).get(operation, "")
    if not followed:
        reach = ""
    after_dd = False
    pathspecs = objects = bare = 0
    for word in words:
        value = word.deny_value
        if not after_dd and value == "--":
            after_dd = True
            continue
        if not after_dd and value is not None and value.startswith("-"):
            continue
        if value is None or word.value is None:
            _git_path(cmd, word, "", rooted=False, guess=not after_dd)
            pathspecs += int(after_dd)
            continue
        if after_dd:
            path, rooted = _git_pathspec(value)
            _git_path(cmd, word, path, rooted=rooted, guess=False, reach=reach)
            pathspecs += 1
            continue
        if value.startswith(":"):
            name = value[1:]
            if name[:1] in "0123" and name[1:2] == ":":
                name = name[2:]  # `:2:PATH`, a stage of the index
            elif name[:1] in "/(!^":
                name, _ = _git_pathspec(value)  # `:/TEXT` names a commit by message: a path too, for deny
            _git_path(cmd, word, name, rooted=True, guess=False)
            objects += 1
        elif ":" in value:
            _git_path(cmd, word, value.partition(":")[2], rooted=True, guess=False)
            objects += 1
        else:
            _git_path(cmd, word, value, rooted=False, guess=True, reach=reach)
            bare += 1
    if objects and not bare and not patch and operation in reads.get("object_views", ()):
        whole = False  # `git show HEAD:a.txt`: the blob, no patch
    if whole and not pathspecs:
        cmd.paths.append(PathRef("read", static_word("."), cmd.cwd, "operand", cmd, recursive=True, deny_only=True,
                                 guess=True, reach=reach,
                                 repo_wide=followed and operation not in reads.get("here", ())))


def _tar_paths(cmd: Cmd, words: list[Word]) -> None:
    spec = {"value_opts": [], "read_opts": ["-T", "--files-from", "-X", "--exclude-from"],
            "write_opts": [], "target_opts": ["-C", "--directory"]}
    # first word may be a bundled mode without dash: `tar xzf a.tar`
    if words and words[0].deny_value and not words[0].deny_value.startswith("-"):
        words = [static_word("-" + words[0].deny_value)] + words[1:]
    flags: set[str] = set()
    archive: list[Word] = []
    index = 0
    rest: list[Word] = []
    targets: list[Word] = []
    bases: list[int] = []  # for each operand in `rest`, how many `-C` options came before it
    while index < len(words):
        value = words[index].deny_value
        if value is not None and value.startswith("-") and not value.startswith("--") and len(value) > 1:
            letters = value[1:]
            for position, letter in enumerate(letters):
                flags.add(letter)
                if letter == "f":
                    archive.append(words[index + 1] if position == len(letters) - 1 and index + 1 < len(words) else static_word(letters[position + 1 :]))
                    if position == len(letters) - 1:
                        index += 1
                    break
                if letter == "C":
                    targets.append(words[index + 1] if index + 1 < len(words) else static_word(""))
                    index += 1
                    break
            index += 1
            continue
        if value is not None and value.startswith("--"):
            name, _, val = value.partition("=")
            if name in ("--file", "--directory"):
                word = static_word(val) if val else (words[index + 1] if index + 1 < len(words) else static_word(""))
                (archive if name == "--file" else targets).append(word)
                index += 1 if val else 2
                continue
            flags.add(name)
            index += 1
            continue
        rest.append(words[index])
        bases.append(len(targets))
        index += 1
    create = "c" in flags or "r" in flags or "u" in flags or "--create" in flags
    extract = "x" in flags or "--extract" in flags or "--get" in flags
    for archive_word in archive:
        cmd.paths.append(PathRef("write" if create else "read", archive_word, cmd.cwd, "operand", cmd))
    if extract:
        for word in targets or [static_word(".")]:
            cmd.paths.append(PathRef("write", word, cmd.cwd, "operand", cmd))
    if create:
        # `tar -cf a.tar A -C DIR B -C SUB C`: A is read here, B under DIR, C under DIR/SUB (each
        # `-C` moves the names after it, relative to the one before)
        for word, count in zip(rest, bases):
            directory = cmd.cwd
            for target in targets[:count]:
                directory = based(directory, target)
            cmd.paths.append(PathRef("read", word, directory, "operand", cmd, recursive=True))
    start = len(cmd.paths)
    if extract:
        # `tar -xf a.tar -C DIR NAME`: the named members are written under DIR (or here).
        for word in rest:
            cmd.paths.append(PathRef("write", word, cmd.cwd, "operand", cmd))
    if targets and extract:
        # `tar -xf a.tar -C DIR NAME`: the members are written relative to DIR (and, over-matching,
        # to the working directory too).
        _rebase(cmd, start, targets)


_SED_EXEC = re.compile(r"(^|[;{}\n])\s*[0-9,$/\\!]*\s*[ewW]\b|s(.).*?\2.*?\2[gpiImM0-9]*[ewW]")


_CODE_RUNNERS = {"deno", "awk", "gawk", "mawk", "nawk", "sed", "git"}


def mark_unprovable(cmd: Cmd) -> None:
    """Code-running marks: code the arguments do not show, and dynamic words that may be options."""
    base = cmd.basename
    words = cmd.words
    if base is None:
        return
    spec = program_spec(base)
    flags = code_flags(spec) if spec is not None else None
    if flags or base in _CODE_RUNNERS:
        _mark_code_runner(cmd, base, flags, [word.deny_value for word in words[1:]])
    if spec is not None:
        why = _interpreter_code(cmd, spec)
        if why:
            cmd.unprovable.append(why)
    for word in words[1:]:
        if word.deny_value == "--":
            break
        if word.deny_value is None and word.may_dash:
            cmd.unprovable.append("dynamic word may be an option")
            break


def _mark_code_runner(cmd: Cmd, base: str, flags: frozenset[str] | None, vals: list[str | None]) -> None:
    if flags and any(value in flags or (value and value[:2] in flags and len(value) > 2 and not value.startswith("--")) for value in vals):
        cmd.unprovable.append("interpreter runs code from an argument")
    if base == "deno" and vals[:1] == ["eval"]:
        cmd.unprovable.append("interpreter runs code from an argument")
    if base in ("awk", "gawk", "mawk", "nawk"):
        cmd.unprovable.append("awk can run commands")
    if base == "sed":
        if any(value and (value.startswith("--in-place") or (not value.startswith("--") and value.startswith("-") and "i" in value)) for value in vals):
            cmd.unprovable.append("sed -i writes files")
        elif any(value is not None and _SED_EXEC.search(value) for value in vals if value and not value.startswith("-")):
            cmd.unprovable.append("sed script may execute or write")
    if base == "git" and any(value is not None and (value in ("-c", "--exec-path", "--upload-pack", "--receive-pack", "-u") or value.startswith(("--exec-path=", "--upload-pack=", "--receive-pack=", "--config-env"))) for value in vals):
        cmd.unprovable.append("git option runs a program")


def _interpreter_code(cmd: Cmd, spec: dict) -> str | None:
    """Why an interpreter's program is not a file it names, or None: code from an option in any
    short-option cluster (`python3 -Ic`, `perl -lne`), or from stdin (`-`, `/dev/stdin`, no
    script operand while stdin is a here-document, here-string, pipe or redirect)."""
    found = code_of(cmd, spec)
    if found is None:
        return None
    words, reads_stdin = found
    if any(word.deny_value is None for word in words):
        return None  # dynamic: marked as a possible option elsewhere (and the program is unknown)
    return "interpreter reads its program from stdin" if reads_stdin else "interpreter runs code from an argument"
