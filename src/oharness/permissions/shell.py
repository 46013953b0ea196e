"""Shell analysis: from a command string to simple commands and path subjects (permissions.md § 7.2).

What belongs here: the lexical pre-pass, the tree-sitter-bash walk, word evaluation (quote removal,
static vs dynamic, shapes), wrapper unwrapping, redirects, known file commands, working-directory
tracking and the syntactic marks (opaque, program unknown, unprovable).

Rules this module keeps:
* every `command` node at any depth becomes a simple command, and the walk never stops early:
  limits (64 commands, depth 8) and parse errors mark the call opaque but extraction continues, so
  deny rules are evaluated over everything (§ 7.2.1 step 5);
* what cannot be read is marked, never guessed: a dynamic program, a shell reading a script from a
  pipe, `eval` of a dynamic string all set `program_unknown` (maybe against every Bash deny/ask rule);
* no knowledge of rules or modes: this module only describes the command.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Iterable, NamedTuple

from .tables import lazy_attributes, load_table

if TYPE_CHECKING:
    import tree_sitter

__all__ = [
    "Word",
    "Cmd",
    "PathRef",
    "Analysis",
    "analyse",
    "static_word",
    "SAFE_ASSIGNMENTS",
    "MAX_COMMAND_CHARS",
]

MAX_COMMAND_CHARS = 100_000
MAX_COMMANDS = 64
MAX_DEPTH = 8
SHELLS = {"sh", "bash", "zsh", "dash", "ksh"}
EXEMPT_TARGETS = {"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/fd/1", "/dev/fd/2"}
_SAFE_EXACT = {"LANG", "TZ", "NO_COLOR", "FORCE_COLOR", "CLICOLOR", "TERM", "CI", "COLUMNS"}
INTERPRETER_CODE_FLAGS = {
    "python": {"-c", "-"}, "python2": {"-c", "-"}, "python3": {"-c", "-"},
    "node": {"-e", "-p", "--eval", "--print"}, "nodejs": {"-e", "-p", "--eval", "--print"},
    "perl": {"-e", "-E"}, "ruby": {"-e"}, "php": {"-r"}, "lua": {"-e"},
    "Rscript": {"-e"}, "osascript": {"-e"},
}


def SAFE_ASSIGNMENTS(name: str) -> bool:  # noqa: N802 - reads as a set
    return name in _SAFE_EXACT or name.startswith("LC_")


def _language() -> Any:
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Language(tree_sitter_bash.language())


# Built on first use, not at import (see tables.py): the wrapper, option and file-command tables
# and the tree-sitter language. They stay module attributes (`shell.WRAPPERS`, `from .shell
# import OPTIONS`); read them here through `_lazy`.
__getattr__, _lazy = lazy_attributes(globals(), {
    "WRAPPERS": lambda: load_table("wrappers.toml"),
    "OPTIONS": lambda: load_table("options.toml"),
    "FILECOMMANDS": lambda: load_table("filecommands.toml"),
    "_LANGUAGE": _language,
})


@lru_cache(maxsize=1)
def _parser() -> tree_sitter.Parser:
    import tree_sitter

    return tree_sitter.Parser(_lazy("_LANGUAGE"))


# --------------------------------------------------------------------------------------------
# Words


class Word(NamedTuple):
    """One word of a simple command (§ 6.1.2).

    `value` is the exact runtime value when static, else None. `deny_value` is the value used for
    deny/ask matching (ANSI-C strings are decoded there but count as dynamic for allow).
    `pattern` is a regular expression over the possible values, or None for a static word (whose
    pattern, `re.escape(value)`, is built only if asked for: most words never are). A tuple,
    because a command line makes dozens of these per decision.
    """

    text: str
    value: str | None
    deny_value: str | None
    pattern: str | None
    may_dash: bool

    @property
    def static(self) -> bool:
        return self.value is not None

    @property
    def shape(self) -> str:
        return self.pattern if self.pattern is not None else re.escape(self.deny_value or "")

    def could_be(self, literal: str, *, fold: bool = True) -> bool:
        return _shape_regex(self.shape, fold).fullmatch(literal) is not None

    def shape_prefix(self) -> str:
        """The literal text every possible value starts with."""
        m = re.match(r"((?:\\.|[^\\.\[(*?+{|^$])*)", self.shape)
        raw = m.group(1) if m else ""
        return re.sub(r"\\(.)", r"\1", raw)


@lru_cache(maxsize=4096)
def _shape_regex(shape: str, fold: bool) -> re.Pattern[str]:
    return re.compile(shape, re.IGNORECASE | re.DOTALL if fold else re.DOTALL)


def static_word(value: str) -> Word:
    return Word(value, value, value, None, value.startswith("-"))


DYNAMIC_ITEM = Word("<item>", None, None, ".*", True)

_ANSI_SIMPLE = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r",
                "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}


def _decode_ansi_c(body: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\" or i + 1 >= len(body):
            out.append(c)
            i += 1
            continue
        n = body[i + 1]
        if n in _ANSI_SIMPLE:
            out.append(_ANSI_SIMPLE[n])
            i += 2
        elif n in "01234567":
            m = re.match(r"[0-7]{1,3}", body[i + 1 :])
            out.append(chr(int(m.group(0), 8) & 0xFF))
            i += 1 + len(m.group(0))
        elif n in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[n]
            m = re.match(r"[0-9a-fA-F]{1,%d}" % width, body[i + 2 :])
            if m:
                out.append(chr(int(m.group(0), 16)))
                i += 2 + len(m.group(0))
            else:
                out.append("\\" + n)
                i += 2
        elif n == "c" and i + 2 < len(body):
            out.append(chr(ord(body[i + 2]) & 0x1F))
            i += 3
        else:
            out.append("\\" + n)
            i += 2
    return "".join(out)


def _unquoted(text: str, i: int = 0):
    """(index, character) of each character from `i` that is outside quotes and not escaped."""
    quote: str | None = None
    while i < len(text):
        c = text[i]
        if quote == "'":
            if c == "'":
                quote = None
        elif c == "\\":
            i += 2
            continue
        elif quote == '"':
            if c == '"':
                quote = None
        elif c in "'\"":
            quote = c
        else:
            yield i, c
        i += 1


def _skip_balanced(text: str, i: int, open_: str, close: str) -> int:
    """Index just past the `close` matching the `open_` at text[i] (quote-aware, approximate)."""
    depth = 0
    for j, c in _unquoted(text, i):
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)


def _brace_end(text: str, i: int) -> int:
    """If text[i] == '{' opens a brace expansion ({a,b} or {a..b}), the index past its '}'."""
    depth = 0
    j = i
    has_sep = False
    while j < len(text):
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c in "'\"" or c.isspace():
            return -1
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return j + 1 if has_sep else -1
        elif c == "," and depth == 1:
            has_sep = True
        elif text.startswith("..", j) and depth == 1:
            has_sep = True
        j += 1
    return -1


_PLAIN = re.compile(r"[A-Za-z0-9_./:=+,@%^-]+")


def parse_word(text: str, home: str | None = None) -> Word:
    """Evaluate one shell word from its source text (§ 7.2.1 step 6)."""
    if _PLAIN.fullmatch(text):
        return static_word(text)  # no quoting, expansion, glob or tilde: the text is the value
    lit: list[str] = []  # literal chars, current run
    shape: list[str] = []
    value: list[str] = []  # None marker when dynamic
    dynamic = False
    ansi = False
    first_dynamic_pos: int | None = None

    def literal(s: str) -> None:
        value.append(s)
        shape.append(re.escape(s))

    def dyn(regex: str = ".*") -> None:
        nonlocal dynamic, first_dynamic_pos
        if first_dynamic_pos is None:
            first_dynamic_pos = len("".join(value))
        dynamic = True
        shape.append(regex)

    i = 0
    n = len(text)
    if text == "~" or text.startswith("~/"):
        if home is not None:
            literal(home)
        else:
            dyn()  # HOME is assigned in this call: `~` is only known when it runs
        i = 1
    elif text.startswith("~") and re.match(r"~[A-Za-z_]", text):
        dyn()
        m = re.match(r"~[A-Za-z0-9_.-]*", text)
        i = m.end()
    while i < n:
        c = text[i]
        if c == "\\":
            if i + 1 < n:
                if text[i + 1] != "\n":
                    literal(text[i + 1])
                i += 2
            else:
                literal("\\")
                i += 1
        elif c == "'":
            end = text.find("'", i + 1)
            end = n if end == -1 else end
            literal(text[i + 1 : end])
            i = end + 1
        elif c == "$" and text.startswith("$'", i):
            j = i + 2
            while j < n and text[j] != "'":
                j += 2 if text[j] == "\\" else 1
            decoded = _decode_ansi_c(text[i + 2 : j])
            ansi = True
            literal(decoded)
            i = j + 1
        elif c == "$" and text.startswith('$"', i):
            dyn()
            i = _skip_dq(text, i + 1)
        elif c == '"':
            i = _eval_dq(text, i, literal, dyn)
        elif c == "$":
            i = _skip_dollar(text, i, dyn, literal)
        elif c == "`":
            end = text.find("`", i + 1)
            dyn()
            i = n if end == -1 else end + 1
        elif c in "<>" and text.startswith("(", i + 1):
            dyn()
            i = _skip_balanced(text, i + 1, "(", ")")
        elif c == "*":
            dyn(".*")
            i += 1
        elif c == "?":
            dyn(".")
            i += 1
        elif c == "[" and "]" in text[i + 1 :]:
            dyn(".*")
            i += 1
        elif c == "{" and (end := _brace_end(text, i)) != -1:
            dyn(".*")
            i = end
        else:
            literal(c)
            i += 1
    joined = "".join(value)
    shape_re = "".join(shape)
    if "\x00" in joined and not dynamic:
        # argv strings are C strings: bash cuts the word at a decoded NUL (`$'\c@'`, `$'\0'`).
        joined = joined.split("\x00", 1)[0]
        shape_re = re.escape(joined)
    if dynamic:
        may_dash = first_dynamic_pos == 0 or joined.startswith("-")
        return Word(text, None, None, shape_re, may_dash)
    if ansi:
        return Word(text, None, joined, shape_re, joined.startswith("-"))
    return Word(text, joined, joined, shape_re, joined.startswith("-"))


def _skip_dq(text: str, i: int) -> int:
    j = i + 1
    while j < len(text) and text[j] != '"':
        j += 2 if text[j] == "\\" else 1
    return j + 1


def _skip_dollar(text: str, i: int, dyn, literal) -> int:
    n = len(text)
    if text.startswith("$(", i) or text.startswith("$[", i):
        dyn()
        return _skip_balanced(text, i + 1, text[i + 1], ")" if text[i + 1] == "(" else "]")
    if text.startswith("${", i):
        dyn()
        return _skip_balanced(text, i + 1, "{", "}")
    m = re.match(r"\$(?:[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-])", text[i:])
    if m:
        dyn()
        return i + m.end()
    literal("$")
    return i + 1 if i < n else n


def _eval_dq(text: str, i: int, literal, dyn) -> int:
    j = i + 1
    n = len(text)
    while j < n and text[j] != '"':
        c = text[j]
        if c == "\\" and j + 1 < n:
            nxt = text[j + 1]
            if nxt in '$`"\\':
                literal(nxt)
            elif nxt == "\n":
                pass
            else:
                literal("\\" + nxt)
            j += 2
        elif c == "$":
            j = _skip_dollar(text, j, dyn, literal)
        elif c == "`":
            end = text.find("`", j + 1)
            dyn()
            j = n if end == -1 else end + 1
        else:
            literal(c)
            j += 1
    return j + 1


# --------------------------------------------------------------------------------------------
# Results


@dataclass(slots=True)
class PathRef:
    """A file the call reads or writes, as the analysis sees it (§ 7.2.6, § 7.2.7)."""

    access: str  # "read" | "write"
    word: Word
    cwd: str | None  # directory relative paths resolve against; None = unknown
    via: str  # "redirect" | "operand" | "tool"
    owner: "Cmd | None" = None
    recursive: bool = False
    removal: bool = False
    deny_only: bool = False

    @property
    def static(self) -> bool:
        return self.word.deny_value is not None and (self.cwd is not None or self.is_absolute)

    @property
    def is_absolute(self) -> bool:
        v = self.word.deny_value
        return v is not None and v.startswith("/")


class Cmd:
    """One simple command (a layer of a wrapped command, or an inner command) — a `cmd` subject.

    A plain slotted class with a hand-written constructor: a command line makes one or more per
    simple command on every decision, and a dataclass constructor is several times slower."""

    __slots__ = ("words", "basename", "assigns", "group", "layer", "wrapper", "transparent", "inner", "alt_tails",
                 "unprovable", "opaque", "program_unknown", "deny_only", "in_body", "cwd", "paths",
                 "norm_cache")

    def __init__(self, words: list[Word], assigns: list[tuple[str, Word]] | None = None, group: int = 0,
                 layer: int = 0, in_body: bool = False, cwd: str | None = None, deny_only: bool = False,
                 unprovable: list[str] | None = None, program_unknown: bool = False,
                 opaque: str | None = None) -> None:
        self.words = words  # never rebound: `basename` is worked out once, here
        program = words[0].deny_value if words else None
        self.basename = program.rsplit("/", 1)[-1] if program is not None else None
        self.assigns = assigns if assigns is not None else []
        self.group = group  # id of the outermost simple command this layer belongs to
        self.layer = layer  # 0 = outermost
        self.wrapper: str | None = None  # wrapper kind when this layer wraps an inner command
        self.transparent = False
        self.inner: Cmd | None = None
        self.alt_tails = False  # xargs: matching also tries the words without the appended item
        self.unprovable = unprovable if unprovable is not None else []
        self.opaque = opaque
        self.program_unknown = program_unknown
        self.deny_only = deny_only
        self.in_body = in_body
        self.cwd = cwd
        self.paths: list[PathRef] = []
        self.norm_cache: dict = {}  # rules.py / engine.py memo, per analysis

    def __repr__(self) -> str:
        return f"Cmd({self.display()!r}, group={self.group}, layer={self.layer})"

    @property
    def program(self) -> Word | None:
        return self.words[0] if self.words else None

    def display(self) -> str:
        parts = [f"{k}={w.text}" for k, w in self.assigns] + [w.text for w in self.words]
        return " ".join(parts)

    def word_variants(self) -> list[list[Word]]:
        # Built once and kept: the matchers memoise per variant by the list's id, which must
        # therefore stay alive (a fresh slice per call could reuse a freed list's id).
        variants = self.norm_cache.get("variants")
        if variants is None:
            if self.alt_tails and self.words and self.words[-1] is DYNAMIC_ITEM:
                variants = [self.words, self.words[:-1]]
            else:
                variants = [self.words]
            self.norm_cache["variants"] = variants
        return variants


@dataclass(slots=True)
class Analysis:
    cmds: list[Cmd] = field(default_factory=list)
    paths: list[PathRef] = field(default_factory=list)  # redirects (commands' operands live on them)
    opaque: list[str] = field(default_factory=list)  # why the call is opaque
    program_unknown: list[str] = field(default_factory=list)  # maybe against every Bash rule
    too_large: bool = False

    def all_paths(self) -> Iterable[PathRef]:
        yield from self.paths
        for c in self.cmds:
            yield from c.paths


# --------------------------------------------------------------------------------------------
# Pre-pass (§ 7.2.1 step 2)


def _prepass(text: str) -> tuple[str, bool]:
    """Join backslash-newlines where bash's lexer does. Returns (joined, fully_modelled)."""
    if "\\\n" not in text:
        return text, True
    out: list[str] = []
    i = 0
    n = len(text)
    quote: str | None = None
    modelled = True
    pending_quoted_heredocs: list[str] = []
    at_word_start = True
    while i < n:
        c = text[i]
        if quote == "'":
            out.append(c)
            if c == "'":
                quote = None
            i += 1
            continue
        if quote == "$'":
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == "'":
                quote = None
            i += 1
            continue
        if c == "\\" and i + 1 < n:
            if text[i + 1] == "\n":
                i += 2
                continue
            out.append(text[i : i + 2])
            i += 2
            at_word_start = False
            continue
        if quote == '"':
            out.append(c)
            if c == '"':
                quote = None
            i += 1
            continue
        if c == "'":
            quote = "'"
        elif c == "$" and text.startswith("$'", i):
            quote = "$'"
            out.append("$'")
            i += 2
            continue
        elif c == '"':
            quote = '"'
        elif c == "#" and at_word_start:
            end = text.find("\n", i)
            end = n if end == -1 else end
            out.append(text[i:end])
            i = end
            continue
        elif c == "<" and text.startswith("<<", i) and not text.startswith("<<<", i):
            m = re.match(r"<<-?\s*(['\"]?)([A-Za-z0-9_]+)\1", text[i:])
            if m is None:
                modelled = False
            elif m.group(1):
                pending_quoted_heredocs.append(m.group(2))
        elif c == "\n" and pending_quoted_heredocs:
            out.append(c)
            i += 1
            # Copy quoted heredoc bodies verbatim: bash does not join lines inside them.
            while pending_quoted_heredocs:
                delim = pending_quoted_heredocs.pop(0)
                while i < n:
                    end = text.find("\n", i)
                    end = n if end == -1 else end + 1
                    line = text[i:end]
                    out.append(line)
                    i = end
                    if line.rstrip("\n").lstrip("\t") == delim:
                        break
            at_word_start = True
            continue
        out.append(c)
        at_word_start = c.isspace() or c in ";|&()"
        i += 1
    return "".join(out), modelled


