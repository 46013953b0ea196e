"""`oharness --stdio`: the child side of docs/internals/oharness-stdio.md.

What belongs here: reading the parent's lines (user, frame, decision, steer, set_mode,
interrupt; a decision carrying `"interrupt": true` is an interrupt's abandonment deny and
stops the running turn as it is read), writing the child's records (init, turn_start, text, thinking, injection,
tool_call, tool_result, usage, turn_end, result, error), and the per-call seam that
blocks each call until its `decision` arrives.

Rules it keeps: one JSON object per line, flushed at once, nothing else on stdout;
human text only on stderr. A call waits for its decision with no timeout of its own —
except once stdin has ended, when no decision can arrive: then it is denied. A bad
inbound line gets an `error` record and is otherwise ignored. At stdin EOF the running
turn (and any queued one) finishes, `result` is written, and the process exits 0. A
session that cannot start writes one `error` record and exits 2, before `init`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
import time
import uuid
from typing import Any

import msgspec

from metaharness.protocol.failures import ModelFailure

from metaharness.permissions import ExternalDecision

from . import __version__
from .gate import decision_from_wire
from .model import ToolCall
from .tools.base import ToolOutput

EOF_DENIAL = "stdin closed: no decision can arrive for this call"


class RecordWriter:
    """Writes one record per line on stdout (and the transcript, when there is one)."""

    def __init__(self, transcript_path: str | None) -> None:
        self._out = sys.stdout.buffer
        self._transcript = open(transcript_path, "ab") if transcript_path else None

    def write(self, record: dict[str, Any]) -> None:
        line = msgspec.json.encode(record) + b"\n"
        self._out.write(line)
        self._out.flush()
        if self._transcript is not None:
            self._transcript.write(line)
            self._transcript.flush()

    def note_inbound(self, line: bytes) -> None:
        if self._transcript is not None:
            self._transcript.write(b'{"type":"inbound","line":' + msgspec.json.encode(line.decode("utf-8", "replace")) + b"}\n")

    def close(self) -> None:
        if self._transcript is not None:
            self._transcript.close()


class StdioSink:
    """The loop's reports, as records. Subagent text and thinking stay inside the
    subagent (its answer reaches the model as the agent tool's result)."""

    last_failure: ModelFailure | None = None  # the last failed model request (the result's api_error_status)

    def __init__(self, writer: RecordWriter) -> None:
        self.w = writer

    def text(self, text: str, request_id: str, agent: str | None) -> None:
        if agent is None:
            self.w.write({"type": "text", "text": text, "request_id": request_id})

    def thinking(self, text: str, request_id: str, agent: str | None) -> None:
        if agent is None:
            self.w.write({"type": "thinking", "text": text, "request_id": request_id})

    def injection(self, text: str, origin: str) -> None:
        self.w.write({"type": "injection", "text": text, "origin": origin})

    def tool_call(self, call: ToolCall) -> None:
        self.w.write({"type": "tool_call", "call_id": call.id, "name": call.name, "input": call.input, "cwd": call.cwd})

    def tool_result(self, call: ToolCall, output: ToolOutput) -> None:
        self.w.write({
            "type": "tool_result", "call_id": call.id, "is_error": output.is_error, "exit_code": output.exit_code,
            "content": output.content, "bytes": len(output.content.encode("utf-8")),
            **({"refused": True} if output.refused else {}),
        })

    def usage(self, request_id: str, model: str, usage: dict[str, int | None]) -> None:
        self.w.write({"type": "usage", "request_id": request_id, "model": model, "usage": dict(usage)})

    def model_failure(self, failure: ModelFailure, agent: str | None) -> None:
        self.last_failure = failure
        self.w.write({"type": "model_error", "agent": agent, "failure": msgspec.to_builtins(failure)})


class StdioSeam:
    """Each presented call waits here for the parent's `decision` line."""

    def __init__(self) -> None:
        self.pending: dict[str, asyncio.Future[ExternalDecision]] = {}
        self.closed = False

    async def decide(self, call: ToolCall) -> ExternalDecision | None:
        if self.closed:
            return ExternalDecision("deny", reason=EOF_DENIAL)
        future: asyncio.Future[ExternalDecision] = asyncio.get_running_loop().create_future()
        self.pending[call.id] = future
        try:
            return await future
        finally:
            self.pending.pop(call.id, None)

    def resolve(self, call_id: str, decision: ExternalDecision) -> bool:
        future = self.pending.get(call_id)
        if future is None or future.done():
            return False
        future.set_result(decision)
        return True

    def close(self) -> None:
        self.closed = True
        for future in self.pending.values():
            if not future.done():
                future.set_result(ExternalDecision("deny", reason=EOF_DENIAL))


def _stdin_lines(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[bytes | None]) -> None:
    """A thread: blocking reads of stdin (works for pipes, files and terminals alike)."""
    stream = sys.stdin.buffer
    try:
        for line in iter(stream.readline, b""):
            loop.call_soon_threadsafe(queue.put_nowait, line)
    except (OSError, ValueError):
        pass
    loop.call_soon_threadsafe(queue.put_nowait, None)


class ChildServer:
    def __init__(self, session: Any, writer: RecordWriter, seam: StdioSeam) -> None:
        self.session = session
        self.agent = session.agent
        self.writer = writer
        self.seam = seam
        self.turns: asyncio.Queue[str | None] = asyncio.Queue()
        self.current: asyncio.Task[Any] | None = None
        self.num_turns = 0
        self.last_outcome: Any = None
        self.started = time.monotonic()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        inbound: asyncio.Queue[bytes | None] = asyncio.Queue()
        threading.Thread(target=_stdin_lines, args=(loop, inbound), daemon=True, name="oharness-stdin").start()
        worker = asyncio.create_task(self._turn_worker())
        while (line := await inbound.get()) is not None:
            self.writer.note_inbound(line)
            self._handle(line)
        self.seam.close()  # from here on no decision can arrive
        await self.turns.put(None)
        await worker
        self._write_result()

    async def _turn_worker(self) -> None:
        while (text := await self.turns.get()) is not None:
            self.num_turns += 1
            self.writer.write({"type": "turn_start", "turn_id": f"turn_{self.num_turns}"})
            task = asyncio.create_task(self.agent.run_turn(text))
            self.current = task
            try:
                await asyncio.wait({task})
            finally:
                self.current = None
            if task.cancelled():
                from .loop import TurnOutcome

                outcome = TurnOutcome("interrupted")
            elif task.exception() is not None:
                from .loop import TurnOutcome

                exc = task.exception()
                outcome = TurnOutcome("error", f"{type(exc).__name__}: {exc}")
            else:
                outcome = task.result()
            self.last_outcome = outcome
            self.writer.write({"type": "turn_end", "stop_reason": outcome.stop_reason, "error": outcome.error})

    def _error(self, message: str) -> None:
        self.writer.write({"type": "error", "message": message})

    def _handle(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            record = msgspec.json.decode(line)
        except msgspec.DecodeError:
            self._error("an input line is not JSON; it was ignored")
            return
        if not isinstance(record, dict) or not isinstance(record.get("type"), str):
            self._error("an input line is not an object with a `type`; it was ignored")
            return
        kind = record["type"]
        if kind == "user":
            text = record.get("text")
            if not isinstance(text, str):
                self._error("a `user` line needs a string `text`; it was ignored")
                return
            self.turns.put_nowait(text)
        elif kind == "frame":
            text = record.get("text")
            if text is not None and not isinstance(text, str):
                self._error("a `frame` line needs `text` as a string or null; it was ignored")
                return
            self.agent.frame = text
        elif kind == "decision":
            call_id = record.get("call_id")
            try:
                decision = decision_from_wire(record.get("decision"), record.get("decided_by"))
            except ValueError as exc:
                self._error(f"decision for {call_id!r} ignored: {exc}")
                return
            if not isinstance(call_id, str) or not self.seam.resolve(call_id, decision):
                self._error(f"decision for {call_id!r} ignored: no call with that id is waiting for one")
            if record.get("interrupt") is True and self.current is not None:
                # The deny of an interrupt: the turn stops here, before it could ask the model again.
                self.current.cancel()
        elif kind == "steer":
            text = record.get("text")
            if not isinstance(text, str):
                self._error("a `steer` line needs a string `text`; it was ignored")
            elif self.current is not None:
                self.agent.shared.steers.append(text)
        elif kind == "set_mode":
            try:
                self.session.gate.set_mode(record.get("mode"))
            except (ValueError, TypeError) as exc:
                self._error(f"set_mode ignored: {exc}")
        elif kind == "interrupt":
            if self.current is not None:
                self.current.cancel()
        else:
            self._error(f"unknown input type {kind!r}; the line was ignored")

    def _write_result(self) -> None:
        outcome = self.last_outcome
        failed = outcome is not None and outcome.stop_reason == "error"
        self.writer.write({
            "type": "result",
            "is_error": failed,
            "subtype": "error" if failed else "success",
            "final_text": outcome.final_text if outcome is not None else "",
            "num_turns": self.num_turns,
            "duration_ms": int((time.monotonic() - self.started) * 1000),
            "usage": dict(self.agent.shared.usage),
            "total_cost_usd": self.agent.shared.cost_usd,
            "api_error_status": self._api_error_status() if failed else None,
        })

    def _api_error_status(self) -> str | None:
        failure = getattr(self.agent.sink, "last_failure", None)
        return str(failure.http_status) if failure is not None and failure.http_status is not None else None


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="oharness --stdio", description="oharness child for metaharness")
    parser.add_argument("--stdio", action="store_true", required=True)
    parser.add_argument("--model", default="scripted:default")
    parser.add_argument("--script")
    parser.add_argument("--cwd")
    parser.add_argument("--mode")
    parser.add_argument("--no-decision-trail", action="store_true")
    parser.add_argument("--session-dir")
    return parser.parse_args(argv)


async def serve(opts: argparse.Namespace, gate_factory: Any = None) -> int:
    from .session import StartError, default_gate, open_session

    started = time.monotonic()
    transcript = None
    if opts.session_dir:
        os.makedirs(opts.session_dir, exist_ok=True)
        transcript = os.path.join(os.path.abspath(opts.session_dir), "transcript.jsonl")
    writer = RecordWriter(transcript)
    seam = StdioSeam()
    try:
        session = await open_session(
            model=opts.model, script=opts.script, cwd=opts.cwd, mode=opts.mode, sink=StdioSink(writer), seam=seam,
            gate_factory=gate_factory or default_gate, session_dir=opts.session_dir,
            decision_trail=not opts.no_decision_trail,
        )
    except StartError as exc:
        writer.write({"type": "error", "message": str(exc)})
        print(f"oharness: {exc}", file=sys.stderr)
        writer.close()
        return 2
    writer.write({
        "type": "init",
        "session_id": uuid.uuid4().hex,
        "version": __version__,
        "model": opts.model,
        "cwd": session.cwd,
        "tools": [tool.name for tool in session.tools],
        "permission_mode": session.gate.mode,
        "skills": session.skills,
        "mcp_servers": session.mcp_statuses,
        "transcript": transcript,
    })
    server = ChildServer(session, writer, seam)
    server.started = started
    try:
        await server.run()
    finally:
        await session.close()
        writer.close()
    return 0


def keep_to_myself() -> None:
    """Become non-dumpable (prctl PR_SET_DUMPABLE 0), as metaharness is: the tools' processes
    run as this user below this process, and could otherwise open its memory, environment and
    fds through /proc (and ptrace it) wherever the kernel lets a process trace its parent —
    and so make it write anything on its channel. Where prctl is missing, nothing changes."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
    except (OSError, AttributeError):
        pass


def main(argv: list[str] | None = None) -> int:
    keep_to_myself()
    opts = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return asyncio.run(serve(opts))
    except KeyboardInterrupt:
        return 130
