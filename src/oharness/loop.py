"""The agent loop: one conversation, turn by turn, over a provider and a tool set.

What belongs here: building each model request (system prompt with the frame section
when a frame is in force, the messages, the tool specs, pending steer texts), reading
the provider's blocks, and taking every tool call through the per-call seam in order:
report the call → wait for its external decision (`Seam.decide`) → `Gate.check` → run
→ report the result. What the records look like on a wire is the `Sink`'s business.

Rules it keeps: calls of one answer are handled one after the other, each decided
before the next is presented; an interrupt is a cancellation of `run_turn` — a running
tool kills its process group, and the conversation is repaired so that every call the
model made has a result (`interrupted`) before the next turn; a nested `agent` call
runs a child `Agent` that shares the provider, the sink, the seam and the gate.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from typing import Any, Protocol

from metaharness.permissions import ExternalDecision
from metaharness.protocol.failures import ModelFailure, bounded

from .gate import Gate
from .model import (
    Message, ModelRequest, Provider, ProviderError, Stop, TextBlock, ThinkingBlock, ToolCall, ToolCallBlock, Usage,
    add_usage, empty_usage,
)
from .tools import Tool, ToolContext, ToolFailure, ToolOutput

INTERRUPTED_RESULT = "the call was interrupted before it finished"
MAX_REQUESTS_PER_TURN = 500


class Sink(Protocol):
    """Where the loop reports what happens (the stdio writer, the terminal printer)."""

    def text(self, text: str, request_id: str, agent: str | None) -> None: ...
    def thinking(self, text: str, request_id: str, agent: str | None) -> None: ...
    def injection(self, text: str, origin: str) -> None: ...
    def tool_call(self, call: ToolCall) -> None: ...
    def tool_result(self, call: ToolCall, output: ToolOutput) -> None: ...
    def usage(self, request_id: str, model: str, usage: dict[str, int | None]) -> None: ...
    def model_failure(self, failure: ModelFailure, agent: str | None) -> None: ...


class Seam(Protocol):
    """Waits for the external decision of one presented call (None: nobody decides)."""

    async def decide(self, call: ToolCall) -> ExternalDecision | None: ...


class NoSeam:
    async def decide(self, call: ToolCall) -> ExternalDecision | None:
        return None


@dataclass
class TurnOutcome:
    stop_reason: str  # end_turn | interrupted | max_tokens | error
    error: str | None = None
    final_text: str = ""


@dataclass
class Shared:
    """State one session's agents share: request ids, usage totals, the steer queue."""

    request_numbers: itertools.count = field(default_factory=lambda: itertools.count(1))
    usage: dict[str, int | None] = field(default_factory=empty_usage)
    cost_usd: float | None = None
    steers: list[str] = field(default_factory=list)


BASE_PROMPT = """You are oharness, a coding agent working in {cwd}.
Work with the tools you are given; every tool call may be refused, and a refusal's reason
is returned as the call's result. Keep answers short and say what you did."""


