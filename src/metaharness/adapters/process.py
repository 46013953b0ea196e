"""A harness child process speaking one JSON object per line on its control channel.

Shared by every adapter: spawn in its own process group, read stdout line by line
(with the 1-based transcript line number, for `opaque`/`source_line`), write lines
to stdin, keep a tail of stderr for NO_TERMINAL_RECORD, optionally tee the raw
stdout into a transcript file, and stop the whole process group.

The seam's protections live here too, one rule each, for every adapter:
* the control channel (the child's stdin and stdout) is one end of a Unix socketpair,
  never a pipe: a socket cannot be reopened through `/proc/<pid>/fd/N` (open fails
  with ENXIO), so nothing the agent starts can write into the channel or read from it;
* the child gets SIGKILL when metaharness dies (PR_SET_PDEATHSIG), so no call runs on
  undecided after a killed metaharness;
* where the platform allows it the child runs in a PID and mount namespace of its own
  with a private /proc (`confined_argv`), so the agent cannot name metaharness's pid;
* metaharness itself is made non-dumpable (`make_non_dumpable`): another process of the
  same user cannot open its /proc files (fds, environ, memory) or ptrace it.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import math
import os
import shutil
from pathlib import Path
import signal
import socket
import subprocess
from typing import Any, AsyncIterator

from metaharness.protocol.values import Exited, Signaled, UnknownTermination

STDOUT_LIMIT = 64 * 1024 * 1024  # vendors write large single records (file contents)
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4


@functools.lru_cache(maxsize=1)
def _prctl_function() -> Any:
    """libc's prctl, resolved in the parent: a preexec_fn must not import or load anything
    (another thread may hold the import lock at the fork)."""
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _prctl(option: int, value: int) -> bool:
    prctl = _prctl_function()
    return prctl is not None and prctl(option, value, 0, 0, 0) == 0


def parent_death_signal() -> None:
    """preexec_fn: the child gets SIGKILL when metaharness dies (prctl resolved beforehand)."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def make_non_dumpable() -> bool:
    """Make this process non-dumpable (its /proc files become root's, ptrace is refused to
    same-user processes). Idempotent; False where prctl is not available."""
    return _prctl(PR_SET_DUMPABLE, 0)


def control_socketpair() -> tuple[socket.socket, socket.socket]:
    """(ours, the child's): a connected AF_UNIX stream pair; the child's end is inheritable."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    theirs.set_inheritable(True)
    return ours, theirs


class ChannelWriter:
    """The writing half of a socket channel with the StreamWriter calls the adapters use;
    `close()` half-closes (the child reads end of input, its output still comes)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._closed = False

    def write(self, data: bytes) -> None:
        if self._closed:
            raise BrokenPipeError("the control channel's writing half is closed")
        self._writer.write(data)

    async def drain(self) -> None:
        await self._writer.drain()

    def is_closing(self) -> bool:
        return self._closed or self._writer.is_closing()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._writer.can_write_eof():
                self._writer.write_eof()
            else:
                self._writer.close()
        except (OSError, RuntimeError):
            pass

    async def wait_closed(self) -> None:
        return None


async def open_channel(ours: socket.socket) -> tuple[asyncio.StreamReader, ChannelWriter]:
    reader, writer = await asyncio.open_unix_connection(sock=ours, limit=STDOUT_LIMIT)
    return reader, ChannelWriter(writer)


async def spawn_on_channel(argv: list[str], *, env: dict[str, str] | None, cwd: str | None,
                           stderr: Any = asyncio.subprocess.PIPE
                           ) -> tuple[asyncio.subprocess.Process, asyncio.StreamReader, ChannelWriter]:
    """Spawn `argv` (confined where possible) with a socketpair as its stdin and stdout, in
    its own process group, with a parent-death signal. Returns (process, reader, writer)."""
    _prctl_function()  # resolved here, so the preexec_fn only calls it
    ours, theirs = control_socketpair()
    try:
        proc = await asyncio.create_subprocess_exec(
            *confined_argv(argv), stdin=theirs.fileno(), stdout=theirs.fileno(), stderr=stderr,
            env=env, cwd=cwd, start_new_session=True, preexec_fn=parent_death_signal,
        )
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    reader, writer = await open_channel(ours)
    return proc, reader, writer


# --- the child's PATH ------------------------------------------------------------------------

