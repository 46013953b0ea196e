"""Opening a path exactly as the engine decided it: `open_decided` and its error, `PathChanged`.

What belongs here: what a file tool does between a decision about a path (paths.canonical) and
its use of the path, so that a link swapped in between is caught rather than followed. Nothing
the decision itself reads. Kept apart from paths.py, which setup.py compiles with mypyc: mypyc
cannot compile a subclass of OSError, and paths.py names both of these for its callers.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .paths import CanonicalPath

__all__ = ["PathChanged", "open_decided"]


class PathChanged(OSError):
    """The file changed between the decision and its use."""


def open_decided(path: CanonicalPath, flags: int, mode: int = 0o644) -> int:
    """Open a path exactly as decided: `O_NOFOLLOW` on the final component unless the decided path
    was itself a symlink, then compare the descriptor's real path with the decided one.
    Returns the fd; raises PathChanged (fd closed) when they differ."""
    was_link = path.lexical != path.real and os.path.islink(path.lexical)
    descriptor = os.open(path.lexical, flags | (0 if was_link else os.O_NOFOLLOW), mode)
    try:
        actual = os.readlink(f"/proc/self/fd/{descriptor}") if os.path.isdir("/proc/self/fd") else os.path.realpath(path.lexical)
    except OSError:
        actual = os.path.realpath(path.lexical)
    if actual != path.real:
        os.close(descriptor)
        raise PathChanged(f"{path.lexical} changed between the decision and its use (now {actual})")
    return descriptor
