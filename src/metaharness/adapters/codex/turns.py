"""The turns of one Codex thread: `turn/start`, `turn/steer`, `turn/interrupt`, and the steers a
turn did not take up carried into the next (docs/guides/claude-and-codex.md).

What belongs here: which turn is running, what was sent into it, and when a steer opens a turn
of its own. The ledger of where each steer is (`steers.py`) is sans-IO; this module writes the
requests it implies. What does not: the approvals (`seam.py`), the events (`translate.py`).

Rules kept:
* a steer is never dropped silently: one Codex has not taken up by `turn/completed` (still in
  flight, refused "no active turn", or accepted without its `userMessage`) opens the next turn,
  and the run stays open until that turn is done (`carry_coming`);
* nothing is carried past a turn that was interrupted or a run that was halted (`stopping`);
  an interrupt covers only the turn it interrupted;
* every turn is sent with the sandbox policy in force when it starts (`sandbox`).
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from metaharness.adapters.base import ControlRefused, RunContext, TurnInput
from metaharness.protocol.refusals import CommandCode, Sentence, WarningCode

from .rpc import RpcChannel, RpcClosed, RpcError
from .steers import SteerLedger
from .translate import Translator


def text_input(blocks: list[str]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": block, "text_elements": []} for block in blocks]


class Turns:
    def __init__(self, rpc: RpcChannel, translator: Translator, ctx: RunContext, thread_id: Callable[[], str | None],
                 sandbox: Callable[[], dict]) -> None:
        self.rpc, self.translator, self.ctx = rpc, translator, ctx
        self._thread_id, self._sandbox = thread_id, sandbox
        self.turn_id: str | None = None
        self.started = 0
        self.steers = SteerLedger()
        self.carry_coming = False  # a carried steer will open the next turn
        self.stopping = False  # interrupt or halt: nothing is carried past the turn
        self.halted = False
        self._carry_task: asyncio.Task | None = None

    @property
    def running(self) -> str | None:
        """The id of the running turn, as Codex last reported it (or as `turn/start` answered)."""
        return self.translator.active_turn_id or self.turn_id

    # --- from the translator --------------------------------------------------------------
    def on_started(self, turn_id: str) -> None:
        self.turn_id = turn_id
        self.carry_coming = False
        self.stopping = self.halted  # an interrupt covers only the turn it interrupted

    def on_completed(self, turn: dict) -> None:
        if self.turn_id == turn.get("id"):
            self.turn_id = None
        # Codex 0.171.0 was seen to take every accepted steer into the same turn; what is left
        # here is a steer that reached it after it went idle, or one it accepted and never showed.
        undelivered = self.steers.undelivered(self.translator.client_messages)
        if not undelivered or self.stopping or self.rpc.stdin_closed:
            return
        self.steers.carried.update(undelivered)
        self.carry_coming = True
        self._carry_task = asyncio.get_running_loop().create_task(self._carry(undelivered))

    async def _carry(self, steers: dict[str, str]) -> None:
        for client_id in steers:
            self.translator.client_messages.pop(client_id, None)
        try:
            await self.begin(list(steers.values()), client_id=next(iter(steers)), origin="steer",
                             record_text="\n\n".join(steers.values()))
        except (RpcError, RpcClosed) as exc:
            # The turn cannot start: say so, and end the session rather than wait for it.
            self.carry_coming = False
            self.ctx.warn(WarningCode.COMMAND_NOT_APPLIED, f"a steer could not be delivered as the next turn's input: {exc}")
            self.rpc.close_stdin()

    # --- requests -------------------------------------------------------------------------
    async def begin(self, text: TurnInput, *, client_id: str | None = None, origin: str = "input",
                    record_text: str | None = None) -> None:
        self.started += 1
        blocks = [text] if isinstance(text, str) else [block for block in text if block]
        client_id = client_id or f"mh-turn-{self.started}"
        self.translator.client_messages[client_id] = (origin, record_text if record_text is not None else "\n\n".join(blocks))
        result = await self.rpc.request("turn/start", {
            "threadId": self._thread_id(), "clientUserMessageId": client_id, "input": text_input(blocks),
            "sandboxPolicy": self._sandbox(),
        })
        turn = (result or {}).get("turn") or {}
        translator = self.translator
        if turn.get("status") == "inProgress" and translator.active_turn_id is None \
                and translator.turns_completed < self.started:
            self.turn_id = translator.active_turn_id = turn.get("id")

    async def steer(self, text: str) -> None:
        turn_id = self.running
        if turn_id is None:
            raise ControlRefused(CommandCode.TOO_LATE, Sentence.NOTHING_TO_STEER)
        client_id = self.steers.sent(text)
        self.translator.client_messages[client_id] = ("steer", text)
        try:
            await self.rpc.request("turn/steer", {
                "threadId": self._thread_id(), "expectedTurnId": turn_id, "clientUserMessageId": client_id,
                "input": text_input([text]),
            }, timeout=10)
        except (RpcError, RpcClosed, asyncio.TimeoutError) as exc:
            # Codex went idle ("no active turn") with its turn/completed still on the way: carried then.
            ending = isinstance(exc, RpcError) and "no active turn" in exc.message \
                and self.translator.active_turn_id == turn_id and not self.stopping
            if self.steers.failed(client_id, turn_ending=ending):
                return
            self.translator.client_messages.pop(client_id, None)
            raise ControlRefused(CommandCode.TOO_LATE, f"{Sentence.NOTHING_TO_STEER} (codex: {exc})") from None
        self.steers.answered(client_id)

    async def interrupt(self) -> None:
        """`turn/interrupt` for the running turn (none: nothing to send); nothing it left is carried."""
        self.stopping = True  # until the next turn starts
        turn_id = self.running
        if turn_id is not None and self.rpc.reaches_the_peer():
            try:
                await self.rpc.request("turn/interrupt", {"threadId": self._thread_id(), "turnId": turn_id}, timeout=5)
            except (RpcError, RpcClosed, asyncio.TimeoutError):
                pass
