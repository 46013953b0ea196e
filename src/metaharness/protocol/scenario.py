"""`metaharness.scenario/1` — a script for a model (docs/scenarios.md).

The same document drives oharness's `scripted` provider and `metaharness loopback`.
Pure: parse and validate bytes into typed turns; every refusal names the turn
(index, and its `id` when it has one). Calls are written in the neutral operation
vocabulary with the neutral input keys below.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

from .values import U64

SCENARIO_FORMAT = "metaharness.scenario/1"
FINAL_TEXT = "(scenario complete)"

# Neutral operation → the input keys a call of it must carry.
NEUTRAL_INPUTS: dict[str, tuple[str, ...]] = {
    "shell": ("command",),
    "file.read": ("path",),
    "file.write": ("path", "content"),
    "file.edit": ("path", "old", "new"),
    "dir.list": ("path",),
    "search": ("pattern", "path"),
    "web.read": ("url",),
    "task.todo": ("items",),
    "skill.load": ("name",),
    "subagent.spawn": ("prompt",),
    "mcp.call": ("server", "tool", "arguments"),
}


class ScenarioCall(Struct, kw_only=True):
    op: str
    input: dict[str, Any]
    id: str | None = None


class ScenarioFailure(Struct, kw_only=True, forbid_unknown_fields=True):
    """How the loopback fails this turn's request instead of answering it (docs/scenarios.md)."""

    kind: Literal["status", "hold", "stall", "cut", "malformed"] = "status"
    status: Annotated[int, Meta(ge=400, le=599)] = 500
    message: str | None = None  # the provider-shaped error body's message
    error_type: str | None = None  # the body's error type; by default the one the status implies
    retry_after: str | None = None  # sent as the `retry-after` header
    times: Annotated[int, Meta(ge=1)] | None = None  # fail only the first N requests of this turn


class ScenarioUsage(Struct, kw_only=True, forbid_unknown_fields=True):
    """The token counts a scripted answer reports (the loopback and oharness's scripted model)."""

    input_tokens: U64 = 10
    output_tokens: U64 = 5
    cache_read_input_tokens: U64 = 0
    cache_creation_input_tokens: U64 = 0

    def counts(self) -> dict[str, int]:
        return {f: getattr(self, f) for f in self.__struct_fields__}


# A turn that sets no usage, a side request and the answer past the last turn report this.
DEFAULT_USAGE = ScenarioUsage()


class ScenarioTurn(Struct, kw_only=True):
    text: str | None = None
    calls: list[ScenarioCall] = msgspec.field(default_factory=list)
    id: str | None = None
    delay_ms: U64 | None = None
    fail: ScenarioFailure | None = None
    usage: ScenarioUsage | None = None

    def usage_counts(self) -> dict[str, int]:
        return (self.usage or DEFAULT_USAGE).counts()


class Scenario(Struct, kw_only=True):
    turns: list[ScenarioTurn]

    def answer(self, index: int) -> ScenarioTurn:
        """The model's answer to its `index`-th main request (0-based)."""
        if index < len(self.turns):
            return self.turns[index]
        return ScenarioTurn(text=FINAL_TEXT)


class ScenarioError(ValueError):
    """A scenario that is not a valid document; the message names the turn."""


def turn_label(index: int, turn_id: str | None) -> str:
    return f"turn {index}" + (f" ({turn_id!r})" if turn_id else "")


def parse_scenario(data: bytes | str) -> Scenario:
    try:
        raw = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise ScenarioError(f"the scenario is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ScenarioError("the scenario is JSON but not an object")
    fmt = raw.get("format")
    if fmt != SCENARIO_FORMAT:
        raise ScenarioError(
            f"the scenario's format is {msgspec.json.encode(fmt).decode()}, expected \"{SCENARIO_FORMAT}\""
            if fmt is not None
            else f'the scenario has no format tag, expected "{SCENARIO_FORMAT}"'
        )
    turns_raw = raw.get("turns")
    if not isinstance(turns_raw, list):
        raise ScenarioError("the scenario needs a list of turns under `turns`")
    turns: list[ScenarioTurn] = []
    for index, turn_raw in enumerate(turns_raw):
        label = turn_label(index, turn_raw.get("id") if isinstance(turn_raw, dict) else None)
        try:
            turn = msgspec.convert(turn_raw, ScenarioTurn, strict=True)
        except msgspec.ValidationError as exc:
            raise ScenarioError(f"{label} is malformed: {exc}") from None
        for number, call in enumerate(turn.calls):
            required = NEUTRAL_INPUTS.get(call.op)
            if required is None:
                raise ScenarioError(f"{label}, call {number}: unknown operation {call.op!r}")
            missing = [key for key in required if key not in call.input]
            if missing:
                raise ScenarioError(
                    f"{label}, call {number} ({call.op}): missing input key(s) {', '.join(missing)}"
                )
        turns.append(turn)
    return Scenario(turns=turns)


def load_scenario(path: str) -> Scenario:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise ScenarioError(f"the scenario {path} could not be read: {exc.strerror or exc}") from None
    return parse_scenario(data)