class Agent:
    def __init__(
        self,
        provider: Provider,
        tools: list[Tool],
        sink: Sink,
        gate: Gate,
        ctx: ToolContext,
        *,
        seam: Seam | None = None,
        name: str | None = None,
        shared: Shared | None = None,
        base_prompt: str | None = None,
    ) -> None:
        self.provider = provider
        self.tools = {tool.name: tool for tool in tools}
        self.sink = sink
        self.gate = gate
        self.seam = seam or NoSeam()
        self.ctx = ctx
        self.name = name  # None for the main agent; the subagent label otherwise
        self.shared = shared or Shared()
        self.frame: str | None = None
        self.messages: list[Message] = []
        self.base_prompt = base_prompt or BASE_PROMPT.format(cwd=ctx.cwd)
        self._subagents = itertools.count(1)
        ctx.spawn_agent = self._spawn_agent
        ctx.agent = self

    # -- the system prompt -------------------------------------------------------------

    def system_prompt(self) -> str:
        if self.frame is None:
            return self.base_prompt
        return f"{self.base_prompt}\n\n## The frame in force\n\n{self.frame}"

    # -- a turn ------------------------------------------------------------------------

    async def run_turn(self, user_text: str) -> TurnOutcome:
        """Run one user turn to its end. Cancelling it is an interrupt (the caller reports it)."""
        self.messages.append({"role": "user", "content": [{"type": "text", "text": user_text}]})
        final_text = ""
        try:
            for _ in range(MAX_REQUESTS_PER_TURN):
                self._deliver_steers()
                request_id = f"req_{next(self.shared.request_numbers)}"
                request = ModelRequest(self.system_prompt(), list(self.messages), [t.spec() for t in self.tools.values()])
                blocks: list[dict[str, Any]] = []
                calls: list[ToolCallBlock] = []
                texts: list[str] = []
                stop = "end_turn"
                try:
                    async for event in self.provider.stream(request):
                        if isinstance(event, TextBlock):
                            blocks.append({"type": "text", "text": event.text})
                            texts.append(event.text)
                            self.sink.text(event.text, request_id, self.name)
                        elif isinstance(event, ThinkingBlock):
                            self.sink.thinking(event.text, request_id, self.name)
                        elif isinstance(event, ToolCallBlock):
                            calls.append(event)
                            blocks.append({"type": "tool_call", "id": event.id, "name": event.name, "input": event.input})
                        elif isinstance(event, Usage):
                            add_usage(self.shared.usage, event.counts)
                            if event.cost_usd is not None:
                                self.shared.cost_usd = (self.shared.cost_usd or 0.0) + event.cost_usd
                            self.sink.usage(request_id, self.provider.name, event.counts)
                        elif isinstance(event, Stop):
                            stop = event.reason
                except ProviderError as exc:
                    self.sink.model_failure(exc.failure or ModelFailure(
                        provider=self.provider.name, kind="stream_error", provider_message=bounded(str(exc))), self.name)
                    if blocks:
                        self._append_assistant(blocks)
                    return TurnOutcome("error", str(exc), final_text)
                except asyncio.CancelledError:
                    if blocks:
                        self._append_assistant(blocks)
                    raise
                self._append_assistant(blocks)
                if texts:
                    final_text = "\n".join(texts)
                if not calls:
                    return TurnOutcome("max_tokens" if stop == "max_tokens" else "end_turn", None, final_text)
                results = self._results_message()
                for block in calls:
                    cwd = self.ctx.bash_cwd() if block.name == "bash" else self.ctx.cwd
                    call = ToolCall(block.id, block.name, block.input, cwd, self.name)
                    output = await self._handle_call(call)
                    if output.cwd is not None:
                        self.ctx.shell_cwd = output.cwd  # decided with, and run in, from the next call on
                    results["content"].append(
                        {"type": "tool_result", "call_id": call.id, "content": output.content, "is_error": output.is_error}
                    )
                if stop == "max_tokens":
                    return TurnOutcome("max_tokens", None, final_text)
            return TurnOutcome("error", f"the turn made more than {MAX_REQUESTS_PER_TURN} model requests", final_text)
        except asyncio.CancelledError:
            self._repair_after_interrupt()
            raise

    async def _handle_call(self, call: ToolCall) -> ToolOutput:
        self.sink.tool_call(call)
        external = await self.seam.decide(call)
        verdict = await self.gate.check(call, external)
        if not verdict.allowed:
            # refused by oharness's own gate, unless metaharness's deny is what it carried out
            own = external is None or external.decision != "deny"
            output = ToolOutput(verdict.reason or "the call was refused", is_error=True, refused=own)
        else:
            tool = self.tools.get(call.name)
            if tool is None:
                output = ToolOutput(f"there is no tool named {call.name!r}", is_error=True)
            else:
                try:
                    output = await tool.call(verdict.input, self.ctx)
                except asyncio.CancelledError:
                    self.sink.tool_result(call, ToolOutput(INTERRUPTED_RESULT, is_error=True))
                    raise
                except Exception as exc:  # a tool bug must not end the session
                    output = ToolOutput(f"the {call.name} tool failed: {type(exc).__name__}: {exc}", is_error=True)
        self.sink.tool_result(call, output)
        return output

    # -- conversation bookkeeping ------------------------------------------------------

    def _append_assistant(self, blocks: list[dict[str, Any]]) -> None:
        self.messages.append({"role": "assistant", "content": blocks})

    def _results_message(self) -> Message:
        message: Message = {"role": "user", "content": []}
        self.messages.append(message)
        return message

    def _deliver_steers(self) -> None:
        if not self.shared.steers or self.name is not None:
            return
        texts, self.shared.steers[:] = list(self.shared.steers), []
        last = self.messages[-1] if self.messages else None
        content = [{"type": "text", "text": text} for text in texts]
        if last is not None and last["role"] == "user":
            last["content"].extend(content)
        else:
            self.messages.append({"role": "user", "content": content})
        for text in texts:
            self.sink.injection(text, "steer")

    def _repair_after_interrupt(self) -> None:
        """Give every call of the last answer a result, so the next request is well formed."""
        if not self.messages:
            return
        last = self.messages[-1]
        if last["role"] == "assistant":
            assistant, results = last, None
        elif len(self.messages) > 1 and self.messages[-2]["role"] == "assistant":
            assistant, results = self.messages[-2], last
        else:
            return
        answered = {b["call_id"] for b in results["content"] if b["type"] == "tool_result"} if results else set()
        missing = [b for b in assistant["content"] if b["type"] == "tool_call" and b["id"] not in answered]
        if missing and results is None:
            results = self._results_message()
        for block in missing:
            results["content"].append(  # type: ignore[index]
                {"type": "tool_result", "call_id": block["id"], "content": INTERRUPTED_RESULT, "is_error": True}
            )

    # -- subagents ---------------------------------------------------------------------

    async def _spawn_agent(self, prompt: str, kind: str | None) -> str:
        if self.name is not None:
            raise ToolFailure("a subagent cannot spawn another subagent")
        label = f"{kind or 'general'}-{next(self._subagents)}"
        child_ctx = ToolContext(
            cwd=self.ctx.cwd, skills_dirs=self.ctx.skills_dirs, hidden=self.ctx.hidden, admit_url=self.ctx.admit_url,
            decided_path=self.ctx.decided_path, scratch_dir=self.ctx.scratch_dir,
        )
        child_tools = [tool for name, tool in self.tools.items() if name != "agent"]
        child = Agent(
            self.provider, child_tools, self.sink, self.gate, child_ctx,
            seam=self.seam, name=label, shared=self.shared, base_prompt=self.base_prompt,
        )
        child.frame = self.frame
        outcome = await child.run_turn(prompt)
        if outcome.stop_reason == "error":
            raise ToolFailure(f"the subagent failed: {outcome.error}")
        return outcome.final_text