def _has_unquoted_cr(text: str) -> bool:
    return "\r" in text and any(c == "\r" for _, c in _unquoted(text))


# --------------------------------------------------------------------------------------------
# Walk


@dataclass(slots=True)
class _State:
    home: str | None
    cwd: str | None
    result: Analysis
    tainted: bool = False
    home_assigned: bool = False
    groups: int = 0
    commands: int = 0
    limit_hit: bool = False


class _Env(NamedTuple):  # a tuple: the walk makes one per nesting level
    depth: int = 0
    in_body: bool = False
    top_level: bool = True
    piped: bool = False  # stdin comes from a pipe
    deny_only: bool = False


_BODY_TYPES = {"for_statement", "c_style_for_statement", "while_statement", "case_statement",
               "function_definition", "test_command", "arithmetic_expansion"}
_NESTING_TYPES = {"command_substitution", "process_substitution"}
# Node types the walk acts on even when the parser gave them no children.
_LEAF_FACTS = {"command", "redirected_statement", "pipeline", "variable_assignment", "declaration_command",
               "unset_command", "function_definition", "file_redirect", "heredoc_redirect", "herestring_redirect"}
_MAY_NEST = re.compile(rb"[$`(]")
_WORDISH = {"word", "string", "raw_string", "concatenation", "simple_expansion", "expansion",
            "command_substitution", "process_substitution", "ansi_c_string", "translated_string",
            "number", "arithmetic_expansion", "brace_expression", "$"}


