"""Command lines (the wire rules “command envelope”, “decoding a line” and “reading stdin”, the wire rule “processing one decoded command” steps 1–2; checklist 10–18 decoder side)."""

from __future__ import annotations

import json

import pytest

from metaharness.protocol import (
    COMMAND_NAMES, COMMAND_TYPES, CommandRefusal, decode_command_line, encode_command_line, well_formedness_refusal,
)
from metaharness.protocol.commands import FrameSet, Halt, ToolDecide
from metaharness.protocol.values import Allow, Deny

from .samples import COMMANDS

F = '{"format":"metaharness.command/1",'


def line(s: str) -> bytes:
    return s.encode()


def refusal(raw: bytes | str) -> CommandRefusal:
    r = decode_command_line(line(raw) if isinstance(raw, str) else raw)
    assert isinstance(r, CommandRefusal), r
    assert r.code == "MALFORMED"
    return r


def test_seven_command_names_in_canonical_order():  # checklist 9
    assert list(COMMAND_NAMES) == ["tool.decide", "frame.set", "message.inject", "steer", "permission.set", "interrupt", "halt"]
    assert {type(c) for c in COMMANDS} == set(COMMAND_TYPES)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: f"{type(c).__name__}-{c.id}")
def test_round_trip_every_command(command):
    raw = encode_command_line(command)
    assert raw.endswith(b"\n")
    obj = json.loads(raw)
    assert list(obj)[:3] == ["format", "id", "command"]
    assert obj["format"] == "metaharness.command/1" and obj["id"] == command.id
    assert list(obj)[3:] == [f for f in type(command).__struct_fields__ if f != "id"]
    assert decode_command_line(raw) == command
    assert decode_command_line(raw.rstrip(b"\n")) == command


def test_spec_example_lines_decode():
    assert decode_command_line(line(F + '"id":"c1","command":"tool.decide","call_id":"x","decision":{"decision":"allow"}}')) == ToolDecide(id="c1", call_id="x", decision=Allow())
    assert decode_command_line(line(F + '"id":"c-4","command":"halt","reason":"budget spent"}')) == Halt(id="c-4", reason="budget spent")
    assert encode_command_line(ToolDecide(id="c2", call_id="…", decision=Deny(reason="this step only reads; propose the change instead"))) == (
        '{"format":"metaharness.command/1","id":"c2","command":"tool.decide","call_id":"…","decision":{"decision":"deny",'
        '"reason":"this step only reads; propose the change instead"}}\n').encode()


@pytest.mark.parametrize("raw", [b"", b" ", b"\t \r", b"\r", b"   \t\t  ", b"\n", b" \r\n"])
def test_blank_lines_get_no_answer(raw):  # checklist 11
    assert decode_command_line(raw) is None


def test_flat_decision_exact_reason():  # checklist 12
    r = refusal(F + '"id":"c1","command":"tool.decide","call_id":"x","decision":"allow"}')
    assert r == CommandRefusal("c1", 'malformed tool.decide: invalid type: string "allow", expected internally tagged enum Decision')


def test_serde_wordings():
    assert refusal(F + '"id":"c1","command":"tool.decide","call_id":"x","decision":{"decision":"maybe"}}').reason == (
        "malformed tool.decide: unknown variant `maybe`, expected one of `allow`, `deny`, `replace`, `abstain`")
    assert refusal(F + '"id":"c1","command":"tool.decide","decision":{"decision":"allow"}}').reason == "malformed tool.decide: missing field `call_id`"
    assert refusal(F + '"id":"c1","command":"tool.decide","call_id":"x","decision":{"decision":"deny"}}').reason == "malformed tool.decide: missing field `reason`"
    assert refusal(F + '"id":"c1","command":"tool.decide","call_id":"x","decision":{}}').reason == "malformed tool.decide: missing field `decision`"
    assert refusal(F + '"id":"c1","command":"tool.decide","call_id":7,"decision":{"decision":"allow"}}').reason == (
        "malformed tool.decide: invalid type: integer `7`, expected a string")
    assert refusal(F + '"id":"h","command":"halt"}').reason == "malformed halt: missing field `reason`"
    assert refusal(F + '"id":"h","command":"interrupt"}').reason == "malformed interrupt: missing field `reason`"
    assert refusal(F + '"id":"f","command":"frame.set","frame":[]}').reason == "malformed frame.set: invalid type: sequence, expected a map"


