"""Interpreter code given inline or on stdin, scanned for deny (docs/reference/permissions.md).

What belongs here: finding the code an interpreter of `data/interpreters.toml` runs from its
arguments or its stdin (`python3 -c CODE`, `node -e CODE`, `perl -e CODE`, `awk PROGRAM`,
`python3 - <<EOF`), a small tokenizer of string literals per language family (quotes, escapes,
comments, Perl's and Ruby's quote operators), and what the scan contributes to the analysis:

* when the code has a way to run a program (a `runs` marker of its family: `os.system`,
  `subprocess`, `child_process`, `system(`, backquotes …), every string literal, and every run
  of adjacent literals (`["rm", "-rf", "dist"]`) joined as words, is analysed as a shell command
  for deny/ask; a backquoted string of Perl, Ruby or PHP always is;
* every literal is a possible path: a read, and a write too when the code has a `writes`
  marker (`open(…, "w")`, `writeFileSync`, `unlink`); a Read/Write deny rule covering it gives
  `maybe` (the literal may never be opened);
* code that is not static (a dynamic `-c` string, a script from a pipe or a dynamic
  here-document) makes the program unknown — maybe against every Bash deny rule — like `sh -c "$X"`.

Rules this module keeps: over-matching by design (a marker in a comment counts, a literal that
is only printed still meets a path rule as `maybe`); it only ever adds subjects for deny (every
one `deny_only`), never grants; code in a file the interpreter names (`python3 x.py`, `awk -f`,
`python3 -m mod`) is outside argument inspection, as the reference says.
"""

from __future__ import annotations

import re
import shlex
from functools import lru_cache
from typing import NamedTuple

from ..tables import load_table
from .model import Cmd, PathRef
from .walk import Env, State, recurse, unknown
from .words import Word, static_word

__all__ = ["scan", "literals", "code_of", "code_flags", "analyse_code", "program_spec", "sed_script", "Scan",
           "Literal", "SedScript", "SCRIPT_SCANNERS"]

MAX_LITERALS = 128  # literals per code string taken as commands and paths (the rest: over the limit, opaque)
MAX_PATH_CHARS = 1024
_PYTHON = re.compile(r"python[0-9.]*")
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|.)", re.S)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "a": "\a", "e": "\x1b"}
_ADJACENT = re.compile(r"[\s,\[\]()]*")
_CLOSERS = {"(": ")", "[": "]", "{": "}", "<": ">"}


@lru_cache(maxsize=1)
def _table() -> dict:
    table = load_table("interpreters.toml")
    for family in table["family"].values():
        family["runs_re"] = re.compile("|".join(f"(?:{p})" for p in family.get("runs", [])))
        family["writes_re"] = re.compile("|".join(f"(?:{p})" for p in family.get("writes", [])))
        starts = set(family["quotes"]) | {opener[0] for opener in family.get("comment", []) + family.get("quote_ops", [])}
        starts |= {family["block_comment"][0][0]} if family.get("block_comment") else set()
        family["openers_re"] = re.compile("[" + re.escape("".join(sorted(starts))) + "]")
    return table


_SPECS: dict[str, dict | None] = {}  # program_spec per basename, for the table in _SPECS_OF
_SPECS_OF: list = [None]


def program_spec(basename: str | None) -> dict | None:
    """The interpreters.toml entry of a program name (`python3.11`, `nodejs`, `gawk`), or None
    (kept per basename: every simple command asks, twice)."""
    if basename is None:
        return None
    table = _table()
    if _SPECS_OF[0] is not table or len(_SPECS) > 4096:
        _SPECS.clear()
        _SPECS_OF[0] = table
    if basename in _SPECS:
        return _SPECS[basename]
    name = table["alias"].get(basename, basename)
    if _PYTHON.fullmatch(name):
        name = "python"
    spec = _SPECS[basename] = table["program"].get(name)
    return spec


def code_flags(spec: dict) -> frozenset[str]:
    """The words that, anywhere in the arguments, may give an interpreter code to run (`-c`,
    `--eval`, `-` for stdin): the unprovable mark's over-approximation (fileops.mark_unprovable)."""
    got = spec.get("_flags")
    if got is None:
        got = spec["_flags"] = frozenset({"-" + letter for letter in spec.get("code_letters", "")}
                                         | set(spec.get("code_opts", [])) | ({"-"} if "-" in spec.get("stdin", []) else set()))
    return got