def analyse(command: str, cwd: str | None, home: str | None = None) -> Analysis:
    """Analyse one shell command string (§ 7.2.1)."""
    result = Analysis()
    if len(command) > MAX_COMMAND_CHARS:
        result.too_large = True
        return result
    # `~` is the session's HOME unless the call assigns HOME anywhere (§ 7.2.1 step 6).
    home_assigned = re.search(r"(?<![$\w{])HOME\b", command) is not None
    state = _State(home=home, cwd=cwd, result=result, home_assigned=home_assigned)
    _analyse_text(command, state, _Env())
    if state.limit_hit:
        result.opaque.append("analysis limit reached")
    return result


_SURROGATE = re.compile("[\ud800-\udfff]")


def _analyse_text(text: str, state: _State, env: _Env) -> None:
    if env.depth > MAX_DEPTH:
        state.limit_hit = True
    variants: list[str] = []
    if _SURROGATE.search(text):
        state.result.opaque.append("invalid UTF-8 in command")
    if "\x00" in text:
        state.result.opaque.append("NUL byte in command")
        text = text.replace("\x00", " ")
    joined, modelled = _prepass(text)
    variants.append(joined)
    if not modelled:
        state.result.opaque.append("line continuation in an unmodelled construct")
        variants.append(text)
    if _has_unquoted_cr(joined):
        state.result.opaque.append("carriage return outside quotes")
        variants.append(joined.replace("\r", "\n"))
    if "shopt" in joined and re.search(r"shopt\s+(-[a-z]*s[a-z]*\s+)?[^;&|\n]*expand_aliases", joined):
        state.result.opaque.append("alias expansion enabled")
    cwd_before, taint_before = state.cwd, state.tainted
    k = 0
    while k < len(variants):
        variant = variants[k]
        if k:
            state.cwd, state.tainted = cwd_before, taint_before
        k += 1
        source = variant.encode("utf-8", "surrogatepass")
        tree = _parser().parse(source)
        if k == 1 and "\n" in variant and _word_spans_newline(tree.root_node):
            # tree-sitter-bash reads `ls⏎\rm` as one command where bash runs two: the parser and
            # bash disagree, so the call is unreadable; deny also runs over a variant bash would see.
            state.result.opaque.append("parser disagrees with bash (newline inside a word)")
            state.result.program_unknown.append("parser disagrees with bash (newline inside a word)")
            variants.append(_split_newline_words(variant))
        if tree.root_node.has_error:
            where = _first_error(tree.root_node)
            state.result.opaque.append(f"parse error at {where}")
            state.result.program_unknown.append(f"parse error at {where}")
        _Walker(source, state).walk(tree.root_node, env)


def _word_spans_newline(node: tree_sitter.Node) -> bool:
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == "word" and b"\n" in n.text:
            return True
        if n.type not in ("heredoc_body", "string", "raw_string", "comment"):
            stack.extend(n.children)
    return False


def _split_newline_words(text: str) -> str:
    """A variant for deny evaluation: a line starting with a backslash-escape loses the backslash."""
    return re.sub(r"\n\\(?=[^\n])", "\n", text)


def _first_error(node: tree_sitter.Node) -> str:
    stack = [node]
    while stack:
        n = stack.pop(0)
        if n.type == "ERROR" or n.is_missing:
            r, c = n.start_point
            return f"{r + 1}:{c + 1}"
        stack.extend(n.children)
    r, c = node.start_point
    return f"{r + 1}:{c + 1}"