@pytest.mark.parametrize("raw, reason", [
    ("not json at all", None),
    ("{", None),
    ('{"id":"c1"', None),
    ("[1,2,3]", "not a JSON object: the line is JSON but not an object"),
    ('"a string"', "not a JSON object: the line is JSON but not an object"),
    ("42", "not a JSON object: the line is JSON but not an object"),
    ("null", "not a JSON object: the line is JSON but not an object"),
])
def test_not_json_or_not_object_is_answered_under_dash(raw, reason):  # checklist 13
    r = refusal(raw)
    assert r.id == "-"
    if reason is None:
        assert r.reason.startswith("not a JSON object: ")
    else:
        assert r.reason == reason


@pytest.mark.parametrize("raw, reason", [
    ('{"id":"q1","command":"halt","reason":"x"}', 'no format tag, expected "metaharness.command/1"'),
    ('{"format":1,"id":"q1","command":"halt","reason":"x"}', 'no format tag, expected "metaharness.command/1"'),
    ('{"format":"metaharness.command/2","id":"q1","command":"halt","reason":"x"}', 'unknown format tag "metaharness.command/2", expected "metaharness.command/1"'),
    ('{"format":"metaharness.event/1","id":"q1","command":"halt","reason":"x"}', 'unknown format tag "metaharness.event/1", expected "metaharness.command/1"'),
    (F + '"id":"q1","command":"tool.decline"}', 'unknown command name "tool.decline"'),
    (F + '"id":"q1"}', 'unknown command name ""'),
    (F + '"id":"q1","command":null}', 'unknown command name ""'),
    (F + '"id":"q1","command":"halt","reason":5}', "malformed halt: invalid type: integer `5`, expected a string"),
    (F + '"id":"q1","command":"steer"}', "malformed steer: missing field `text`"),
    (F + '"id":"q1","command":"permission.set","posture":["plan"]}', "malformed permission.set: invalid type: sequence, expected a string"),
    (F + '"id":"q1","command":"message.inject","text":"x","format":"metaharness.command/9"}', 'unknown format tag "metaharness.command/9", expected "metaharness.command/1"'),
])
def test_object_with_string_id_is_answered_under_that_id(raw, reason):  # checklist 14
    assert refusal(raw) == CommandRefusal("q1", reason)


@pytest.mark.parametrize("id_part", ['', '"id":7,', '"id":null,', '"id":["a"],', '"id":{"x":1},'])
def test_object_without_string_id_is_answered_under_dash(id_part):  # checklist 14
    assert refusal('{"format":"metaharness.command/1",' + id_part + '"command":"halt","reason":"x"}').id == "-"
    assert refusal('{' + id_part + '"command":"nope"}').id == "-"


@pytest.mark.parametrize("raw, offset", [
    (b'{"format":"metaharness.command/1","id":"c\xff","command":"halt","reason":"x"}', 41),
    (b"\xff", 0),
    (b"\xc3", 0),
    (b'{"id":"ok","text":"\xe2\x82"}', 19),
    (b'{"id":"\xed\xa0\x80"}', 7),  # an encoded surrogate is not UTF-8
    (b"abc\xf8", 3),
])
def test_non_utf8_refused_under_dash_with_offset_and_nothing_quoted(raw, offset):  # checklist 15
    r = refusal(raw)
    assert r.id == "-"
    assert r.reason == f"the line is not valid UTF-8: the first invalid byte sequence starts at byte offset {offset}"
    assert r.reason.isascii()


def test_reserved_id():  # checklist 17
    r = refusal(F + '"id":"-","command":"halt","reason":"x"}')
    assert r == CommandRefusal("-", 'the id "-" is reserved for lines whose id could not be read')
    # every answer under "-" is a refusal: a malformed line with id "-" is refused too
    assert refusal(F + '"id":"-","command":"halt"}').id == "-"


def test_ids_echoed_verbatim_including_empty_and_duplicates():  # checklist 18 (decoder side)
    raw = line(F + '"id":"","command":"halt","reason":"x"}')
    assert decode_command_line(raw) == Halt(id="", reason="x")
    assert decode_command_line(raw) == decode_command_line(raw)  # the same id twice is two lines, two results
    assert decode_command_line(line(F + '"id":" \\u00e9/\\"","command":"halt","reason":"x"}')).id == ' é/"'
    assert refusal(F + '"id":"","command":"nope"}').id == ""


def test_reading_continues_after_every_kind_of_bad_line():  # checklist 16 (decoder side)
    bad = [b"\xff\xfe", b"{", b"[]", line(F + '"id":"a","command":"x"}'), line('{"id":"a"}'), line(F + '"id":"-","command":"halt","reason":"x"}'),
           line(F + '"id":"a","command":"tool.decide","call_id":"x","decision":"allow"}'), b"\x00" * 10, b"{" * 100000]
    good = line(F + '"id":"ok","command":"halt","reason":"x"}')
    for b in bad:
        assert isinstance(decode_command_line(b), CommandRefusal)
        assert decode_command_line(good) == Halt(id="ok", reason="x")