class Literal(NamedTuple):
    text: str
    start: int
    end: int
    runs: bool  # a backquoted string that runs as a command (Perl, Ruby, PHP)


class Scan(NamedTuple):
    commands: list[str]
    paths: list[str]
    writes: bool
    over_limit: bool


def _unescape(body: str, raw: bool) -> str:
    if raw or "\\" not in body:
        return body

    def one(match: re.Match) -> str:
        got = match.group(1)
        if got[0] == "x" and len(got) == 3:
            return chr(int(got[1:], 16))
        return _ESCAPES.get(got, got)

    return _ESCAPE.sub(one, body)


@lru_cache(maxsize=64)
def _body_re(close: str) -> re.Pattern:
    return re.compile(r"(?:[^\\%s]|\\.)*" % re.escape(close), re.S)


def _until(code: str, pos: int, close: str, opener: str | None = None) -> int:
    """Index of the unescaped `close` from pos (nesting `opener`), or len(code)."""
    if opener is None:
        body = _body_re(close).match(code, pos)
        assert body is not None  # a starred pattern matches the empty string
        return body.end()
    depth = 0
    while pos < len(code):
        char = code[pos]
        if char == "\\":
            pos += 2
            continue
        if opener is not None and char == opener:
            depth += 1
        elif char == close:
            if depth == 0:
                return pos
            depth -= 1
        pos += 1
    return len(code)


def literals(code: str, family: str) -> list[Literal]:
    """The string literals of `code` in the syntax of `family`, in order (a tokenizer of quotes,
    escapes and comments; anything else is skipped)."""
    spec = _table()["family"][family]
    quotes = set(spec["quotes"])
    comments = spec.get("comment", [])
    block = spec.get("block_comment")
    ops = sorted(spec.get("quote_ops", []), key=len, reverse=True)
    backtick_runs = spec.get("backtick_runs", False)
    openers = spec["openers_re"]
    out: list[Literal] = []
    length = len(code)
    found = openers.search(code)
    pos = found.start() if found else length
    while pos < length:
        char = code[pos]
        if char in "#/" and any(code.startswith(comment, pos) for comment in comments):
            pos = code.find("\n", pos)
            pos = length if pos < 0 else pos
            continue
        if block and code.startswith(block[0], pos):
            end = code.find(block[1], pos + len(block[0]))
            pos = length if end < 0 else end + len(block[1])
            continue
        op = next((op for op in ops if code.startswith(op, pos) and (pos == 0 or not (code[pos - 1].isalnum() or code[pos - 1] in "_$@%"))), None)
        if op is not None and pos + len(op) < length:
            delim = code[pos + len(op)]
            if not delim.isalnum() and not delim.isspace() and delim not in "_=,;":
                close = _CLOSERS.get(delim, delim)
                start = pos + len(op) + 1
                end = _until(code, start, close, delim if close != delim else None)
                body = _unescape(code[start:end], raw=op in ("q", "%q", "%w"))
                runs = op in ("qx", "%x")
                if op in ("%w", "%W"):
                    out.extend(Literal(part, start, end + 1, False) for part in body.split())
                else:
                    out.append(Literal(body, pos, end + 1, runs))
                pos = end + 1
                continue
        if char in quotes:
            prefix_start = pos
            while prefix_start > 0 and code[prefix_start - 1] in spec.get("prefixes", ""):
                prefix_start -= 1
            raw = "r" in code[prefix_start:pos].lower() or (char == "'" and family in ("perl", "ruby", "php"))
            if spec.get("triple") and code.startswith(char * 3, pos):
                end = code.find(char * 3, pos + 3)
                end = length if end < 0 else end
                out.append(Literal(_unescape(code[pos + 3:end], raw), prefix_start, end + 3, False))
                pos = end + 3
                continue
            end = _until(code, pos + 1, char)
            out.append(Literal(_unescape(code[pos + 1:end], raw), prefix_start, end + 1, char == "`" and backtick_runs))
            pos = end + 1
            continue
        found = openers.search(code, pos + 1)
        pos = found.start() if found else length
    return out