class _Walker:
    def __init__(self, source: bytes, state: _State) -> None:
        self.src = source
        self.state = state

    def text(self, node: tree_sitter.Node) -> str:
        return self.src[node.start_byte : node.end_byte].decode("utf-8", "replace")

    # The walk visits every node; specific node types add facts, all of them recurse.
    def walk(self, node: tree_sitter.Node, env: _Env) -> None:
        t = node.type
        if not node.child_count and t not in _LEAF_FACTS:
            return  # a token: nothing below it, no fact of its own
        if t == "command":
            self.command(node, env, [])
            return
        if t == "redirected_statement":
            self.redirected(node, env)
            return
        if t == "pipeline":
            kids = [c for c in node.children if c.is_named]
            for index, child in enumerate(kids):
                self.walk(child, _Env(env.depth, env.in_body, False, index > 0, env.deny_only))
            return
        if t == "variable_assignment":
            self.standalone_assignment(node, env)
            return
        if t == "declaration_command" or t == "unset_command":
            self.declaration(node, env)
            return
        if t == "function_definition":
            self.state.tainted = True
        child_env = env
        if t in _BODY_TYPES or (t == "compound_statement" and self.text(node).startswith("((")):
            child_env = _Env(env.depth, True, False, env.piped, env.deny_only)
        elif t in _NESTING_TYPES:
            child_env = _Env(env.depth + 1, env.in_body, False, False, env.deny_only)
            if env.depth + 1 > MAX_DEPTH:
                self.state.limit_hit = True
        elif t in ("subshell", "if_statement", "compound_statement", "negated_command", "do_group",
                   "else_clause", "elif_clause", "case_item"):
            child_env = _Env(env.depth, child_env.in_body, t in ("if_statement", "else_clause", "elif_clause", "compound_statement", "negated_command") and env.top_level, env.piped, env.deny_only)
            if t == "subshell":
                child_env = _Env(env.depth, env.in_body, False, env.piped, env.deny_only)
        elif t not in ("program", "list"):
            child_env = _Env(env.depth, env.in_body, False, env.piped, env.deny_only)
        if t == "file_redirect" or t == "heredoc_redirect" or t == "herestring_redirect":
            self.redirect(node, env, None)
            return
        for child in node.children:
            self.walk(child, child_env)

    # -- statements ------------------------------------------------------------------------
    def redirected(self, node: tree_sitter.Node, env: _Env) -> None:
        body = node.child_by_field_name("body")
        redirects = [c for c in node.children if c.type.endswith("_redirect")]
        if body is None:
            kids = [c for c in node.children if c.is_named and not c.type.endswith("_redirect")]
            body = kids[0] if kids else None
        # Redirects of the statement are evaluated first: their substitutions run before the body.
        owner: Cmd | None = None
        if body is not None and body.type == "command":
            self.command(body, env, redirects)
            return
        if body is not None:
            self.walk(body, env)
        for r in redirects:
            self.redirect(r, env, owner)

    def standalone_assignment(self, node: tree_sitter.Node, env: _Env) -> None:
        name_node = node.child_by_field_name("name") or (node.children[0] if node.children else None)
        name = self.text(name_node) if name_node is not None else ""
        if name == "HOME":
            self.state.home_assigned = True
        if not SAFE_ASSIGNMENTS(name):
            self.state.tainted = True
        for child in node.children[1:]:
            self.walk(child, _Env(env.depth, env.in_body, False, False, env.deny_only))

    def declaration(self, node: tree_sitter.Node, env: _Env) -> None:
        words: list[Word] = []
        for child in node.children:
            if child.type == "variable_assignment":
                nm = child.child_by_field_name("name") or child.children[0]
                if self.text(nm) == "HOME":
                    self.state.home_assigned = True
                for sub in child.children[1:]:
                    self.walk(sub, _Env(env.depth, env.in_body, False, False, env.deny_only))
            elif child.type in _NESTING_TYPES:
                self.walk(child, env)
            words.append(parse_word(self.text(child), self._home()))
        self.state.groups += 1
        cmd = Cmd(words=words, group=self.state.groups, in_body=env.in_body, cwd=self.state.cwd,
                  deny_only=env.deny_only)
        self._register(cmd, env, [])
        # A declaration (`export PATH=…`, `unset`, `local`) changes the shell for later commands.
        names = [w.deny_value.split("=", 1)[0] for w in words[1:] if w.deny_value and not w.deny_value.startswith("-")]
        if (words and words[0].value == "unset") or any(not SAFE_ASSIGNMENTS(nm) for nm in names):
            self.state.tainted = True

    # -- commands --------------------------------------------------------------------------
    def _home(self) -> str | None:
        return None if self.state.home_assigned else self.state.home

    def command(self, node: tree_sitter.Node, env: _Env, outer_redirects: list) -> None:
        assigns: list[tuple[str, Word]] = []
        arg_nodes: list[tree_sitter.Node] = []
        redirects: list[tree_sitter.Node] = []
        seen_name = False
        for child in node.children:
            ct = child.type
            if ct == "variable_assignment" and not seen_name:
                name_node = child.child_by_field_name("name") or child.children[0]
                name = self.text(name_node)
                value_text = self.text(child)[len(name) :]
                value_text = value_text[2:] if value_text.startswith("+=") else value_text[1:]
                if name == "HOME":
                    self.state.home_assigned = True
                for sub in child.children[1:]:
                    self._walk_nested(sub, env)
                assigns.append((name, parse_word(value_text, self._home())))
            elif ct.endswith("_redirect"):
                redirects.append(child)
            elif ct == "command_name":
                seen_name = True
                arg_nodes.append(child)
            elif ct != "comment":
                arg_nodes.append(child)
        # Substitutions inside the words run before the command itself.
        if _MAY_NEST.search(self.src, node.start_byte, node.end_byte):
            for a in arg_nodes:
                self._walk_nested(a, env)
        home = self._home()
        plain = _PLAIN.fullmatch
        words = [static_word(text) if plain(text) else parse_word(text, home)
                 for text in self._group_words(arg_nodes)]
        self.state.groups += 1
        cmd = Cmd(words, assigns, self.state.groups, 0, env.in_body, self.state.cwd, env.deny_only)
        self._register(cmd, env, redirects + outer_redirects if outer_redirects else redirects)
        self._track_cd(cmd, env)

    def _group_words(self, nodes: list[tree_sitter.Node]) -> list[str]:
        """Adjacent nodes with no space between them form one word (`$"x"`, `a"b"`)."""
        out: list[str] = []
        last_end = -1
        src = self.src
        for n in nodes:
            start, end = n.start_byte, n.end_byte
            if start == end:
                continue
            txt = src[start:end].decode("utf-8", "replace")
            if start == last_end and out:
                out[-1] += txt
            else:
                out.append(txt)
            last_end = end
        return out

    def _walk_nested(self, node: tree_sitter.Node, env: _Env) -> None:
        if not _MAY_NEST.search(self.src, node.start_byte, node.end_byte):
            return  # no `$`, backquote or `(` in its text: no substitution can be inside
        if node.type in _NESTING_TYPES:
            self.walk(node, env)
            return
        for child in node.children:
            self._walk_nested(child, env)

    def _register(self, cmd: Cmd, env: _Env, redirect_nodes: list) -> None:
        st = self.state
        st.commands += 1
        if st.commands > MAX_COMMANDS or env.depth > MAX_DEPTH:
            st.limit_hit = True
        if st.tainted and cmd.words and not cmd.unprovable:
            cmd.unprovable.append("follows a change to the shell environment")
        for name, w in cmd.assigns:
            if not SAFE_ASSIGNMENTS(name) or not w.static:
                cmd.unprovable.append(f"assignment {name}=")
        if env.in_body:
            cmd.unprovable.append("inside a loop, case, function, test or arithmetic")
        stdin_script: str | None = None
        stdin_dynamic = env.piped
        for r in redirect_nodes:
            kind, payload = self._stdin_of(r)
            if kind == "static":
                stdin_script = payload
            elif kind == "dynamic":
                stdin_dynamic = True
        chain = _unwrap(cmd, st, env, stdin_script, stdin_dynamic, self)
        for c in chain:
            st.result.cmds.append(c)
            _file_operands(c, st)
            _mark_unprovable(c)
        for r in redirect_nodes:
            self.redirect(r, env, cmd)

    def _stdin_of(self, r: tree_sitter.Node) -> tuple[str, str | None]:
        """What a redirect feeds to stdin: ("static", text), ("dynamic", None) or ("none", None)."""
        if r.type == "herestring_redirect":
            kids = [c for c in r.children if c.is_named]
            w = parse_word(" ".join(self.text(k) for k in kids), self._home()) if kids else None
            if w is not None and w.deny_value is not None:
                return "static", w.deny_value
            return "dynamic", None
        if r.type == "heredoc_redirect":
            start = next((c for c in r.children if c.type == "heredoc_start"), None)
            body = next((c for c in r.children if c.type == "heredoc_body"), None)
            quoted = start is not None and re.search(r"['\"\\]", self.text(start)) is not None
            text = self.text(body) if body is not None else ""
            if quoted or not re.search(r"[$`]", text):
                return "static", text
            return "dynamic", None
        if r.type == "file_redirect":
            op = "".join(self.text(c) for c in r.children if not c.is_named)
            if op in ("<", "<>"):
                return "dynamic", None
        return "none", None

    def redirect(self, r: tree_sitter.Node, env: _Env, owner: Cmd | None) -> None:
        for child in r.children:
            if child.is_named and child.type != "heredoc_body":
                self._walk_nested(child, env)
            if child.type == "heredoc_body":
                # Unquoted heredoc bodies expand substitutions: walk what the parser found there.
                for sub in child.children:
                    self._walk_nested(sub, env)
        if r.type != "file_redirect":
            return
        op = "".join(self.text(c) for c in r.children if not c.is_named and c.type != "file_descriptor")
        targets = [c for c in r.children if c.is_named and c.type not in ("file_descriptor",)]
        if not targets:
            return
        target_nodes = targets
        if any(t.type == "process_substitution" for t in target_nodes):
            return  # the substituted commands were walked; no file is written
        text = self._group_words(target_nodes)
        if not text:
            return
        word = parse_word(text[0], self._home())
        if op in (">&", "<&", "&>") and word.value is not None and (word.value.isdigit() or word.value == "-"):
            return
        if word.value in EXEMPT_TARGETS:
            return
        access = "read" if op in ("<", "<&") else "write"
        self.state.result.paths.append(PathRef(access, word, self.state.cwd, "redirect",
                                               deny_only=env.deny_only))

    def _track_cd(self, cmd: Cmd, env: _Env) -> None:
        if cmd.basename not in ("cd", "pushd", "popd") or cmd.layer != 0:
            return
        args = [w for w in cmd.words[1:] if not (w.value or "").startswith("-") or w.value == "-"]
        static_target = len(args) == 1 and args[0].deny_value is not None and args[0].value != "-"
        if cmd.basename == "popd" or not static_target or not env.top_level or env.in_body:
            self.state.cwd = None
            if not static_target:
                self.state.tainted = True
            return
        if self.state.cwd is None and not args[0].deny_value.startswith("/"):
            return
        self.state.cwd = os.path.normpath(os.path.join(self.state.cwd or "/", args[0].deny_value))


