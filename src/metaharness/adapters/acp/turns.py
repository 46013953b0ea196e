"""The turns of one ACP session: one `session/prompt` per turn, awaited as a task of its own.

What belongs here: sending a turn's prompt, awaiting its answer, and the turn's end that answer
implies — the translator's stop reason (`translate.py`), or `error` for a prompt the agent failed,
with the warning naming it and, for a direct endpoint, the model failure named by kind — and
whether a turn runs. What does not: the session's rules (`protocol.py`), the approvals
(`seam.py`), the events (`translate.py`).

Rules kept:
* `turn.started` is written before the prompt is sent; the turn ends when the prompt's answer
  comes (an agent that went away ends no turn: the stream's end says so);
* a direct endpoint (no loopback in between to see the request) is looked at when the agent
  failed a prompt: an endpoint that cannot be reached now is the model failure, named by kind
  (`reach.py`).
"""

from __future__ import annotations

import asyncio
from typing import Callable

from metaharness.adapters.base import RunContext
from metaharness.protocol.failures import ModelFailure, bounded
from metaharness.protocol.refusals import WarningCode

from . import reach
from .rpc import RpcChannel, RpcClosed, RpcError
from .translate import Translator, failure_text


class Turns:
    def __init__(self, rpc: RpcChannel, translator: Translator, ctx: RunContext, *, session_id: str | None,
                 binary_name: str, endpoint: str | None, provider: str,
                 model_failed: Callable[[ModelFailure], None]) -> None:
        self.rpc, self.translator, self.ctx = rpc, translator, ctx
        self.session_id, self.binary_name = session_id, binary_name
        self.endpoint, self.provider, self.model_failed = endpoint, provider, model_failed
        self.prompt: asyncio.Task | None = None

    @property
    def running(self) -> bool:
        """A prompt was sent and its answer has not come."""
        return self.prompt is not None and not self.prompt.done()

    async def begin(self, text: str) -> None:
        self.ctx.turn_started()
        future = self.rpc.send_request("session/prompt", {"sessionId": self.session_id,
                                                          "prompt": [{"type": "text", "text": text}]})
        await self.rpc.drain()
        self.prompt = asyncio.get_running_loop().create_task(self._answered(future))

    async def done(self) -> None:
        """Wait until the running prompt's answer was taken (none running: at once)."""
        if self.running:
            await asyncio.gather(self.prompt, return_exceptions=True)  # type: ignore[arg-type]

    async def _answered(self, future: asyncio.Future) -> None:
        try:
            result = await future
        except RpcError as exc:
            self.translator.flush()
            self.translator.last_error = f"{self.binary_name} failed the prompt: {failure_text(exc)}"
            await self._unreachable_endpoint(self.translator.last_error)
            self.ctx.warn(WarningCode.VENDOR_ERROR, self.translator.last_error)
            self.ctx.turn_ended("error")
            return
        except RpcClosed:
            return  # the child went away; the stream's end says so
        self.ctx.turn_ended(self.translator.prompt_result(result))

    async def _unreachable_endpoint(self, sentence: str) -> None:
        if self.endpoint is None:
            return
        kind = await reach.probe(self.endpoint)
        if kind is not None:
            self.model_failed(ModelFailure(provider=self.provider, kind=kind, provider_message=bounded(sentence)))