def scan(code: str, family: str) -> Scan:
    """What code of `family` may run and touch: command texts (for deny/ask) and path literals."""
    spec = _table()["family"][family]
    found = literals(code, family)
    over = len(found) > MAX_LITERALS
    found = found[:MAX_LITERALS]
    runs = spec["runs_re"].search(code) is not None
    commands: list[str] = []
    group: list[Literal] = []

    def close_group() -> None:
        if len(group) > 1:
            commands.append(" ".join(shlex.quote(lit.text) for lit in group))
        group.clear()

    for lit in found:
        if lit.runs or runs:
            text = re.sub(r"^[\s|]+|[\s|]+$", "", lit.text)
            if text and (lit.runs or not group or re.search(r"\s", text)):
                commands.append(text)
        if runs:
            if group and not _ADJACENT.fullmatch(code, group[-1].end, lit.start):
                close_group()
            group.append(lit)
    close_group()
    paths = [lit.text for lit in found
             if lit.text and len(lit.text) <= MAX_PATH_CHARS and "\n" not in lit.text and "\0" not in lit.text]
    return Scan(list(dict.fromkeys(commands)), list(dict.fromkeys(paths)),
                spec["writes_re"].search(code) is not None, over)


# sed's commands that reach outside its stream (GNU sed): `e CMD` runs CMD by a shell, and `e`
# alone or the `e` flag of `s` run the pattern space (unreadable); `r F`/`R F` read F; `w F`/`W F`
# and the `w F` flag of `s` write F. Matched over-broadly (a letter after an address, a separator
# or a closing `/`), never parsed: a false match costs a harmless path or an opaque call.
_SED_COMMAND = re.compile(r"(?:^|[;\n{}!\d$,/])\s*([erRwW])(?:[ \t]+([^\n]*)|(?=[;\n}]|$))")
_SED_FLAGS = re.compile(r"/[gpiImM\d]*([ew])(?:[ \t]*([^\n]*))?(?=\n|$)")


class SedScript(NamedTuple):
    commands: list[str]  # `e CMD`: run by a shell
    reads: list[str]
    writes: list[str]
    runs_unread: bool  # `e` alone, or the `e` flag: what runs is the pattern space


def sed_script(script: str) -> SedScript:
    """What a sed script reaches outside its stream (see _SED_COMMAND)."""
    commands: list[str] = []
    reads: list[str] = []
    writes: list[str] = []
    runs_unread = False
    for letter, argument in [*_SED_COMMAND.findall(script), *_SED_FLAGS.findall(script)]:
        argument = argument.strip()
        if letter == "e":
            if argument:
                commands.append(argument)
            else:
                runs_unread = True
        elif argument:
            (reads if letter in "rR" else writes).append(argument)
    return SedScript(commands, reads, writes, runs_unread)


def code_of(cmd: Cmd, spec: dict) -> tuple[list[Word], bool] | None:
    """(the words holding the code, reads stdin) of an interpreter command, or None when its
    program is a file it names (or it runs nothing)."""
    letters = spec.get("code_letters", "")
    code_opts = set(spec.get("code_opts", []))
    value_opts = set(spec.get("value_opts", []))
    file_opts = set(spec.get("file_opts", []))
    module_opts = set(spec.get("module_opts", []))
    words = cmd.words[1:]
    codes: list[Word] = []
    index = 0

    def following(at: int) -> Word:
        return words[at] if at < len(words) else static_word("")

    def script_file(named: Word) -> tuple[list[Word], bool] | None:
        """A program file option's value: stdin (`sed -f -`, `awk -f /dev/stdin`) is code read
        from stdin; any other file is outside argument inspection (None)."""
        return ([], True) if named.deny_value in spec.get("stdin", []) else None

    while index < len(words):
        word = words[index]
        value = word.deny_value
        if value is None:
            if word.may_dash:
                codes.append(word)  # a dynamic word that may be a code option: unknown
                return codes, False
            break
        if value == "--":
            index += 1
            break
        if value == "-" or not value.startswith("-"):
            break
        if value.startswith("--"):
            name, equals, attached = value.partition("=")
            if name in file_opts:
                return script_file(static_word(attached) if equals else following(index + 1))
            if name in code_opts:
                codes.append(static_word(attached) if equals else following(index + 1))
                index += 1 if equals else 2
                continue
            index += 2 if (name in value_opts and not equals) else 1
            continue
        if value in file_opts:
            return script_file(following(index + 1))
        if value in module_opts:
            return None
        if value in code_opts:
            codes.append(following(index + 1))
            index += 2
            continue
        for position, letter in enumerate(value[1:]):
            option = "-" + letter
            rest = value[position + 2:]
            if letter in letters:
                codes.append(static_word(rest) if rest else following(index + 1))
                index += 0 if rest else 1
                break
            if option in file_opts:
                return script_file(static_word(rest) if rest else following(index + 1))
            if option in module_opts:
                return None
            if option in value_opts:
                index += 0 if rest else 1
                break
        index += 1
    if codes:
        return codes, False
    operand = words[index] if index < len(words) else None
    if spec.get("program_operand"):
        return ([operand], False) if operand is not None else None
    if operand is None:
        return ([], True) if cmd.stdin is not None else None
    if operand.deny_value is None:
        # A dynamic script path is a file, unless stdin carries something it may name (/dev/stdin).
        return ([], True) if cmd.stdin is not None else None
    if operand.deny_value in spec.get("stdin", []):
        return [], True
    return None


