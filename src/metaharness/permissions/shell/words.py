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
        match = re.match(r"((?:\\.|[^\\.\[(*?+{|^$])*)", self.shape)
        raw = match.group(1) if match else ""
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
    pos = 0
    while pos < len(body):
        char = body[pos]
        if char != "\\" or pos + 1 >= len(body):
            out.append(char)
            pos += 1
            continue
        escaped = body[pos + 1]
        if escaped in _ANSI_SIMPLE:
            out.append(_ANSI_SIMPLE[escaped])
            pos += 2
        elif escaped in "01234567":
            octal = re.match(r"[0-7]{1,3}", body[pos + 1 :])
            assert octal is not None  # the escape's first character is an octal digit
            out.append(chr(int(octal.group(0), 8) & 0xFF))
            pos += 1 + len(octal.group(0))
        elif escaped in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[escaped]
            match = re.match(r"[0-9a-fA-F]{1,%d}" % width, body[pos + 2 :])
            if match:
                out.append(chr(int(match.group(0), 16)))
                pos += 2 + len(match.group(0))
            else:
                out.append("\\" + escaped)
                pos += 2
        elif escaped == "c" and pos + 2 < len(body):
            out.append(chr(ord(body[pos + 2]) & 0x1F))
            pos += 3
        else:
            out.append("\\" + escaped)
            pos += 2
    return "".join(out)


def _unquoted(text: str, pos: int = 0):
    """(index, character) of each character from `i` that is outside quotes and not escaped."""
    quote: str | None = None
    while pos < len(text):
        char = text[pos]
        if quote == "'":
            if char == "'":
                quote = None
        elif char == "\\":
            pos += 2
            continue
        elif quote == '"':
            if char == '"':
                quote = None
        elif char in "'\"":
            quote = char
        else:
            yield pos, char
        pos += 1


def _skip_balanced(text: str, pos: int, open_: str, close: str) -> int:
    """Index just past the `close` matching the `open_` at text[i] (quote-aware, approximate)."""
    depth = 0
    for scan, char in _unquoted(text, pos):
        if char == open_:
            depth += 1
        elif char == close:
            depth -= 1
            if depth == 0:
                return scan + 1
    return len(text)


def _brace_end(text: str, pos: int) -> int:
    """If text[i] == '{' opens a brace expansion ({a,b} or {a..b}), the index past its '}'."""
    depth = 0
    scan = pos
    has_sep = False
    while scan < len(text):
        char = text[scan]
        if char == "\\":
            scan += 2
            continue
        if char in "'\"" or char.isspace():
            return -1
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return scan + 1 if has_sep else -1
        elif char == "," and depth == 1:
            has_sep = True
        elif text.startswith("..", scan) and depth == 1:
            has_sep = True
        scan += 1
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

    def literal(piece: str) -> None:
        value.append(piece)
        shape.append(re.escape(piece))

    def dynamic_part(regex: str = ".*") -> None:
        nonlocal dynamic, first_dynamic_pos
        if first_dynamic_pos is None:
            first_dynamic_pos = len("".join(value))
        dynamic = True
        shape.append(regex)

    pos = 0
    length = len(text)
    if text == "~" or text.startswith("~/"):
        if home is not None:
            literal(home)
        else:
            dynamic_part()  # HOME is assigned in this call: `~` is only known when it runs
        pos = 1
    elif text.startswith("~") and (match := _TILDE_PREFIX.match(text)) is not None:
        # `~user`, `~+` ($PWD), `~-` ($OLDPWD), `~N`/`~+N`/`~-N` (the directory stack): bash
        # expands each when the command runs, so the word is dynamic.
        dynamic_part()
        pos = match.end()
    while pos < length:
        char = text[pos]
        if char == "\\":
            if pos + 1 < length:
                if text[pos + 1] != "\n":
                    literal(text[pos + 1])
                pos += 2
            else:
                literal("\\")
                pos += 1
        elif char == "'":
            end = text.find("'", pos + 1)
            end = length if end == -1 else end
            literal(text[pos + 1 : end])
            pos = end + 1
        elif char == "$" and text.startswith("$'", pos):
            scan = pos + 2
            while scan < length and text[scan] != "'":
                scan += 2 if text[scan] == "\\" else 1
            decoded = _decode_ansi_c(text[pos + 2 : scan])
            ansi = True
            literal(decoded)
            pos = scan + 1
        elif char == "$" and text.startswith('$"', pos):
            dynamic_part()
            pos = _skip_dq(text, pos + 1)
        elif char == '"':
            pos = _eval_dq(text, pos, literal, dynamic_part)
        elif char == "$":
            pos = _skip_dollar(text, pos, dynamic_part, literal)
        elif char == "`":
            end = text.find("`", pos + 1)
            dynamic_part()
            pos = length if end == -1 else end + 1
        elif char in "<>" and text.startswith("(", pos + 1):
            dynamic_part()
            pos = _skip_balanced(text, pos + 1, "(", ")")
        elif char == "*":
            dynamic_part(".*")
            pos += 1
        elif char == "?":
            dynamic_part(".")
            pos += 1
        elif char == "[" and "]" in text[pos + 1 :]:
            dynamic_part(".*")
            pos += 1
        elif char == "{" and (end := _brace_end(text, pos)) != -1:
            dynamic_part(".*")
            pos = end
        else:
            literal(char)
            pos += 1
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


def _skip_dq(text: str, pos: int) -> int:
    scan = pos + 1
    while scan < len(text) and text[scan] != '"':
        scan += 2 if text[scan] == "\\" else 1
    return scan + 1


def _skip_dollar(text: str, pos: int, dynamic_part, literal) -> int:
    length = len(text)
    if text.startswith("$(", pos) or text.startswith("$[", pos):
        dynamic_part()
        return _skip_balanced(text, pos + 1, text[pos + 1], ")" if text[pos + 1] == "(" else "]")
    if text.startswith("${", pos):
        dynamic_part()
        return _skip_balanced(text, pos + 1, "{", "}")
    match = re.match(r"\$(?:[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-])", text[pos:])
    if match:
        dynamic_part()
        return pos + match.end()
    literal("$")
    return pos + 1 if pos < length else length


def _eval_dq(text: str, pos: int, literal, dynamic_part) -> int:
    scan = pos + 1
    length = len(text)
    while scan < length and text[scan] != '"':
        char = text[scan]
        if char == "\\" and scan + 1 < length:
            nxt = text[scan + 1]
            if nxt in '$`"\\':
                literal(nxt)
            elif nxt == "\n":
                pass
            else:
                literal("\\" + nxt)
            scan += 2
        elif char == "$":
            scan = _skip_dollar(text, scan, dynamic_part, literal)
        elif char == "`":
            end = text.find("`", scan + 1)
            dynamic_part()
            scan = length if end == -1 else end + 1
        else:
            literal(char)
            scan += 1
    return scan + 1