def test_every_nonblank_line_yields_exactly_one_answer():  # checklist 10 (decoder side)
    lines = [b"", b"  ", line(F + '"id":"a","command":"halt","reason":"x"}'), b"junk", b"\t\r", line('{"id":"b"}')]
    answers = [decode_command_line(b) for b in lines]
    assert [a is None for a in answers] == [True, True, False, False, True, False]
    assert [a.id for a in answers if a is not None] == ["a", "-", "b"]


def test_unknown_keys_ignored_everywhere():
    c = decode_command_line(line(F + '"id":"a","zzz":1,"command":"tool.decide","call_id":"x","decision":{"decision":"deny","reason":"r","x":[1]},"more":{}}'))
    assert c == ToolDecide(id="a", call_id="x", decision=Deny(reason="r"))


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", '"\\ud800"', '"\\udc00 x"', '"a\\ud83dz"'])
def test_json_python_accepts_but_serde_rejects(value):  # checklist 8
    r = refusal(F + '"id":"a","command":"halt","reason":' + value + "}")
    assert r.id == "-" and r.reason.startswith("not a JSON object: ")


def test_paired_surrogate_escape_is_text():
    assert decode_command_line(line(F + '"id":"a","command":"halt","reason":"\\ud83d\\ude00"}')).reason == "😀"


def test_duplicate_keys_last_wins():
    assert decode_command_line(line(F + '"id":"a","id":"b","command":"halt","reason":"x"}')).id == "b"
    assert refusal(F + '"id":"a","command":"halt","reason":"x","format":"other"}').reason.startswith('unknown format tag "other"')
    assert decode_command_line(line('{"format":"x",' + F[1:] + '"id":"a","command":"halt","reason":"x"}')) == Halt(id="a", reason="x")


def test_json_dumps_spacing_reads_as_the_compact_line():
    """Python's json.dumps writes `{"format": "…", …}`; the fast path takes that spacing too, and
    a later format key or another tag still decides as it does for the compact line."""
    for command in COMMANDS:
        spaced = json.dumps(json.loads(encode_command_line(command))).encode()
        assert spaced.startswith(b'{"format": "metaharness.command/1", ')
        assert decode_command_line(spaced) == command
    spaced = '{"format": "metaharness.command/1", "id": "a", "command": "halt", "reason": "x"'
    assert decode_command_line(line(spaced + "}")) == Halt(id="a", reason="x")
    assert refusal(spaced + ', "format": "other"}').reason.startswith('unknown format tag "other"')
    assert refusal(spaced.replace("command/1", "command/12") + "}").reason.startswith('unknown format tag')
    assert refusal(spaced.replace('"id": "a"', '"id": "-"') + "}").id == "-"


def test_str_input_and_trailing_newline_are_accepted():
    assert decode_command_line(F + '"id":"a","command":"halt","reason":"é"}\n') == Halt(id="a", reason="é")


# --- the wire rule “processing one decoded command” step 2 -----------------------------------------------------------------------


def test_deny_with_blank_reason_is_not_well_formed():  # checklist 23 (the check itself)
    for reason in ["", " ", "\t\n "]:
        c = decode_command_line(line(F + '"id":"a","command":"tool.decide","call_id":"x","decision":{"decision":"deny","reason":' + json.dumps(reason) + "}}"))
        assert isinstance(c, ToolDecide)
        assert well_formedness_refusal(c).startswith("malformed tool.decide: ")
    assert well_formedness_refusal(ToolDecide(id="a", call_id="x", decision=Deny(reason=" no "))) is None
    assert well_formedness_refusal(Halt(id="a", reason="")) is None


def test_frame_set_well_formedness(golden_obj):
    assert well_formedness_refusal(FrameSet(id="f", frame=golden_obj)) is None
    stale = dict(golden_obj, step=dict(golden_obj["step"], index=3))
    assert well_formedness_refusal(FrameSet(id="f", frame=stale)).startswith("malformed frame.set: the stated digest ")
    wrong = dict(golden_obj, format="metaharness.frame/2")
    assert well_formedness_refusal(FrameSet(id="f", frame=wrong)) == (
        'malformed frame.set: unknown format tag "metaharness.frame/2", expected "metaharness.frame/1"')
    no_format = {k: v for k, v in golden_obj.items() if k != "format"}
    assert well_formedness_refusal(FrameSet(id="f", frame=no_format)) is None
