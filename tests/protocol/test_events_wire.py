"""Event lines: encoding rules (the wire rule “writing an event line”, checklist 1–6) and decoding (the wire rule “decoding a line”, checklist 7–9)."""

from __future__ import annotations

import json
import math

import msgspec
import pytest

from metaharness.protocol import (
    EVENT_NAMES, EVENT_TYPES, LineError, decode_event_line, encode_event_line,
)
from metaharness.protocol.events import (
    RateLimit, SessionEnded, Text, ThinkingEstimate, ToolDecided, ToolRequested, ToolResult, TurnStarted, UsageReport,
)
from metaharness.protocol.values import Allow, DecisionCensus, RateLimitInfo, Replace, Usage

from .samples import EVENTS

CANONICAL_EVENTS = (
    "session.started, session.ended, step.entered, step.left, turn.started, turn.ended, text, thinking, "
    "thinking.estimate, injection, tool.requested, tool.decided, tool.result, usage, rate_limit, command.result, "
    "warning, opaque, auth.expired, stream.closed"
).split(", ")


def line_of(event, at=None, seq=1, run="r") -> bytes:
    return encode_event_line(seq, run, event, at)


def test_every_event_type_has_a_sample():
    assert {type(e) for e in EVENTS} == set(EVENT_TYPES)


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_round_trip_every_event(event):
    line = line_of(event, at="2026-08-23T02:57:58.487Z", seq=7, run="claude-1")
    envelope, decoded = decode_event_line(line)
    assert (envelope.format, envelope.seq, envelope.run, envelope.at) == ("metaharness.event/1", 7, "claude-1", "2026-08-23T02:57:58.487Z")
    assert decoded == event
    assert line_of(decoded, at=envelope.at, seq=7, run="claude-1") == line


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_key_order_compact_and_payload_in_struct_order(event):  # checklist 1
    line = line_of(event, at="T", seq=3)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    obj = json.loads(line)
    keys = list(obj)
    assert keys[:5] == ["format", "seq", "run", "at", "event"]
    payload = [f for f in type(event).__struct_fields__ if getattr(event, f) is not msgspec.UNSET]
    assert keys[5:] == payload
    # compact: re-serialising the parsed object the Python way gives the same bytes
    assert json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n" == line


def test_exact_bytes_of_spec_examples():
    assert line_of(ToolDecided(call_id="toolu_01", decision=Allow(), decided_by="embedder", seam="hook", latency_ms=2), seq=6, run="R3-4/claude-driven") == (
        b'{"format":"metaharness.event/1","seq":6,"run":"R3-4/claude-driven","event":"tool.decided","call_id":"toolu_01",'
        b'"decision":{"decision":"allow"},"decided_by":"embedder","seam":"hook","latency_ms":2}\n')
    assert line_of(RateLimit(info=RateLimitInfo(status="allowed", window="five_hour", resets_at=1787470800, using_overage=False)), seq=2, run="golden") == (
        b'{"format":"metaharness.event/1","seq":2,"run":"golden","event":"rate_limit","info":{"status":"allowed",'
        b'"window":"five_hour","resets_at":1787470800,"utilization":null,"using_overage":false}}\n')
    assert line_of(ToolResult(call_id="call_001", is_error=True), seq=3, run="golden") == (
        b'{"format":"metaharness.event/1","seq":3,"run":"golden","event":"tool.result","exit_code":null,"outcome_source":null,'
        b'"call_id":"call_001","is_error":true,"content":null,"bytes":null,"tool_use_result":null}\n')


def test_at_omitted_not_null_when_absent():  # checklist 3
    line = line_of(Text(text="x"))
    assert b'"at"' not in line
    assert list(json.loads(line))[:4] == ["format", "seq", "run", "event"]
    env, _ = decode_event_line(line)
    assert env.at is None


