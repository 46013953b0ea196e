"""Generated garbage lines: every non-blank line gives exactly one answer, never an exception."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings, strategies as st
from examples import examples

from metaharness.protocol import (
    CommandRefusal, FrameRefusal, LineError, check_stream, decode_command_line, decode_event_line,
    parse_frame_document,
)
from metaharness.protocol.commands import COMMAND_TYPES

GOOD = b'{"format":"metaharness.command/1","id":"c1","command":"tool.decide","call_id":"x","decision":{"decision":"allow"}}'

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
keys = st.sampled_from(["format", "id", "command", "call_id", "decision", "reason", "text", "frame", "posture", "x"])
command_like = st.dictionaries(keys, json_values | st.sampled_from(["metaharness.command/1", "tool.decide", "halt", "-"]), max_size=7)


def answered_once(raw: bytes) -> None:
    result = decode_command_line(raw)
    blank = not raw.rstrip(b"\n").strip(b" \t\r")
    if blank:
        assert result is None
        return
    assert type(result) in COMMAND_TYPES or isinstance(result, CommandRefusal), result
    if isinstance(result, CommandRefusal):
        assert result.code == "MALFORMED" and result.reason and isinstance(result.id, str)
        if result.id == "-":
            return
        # a refusal under a real id only when the line is an object with that string id
        obj = json.loads(raw)
        assert obj["id"] == result.id


@settings(max_examples=examples(400), suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_random_bytes(raw):
    answered_once(raw)


@settings(max_examples=examples(300))
@given(st.integers(min_value=0, max_value=len(GOOD)))
def test_truncated_json(n):
    answered_once(GOOD[:n])


@settings(max_examples=examples(400), suppress_health_check=[HealthCheck.too_slow])
@given(command_like)
def test_wrong_types_and_shapes(obj):
    answered_once(json.dumps(obj).encode())


@settings(max_examples=examples(50))
@given(st.integers(min_value=1, max_value=200_000), st.sampled_from(["[", "{\"a\":", "[{\"x\":"]))
def test_deep_nesting(depth, opener):
    answered_once((opener * depth).encode())
    answered_once(("[" * depth + "]" * depth).encode())


def test_huge_lines():
    answered_once(b'{"format":"metaharness.command/1","id":"big","command":"steer","text":"' + b"x" * 5_000_000 + b'"}')
    answered_once(b"[" + b"1," * 1_000_000 + b"1]")
    answered_once(b" " * 1_000_000)
    r = decode_command_line(b'{"format":"metaharness.command/1","id":"big","command":"steer","text":' + b"1" * 100_000 + b"}")
    assert isinstance(r, CommandRefusal)


@settings(max_examples=examples(300))
@given(st.binary(max_size=200))
def test_event_decoder_raises_only_line_error(raw):
    try:
        decode_event_line(raw)
    except LineError as exc:
        assert exc.message


@settings(max_examples=examples(200))
@given(st.binary(max_size=200))
def test_frame_parser_raises_only_frame_refusal(raw):
    try:
        parse_frame_document(raw)
    except FrameRefusal as exc:
        assert exc.name == "FrameInvalid" and exc.detail


@settings(max_examples=examples(200))
@given(st.lists(st.binary(max_size=60), max_size=6))
def test_check_stream_always_gives_a_verdict(lines):
    v = check_stream(b"\n".join(lines))
    assert v.exit_code in (0, 1, 3)
