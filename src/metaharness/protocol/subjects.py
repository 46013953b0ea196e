"""Subjects of a call and the frame's subject scope (docs/reference/frame.md).

Pure functions. A subject is a scheme-prefixed string (`file:src/a.py`,
`proc:/usr/bin/cargo`). File paths are normalised so that one subject rule matches
the same call the same way on every harness: relative paths are taken against the
call's own working directory; inside the run's working directory a path is written
relative to it (POSIX separators, no `./`, `..` resolved lexically, the directory
itself is `.`); outside it, absolute.
"""

from __future__ import annotations

import posixpath
import re
from functools import lru_cache

OpKey = tuple[str, str, str]


def normalise_path(path: str, call_cwd: str | None, run_cwd: str) -> str:
    base = call_cwd or run_cwd
    joined = path if posixpath.isabs(path) else posixpath.join(base, path)
    absolute = posixpath.normpath(joined)
    if absolute.startswith("//"):  # normpath keeps a leading double slash
        absolute = "/" + absolute.lstrip("/")
    root = posixpath.normpath(run_cwd)
    if absolute == root:
        return "."
    prefix = root.rstrip("/") + "/"
    if absolute.startswith(prefix):
        return absolute[len(prefix):]
    return absolute


def file_subject(path: str, call_cwd: str | None, run_cwd: str) -> str:
    return "file:" + normalise_path(path, call_cwd, run_cwd)


@lru_cache(maxsize=512)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    # `**` crosses `/`, `*` does not; every other character is literal.
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out), re.DOTALL)


def subject_matches(pattern: str, subject: str) -> bool:
    return _glob_regex(pattern).fullmatch(subject) is not None


def scope_refusal(
    rules: list[tuple[list[str], set[OpKey]]],
    subjects: list[tuple[str, list[OpKey]]],
) -> tuple[str, list[OpKey], list[str], set[OpKey]] | None:
    """Apply a frame's subject scope. `rules` are (patterns, admitted ops) in order.

    Returns None when the scope admits the call or is silent, else
    (refused subject, the ops performed on it, the matching rule's patterns, what it admits).
    """
    if not rules or not subjects:
        return None
    for subject, ops in subjects:
        for patterns, admitted in rules:
            if any(subject_matches(p, subject) for p in patterns):
                if not all(op in admitted for op in ops):
                    return subject, ops, patterns, admitted
                break
    return None