def default_vendor_dir() -> str | None:
    """METAHARNESS_VENDOR_DIR, else a source checkout's `.vendor/node_modules/.bin` (`make
    vendor` installs the pinned CLIs there), else None (give --vendor-dir DIR)."""
    configured = os.environ.get("METAHARNESS_VENDOR_DIR")
    if configured:
        return configured
    checkout = Path(__file__).resolve().parents[3] / ".vendor" / "node_modules" / ".bin"
    return str(checkout) if checkout.is_dir() else None


def child_path(vendor_dir: str | None) -> str:
    """The child's PATH: the vendor dir, node's own dir (real and as found), the system dirs;
    each once, in that order."""
    parts: list[str] = []
    if vendor_dir:
        parts.append(os.path.abspath(vendor_dir))
    node = shutil.which("node")
    if node:
        parts += [os.path.dirname(os.path.realpath(node)), os.path.dirname(node)]
    parts += ["/usr/local/bin", "/usr/bin", "/bin"]
    return ":".join(dict.fromkeys(parts))


# --- scratch ------------------------------------------------------------------------------


class ScratchRefused(Exception):
    """A scratch base that is not private to this user; the message names it and says why."""


def private_base(path: str) -> str:
    """`path` as a directory only this user can enter: created mode 0700 if absent; if present,
    it must be a real directory (a symlink is never followed), owned by this user, writable by
    no one else. A base that is only readable by others is tightened to 0700; anything else is
    refused by name (ScratchRefused)."""
    import stat

    path = os.path.abspath(path)
    parent = os.path.dirname(path)
    if parent and not os.path.isdir(parent):
        os.makedirs(parent, mode=0o700, exist_ok=True)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise ScratchRefused(f"the scratch base {path} is not a directory of its own "
                             f"(a symlink is never followed): {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISDIR(info.st_mode):
            raise ScratchRefused(f"the scratch base {path} is not a directory")
        if info.st_uid != os.geteuid():
            raise ScratchRefused(f"the scratch base {path} belongs to uid {info.st_uid}, not to this user "
                                 f"(uid {os.geteuid()}); remove it or choose another base")
        if info.st_mode & 0o022:
            raise ScratchRefused(f"the scratch base {path} is writable by others (mode {info.st_mode & 0o777:o}); "
                                 "remove it or choose another base")
        if info.st_mode & 0o077:
            os.fchmod(fd, 0o700)
    finally:
        os.close(fd)
    return path


def private_scratch(base: str, prefix: str) -> str:
    """A fresh per-run directory (mkdtemp, mode 0700) inside the private `base`."""
    import tempfile

    return tempfile.mkdtemp(prefix=prefix, dir=private_base(base))


# --- confinement ---------------------------------------------------------------------------

NAMESPACE_ENV = "METAHARNESS_NAMESPACE"  # "off" turns confinement off (diagnosis only)


@functools.lru_cache(maxsize=1)
def confinement() -> tuple[list[str], str]:
    """(prefix, how): the argv prefix that runs a child in its own PID and mount namespace
    with a private /proc, and a sentence saying how — or ([], why not)."""
    if os.environ.get(NAMESPACE_ENV) == "off":
        return [], f"{NAMESPACE_ENV}=off"
    unshare = shutil.which("unshare")
    if unshare is None:
        return [], "unshare(1) is not installed"
    prefix = [unshare, "--pid", "--mount", "--mount-proc", "--fork", "--kill-child"]
    if os.geteuid() != 0:
        prefix.insert(1, "--map-current-user")  # an unprivileged user namespace owns the others
    try:
        probe = subprocess.run([*prefix, "true"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [], f"unshare could not run: {exc}"
    if probe.returncode != 0:
        detail = probe.stderr.decode("utf-8", "replace").strip().splitlines()
        return [], f"unshare refused: {detail[-1] if detail else probe.returncode}"
    user = " in an unprivileged user namespace" if os.geteuid() != 0 else ""
    return prefix, f"own PID and mount namespace with a private /proc (unshare{user})"


def confined_argv(argv: list[str]) -> list[str]:
    prefix, _how = confinement()
    return [*prefix, *argv]


# --- the process tree --------------------------------------------------------------------
# A vendor's tool commands run in process groups of their own below the child; stopping a run
# collects every group first and kills them after, so nothing re-parents out of reach.


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


def kill_groups(groups: set[int], *, spare: set[int] = frozenset()) -> None:  # type: ignore[assignment]
    """SIGKILL each group, never our own, init's, or one in `spare`."""
    spare = set(spare) | {os.getpgrp()}
    for group in groups:
        if group in spare or group <= 1:
            continue
        try:
            os.killpg(group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def kill_tree(root: int) -> None:
    """SIGKILL `root`'s group and every descendant's group except our own."""
    kill_groups(descendant_groups(root, with_root=True) | {root})


# --- the vendor's timeout ----------------------------------------------------------------


def vendor_timeout_ms(deadline_ms: int) -> int:
    """The harness's own timeout for a blocking call, for metaharness's decision deadline D:
    strictly longer than D, so that a refusal at the deadline is metaharness's."""
    return deadline_ms + 5000 if deadline_ms > 2500 else 2 * deadline_ms


def whole_seconds(ms: int) -> int:
    """A vendor timeout given in whole seconds: rounded up, at least one."""
    return max(1, math.ceil(ms / 1000))


class ChildProcess:
    def __init__(self, argv: list[str], *, env: dict[str, str] | None = None, cwd: str | None = None,
                 transcript_path: str | None = None) -> None:
        self.argv = argv
        self.env = env
        self.cwd = cwd
        self.transcript_path = transcript_path
        self.proc: asyncio.subprocess.Process | None = None
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=40)
        self._stderr_task: asyncio.Task | None = None
        self._transcript = None
        self.stdin_closed = False
        self._out: asyncio.StreamReader | None = None  # the child's stdout (our end of the socket)
        self._in: ChannelWriter | None = None  # the child's stdin

    async def spawn(self) -> None:
        # Its own process group (a halt reaches every descendant), a socketpair for the channel.
        self.proc, self._out, self._in = await spawn_on_channel(self.argv, env=self.env, cwd=self.cwd)
        if self.transcript_path:
            self._transcript = open(self.transcript_path, "wb")
        self._stderr_task = asyncio.create_task(self._read_stderr())

    async def _read_stderr(self) -> None:
        assert self.proc and self.proc.stderr
        async for raw in self.proc.stderr:
            self._stderr_tail.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def stderr_tail(self) -> str:
        return "\n".join(self._stderr_tail)

    async def lines(self) -> AsyncIterator[tuple[int, bytes]]:
        """(1-based line number, raw line without its terminator) until EOF."""
        assert self._out is not None
        number = 0
        while True:
            try:
                raw = await self._out.readline()
            except (asyncio.LimitOverrunError, ValueError):
                raw = await self._out.read(STDOUT_LIMIT)
            except OSError:
                break
            if not raw:
                break
            number += 1
            if self._transcript is not None:
                self._transcript.write(raw if raw.endswith(b"\n") else raw + b"\n")
                self._transcript.flush()
            line = raw.rstrip(b"\n")
            if line.endswith(b"\r"):
                line = line[:-1]
            yield number, line

    def write(self, data: bytes) -> None:
        """Write one line (synchronously buffered; the loop drains it)."""
        if self._in is None or self.stdin_closed or self._in.is_closing():
            raise BrokenPipeError("the harness's stdin is closed")
        if self.proc is not None and self.proc.returncode is not None:
            raise BrokenPipeError("the harness has exited")
        self._in.write(data if data.endswith(b"\n") else data + b"\n")

    async def drain(self) -> None:
        if self._in is not None and not self.stdin_closed:
            try:
                await self._in.drain()
            except (BrokenPipeError, ConnectionResetError):
                pass

    def close_stdin(self) -> None:
        if self._in is not None and not self.stdin_closed:
            self.stdin_closed = True
            self._in.close()

    def kill_group(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            try:
                self.proc.send_signal(sig)
            except ProcessLookupError:
                pass

    async def terminate(self, grace: float = 2.0) -> None:
        """Close stdin, SIGTERM the group, SIGKILL it after `grace` seconds."""
        self.close_stdin()
        if self.proc is None or self.proc.returncode is not None:
            return
        # A confined child is its namespace's init, which ignores SIGTERM from outside: stop it for good.
        self.kill_group(signal.SIGKILL if confinement()[0] else signal.SIGTERM)
        try:
            await asyncio.wait_for(self.proc.wait(), grace)
        except asyncio.TimeoutError:
            self.kill_group(signal.SIGKILL)

    async def wait(self):
        if self.proc is None:
            return UnknownTermination()
        code = await self.proc.wait()
        if self._stderr_task is not None:
            try:
                await asyncio.wait_for(self._stderr_task, 2)
            except (asyncio.TimeoutError, Exception):
                pass
        if self._transcript is not None:
            self._transcript.close()
            self._transcript = None
        if code < 0:
            return Signaled(signal=-code)
        return Exited(code=code)
