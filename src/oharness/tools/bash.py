"""The bash tool: one fresh shell per call (docs/reference/permissions.md).

Rules it keeps: runs exactly the given string, in a fresh `bash --noprofile --norc -c`
with BASH_ENV, ENV, SHELLOPTS and BASHOPTS removed from the environment, stdin closed,
in its own process group (session); stdout and stderr merged; output capped (the rest
is drained and counted, never buffered); the whole process group is killed on timeout,
on interrupt (cancellation), and when the shell exits while a background child still
holds the output open. The exit code is measured (128+N for death by signal N).

Shell state never carries over, except the working directory: each call starts where the
last one ended (`ToolContext.shell_cwd`) and reports where it ended (`ToolOutput.cwd`). To
learn that without changing the command, the shell's EXIT trap writes `pwd` to a file
and the command runs verbatim as `eval`'s argument, with `$0` = bash and no positional
parameters, as under `bash -c`. A command that sets its own EXIT trap, `exec`s, or is
killed reports nothing: the next call then starts where this one started, which is also
where it is decided.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import tempfile
from typing import Any

from .base import OUTPUT_CAP_CHARS, Tool, ToolContext, ToolFailure, ToolOutput

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000
DRAIN_AFTER_EXIT_S = 0.5
SCRUBBED_ENV = ("BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS")


def _kill_group(process: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class _CappedReader:
    """Keeps the first `cap` bytes of a stream and counts the rest."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.kept = bytearray()
        self.dropped = 0

    async def drain(self, stream: asyncio.StreamReader) -> None:
        while True:
            chunk = await stream.read(65536)
            if not chunk:
                return
            room = self.cap - len(self.kept)
            if room > 0:
                self.kept += chunk[:room]
            self.dropped += max(0, len(chunk) - max(room, 0))


async def _exit(process: asyncio.subprocess.Process, drain: asyncio.Future[None], bound_s: float | None = None) -> None:
    """Wait until the shell itself has exited. (`Process.wait()` also waits for every pipe
    to close, which a background child holding stdout would delay forever.) While the
    output is open we wake on its end; once it is closed, `wait()` returns promptly."""
    loop = asyncio.get_running_loop()
    deadline = None if bound_s is None else loop.time() + bound_s
    while process.returncode is None:
        if drain.done():
            await process.wait()
            return
        if deadline is not None and loop.time() > deadline:
            return
        await asyncio.wait({drain}, timeout=0.02)


class BashTool(Tool):
    name = "bash"
    description = (
        "Run a shell command with bash in the working directory and return its output "
        "(stdout and stderr merged) and exit code. `timeout_ms` defaults to 120000."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "command": {"type": "string"},
            "timeout_ms": {"type": "integer", "description": "kill the command after this many ms"},
        },
        "required": ["command"],
    }

    def __init__(self, output_cap_bytes: int = OUTPUT_CAP_CHARS) -> None:
        self.output_cap_bytes = output_cap_bytes

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        command: str = args["command"]
        timeout_ms = args.get("timeout_ms") or DEFAULT_TIMEOUT_MS
        if timeout_ms <= 0:
            raise ToolFailure("`timeout_ms` must be positive")
        timeout_ms = min(timeout_ms, MAX_TIMEOUT_MS)
        if "\0" in command:
            raise ToolFailure("the command contains a NUL character")
        env = {key: value for key, value in os.environ.items() if key not in SCRUBBED_ENV}
        start_cwd = ctx.shell_cwd or ctx.cwd
        env["PWD"] = start_cwd  # bash keeps it as the logical directory, so `pwd` names it as the analysis does
        scratch = ctx.scratch_dir if ctx.scratch_dir and os.path.isdir(ctx.scratch_dir) else None
        fd, cwd_file = tempfile.mkstemp(prefix="oharness-cwd-", dir=scratch)
        os.close(fd)
        try:
            return await self._run(command, timeout_ms, env, start_cwd, cwd_file)
        finally:
            try:
                os.unlink(cwd_file)
            except OSError:
                pass

    async def _run(self, command: str, timeout_ms: int, env: dict[str, str], start_cwd: str, cwd_file: str) -> ToolOutput:
        report = f"builtin pwd >| {shlex.quote(cwd_file)} 2>/dev/null"
        script = f"trap {shlex.quote(report)} EXIT\neval \"set --\"$'\\n'\"$1\""
        spawn = asyncio.ensure_future(asyncio.create_subprocess_exec(
            "bash", "--noprofile", "--norc", "-c", script, "bash", command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            cwd=start_cwd,
            env=env,
            start_new_session=True,  # own session → own process group, killed as one
        ))
        try:
            process = await asyncio.shield(spawn)
        except asyncio.CancelledError:
            # Cancelled while the shell was starting: it may run already (and have started
            # children of its own), so the start is seen through and its group ended.
            try:
                process = await spawn
            except OSError:
                raise asyncio.CancelledError from None
            _kill_group(process)
            try:
                await asyncio.wait_for(process.wait(), 1.0)
            except asyncio.TimeoutError:
                pass
            raise
        except OSError as exc:
            raise ToolFailure(f"bash could not be started: {exc.strerror or exc}") from None
        assert process.stdout is not None
        reader = _CappedReader(self.output_cap_bytes)
        drain = asyncio.ensure_future(reader.drain(process.stdout))
        timed_out = False
        try:
            try:
                await asyncio.wait_for(_exit(process, drain), timeout_ms / 1000)
            except asyncio.TimeoutError:
                timed_out = True
                _kill_group(process)
                await _exit(process, drain, bound_s=2.0)
            # A background child may still hold the pipe: give it a moment, then end the group.
            done, _ = await asyncio.wait({drain}, timeout=DRAIN_AFTER_EXIT_S)
            if not done:
                _kill_group(process)
                await asyncio.wait({drain}, timeout=DRAIN_AFTER_EXIT_S)
        except asyncio.CancelledError:
            _kill_group(process)
            drain.cancel()
            try:  # reap the killed shell so its transport closes with this loop, not after it
                await asyncio.wait_for(process.wait(), 1.0)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                pass
            raise
        finally:
            if not drain.done():
                drain.cancel()
        if drain.done() and process.returncode is not None:
            # Output ended and the shell exited: let the transport finish closing now rather
            # than when it is collected (after the caller's event loop may be gone).
            try:
                await asyncio.wait_for(process.wait(), 1.0)
            except asyncio.TimeoutError:
                pass
        code = process.returncode if process.returncode is not None else -1
        exit_code = 128 - code if code < 0 else code
        text = reader.kept.decode("utf-8", errors="replace")
        if reader.dropped:
            text += f"\n[output truncated: {reader.dropped} more bytes]"
        if timed_out:
            text += f"\n[timed out after {timeout_ms} ms; the process group was killed]"
            return ToolOutput(text.lstrip("\n"), is_error=True, exit_code=exit_code)
        if exit_code != 0:
            text += f"\n[exit code {exit_code}]"
        end_cwd = _reported_cwd(cwd_file)
        if end_cwd is not None and end_cwd != start_cwd:
            text += f"\n[working directory now {end_cwd}]"
        return ToolOutput(text if text else "(no output)", exit_code=exit_code, cwd=end_cwd)


def _reported_cwd(path: str) -> str | None:
    """The directory the shell's EXIT trap wrote, if it wrote one that still exists."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as handle:
            reported = handle.read()
    except OSError:
        return None
    reported = reported[:-1] if reported.endswith("\n") else reported
    return reported if reported.startswith("/") and "\n" not in reported and os.path.isdir(reported) else None