def _literal_command(text: str, cmd: Cmd, state: State, env: Env) -> None:
    """A literal analysed as a shell command, for deny/ask only. What it shows is kept (its simple
    commands, their paths, a program it cannot read); what only says the literal is not shell — a
    parse error, the command-count limit, a change to the shell environment — is not the call's:
    the literal may never run, and the call itself was read."""
    result = state.result
    kept = (len(result.opaque), len(result.program_unknown), state.commands, state.limit_hit, state.tainted)
    recurse(text, state, env, outer=cmd, deny_only=True)
    carried = {inner.opaque for inner in result.cmds if inner.program_unknown}
    del result.opaque[kept[0]:]
    result.program_unknown[kept[1]:] = [why for why in result.program_unknown[kept[1]:] if why in carried]
    state.commands, state.limit_hit, state.tainted = kept[2], kept[3], kept[4]


def analyse_code(cmd: Cmd, state: State, env: Env, stdin_script: str | None, stdin_dynamic: bool) -> None:
    """The scan of an interpreter command's inline or stdin code, added to the analysis."""
    spec = program_spec(cmd.basename)
    if spec is None:
        return
    found = code_of(cmd, spec)
    if found is None:
        return
    words, reads_stdin = found
    texts: list[str] = []
    for word in words:
        if word.deny_value is None:
            unknown(state, cmd, f"{cmd.basename} runs code that is not static")
            return
        texts.append(word.deny_value)
    if reads_stdin:
        if stdin_script is None or stdin_dynamic:
            unknown(state, cmd, f"{cmd.basename} reads its code from a pipe or a non-static source")
            return
        texts.append(stdin_script)
    own = SCRIPT_SCANNERS.get(spec["family"])
    if own is not None:
        own(texts, cmd, state, env)
        return
    for text in texts:
        result = scan(text, spec["family"])
        if result.over_limit:
            state.result.opaque.append(f"{cmd.basename} code has more string literals than are scanned")
        for command in result.commands:
            _literal_command(command, cmd, state, env)
        for access in ("read", "write") if result.writes else ("read",):
            for path in result.paths:
                cmd.paths.append(PathRef(access, static_word(path), cmd.cwd, "code", cmd, deny_only=True, guess=True))
        if result.writes:  # `python3 -c 'open(sys.argv[1], "w")' .env`: the code's arguments too
            for word in cmd.words[1:]:
                if word.deny_value is not None and not word.deny_value.startswith("-") and word not in words:
                    cmd.paths.append(PathRef("write", word, cmd.cwd, "code", cmd, deny_only=True, guess=True))


def _analyse_sed(scripts: list[str], cmd: Cmd, state: State, env: Env) -> None:
    """A sed script's own reads, writes and commands (`sed_script`); none under `--sandbox`,
    which makes sed refuse them."""
    if any(word.deny_value == "--sandbox" for word in cmd.words[1:]):
        return
    for script in scripts:
        found = sed_script(script)
        if found.runs_unread or found.commands:
            unknown(state, cmd, "sed runs a command from its script")
        for command in found.commands:
            _literal_command(command, cmd, state, env)
        for access, paths in (("read", found.reads), ("write", found.writes)):
            for path in paths:
                cmd.paths.append(PathRef(access, static_word(path), cmd.cwd, "operand", cmd))


#: The families whose scripts are not scanned for literals but read by a scanner of their own.
SCRIPT_SCANNERS = {"sed": _analyse_sed}