# --------------------------------------------------------------------------------------------
# Wrappers (§ 7.2.4)


def _split_options(words: list[Word], spec: dict, *, stop_at_operand: bool = True) -> tuple[dict, list[Word], bool]:
    """Parse leading options of a wrapper. Returns (options, rest, dynamic_option_seen)."""
    value_opts = set(spec.get("value_opts", []))
    numeric = spec.get("numeric_opts", False)
    opts: dict[str, Word | None] = {}
    i = 0
    dynamic = False
    while i < len(words):
        w = words[i]
        v = w.deny_value
        if v is None:
            if w.may_dash:
                dynamic = True
            break
        if v == "--":
            i += 1
            break
        if not v.startswith("-") or v == "-":
            break
        if "=" in v and v.startswith("--"):
            k, _, val = v.partition("=")
            opts[k] = static_word(val)
            i += 1
            continue
        if v in value_opts:
            opts[v] = words[i + 1] if i + 1 < len(words) else None
            i += 2
            continue
        if numeric and re.fullmatch(r"-\d+", v):
            i += 1
            continue
        if not v.startswith("--") and len(v) > 2:
            # A getopt cluster: `-qc STRING`, `-n1`, `-uroot`.
            letters = v[1:]
            consumed = 1
            for k, ch in enumerate(letters):
                if "-" + ch in value_opts:
                    rest_ = letters[k + 1 :]
                    if rest_:
                        opts["-" + ch] = static_word(rest_)
                    else:
                        opts["-" + ch] = words[i + 1] if i + 1 < len(words) else None
                        consumed = 2
                    break
                opts["-" + ch] = None
            i += consumed
            continue
        opts[v] = None
        i += 1
    return opts, words[i:], dynamic


def _unwrap(cmd: Cmd, st: _State, env: _Env, stdin_script: str | None, stdin_dynamic: bool, walker: _Walker) -> list[Cmd]:
    chain = [cmd]
    current = cmd
    layer = 0
    while current.words:
        prog = current.program
        if prog.deny_value is None:
            current.program_unknown = True
            current.opaque = "dynamic program name"
            st.result.opaque.append("dynamic program name")
            st.result.program_unknown.append("dynamic program name")
            break
        if prog.value is None and current.opaque is None:
            # `$'\x72m'`: decoded for deny/ask, but the program is not a plain word.
            current.opaque = "dynamic program name"
            st.result.opaque.append("dynamic program name")
        base = prog.deny_value.rsplit("/", 1)[-1]
        wrappers = _lazy("WRAPPERS")
        key = base if base in wrappers else base.lower()
        spec = wrappers.get(key)
        if spec is None:
            _maybe_source(current, st, env, stdin_script, stdin_dynamic, walker)
            break
        produced = len(st.result.cmds)
        inner_words, transparent, extra = _inner_of(key, spec, current, st, env, stdin_script, stdin_dynamic, walker)
        if inner_words is None:
            if len(st.result.cmds) > produced:
                # The wrapper ran a string (sh -c, eval, watch, trap …) analysed recursively.
                current.wrapper = key
                current.transparent = transparent
            break
        if not inner_words:
            break
        layer += 1
        inner = Cmd(words=inner_words, group=cmd.group, layer=layer, in_body=current.in_body,
                    cwd=current.cwd, deny_only=current.deny_only, unprovable=list(cmd.unprovable))
        inner.assigns = extra.get("assigns", [])
        inner.alt_tails = extra.get("alt_tails", False)
        for name, w in inner.assigns:
            if not SAFE_ASSIGNMENTS(name) or not w.static:
                inner.unprovable.append(f"assignment {name}=")
        current.wrapper = key
        current.transparent = transparent
        current.inner = inner
        chain.append(inner)
        current = inner
        # find -exec may produce several inner commands; they are appended by _inner_of via extra.
        for more in extra.get("more", []):
            more.group, more.layer, more.cwd, more.in_body = cmd.group, layer, current.cwd, current.in_body
            more.unprovable.extend(cmd.unprovable)
            chain.append(more)
    return chain



