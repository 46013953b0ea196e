"""Reading a recorded `metaharness.event/1` stream for the viewers.

What belongs here: splitting stream bytes into lines, decoding each through the one
wire decoder (`metaharness.protocol.decode`), turning a decoded event back into its
payload *as the event line carries it* (docs/reference/wire.md), classifying a
stream's completeness and counting its census.

Rules it keeps: nothing here reads a clock or guesses; an undecodable line is
reported by number with the decoder's own message (`BadLine`), never skipped
silently; the payload of an event is built from the decoded struct, so unknown keys
are dropped exactly as the decoder drops them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

import msgspec

from metaharness.protocol.census import Census
from metaharness.protocol.events import EVENT_FORMAT, event_name
from metaharness.protocol.values import Decision

# Values carried without owning their shape: key-sorted at every level.
_PASS_THROUGH: dict[str, tuple[str, ...]] = {
    "tool.requested": ("input",),
    "tool.result": ("content", "tool_use_result"),
}
# Map-typed values: keys sorted, one level.
_SORTED_MAPS = ("by_seam", "by_decider", "model_usage")


class BadLine(Exception):
    """A stream line that is not a valid `metaharness.event/1` line."""

    def __init__(self, number: int, message: str) -> None:
        super().__init__(f"line {number} is not a valid {EVENT_FORMAT} line: {message}")
        self.number = number
        self.message = message


@dataclass(frozen=True)
class StreamLine:
    number: int  # 1-based line number in the stream
    raw: bytes  # the line's bytes without its "\n"
    envelope: Any
    event: Any

    @property
    def name(self) -> str:
        return event_name(self.event)

    @property
    def at(self) -> str | None:
        return envelope_at(self.envelope)

    @property
    def run(self) -> str:
        return self.envelope.run

    @property
    def seq(self) -> int:
        return self.envelope.seq


def envelope_at(envelope: Any) -> str | None:
    at = getattr(envelope, "at", None)
    return at if isinstance(at, str) else None


def split_lines(data: bytes) -> list[bytes]:
    """The stream's lines, each without its `\\n`; a final unterminated line still counts."""
    if not data:
        return []
    parts = data.split(b"\n")
    if parts[-1] == b"":
        parts.pop()
    return parts


def decode_line(number: int, raw: bytes) -> StreamLine:
    from metaharness.protocol.decode import LineError, decode_event_line

    try:
        envelope, event = decode_event_line(raw)
    except LineError as exc:
        raise BadLine(number, str(exc)) from None
    return StreamLine(number, raw, envelope, event)


def decode_stream(data: bytes) -> list[StreamLine]:
    """Every line decoded, or `BadLine` naming the first that does not decode."""
    return [decode_line(n, raw) for n, raw in enumerate(split_lines(data), start=1)]


# --- payloads as on the event line ----------------------------------------------------


def _sorted_deep(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted_deep(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted_deep(v) for v in value]
    return value


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _sort_maps(value: Any) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in _SORTED_MAPS and isinstance(item, dict):
                item = {k: item[k] for k in sorted(item)}
            out[key] = _sort_maps(item)
        return out
    if isinstance(value, list):
        return [_sort_maps(v) for v in value]
    return value


def payload_of(event: Any) -> dict[str, Any]:
    """The event's payload keys in the order of its table with values as the event line writes them."""
    name = event_name(event)
    payload = msgspec.to_builtins(event)  # struct order; UNSET fields omitted; None kept
    payload.pop("event", None)
    payload = _sort_maps(payload)
    for key in _PASS_THROUGH.get(name, ()):
        if key in payload:
            payload[key] = _sorted_deep(payload[key])
    if name == "tool.decided":
        decision = payload.get("decision")
        if isinstance(decision, dict) and "input" in decision:
            decision["input"] = _sorted_deep(decision["input"])
    if name == "session.ended" and isinstance(payload.get("permission_denials"), list):
        for denial in payload["permission_denials"]:
            if isinstance(denial, dict) and "tool_input" in denial:
                denial["tool_input"] = _sorted_deep(denial["tool_input"])
    return _finite(payload)


# --- completeness and census ------------------------------------------------------------


def completeness(names: list[str]) -> str:
    """Completeness, as `metaharness check` judges it, over the event names in stream order:
    complete, truncated or inconsistent."""
    closed_at = [i for i, name in enumerate(names) if name == "stream.closed"]
    if not closed_at:
        return "truncated"
    if len(closed_at) > 1 or closed_at[0] != len(names) - 1:
        return "inconsistent"
    return "complete"


def stream_verdict(lines: list[StreamLine]) -> str:
    verdict = completeness([line.name for line in lines])
    if verdict == "complete" and lines[-1].event.events != len(lines) - 1:
        return "inconsistent"
    return verdict




# The census rule lives once, in the protocol package.
CensusCounter = Census


def count_census(events: Iterable[Any]) -> dict[str, Any]:
    counter = CensusCounter()
    for event in events:
        if event_name(event) == "tool.decided":
            counter.add(event)
    return counter.as_dict()


def decision_word(decision: Decision) -> str:
    """`allow`, `deny`, `replace` or `abstain` for a Decision struct."""
    return type(decision).__struct_config__.tag


def iter_names(lines: Iterable[StreamLine]) -> Iterator[str]:
    for line in lines:
        yield line.name
