"""The `scripted` provider: a deterministic model read from a `metaharness.scenario/1`.

Rules it keeps: the i-th main request of the run (counting from 0, subagent requests
included) is answered with `Scenario.answer(i)`; after the last turn every request gets
`(scenario complete)` and no calls. A turn's `delay_ms` is waited before answering (an
interrupt during the wait abandons the request). Calls render to oharness tools
(`render_call`); a call whose tool the harness does not offer is refused before the run
starts (`check_offered`), naming the turn. No network, no clock beyond `delay_ms`; each answer
reports the turn's `usage` (the scenario's default when it sets none), so a budget can be tried offline.
Without a scenario the model answers every request with `(scenario complete)`.
"""

from __future__ import annotations

import asyncio
from typing import AsyncIterator

from metaharness.protocol.scenario import Scenario, ScenarioError, load_scenario, turn_label

from metaharness.protocol.scenario import DEFAULT_USAGE

from ..model import ModelEvent, ModelRequest, Stop, TextBlock, ToolCallBlock, Usage
from ..tools import render_call


class ScriptedProvider:
    def __init__(self, name: str, scenario: Scenario | None) -> None:
        self.name = name
        self.scenario = scenario or Scenario(turns=[])
        self.requests = 0  # main requests answered so far

    @classmethod
    def from_file(cls, name: str, path: str | None) -> "ScriptedProvider":
        return cls(name, load_scenario(path) if path else None)

    def check_offered(self, offered: set[str]) -> None:
        """Refuse (ScenarioError naming the turn) a call whose tool is not offered."""
        for index, turn in enumerate(self.scenario.turns):
            for number, call in enumerate(turn.calls):
                label = f"{turn_label(index, turn.id)}, call {number} ({call.op})"
                if call.op == "mcp.call" and not isinstance(call.input.get("arguments"), (dict, type(None))):
                    raise ScenarioError(f"{label}: `arguments` must be an object")
                tool, _ = render_call(call.op, call.input)
                if tool not in offered:
                    raise ScenarioError(f"{label}: oharness offers no tool {tool!r} in this session")

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        index = self.requests
        if request.main:
            self.requests += 1
        turn = self.scenario.answer(index) if request.main else None
        if turn is None:
            yield TextBlock("ok")
            yield Usage(DEFAULT_USAGE.counts())
            yield Stop("end_turn")
            return
        if turn.delay_ms:
            await asyncio.sleep(turn.delay_ms / 1000)
        if turn.text:
            yield TextBlock(turn.text)
        for number, call in enumerate(turn.calls):
            name, tool_input = render_call(call.op, call.input)
            yield ToolCallBlock(call.id or f"call_{index}_{number}", name, tool_input)
        yield Usage(turn.usage_counts())
        yield Stop("tool_use" if turn.calls else "end_turn")