def _recurse_string(s: "Word | None", st, env, cmd, what: str) -> None:
    """A `-c STRING` argument: analysed as a command line when static, else the call is unknown."""
    if s is None or s.deny_value is None:
        _unknown(st, cmd, what)
    else:
        _recurse(s.deny_value, st, env, outer=cmd)

def _recurse(text: str, st: _State, env: _Env, *, deny_only: bool = False, unprovable: str | None = None,
             outer: Cmd | None = None) -> None:
    before = len(st.result.cmds)
    saved_cwd = st.cwd
    _analyse_text(text, st, _Env(env.depth + 1, env.in_body, env.top_level, False, env.deny_only or deny_only))
    if env.depth + 1 > MAX_DEPTH:
        st.limit_hit = True
    st.cwd = saved_cwd if deny_only else st.cwd
    for c in st.result.cmds[before:]:
        if outer is not None:
            # Everything a wrapper's string runs belongs to the wrapper's command (§ 7.2.4).
            c.group, c.layer = outer.group, outer.layer + 1 + c.layer
            if outer.in_body:
                c.in_body = True
                c.unprovable.append("inside a loop, case, function, test or arithmetic")
        if unprovable:
            c.unprovable.append(unprovable)
        if deny_only:
            c.deny_only = True


def _unknown(st: _State, cmd: Cmd, why: str) -> None:
    cmd.program_unknown = True
    cmd.opaque = why
    st.result.opaque.append(why)
    st.result.program_unknown.append(why)


def _inner_of(key: str, spec: dict, cmd: Cmd, st: _State, env: _Env, stdin_script: str | None,
              stdin_dynamic: bool, walker: _Walker) -> tuple[list[Word] | None, bool, dict]:
    kind = spec["kind"]
    args = cmd.words[1:]
    transparent = bool(spec.get("transparent", False))
    extra: dict = {}
    if kind == "generic":
        opts, rest, dyn = _split_options(args, spec)
        if dyn:
            _unknown(st, cmd, f"dynamic option of {key}")
            return None, transparent, extra
        rest = rest[int(spec.get("positionals", 0)) :]
        return rest, transparent, extra
    if kind == "command":
        if any(w.value in ("-v", "-V") for w in args[:2]):
            return None, transparent, extra
        opts, rest, dyn = _split_options(args, spec)
        return rest, transparent, extra
    if kind == "env":
        opts, rest, dyn = _split_options(args, spec)
        if dyn:
            _unknown(st, cmd, "dynamic option of env")
            return None, False, extra
        if "-S" in opts or "--split-string" in opts:
            s = opts.get("-S") or opts.get("--split-string")
            if s is None or s.deny_value is None:
                _unknown(st, cmd, "dynamic env -S string")
                return None, False, extra
            _recurse(" ".join([s.deny_value] + [w.deny_value or w.text for w in rest]), st, env, outer=cmd)
            return None, False, extra
        assigns: list[tuple[str, Word]] = []
        while rest and rest[0].deny_value is not None and re.match(r"[A-Za-z_][A-Za-z0-9_]*=", rest[0].deny_value):
            name, _, val = rest[0].text.partition("=")
            assigns.append((name, parse_word(val, st.home)))
            rest = rest[1:]
        extra["assigns"] = assigns
        clean = not opts and all(SAFE_ASSIGNMENTS(n) and w.static for n, w in assigns)
        return rest, clean, extra
    if kind == "shell":
        return _shell_inner(key, cmd, st, env, stdin_script, stdin_dynamic)
    if kind == "eval":
        if not args:
            return None, True, extra
        if any(w.deny_value is None for w in args):
            _unknown(st, cmd, "eval of a dynamic string")
            return None, True, extra
        allow_dynamic = any(w.value is None for w in args)
        _recurse(" ".join(w.deny_value for w in args), st, env, outer=cmd,
                 unprovable="ANSI-C string in eval" if allow_dynamic else None)
        return None, True, extra
    if kind == "coproc":
        _unknown(st, cmd, "coproc is not modelled by the parser")
        return args, False, extra
    if kind == "su":
        opts, rest, dyn = _split_options(args, {"value_opts": spec.get("value_opts", []) + ["-c", "--command"]})
        # su accepts options after the user name too (`su - root -c '…'`): scan every word.
        for k, w in enumerate(args):
            v = w.deny_value
            if v is None:
                continue
            if v in ("-c", "--command") or (re.fullmatch(r"-[a-z]*c", v) and not v.startswith("--")):
                opts["-c"] = args[k + 1] if k + 1 < len(args) else None
            elif v.startswith("--command="):
                opts["-c"] = static_word(v.split("=", 1)[1])
        s = opts.get("-c") or opts.get("--command")
        if "-c" in opts or "--command" in opts:
            _recurse_string(s, st, env, cmd, f"dynamic {key} -c string")
            return None, False, extra
        if "-u" in opts or "--user" in opts:
            return rest, False, extra
        return None, False, extra
    if kind == "xargs":
        opts, rest, dyn = _split_options(args, spec)
        if dyn:
            _unknown(st, cmd, "dynamic option of xargs")
            return None, False, extra
        replace = None
        for k in ("-I", "-i", "--replace"):
            if k in opts:
                replace = opts[k].deny_value if opts[k] is not None else "{}"
        inner = rest or [static_word("echo")]
        if replace:
            inner = [DYNAMIC_ITEM if (w.deny_value and replace in w.deny_value) else w for w in inner]
        extra["alt_tails"] = True
        return inner + [DYNAMIC_ITEM], False, extra
    if kind == "find":
        return _find_inner(cmd, st, extra)
    if kind == "watch":
        opts, rest, dyn = _split_options(args, spec)
        if dyn or any(w.deny_value is None for w in rest):
            _unknown(st, cmd, "dynamic watch command")
            return None, False, extra
        if "-x" in opts or "--exec" in opts:
            return rest, False, extra
        _recurse(" ".join(w.deny_value for w in rest), st, env, outer=cmd)
        return None, False, extra
    if kind == "script":
        opts, rest, dyn = _split_options(args, {"value_opts": spec.get("value_opts", []) + ["-c", "--command"]})
        if "-c" in opts or "--command" in opts:
            s = opts.get("-c") or opts.get("--command")
            _recurse_string(s, st, env, cmd, "dynamic script -c string")
        return None, False, extra
    if kind == "flock":
        opts, rest, dyn = _split_options(args, {"value_opts": spec.get("value_opts", []) + ["-c", "--command"]})
        if "-c" in opts or "--command" in opts:
            s = opts.get("-c") or opts.get("--command")
            _recurse_string(s, st, env, cmd, "dynamic flock -c string")
            return None, False, extra
        if rest and rest[0].deny_value is not None and rest[1:2] and rest[1].deny_value in ("-c", "--command"):
            s = rest[2] if len(rest) > 2 else None
            _recurse_string(s, st, env, cmd, "dynamic flock -c string")
            return None, False, extra
        return rest[1:], False, extra
    if kind in ("trap", "alias"):
        for w in args:
            v = w.deny_value
            if v is not None and v.startswith("-"):
                continue
            if kind == "alias":
                if v is None:
                    _unknown(st, cmd, "dynamic alias value")
                    continue
                if "=" in v:
                    _recurse(v.partition("=")[2], st, env, outer=cmd, deny_only=True)
                continue
            if v is None:
                _unknown(st, cmd, "dynamic trap action")
            else:
                _recurse(v, st, env, outer=cmd, deny_only=True)
            break
        st.tainted = True
        return None, False, extra
    return None, transparent, extra


_SHELL_VALUE_OPTS = {"-o", "+o", "-O", "+O", "--rcfile", "--init-file"}


