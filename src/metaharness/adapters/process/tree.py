"""Stopping a child: its whole process tree, and the wait that comes before the kill.

A vendor's tool commands run in process groups of their own below the child; stopping a run
collects every group first and kills them after, so nothing re-parents out of reach. Rules kept:
* our own process group and init's are never signalled;
* a stop gives the child a grace period to exit by itself (its stdin is closed first), then
  kills its tree — `wait_or_kill` is that one sequence for every adapter;
* whether the child has exited is asked of the kernel (`has_exited`), which knows before
  asyncio's child watcher has reaped it: a command read in the same loop pass as the child's
  death is then not carried to a process that is gone;
* a child that can no longer hear is one that exited or one that was killed and has not exited
  yet (`is_gone`): from the moment a SIGKILL is sent it never runs its own code again, though
  its channel stays open until its last thread is torn down (a write to it still succeeds).
"""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any


def has_exited(proc: Any) -> bool:
    """True once `proc` (an asyncio subprocess of ours) has exited, reaped or not. The peek leaves
    the exit status in place (WNOWAIT) for asyncio's child watcher to collect."""
    if proc.returncode is not None:
        return True
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:  # reaped already, its returncode not yet set
        return True


# SIGKILL's bit in the pending-signal masks of /proc/PID/status (bit n-1 for signal n).
_SIGKILL_BIT = 1 << (signal.SIGKILL - 1)


def killed(pid: int) -> bool:
    """True when `pid` was sent SIGKILL, is exiting or is a zombie: it will read nothing more.
    A group-directed SIGKILL (kill, killpg, the OOM killer) stays in the shared pending mask
    until the process is reaped, so the answer holds from the moment the signal was sent."""
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            raw = handle.read().decode("ascii", "replace")
    except FileNotFoundError:
        return os.path.isdir("/proc/self")  # gone from /proc: reaped (where there is a /proc)
    except OSError:
        return False
    fields = dict(line.split(":", 1) for line in raw.splitlines() if ":" in line)
    if fields.get("State", "").strip()[:1] in ("Z", "X"):
        return True
    pending = 0
    for mask in ("ShdPnd", "SigPnd"):
        try:
            pending |= int(fields.get(mask, "0").strip(), 16)
        except ValueError:
            pass
    return bool(pending & _SIGKILL_BIT)


def is_gone(proc: Any) -> bool:
    """True once `proc` can no longer hear what is written to it: it exited (`has_exited`), or it
    was killed and has not exited yet (`killed`)."""
    return has_exited(proc) or killed(proc.pid)


def _parent_and_group(pid: int) -> tuple[int, int] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read().decode("utf-8", "replace")
    except OSError:
        return None
    # The command name may hold spaces and parentheses; the fields follow the last ')'.
    fields = raw[raw.rfind(")") + 2:].split()
    return int(fields[1]), int(fields[2])


def descendant_groups(root: int, *, with_root: bool = False) -> set[int]:
    """The process groups of every descendant of `root` (and root's own, `with_root`),
    collected, not killed."""
    children: dict[int, list[int]] = {}
    groups: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        info = _parent_and_group(int(entry))
        if info is None:
            continue
        children.setdefault(info[0], []).append(int(entry))
        groups[int(entry)] = info[1]
    found: set[int] = {groups[root]} if with_root and root in groups else set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            if child in groups:
                found.add(groups[child])
            stack.append(child)
    return found


def kill_groups(groups: set[int], *, spare: set[int] = frozenset(),  # type: ignore[assignment]
                sig: int = signal.SIGKILL) -> None:
    """SIGKILL (or `sig`) each group, never our own, init's, or one in `spare`."""
    spare = set(spare) | {os.getpgrp()}
    for group in groups:
        if group in spare or group <= 1:
            continue
        try:
            os.killpg(group, sig)
        except (ProcessLookupError, PermissionError):
            pass


def kill_tree(root: int) -> None:
    """SIGKILL `root`'s group and every descendant's group except our own."""
    kill_groups(descendant_groups(root, with_root=True) | {root})


def kill_group(pid: int) -> None:
    """SIGKILL the process group `pid` leads (a child spawned in its own session)."""
    kill_groups({pid})


async def wait_or_kill(proc: Any, grace: float, *, groups: set[int] = frozenset()) -> bool:  # type: ignore[assignment]
    """Give `proc` (an asyncio subprocess whose stdin is closed) `grace` seconds to exit, then
    SIGKILL its group, its descendants' groups and `groups` (collected earlier, while they were
    still its descendants) — whether it exited or not, so nothing it left behind runs on.
    True when it exited by itself."""
    exited = proc.returncode is not None
    if not exited:
        try:
            await asyncio.wait_for(proc.wait(), grace)
            exited = True
        except asyncio.TimeoutError:
            pass
    kill_groups(set(groups) | descendant_groups(proc.pid, with_root=True) | {proc.pid})
    return exited
