"""Shared terminal output for the wire-core verbs (frame, check, schema).

Errors are one sentence on stderr prefixed `metaharness: `, printed through rich
without markup (messages quote JSON, whose brackets are not markup), and the verb
exits with the verb's code (docs/reference/wire.md#exit-codes). Data on stdout is written as raw bytes, never reflowed.
"""

from __future__ import annotations

import sys
from typing import NoReturn



def fail(sentence: str, code: int = 2) -> NoReturn:
    say_err(sentence)
    sys.exit(code)


def say_err(sentence: str) -> None:
    from rich.console import Console

    Console(stderr=True, highlight=False, soft_wrap=True).print(f"metaharness: {sentence}", markup=False)


def say(text: str) -> None:
    from rich.console import Console

    Console(highlight=False, soft_wrap=True).print(text, markup=False)


def write_bytes(data: bytes) -> None:
    out = sys.stdout.buffer
    out.write(data)
    out.flush()


def read_input(path: str) -> bytes:
    """The bytes of PATH, or stdin for "-"; OSError propagates for the caller to name."""
    if path == "-":
        return sys.stdin.buffer.read()
    with open(path, "rb") as fh:
        return fh.read()
