"""Which build of the permission engine runs: its hot pure modules compiled by mypyc, or pure Python.

What belongs here: `engine_build()`, the one answer to that question, for the benchmarks, the tests
that compare the two builds, and a user checking an install. Which modules are compiled, and when,
is setup.py's (docs/performance.md, "The compiled engine"); both builds make the same decisions.
"""

from __future__ import annotations

from importlib.machinery import EXTENSION_SUFFIXES

__all__ = ["engine_build"]


def engine_build() -> str:
    """"compiled" when the engine's modules are C extensions (the shell walk stands for them all:
    setup.py compiles all of them or none), else "pure"."""
    from .shell import walk

    return "compiled" if (walk.__file__ or "").endswith(tuple(EXTENSION_SUFFIXES)) else "pure"