def _shell_inner(key: str, cmd: Cmd, st: _State, env: _Env, stdin_script: str | None,
                 stdin_dynamic: bool) -> tuple[list[Word] | None, bool, dict]:
    args = cmd.words[1:]
    i = 0
    has_c = False
    reads_stdin_flag = False
    while i < len(args):
        w = args[i]
        v = w.deny_value
        if v is None:
            if w.may_dash:
                _unknown(st, cmd, f"dynamic option of {key}")
                return None, True, {}
            break
        if v == "--" or v == "-":
            i += 1
            break
        if v in _SHELL_VALUE_OPTS:
            i += 2
            continue
        if v.startswith("--"):
            i += 1
            continue
        if v[:1] in "-+" and len(v) > 1:
            letters = v[1:]
            if "c" in letters:
                has_c = True
            if "s" in letters:
                reads_stdin_flag = True
            i += 1
            continue
        break
    operands = args[i:]
    if has_c:
        if not operands:
            _unknown(st, cmd, f"{key} -c without a command string")
            return None, True, {}
        script = operands[0]
        if script.deny_value is None:
            _unknown(st, cmd, f"{key} -c with a dynamic string")
            return None, True, {}
        _recurse(script.deny_value, st, _Env(env.depth, env.in_body, True, False, env.deny_only), outer=cmd,
                 unprovable=None if script.value is not None else "ANSI-C string in -c")
        return None, True, {}
    if operands and not reads_stdin_flag:
        return None, False, {}  # `bash script.sh`: an ordinary program running a file
    if stdin_script is not None and not stdin_dynamic:
        _recurse(stdin_script, st, env, outer=cmd)
        return None, True, {}
    _unknown(st, cmd, f"{key} reads its script from a pipe or a non-static source")
    return None, True, {}


def _maybe_source(cmd: Cmd, st: _State, env: _Env, stdin_script: str | None, stdin_dynamic: bool, walker: _Walker) -> None:
    base = cmd.basename
    if base not in ("source", "."):
        if base == "exec" and len(cmd.words) == 1:
            return
        return
    st.tainted = True
    target = cmd.words[1] if len(cmd.words) > 1 else None
    if target is None or target.deny_value is None:
        _unknown(st, cmd, "source of a dynamic path")
        return
    if target.deny_value in ("/dev/stdin", "/proc/self/fd/0", "/dev/fd/0"):
        st.result.opaque.append("source reads its script from stdin")
        if stdin_script is not None and not stdin_dynamic:
            _recurse(stdin_script, st, env, outer=cmd, deny_only=True)
        else:
            _unknown(st, cmd, "source reads its script from a pipe")


def _find_inner(cmd: Cmd, st: _State, extra: dict) -> tuple[list[Word] | None, bool, dict]:
    args = cmd.words[1:]
    inners: list[list[Word]] = []
    i = 0
    while i < len(args):
        v = args[i].deny_value
        if v in ("-exec", "-execdir", "-ok", "-okdir"):
            j = i + 1
            argv: list[Word] = []
            while j < len(args) and args[j].deny_value not in (";", "+"):
                w = args[j]
                argv.append(DYNAMIC_ITEM if w.deny_value == "{}" else w)
                j += 1
            if argv:
                inners.append(argv)
            i = j + 1
            continue
        if v is None and args[i].may_dash:
            _unknown(st, cmd, "dynamic find expression")
        i += 1
    if not inners:
        return None, False, extra
    extra["more"] = [Cmd(words=w) for w in inners[1:]]
    return inners[0], False, extra


# --------------------------------------------------------------------------------------------
# File operands (§ 7.2.7) and unprovable marks (§ 7.2.3)


_OPTION_SETS: dict[int, tuple[dict, dict[str, set[str]], set[str]]] = {}


def _option_sets(spec: dict) -> tuple[dict[str, set[str]], set[str]]:
    """(path options by kind, every option that takes a value) of a file-command entry, built once
    per entry object (the entry is kept in the memo so its id cannot be reused)."""
    got = _OPTION_SETS.get(id(spec))
    if got is None or got[0] is not spec:
        path_opts = {k: set(spec.get(k, [])) for k in ("read_opts", "write_opts", "target_opts", "at_read_opts")}
        value_opts = set(spec.get("value_opts", [])) | set(spec.get("pattern_opts", []))
        got = _OPTION_SETS[id(spec)] = (spec, path_opts, value_opts.union(*path_opts.values()))
    return got[1], got[2]


def _operands(words: list[Word], spec: dict) -> tuple[list[Word], dict[str, list[Word]], set[str]]:
    """Split into operands and option values, per the file-command table entry."""
    path_opts, all_value = _option_sets(spec)
    operands: list[Word] = []
    values: dict[str, list[Word]] = {k: [] for k in path_opts}
    values["pattern"] = []
    flags: set[str] = set()
    i = 0
    after_dd = False
    while i < len(words):
        w = words[i]
        v = w.deny_value
        if after_dd or v is None or not v.startswith("-") or v == "-":
            operands.append(w)
            i += 1
            continue
        if v == "--":
            after_dd = True
            i += 1
            continue
        name, eq, attached = v.partition("=") if v.startswith("--") else (v, "", "")
        if not eq and not v.startswith("--") and len(v) > 2 and v[:2] in all_value:
            name, attached, eq = v[:2], v[2:], "="
        if name in all_value:
            if eq:
                val = static_word(attached)
                i += 1
            else:
                val = words[i + 1] if i + 1 < len(words) else None
                i += 2
            for k, names in path_opts.items():
                if name in names and val is not None:
                    values[k].append(val)
            if name in spec.get("pattern_opts", []) and val is not None:
                values["pattern"].append(val)
            flags.add(name)
            continue
        if not v.startswith("--") and len(v) > 2:
            flags.update("-" + ch for ch in v[1:])
        flags.add(name)
        i += 1
    return operands, values, flags


def _select(operands: list[Word], how: str | None) -> list[Word]:
    if not how or how == "none" or not operands:
        return []
    return {
        "all": operands, "first": operands[:1], "second": operands[1:2], "rest": operands[1:],
        "last": operands[-1:], "all_but_last": operands[:-1], "after_first": operands[1:],
    }.get(how, [])