def test_null_rule_and_omitted_keys():  # checklist 4
    obj = json.loads(line_of(ToolRequested(call_id="c", name="Bash", input={}, decision_required=False, seam="none")))
    assert "operations" not in obj and "subjects" not in obj and "policy" not in obj
    assert obj["deadline_ms"] is None
    obj = json.loads(line_of(ToolResult(call_id="c")))
    assert obj["tool_use_result"] is None and "tool_use_result" in obj
    obj = json.loads(line_of(ToolDecided(call_id="c", decision=Allow(), decided_by="frame", seam="hook")))
    assert "latency_ms" in obj and obj["latency_ms"] is None
    from metaharness.protocol.events import SessionStarted
    from metaharness.protocol.values import HermeticAttestation, TranscriptRef
    obj = json.loads(line_of(SessionStarted(adapter="oharness", transcript=TranscriptRef(), hermetic=HermeticAttestation())))
    assert "available_operations" not in obj and obj["withheld"] is None and obj["mcp_servers"] is None


def test_pass_through_values_and_maps_sorted_at_every_level():  # checklist 5
    inp = {"z": {"y": [{"d": 1, "c": 2}], "x": 1}, "a": None, "é": 1, "b": 2}
    line = line_of(ToolRequested(call_id="c", name="n", input=inp, decision_required=False, seam="none"))
    assert b'"input":{"a":null,"b":2,"z":{"x":1,"y":[{"c":2,"d":1}]},"\xc3\xa9":1}' in line
    line = line_of(ToolDecided(call_id="c", decision=Replace(input={"b": {"d": 1, "c": 1}, "a": 1}), decided_by="embedder", seam="hook"))
    assert b'"decision":{"decision":"replace","input":{"a":1,"b":{"c":1,"d":1}}}' in line
    line = line_of(ToolResult(call_id="c", content={"b": 1, "a": 1}, tool_use_result={"y": 1, "x": 1}))
    assert b'"content":{"a":1,"b":1}' in line and b'"tool_use_result":{"x":1,"y":1}' in line
    census = DecisionCensus(allowed=1, by_seam={"none": 1, "hook": 2}, by_decider={"frame": 1, "adapter": 2})
    line = line_of(SessionEnded(model_usage={"zz": Usage(), "aa": Usage()}, census=census))
    assert b'"by_seam":{"hook":2,"none":1}' in line and b'"by_decider":{"adapter":2,"frame":1}' in line
    assert line.index(b'"aa"') < line.index(b'"zz"')


def test_string_escapes_follow_rule_1():
    text = "".join(chr(i) for i in range(0x20)) + "\x7f/é😀\u2028\"\\"
    line = line_of(Text(text=text))
    assert json.dumps(text, ensure_ascii=False).encode() in line
    assert b"\\u001f" in line and b"\\u001F" not in line and b"\\n" in line and b"\\b" in line
    assert "é😀".encode() in line and b"\\/" not in line


def test_non_finite_float_is_null_and_exponent_in_rust_form():  # checklist 6
    line = line_of(UsageReport(usage=Usage(cost_usd=math.nan)))
    assert b'"cost_usd":null' in line
    line = line_of(SessionEnded(total_cost_usd=math.inf, census=DecisionCensus()))
    assert b'"total_cost_usd":null' in line
    assert b'"cost_usd":1e-7' in line_of(UsageReport(usage=Usage(cost_usd=1e-7)))
    assert b'"cost_usd":1e16' in line_of(UsageReport(usage=Usage(cost_usd=1e16)))
    assert b'"cost_usd":0.25' in line_of(UsageReport(usage=Usage(cost_usd=0.25)))


