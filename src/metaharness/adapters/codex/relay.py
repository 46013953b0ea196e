"""The replace relay's server side (docs/guides/claude-and-codex.md): a per-run Unix socket that the
PreToolUse hook program (`relay_program.py`) forwards each hook payload to.

What belongs here: the socket (mode 0600 in the run's private scratch directory, a
per-run secret) and its opening for a run (`open_relay`), the hook declaration for `config.toml`, the hook's answer documents,
and reading an `apply_patch` text into the change list approvals carry.

Rules kept:
* a connection whose first line is not the run's secret, or whose payload is not a JSON
  object, is closed unanswered: the relay prints nothing and the approval decides;
* each accepted payload is handed to `on_hook(payload, reply)` exactly once; `reply`
  writes the hook's stdout and may be called at most once, from the event loop;
* the relay program waits less than the hook's `timeout`, so Codex never kills it
  mid-answer.

`METAHARNESS_CODEX_RELAY_PROGRAM` names another hook program to declare in place of
`relay_program.py` (same arguments); the vendor checks use it to stand in a relay that
misbehaves.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import os
import secrets
import shlex
import socket
import sys
from pathlib import Path
from typing import Any, Callable

from metaharness.adapters.base import StartRefusal
from metaharness.adapters.process import whole_seconds
from metaharness.protocol.refusals import RefusalName

SOCKET_NAME = "relay.sock"
# The secret reaches the hook in its environment (inherited from the app-server), never in
# argv, which every local user can read in /proc/<pid>/cmdline; `shell_environment_policy`
# keeps it out of the commands the model runs.
SECRET_ENV = "METAHARNESS_RELAY_SECRET"
PROGRAM = Path(__file__).with_name("relay_program.py")
READ_LIMIT = 64 * 1024 * 1024

OnHook = Callable[[dict, Callable[[bytes], None]], None]


def hook_timing(budget_ms: int, vendor_ms: int) -> tuple[int, float]:
    """(the hook's `timeout` in whole seconds, the relay's own wait in seconds).

    The hook's timeout is the adapter's vendor timeout (docs/reference/wire.md); the relay
    waits halfway between the decision budget and it, so the verdict, due by the budget,
    reaches it, and it is done before Codex stops it."""
    return whole_seconds(vendor_ms), (budget_ms + (vendor_ms - budget_ms) / 2) / 1000


def hook_toml(directory: Path, timeout_s: int, relay_wait: float) -> str:
    """The `[[hooks.PreToolUse]]` declaration: no matcher (every tool), one command hook.
    The secret is not in it: the hook reads SECRET_ENV."""
    program = os.environ.get("METAHARNESS_CODEX_RELAY_PROGRAM") or str(PROGRAM)
    command = shlex.join([sys.executable, "-I", "-S", program, str(directory), f"{relay_wait:g}"])
    escaped = command.replace("\\", "\\\\").replace('"', '\\"')
    # The commands the model runs do not inherit the secret (the hook does: hooks get Codex's environment).
    return ("\n[shell_environment_policy]\n"
            f'exclude = ["{SECRET_ENV}"]\n'
            "\n[[hooks.PreToolUse]]\n[[hooks.PreToolUse.hooks]]\n"
            f'type = "command"\ncommand = "{escaped}"\ntimeout = {timeout_s}\n')


def deny_output(reason: str) -> bytes:
    return json.dumps({"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": reason,
    }}).encode()


def rewrite_output(command: str) -> bytes:
    return json.dumps({"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "allow", "updatedInput": {"command": command},
    }}).encode()


SHELLS = frozenset({"bash", "zsh", "sh", "dash"})


def unwrap_shell(command: Any) -> str | None:
    """`/bin/bash -lc '<cmd>'` (how approvals carry a shell call: the user's shell, login or
    not) → `<cmd>`; anything else → None."""
    if not isinstance(command, str):
        return None
    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    if (len(argv) == 3 and argv[0].startswith("/") and os.path.basename(argv[0]) in SHELLS
            and argv[1] in ("-lc", "-c")):
        return argv[2]
    return None


def patch_changes(text: Any) -> list[dict] | None:
    """The file entries of an `apply_patch` text, in the shape of a `fileChange` item's
    `changes` (`{"path", "kind": {"type", "move_path"}}`); None when it cannot be read.
    The headers are read as the permission engine reads them (`patch_entries`), so a policy
    and a frame see the same entries."""
    from metaharness.permissions.vendor import patch_entries  # on first use: only relay runs read patch text

    entries = patch_entries(text) if isinstance(text, str) else None
    if entries is None:
        return None
    changes: list[dict] = []
    for header, path in entries:
        if header == "Move to":
            if not changes or changes[-1]["kind"]["type"] != "update" or changes[-1]["kind"]["move_path"]:
                return None
            changes[-1]["kind"]["move_path"] = path
        else:
            changes.append({"path": path, "kind": {"type": _PATCH_KINDS[header], "move_path": None}})
    return changes


_PATCH_KINDS = {"Add File": "add", "Update File": "update", "Delete File": "delete"}


class RelayServer:
    """The per-run socket. `start()` binds it; `stop()` closes it and removes the file."""

    def __init__(self, directory: Path, on_hook: OnHook) -> None:
        self.directory = directory
        self.secret = secrets.token_hex(16)
        self.on_hook = on_hook
        self.server: asyncio.AbstractServer | None = None
        self.refused = 0  # connections closed unanswered (bad secret or payload)
        self._open: set[asyncio.Task] = set()  # connections still being served

    @property
    def path(self) -> Path:
        return self.directory / SOCKET_NAME

    async def start(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # Bind through the directory's descriptor: a scratch path can exceed the 108-byte limit.
        fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            sock.bind(f"/proc/self/fd/{fd}/{SOCKET_NAME}")
        finally:
            os.close(fd)
        os.chmod(self.path, 0o600)
        self.server = await asyncio.start_unix_server(self._connection, sock=sock, limit=READ_LIMIT)

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        # A connection still waiting for its verdict is closed unanswered (never a guess).
        for task in list(self._open):
            task.cancel()
        if self._open:
            await asyncio.gather(*self._open, return_exceptions=True)
        try:
            self.path.unlink()
        except OSError:
            pass

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._open.add(task)
        try:
            data = await reader.read(READ_LIMIT)
            while not reader.at_eof():
                more = await reader.read(READ_LIMIT)
                if not more:
                    break
                data += more
            head, _, body = data.partition(b"\n")
            try:
                payload = json.loads(body) if hmac.compare_digest(head, self.secret.encode()) else None
            except ValueError:
                payload = None
            if not isinstance(payload, dict):
                self.refused += 1
                return
            answered: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

            def reply(output: bytes) -> None:
                if not answered.done():
                    answered.set_result(output)

            self.on_hook(payload, reply)
            writer.write(b"ok\n" + await answered)
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass  # the relay gave up (its wait is over): the approval request decides
        finally:
            self._open.discard(task)  # type: ignore[arg-type]
            writer.close()


async def open_relay(child: Any, on_hook: OnHook, budget_ms: int, vendor_ms: int) -> tuple[RelayServer, str]:
    """The run's relay, in `child`'s scratch and stopped with it, and the hook lines `config.toml`
    declares for it; the start refused `ReplaceRelayUnavailable` (the child released) when its
    socket cannot be opened."""
    relay = RelayServer(child.scratch.root, on_hook)
    try:
        await relay.start()
    except OSError as exc:
        await child.release()
        raise StartRefusal(RefusalName.ReplaceRelayUnavailable,
                           f"the replace relay's socket could not be opened: {exc.strerror or exc}") from None
    child.serve(relay)
    return relay, hook_toml(child.scratch.root, *hook_timing(budget_ms, vendor_ms))