def _file_operands(cmd: Cmd, st: _State) -> None:
    base = cmd.basename
    if base is None:
        return
    spec = _lazy("FILECOMMANDS").get(base)
    if spec is None:
        if base == "find":
            _find_paths(cmd)
        elif base == "git":
            _git_paths(cmd)
        return
    words = cmd.words[1:]
    if spec.get("kind") == "dd":
        for w in words:
            v = w.deny_value
            if v is not None and v.startswith("of="):
                cmd.paths.append(PathRef("write", parse_word(w.text[3:], st.home), cmd.cwd, "operand", cmd))
            elif v is not None and v.startswith("if="):
                cmd.paths.append(PathRef("read", parse_word(w.text[3:], st.home), cmd.cwd, "operand", cmd))
            elif v is None:
                cmd.paths.append(PathRef("write", w, cmd.cwd, "operand", cmd))
        return
    if spec.get("kind") == "tar":
        _tar_paths(cmd, words)
        return
    operands, values, flags = _operands(words, spec)
    has_pattern_opt = bool(values.get("pattern"))
    reads_how = spec.get("reads")
    if reads_how == "after_first" and has_pattern_opt:
        reads_how = "all"
    recursive = bool(spec.get("recursive")) or bool(flags & set(spec.get("recursive_opts", [])))
    inplace = bool(flags & set(spec.get("inplace_opts", [])))
    target = values.get("target_opts") or []
    write_how = spec.get("writes")
    if target:
        # `cp -t DIR a b`: every operand is a source, DIR the destination.
        reads_how = "all" if reads_how else None
        write_how = "all" if base == "mv" else None
    removal = bool(spec.get("removal"))
    for w in _select(operands, reads_how):
        if inplace:
            cmd.paths.append(PathRef("write", w, cmd.cwd, "operand", cmd))
        else:
            cmd.paths.append(PathRef("read", w, cmd.cwd, "operand", cmd, recursive=recursive))
    for w in _select(operands, write_how):
        rem = removal or (bool(spec.get("removal_sources")) and (w is not operands[-1] or bool(target)))
        cmd.paths.append(PathRef("write", w, cmd.cwd, "operand", cmd, removal=rem))
    for w in target:
        cmd.paths.append(PathRef("write", w, cmd.cwd, "operand", cmd))
    for w in values.get("read_opts", []):
        cmd.paths.append(PathRef("read", w, cmd.cwd, "operand", cmd))
    for w in values.get("write_opts", []):
        cmd.paths.append(PathRef("write", w, cmd.cwd, "operand", cmd))
    for w in values.get("at_read_opts", []):
        v = w.deny_value
        if v is None:
            continue
        at = v.find("@")
        if at != -1:
            cmd.paths.append(PathRef("read", static_word(v[at + 1 :]), cmd.cwd, "operand", cmd))
    if base in ("grep", "egrep", "fgrep", "rg", "ag") and recursive and not _select(operands, reads_how):
        cmd.paths.append(PathRef("read", static_word("."), cmd.cwd, "operand", cmd, recursive=True))


def _find_paths(cmd: Cmd) -> None:
    starts: list[Word] = []
    for w in cmd.words[1:]:
        v = w.deny_value
        if v is not None and (v.startswith("-") or v in ("(", "!", ")")):
            break
        starts.append(w)
    if not starts:
        starts = [static_word(".")]
    delete = any(w.deny_value == "-delete" for w in cmd.words)
    for w in starts:
        if delete:
            cmd.paths.append(PathRef("write", w, cmd.cwd, "operand", cmd, removal=True))
        else:
            cmd.paths.append(PathRef("read", w, cmd.cwd, "operand", cmd))


def _git_paths(cmd: Cmd) -> None:
    words = [w for w in cmd.words[1:]]
    # skip global options
    i = 0
    gv = set(_lazy("OPTIONS")["git"]["global_value"])
    while i < len(words) and (words[i].deny_value or "").startswith("-"):
        i += 2 if words[i].deny_value in gv else 1
    if i >= len(words):
        return
    sub = words[i].deny_value
    rest = words[i + 1 :]
    if sub == "clone":
        ops = [w for w in rest if not (w.deny_value or "x").startswith("-")]
        if len(ops) >= 2:
            cmd.paths.append(PathRef("write", ops[1], cmd.cwd, "operand", cmd))
    elif sub in ("checkout", "restore"):
        if any(w.deny_value == "--" for w in rest):
            after = rest[[w.deny_value for w in rest].index("--") + 1 :]
            for w in after:
                cmd.paths.append(PathRef("write", w, cmd.cwd, "operand", cmd))
        elif sub == "restore":
            for w in rest:
                if not (w.deny_value or "x").startswith("-"):
                    cmd.paths.append(PathRef("write", w, cmd.cwd, "operand", cmd))


def _tar_paths(cmd: Cmd, words: list[Word]) -> None:
    spec = {"value_opts": [], "read_opts": ["-T", "--files-from", "-X", "--exclude-from"],
            "write_opts": [], "target_opts": ["-C", "--directory"]}
    # first word may be a bundled mode without dash: `tar xzf a.tar`
    if words and words[0].deny_value and not words[0].deny_value.startswith("-"):
        words = [static_word("-" + words[0].deny_value)] + words[1:]
    flags: set[str] = set()
    archive: list[Word] = []
    i = 0
    rest: list[Word] = []
    targets: list[Word] = []
    while i < len(words):
        v = words[i].deny_value
        if v is not None and v.startswith("-") and not v.startswith("--") and len(v) > 1:
            letters = v[1:]
            for k, ch in enumerate(letters):
                flags.add(ch)
                if ch == "f":
                    archive.append(words[i + 1] if k == len(letters) - 1 and i + 1 < len(words) else static_word(letters[k + 1 :]))
                    if k == len(letters) - 1:
                        i += 1
                    break
                if ch == "C":
                    targets.append(words[i + 1] if i + 1 < len(words) else static_word(""))
                    i += 1
                    break
            i += 1
            continue
        if v is not None and v.startswith("--"):
            name, _, val = v.partition("=")
            if name in ("--file", "--directory"):
                w = static_word(val) if val else (words[i + 1] if i + 1 < len(words) else static_word(""))
                (archive if name == "--file" else targets).append(w)
                i += 1 if val else 2
                continue
            flags.add(name)
            i += 1
            continue
        rest.append(words[i])
        i += 1
    create = "c" in flags or "r" in flags or "u" in flags or "--create" in flags
    extract = "x" in flags or "--extract" in flags or "--get" in flags
    for a in archive:
        cmd.paths.append(PathRef("write" if create else "read", a, cmd.cwd, "operand", cmd))
    if create:
        for w in rest:
            cmd.paths.append(PathRef("read", w, cmd.cwd, "operand", cmd, recursive=True))
    if extract:
        for w in targets or [static_word(".")]:
            cmd.paths.append(PathRef("write", w, cmd.cwd, "operand", cmd))


_SED_EXEC = re.compile(r"(^|[;{}\n])\s*[0-9,$/\\!]*\s*[ewW]\b|s(.).*?\2.*?\2[gpiImM0-9]*[ewW]")


_PYTHON = re.compile(r"python[0-9.]*")
_CODE_RUNNERS = {"deno", "awk", "gawk", "mawk", "nawk", "sed", "git"}


def _mark_unprovable(cmd: Cmd) -> None:
    base = cmd.basename
    words = cmd.words
    if base is None:
        return
    flags = INTERPRETER_CODE_FLAGS.get(base)
    if flags is None and base.startswith("python") and _PYTHON.fullmatch(base):
        flags = INTERPRETER_CODE_FLAGS["python"]
    if flags or base in _CODE_RUNNERS:
        _mark_code_runner(cmd, base, flags, [w.deny_value for w in words[1:]])
    for w in words[1:]:
        if w.deny_value == "--":
            break
        if w.deny_value is None and w.may_dash:
            cmd.unprovable.append("dynamic word may be an option")
            break


def _mark_code_runner(cmd: Cmd, base: str, flags: set[str] | None, vals: list[str | None]) -> None:
    if flags and any(v in flags or (v and v[:2] in flags and len(v) > 2 and not v.startswith("--")) for v in vals):
        cmd.unprovable.append("interpreter runs code from an argument")
    if base == "deno" and vals[:1] == ["eval"]:
        cmd.unprovable.append("interpreter runs code from an argument")
    if base in ("awk", "gawk", "mawk", "nawk"):
        cmd.unprovable.append("awk can run commands")
    if base == "sed":
        if any(v and (v == "-i" or v.startswith("-i") or v.startswith("--in-place")) for v in vals):
            cmd.unprovable.append("sed -i writes files")
        elif any(v is not None and _SED_EXEC.search(v) for v in vals if v and not v.startswith("-")):
            cmd.unprovable.append("sed script may execute or write")
    if base == "git" and any(v is not None and (v in ("-c", "--exec-path", "--upload-pack", "--receive-pack", "-u") or v.startswith(("--exec-path=", "--upload-pack=", "--receive-pack=", "--config-env"))) for v in vals):
        cmd.unprovable.append("git option runs a program")