@pytest.mark.parametrize("event", [
    TurnStarted(turn=True), ThinkingEstimate(estimate=False), ThinkingEstimate(estimate=1, delta=True),
    SessionEnded(num_turns=True, census=DecisionCensus()), SessionEnded(census=DecisionCensus(allowed=True)),
    SessionEnded(census=DecisionCensus(by_seam={"hook": True})), UsageReport(usage=Usage(input_tokens=True)),
    TurnStarted(turn=2.0), TurnStarted(turn=-1), TurnStarted(turn=2**32), ThinkingEstimate(estimate=2**64),
    UsageReport(usage=Usage(cost_usd=True)), ToolRequested(call_id="c", name="n", input=None, decision_required=1, seam="hook"),
])
def test_writer_never_writes_a_bool_or_bad_number_where_an_int_is_expected(event):  # checklist 6
    with pytest.raises(ValueError):
        line_of(event)


def test_bad_envelope_arguments_are_refused():
    with pytest.raises(ValueError):
        encode_event_line(True, "r", Text(text="x"))
    with pytest.raises(ValueError):
        encode_event_line(0, "r", Text(text="x"))
    with pytest.raises(TypeError):
        encode_event_line(1, "r", {"event": "text"})
    with pytest.raises(TypeError):
        encode_event_line(1, 5, Text(text="x"))


# --- decoding (the wire rule “decoding a line”) -----------------------------------------------------------------

E = '{"format":"metaharness.event/1","seq":1,"run":"r",'


def err(line: bytes | str) -> str:
    with pytest.raises(LineError) as info:
        decode_event_line(line.encode() if isinstance(line, str) else line)
    return info.value.message


def test_twenty_event_names_in_canonical_order():  # checklist 9
    assert list(EVENT_NAMES) == CANONICAL_EVENTS


def test_decoder_steps_in_order_with_fixed_messages():  # checklist 7
    assert err("{not json").startswith("not a JSON object: ")
    assert err("[1,2]") == "not a JSON object: the line is JSON but not an object"
    assert err('"text"') == "not a JSON object: the line is JSON but not an object"
    assert err('{"seq":1,"event":"nope"}') == 'no format tag, expected "metaharness.event/1"'
    assert err('{"format":7,"event":"nope"}') == 'no format tag, expected "metaharness.event/1"'
    assert err('{"format":"metaharness.event/2","event":"nope"}') == 'unknown format tag "metaharness.event/2", expected "metaharness.event/1"'
    assert err('{"format":"metaharness.command/1","event":"text"}') == 'unknown format tag "metaharness.command/1", expected "metaharness.event/1"'
    assert err(E + '"event":"text.delta","text":"x"}') == 'unknown event name "text.delta"'
    assert err(E + '"text":"x"}') == 'unknown event name ""'
    assert err(E + '"event":5}') == 'unknown event name ""'
    assert err(E + '"event":"text"}') == "malformed text: missing field `text`"
    assert err(E + '"event":"turn.started","turn":"1"}') == 'malformed turn.started: invalid type: string "1", expected u32'
    assert err('{"format":"metaharness.event/1","run":"r","event":"text","text":"x"}') == "malformed text: missing field `seq`"


def test_unknown_keys_ignored_at_every_level():  # checklist 8
    env, ev = decode_event_line((E + '"zzz":{"a":1},"event":"tool.decided","call_id":"c","decision":{"decision":"deny","reason":"r","extra":1},'
                                 '"decided_by":"frame","seam":"hook","latency_ms":null,"more":[1]}').encode())
    assert ev == ToolDecided(call_id="c", decision=__import__("metaharness.protocol", fromlist=["Deny"]).Deny(reason="r"), decided_by="frame", seam="hook")
    _, ev = decode_event_line((E + '"event":"rate_limit","info":{"status":"s","unknown":true}}').encode())
    assert ev.info.status == "s"


def test_optional_fields_may_be_missing_required_may_not():
    _, ev = decode_event_line((E + '"event":"tool.result","call_id":"c"}').encode())
    assert ev == ToolResult(call_id="c")
    assert err(E + '"event":"session.ended"}') == "malformed session.ended: missing field `census`"
    assert err(E + '"event":"stream.closed","events":0,"reason":"error"}') == "malformed stream.closed: missing field `run_id`"
    _, ev = decode_event_line((E + '"event":"stream.closed","events":0,"reason":"error","run_id":"r"}').encode())
    assert ev.process.__struct_config__.tag == "unknown"


