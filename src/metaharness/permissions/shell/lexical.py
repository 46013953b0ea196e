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

SURROGATE = re.compile("[\ud800-\udfff]")


def prepass(text: str) -> tuple[str, bool]:
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


def has_unquoted_cr(text: str) -> bool:
    return "\r" in text and any(c == "\r" for _, c in _unquoted(text))


# `time` is a reserved word in front of a pipeline; before a group, a subshell, `!` or another
# compound command the grammar misreads it, so it is blanked (same length: positions stay) — it
# adds nothing to what runs (transparent).
_TIME_KW = re.compile(
    r"(^|[;&|(){}\n!]|\b(?:then|do|else|elif)\b)([ \t]*)(time(?:[ \t]+-p)*(?:[ \t]+--)?)"
    r"(?=[ \t]+(?:[{(!]|(?:if|while|until|for|case|select)\b|\[\[))")


def blank_time_keyword(text: str) -> str:
    if "time" not in text:
        return text
    quoted: set[int] | None = None
    out = text
    for m in _TIME_KW.finditer(text):
        if quoted is None:
            unquoted = {i for i, _ in _unquoted(text)}
            quoted = {i for i in range(len(text)) if i not in unquoted}
        start, end = m.span(3)
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
    i = 0
    n = len(text)
    in_single = False
    while i < n:
        c = text[i]
        if in_single:
            if c == "'":
                in_single = False
            i += 1
            continue
        if c == "\\":
            i += 2
            continue
        if quotes and c == "'":
            in_single = True
            i += 1
            continue
        if (c == "$" or c in "<>") and text.startswith("(", i + 1):
            end = _skip_balanced(text, i + 1, "(", ")")
            inner = text[i + 2 : max(i + 2, end - 1)]
            if c == "$" and inner.startswith("("):
                out.extend(substitutions(inner[1:], quotes=quotes))  # `$((…))`: arithmetic, scan inside
            else:
                out.append(inner)
            i = max(end, i + 2)
            continue
        if c == "`":
            j = i + 1
            buf: list[str] = []
            while j < n and text[j] != "`":
                if text[j] == "\\" and j + 1 < n and text[j + 1] in "`\\$":
                    buf.append(text[j + 1])
                    j += 2
                    continue
                buf.append(text[j])
                j += 1
            out.append("".join(buf))
            i = j + 1
            continue
        i += 1
    return out
