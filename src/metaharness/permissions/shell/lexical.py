"""The lexical pre-pass: what bash's lexer does before the parser sees the text
(see the shell analysis in docs/reference/permissions.md), and the lexical scans that back up the
tree where the grammar keeps code as text.

What belongs here: backslash-newline joining where bash joins, unquoted CR/NUL/invalid UTF-8
detection, the `time` reserved word before a compound command (the grammar reads `time { …; }`
as a program named `time` with a word `{`), and `substitutions(text)`: every `$(…)`, backquote
and `<(…)`/`>(…)` found in a text the grammar left unparsed (parameter-expansion operands, unquoted
here-document bodies, backquotes escaped inside backquotes).

Rules this module keeps:
* the pre-pass never drops text: a construct it does not model is reported (`modelled = False`)
  and the caller analyses both spellings;
* `substitutions` over-approximates: it may return text bash would not run (the caller analyses
  it for deny like any other command), never the reverse;
* pure functions of strings, no tree-sitter here.
"""

from __future__ import annotations

import re

from .words import _skip_balanced, _unquoted

__all__ = ["prepass", "has_unquoted_cr", "blank_time_keyword", "substitutions", "SURROGATE"]

SURROGATE = re.compile("[" + chr(0xD800) + "-" + chr(0xDFFF) + "]")  # chr(): no surrogate literal in mypyc


def prepass(text: str) -> tuple[str, bool]:
    """Join backslash-newlines where bash's lexer does. Returns (joined, fully_modelled)."""
    if "\\\n" not in text:
        return text, True
    out: list[str] = []
    pos = 0
    length = len(text)
    quote: str | None = None
    modelled = True
    pending_quoted_heredocs: list[str] = []
    at_word_start = True
    while pos < length:
        char = text[pos]
        if quote == "'":
            out.append(char)
            if char == "'":
                quote = None
            pos += 1
            continue
        if quote == "$'":
            out.append(char)
            if char == "\\" and pos + 1 < length:
                out.append(text[pos + 1])
                pos += 2
                continue
            if char == "'":
                quote = None
            pos += 1
            continue
        if char == "\\" and pos + 1 < length:
            if text[pos + 1] == "\n":
                pos += 2
                continue
            out.append(text[pos : pos + 2])
            pos += 2
            at_word_start = False
            continue
        if quote == '"':
            out.append(char)
            if char == '"':
                quote = None
            pos += 1
            continue
        if char == "'":
            quote = "'"
        elif char == "$" and text.startswith("$'", pos):
            quote = "$'"
            out.append("$'")
            pos += 2
            continue
        elif char == '"':
            quote = '"'
        elif char == "#" and at_word_start:
            end = text.find("\n", pos)
            end = length if end == -1 else end
            out.append(text[pos:end])
            pos = end
            continue
        elif char == "<" and text.startswith("<<", pos) and not text.startswith("<<<", pos):
            match = re.match(r"<<-?\s*(['\"]?)([A-Za-z0-9_]+)\1", text[pos:])
            if match is None:
                modelled = False
            elif match.group(1):
                pending_quoted_heredocs.append(match.group(2))
        elif char == "\n" and pending_quoted_heredocs:
            out.append(char)
            pos += 1
            # Copy quoted heredoc bodies verbatim: bash does not join lines inside them.
            while pending_quoted_heredocs:
                delim = pending_quoted_heredocs.pop(0)
                while pos < length:
                    end = text.find("\n", pos)
                    end = length if end == -1 else end + 1
                    line = text[pos:end]
                    out.append(line)
                    pos = end
                    if line.rstrip("\n").lstrip("\t") == delim:
                        break
            at_word_start = True
            continue
        out.append(char)
        at_word_start = char.isspace() or char in ";|&()"
        pos += 1
    return "".join(out), modelled


def has_unquoted_cr(text: str) -> bool:
    return "\r" in text and any(char == "\r" for _, char in _unquoted(text))


# `time` is a reserved word in front of a pipeline; before a group, a subshell, `!` or another
# compound command the grammar misreads it, so it is blanked (same length: positions stay) — it
# adds nothing to what runs (transparent). A `time` after it is the reserved word again (`time
# time if …`: make fuzz, issue 24).
_TIME_KW = re.compile(
    r"(^|[;&|(){}\n!]|\b(?:then|do|else|elif)\b)([ \t]*)(time(?:[ \t]+(?:-p|--|time(?=[ \t])))*)"
    r"(?=[ \t]+(?:[{(!]|(?:if|while|until|for|case|select)\b|\[\[))")


def blank_time_keyword(text: str) -> str:
    if "time" not in text:
        return text
    quoted: set[int] | None = None
    out = text
    for match in _TIME_KW.finditer(text):
        if quoted is None:
            unquoted = {pos for pos, _ in _unquoted(text)}
            quoted = {pos for pos in range(len(text)) if pos not in unquoted}
        start, end = match.span(3)
        if start in quoted:
            continue
        out = out[:start] + " " * (end - start) + out[end:]
    return out


def substitutions(text: str, *, quotes: bool = True) -> list[str]:
    """The command texts of every `$(…)`, backquote and `<(…)`/`>(…)` in `text`, outermost first.

    `quotes=False` for an unquoted here-document body, where quotes are ordinary characters.
    Inside backquotes, `\\\\`, `\\``, and `\\$` lose their backslash, as bash reads them; the
    nested levels are found when the returned text is itself analysed."""
    out: list[str] = []
    pos = 0
    length = len(text)
    in_single = False
    while pos < length:
        char = text[pos]
        if in_single:
            if char == "'":
                in_single = False
            pos += 1
            continue
        if char == "\\":
            pos += 2
            continue
        if quotes and char == "'":
            in_single = True
            pos += 1
            continue
        if (char == "$" or char in "<>") and text.startswith("(", pos + 1):
            end = _skip_balanced(text, pos + 1, "(", ")")
            inner = text[pos + 2 : max(pos + 2, end - 1)]
            if char == "$" and inner.startswith("("):
                out.extend(substitutions(inner[1:], quotes=quotes))  # `$((…))`: arithmetic, scan inside
            else:
                out.append(inner)
            pos = max(end, pos + 2)
            continue
        if char == "`":
            scan = pos + 1
            buf: list[str] = []
            while scan < length and text[scan] != "`":
                if text[scan] == "\\" and scan + 1 < length and text[scan + 1] in "`\\$":
                    buf.append(text[scan + 1])
                    scan += 2
                    continue
                buf.append(text[scan])
                scan += 1
            out.append("".join(buf))
            pos = scan + 1
            continue
        pos += 1
    return out