@pytest.mark.parametrize("payload, detail", [
    ('"event":"turn.started","turn":NaN', None),
    ('"event":"turn.started","turn":Infinity', None),
    ('"event":"turn.started","turn":-Infinity', None),
    ('"event":"turn.started","turn":2.0', "invalid type: floating point `2.0`, expected u32"),
    ('"event":"turn.started","turn":true', "invalid type: boolean `true`, expected u32"),
    ('"event":"turn.started","turn":-1', "invalid value: integer `-1`, expected u32"),
    ('"event":"turn.started","turn":4294967296', "invalid value: integer `4294967296`, expected u32"),
    ('"event":"thinking.estimate","estimate":18446744073709551616', "invalid value: integer `18446744073709551616`, expected u64"),
    ('"event":"tool.result","call_id":"c","bytes":18446744073709551616', "invalid value: integer `18446744073709551616`, expected u64"),
    ('"event":"session.ended","usage":{"input_tokens":18446744073709551616},"census":{"allowed":0,"denied":0,"replaced":0,"abstained":0,"by_seam":{},"by_decider":{}}', "invalid value: integer `18446744073709551616`, expected u64"),
    ('"event":"tool.result","call_id":"c","exit_code":2147483648', "invalid value: integer `2147483648`, expected i32"),
    ('"event":"text","text":"\\ud800"', None),
    ('"event":"text","text":"\\udc00 x"', None),
    ('"event":"tool.decided","call_id":"c","decision":{"decision":"maybe"},"decided_by":"frame","seam":"hook"',
     "unknown variant `maybe`, expected one of `allow`, `deny`, `replace`, `abstain`"),
    ('"event":"tool.decided","call_id":"c","decision":"allow","decided_by":"frame","seam":"hook"',
     'invalid type: string "allow", expected internally tagged enum Decision'),
    ('"event":"tool.decided","call_id":"c","decision":{"decision":"allow"},"decided_by":"frame","seam":"hooky"',
     "unknown variant `hooky`, expected one of `registration`, `hook`, `control_request`, `owned_tool`, `none`"),
])
def test_rejected_values(payload, detail):  # checklist 8
    message = err(E + payload + "}")
    if detail is None:
        assert message.startswith("not a JSON object: ")
    else:
        assert message.endswith(": " + detail), message


def test_u64_ceiling_itself_is_accepted():
    _, ev = decode_event_line((E + '"event":"thinking.estimate","estimate":18446744073709551615,"delta":-9223372036854775808}').encode())
    assert ev.estimate == 2**64 - 1
    env, _ = decode_event_line(b'{"format":"metaharness.event/1","seq":18446744073709551615,"run":"r","event":"text","text":"x"}')
    assert env.seq == 2**64 - 1


def test_duplicate_keys_last_wins():
    env, ev = decode_event_line((E + '"event":"text","text":"a","text":"b","seq":5}').encode())
    assert ev.text == "b" and env.seq == 5
    assert err('{"format":"metaharness.event/1","seq":1,"run":"r","event":"text","text":"a","format":"x"}').startswith("unknown format tag \"x\"")


def test_any_valid_json_number_is_read_for_floats():
    _, ev = decode_event_line((E + '"event":"usage","usage":{"cost_usd":1E-7}}').encode())
    assert ev.usage.cost_usd == 1e-7
    _, ev = decode_event_line((E + '"event":"usage","usage":{"cost_usd":3}}').encode())
    assert ev.usage.cost_usd == 3


def test_non_utf8_event_line():
    assert err(b'{"format":"metaharness.event/1","seq":1,"run":"r","event":"text","text":"\xff"}') == (
        "not a JSON object: the line is not valid UTF-8: the first invalid byte sequence starts at byte offset 73")
