"""Words of a shell command: quote removal, static vs dynamic, shapes (docs/reference/permissions.md).

What belongs here: `Word` and `parse_word` (one word's source text → its runtime value, or the
regular expression of its possible values), ANSI-C decoding, and the quote-aware scanning helpers
the other steps share.

Rules this module keeps:
* a word is static only when bash would give it exactly one value that the text shows: any
  unquoted expansion, glob or brace expression, `$"…"`, and every tilde prefix except `~`/`~/`
  (the session's HOME, when the call does not assign HOME) makes it dynamic;
* an ANSI-C string is decoded for deny/ask matching but counts as dynamic for allow;
* no knowledge of commands, rules or modes: a word is only described.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

__all__ = ["Word", "static_word", "parse_word", "DYNAMIC_ITEM", "SAFE_ASSIGNMENTS"]

_SAFE_EXACT = {"LANG", "TZ", "NO_COLOR", "FORCE_COLOR", "CLICOLOR", "TERM", "CI", "COLUMNS"}


def SAFE_ASSIGNMENTS(name: str) -> bool:  # noqa: N802 - reads as a set
    """The safe list of leading assignments."""
    return name in _SAFE_EXACT or name.startswith("LC_")


class Word(NamedTuple):
    """One word of a simple command.

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


_TILDE_PREFIX = re.compile(r"~(?:[A-Za-z_][A-Za-z0-9_.-]*|[+-]?[0-9]+|[+-])(?=/|$)")
_PLAIN = re.compile(r"[A-Za-z0-9_./:=+,@%^-]+")


def parse_word(text: str, home: str | None = None) -> Word:
    """Evaluate one shell word from its source text."""
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
    elif text.startswith("~") and (m := _TILDE_PREFIX.match(text)) is not None:
        # `~user`, `~+` ($PWD), `~-` ($OLDPWD), `~N`/`~+N`/`~-N` (the directory stack): bash
        # expands each when the command runs, so the word is dynamic.
        dyn()
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

