"""The wire rule “decoding a line”: duplicate keys — the last one wins, for every key at every level
(`id`, `command`, `format`, the payload, the decision's own tag), in command and
event lines alike. Property: a line that repeats keys decodes exactly as the object
holding only each key's last occurrence."""

from __future__ import annotations

import json

from hypothesis import example, given, settings, strategies as st
from examples import examples

from metaharness.protocol.decode import LineError, decode_command_line, decode_event_line
from metaharness.protocol.commands import Halt, ToolDecide
from metaharness.protocol.values import Allow, Deny

FORMAT = "metaharness.command/1"

# JSON values an earlier (losing) occurrence may hold: anything, well-typed or not.
scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.text(max_size=8),
                    st.sampled_from(["halt", "allow", "deny", "-", FORMAT, "tool.decide"]))
junk = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                     st.dictionaries(st.text(max_size=4), inner, max_size=3)),
                    max_leaves=6)

decisions = st.one_of(
    st.just({"decision": "allow"}), st.just({"decision": "abstain"}),
    st.builds(lambda r: {"decision": "deny", "reason": r}, st.text(min_size=1, max_size=8)),
    st.builds(lambda i: {"decision": "replace", "input": i}, st.dictionaries(st.text(max_size=3), scalars, max_size=2)),
)
commands = st.one_of(
    st.builds(lambda i, r: {"id": i, "command": "halt", "reason": r}, st.text(max_size=6), st.text(max_size=6)),
    st.builds(lambda i, r: {"id": i, "command": "interrupt", "reason": r}, st.text(max_size=6), st.text(max_size=6)),
    st.builds(lambda i, t: {"id": i, "command": "message.inject", "text": t}, st.text(max_size=6), st.text(max_size=6)),
    st.builds(lambda i, p: {"id": i, "command": "permission.set", "posture": p}, st.text(max_size=6), st.text(max_size=6)),
    st.builds(lambda i, c, d: {"id": i, "command": "tool.decide", "call_id": c, "decision": d},
              st.text(max_size=6), st.text(max_size=6), decisions),
)


def render(pairs: list) -> str:
    """A JSON object text from (key, value) pairs; a value that is a `Pairs` renders the same way."""
    return "{" + ",".join(json.dumps(k) + ":" + (render(v.pairs) if isinstance(v, Pairs) else json.dumps(v))
                          for k, v in pairs) + "}"


class Pairs:
    def __init__(self, pairs: list) -> None:
        self.pairs = pairs


def last_wins(pairs: list) -> dict:
    out: dict = {}
    for key, value in pairs:
        out.pop(key, None)  # the last occurrence also takes the last position
        out[key] = last_wins(value.pairs) if isinstance(value, Pairs) else value
    return out


@st.composite
def repeated(draw, obj: dict) -> list:
    """`obj` as pairs, with losing occurrences of some of its keys (and of the decision's keys)
    inserted at random earlier positions."""
    pairs: list = []
    for key, value in obj.items():
        if key == "decision" and isinstance(value, dict):
            value = Pairs(draw(repeated(value)))
        pairs.append((key, value))
    for key in draw(st.lists(st.sampled_from(list(obj)), max_size=4)):
        index = next(i for i, (k, _) in enumerate(pairs) if k == key)
        position = draw(st.integers(0, index))
        pairs.insert(position, (key, draw(junk)))
    return pairs


@settings(max_examples=examples(400), deadline=None)
@given(st.data())
def test_a_command_with_repeated_keys_decodes_as_its_last_occurrences(data):
    obj = {"format": FORMAT, **data.draw(commands)}
    pairs = data.draw(repeated(obj))
    if data.draw(st.booleans()):  # a losing format tag too
        pairs.insert(0, ("format", data.draw(junk)))
    line = render(pairs).encode()
    expected = decode_command_line(json.dumps(last_wins(pairs)).encode())
    assert decode_command_line(line) == expected


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["format", "id", "command", "reason", "call_id", "decision", "text"]),
                          st.one_of(junk, st.sampled_from([FORMAT, "halt", "tool.decide", "x"]))),
                min_size=1, max_size=8))
# Found by this property: two faults (the decision, the id) and the decision repeated around the
# id. The answer names the fault the object of last occurrences has first, the id's.
@example([("format", FORMAT), ("command", "tool.decide"), ("decision", FORMAT), ("id", None), ("decision", FORMAT)])
def test_any_object_with_repeats_is_answered_as_its_last_occurrences(pairs):
    """Valid or not, the answer (command, or refusal with id and reason) is the same."""
    line = render(pairs).encode()
    assert decode_command_line(line) == decode_command_line(json.dumps(last_wins(pairs)).encode())


def test_the_cases_of_the_issue():
    f = '{"format":"metaharness.command/1",'
    assert decode_command_line((f + '"id":5,"id":"z","command":"halt","reason":"r"}').encode()) == Halt(id="z", reason="r")
    assert decode_command_line((f + '"id":"a","command":"steer","text":"t","command":"halt","reason":"r"}').encode()) \
        == Halt(id="a", reason="r")
    line = f + '"id":"a","command":"tool.decide","call_id":"c","decision":{"decision":"allow","decision":"deny","reason":"no"}}'
    assert decode_command_line(line.encode()) == ToolDecide(id="a", call_id="c", decision=Deny(reason="no"))
    line = f + '"id":"a","command":"tool.decide","call_id":"c","decision":{"decision":"deny","decision":"allow"}}'
    assert decode_command_line(line.encode()) == ToolDecide(id="a", call_id="c", decision=Allow())
    refusal = decode_command_line((f + '"id":"a","command":"halt","reason":"r","id":7}').encode())
    assert refusal.id == "-"  # the last id is not a string


def test_event_lines_too():
    e = '{"format":"metaharness.event/1","seq":1,"run":"r",'
    _, event = decode_event_line((e + '"event":"text","text":5,"text":"b"}').encode())
    assert event.text == "b"
    _, event = decode_event_line((e + '"event":"warning","event":"text","text":"b"}').encode())
    assert event.text == "b"
    try:
        decode_event_line((e + '"event":"text","text":"b","event":"nope"}').encode())
    except LineError as exc:
        assert exc.message == 'unknown event name "nope"'
    else:
        raise AssertionError("the last event name was not read")


def test_the_typed_decoder_refuses_disagreeing_tags_which_the_fast_path_relies_on():
    """decode_command_line's fast path takes msgspec's typed decode of a line with repeated keys
    as is: that decode keeps each field's last occurrence and refuses a union tag whose
    occurrences disagree (in either order, at either level). Should msgspec ever read one
    occurrence of a tag and ignore the other, this fails before the property above might."""
    import msgspec

    from metaharness.protocol.commands import Command

    typed = msgspec.json.Decoder(Command).decode
    f = '{"format":"metaharness.command/1","id":"a",'
    for line in ('"command":"halt","command":"interrupt","reason":"r"}',
                 '"command":"interrupt","reason":"r","command":"halt"}',
                 '"command":"tool.decide","call_id":"c","decision":{"decision":"allow","decision":"deny","reason":"r"}}',
                 '"command":"tool.decide","call_id":"c","decision":{"decision":"deny","reason":"r","decision":"allow"}}'):
        try:
            typed((f + line).encode())
        except msgspec.ValidationError:
            pass
        else:
            raise AssertionError(f"msgspec accepted disagreeing tags: {line}")
    assert typed((f + '"command":"halt","reason":"x","command":"halt","reason":"y","id":"b"}').encode()) == Halt(id="b", reason="y")
    line = f + '"command":"tool.decide","call_id":"c","decision":{"decision":"deny","reason":"r"},"decision":{"decision":"allow"}}'
    assert typed(line.encode()) == ToolDecide(id="a", call_id="c", decision=Allow())
    line = f + '"command":"tool.decide","call_id":"c","decision":{"decision":"replace","input":{"command":"a","command":"b"}}}'
    assert typed(line.encode()).decision.input == {"command": "b"}


# --- the slow path's shortcut: a line that surely repeats no key skips the repeats reader ----

keys = st.sampled_from(["a", "b", "ab", "", "a\\", 'q"', "é", "\u2028", ":", ","])
nested = st.recursive(
    scalars | keys,
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.builds(Pairs, st.lists(st.tuples(keys, inner), max_size=4))),
    max_leaves=10)


def _repeats(pairs: list) -> bool:
    def walk(value) -> bool:
        if isinstance(value, Pairs):
            names = [k for k, _ in value.pairs]
            return len(set(names)) != len(names) or any(walk(v) for _, v in value.pairs)
        return isinstance(value, list) and any(walk(v) for v in value)
    return walk(Pairs(pairs))


def _render_any(value) -> str:
    if isinstance(value, Pairs):
        return render_nested(value.pairs)
    if isinstance(value, list):
        return "[" + ",".join(_render_any(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def render_nested(pairs: list) -> str:
    """As `render`, with objects inside lists too and text unescaped (a backslash is rarer)."""
    return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + _render_any(v) for k, v in pairs) + "}"


@settings(max_examples=examples(600), deadline=None)
@given(st.lists(st.tuples(keys, nested), max_size=6))
def test_the_no_repeats_shortcut_is_never_wrong(pairs):
    """`_surely_unrepeated` says True only of a text that repeats no key at any level, and says
    it of every such text without a backslash (the one it is there for)."""
    import msgspec

    from metaharness.protocol.decode import _surely_unrepeated

    raw = render_nested(pairs).encode()
    verdict = _surely_unrepeated(raw, msgspec.json.decode(raw))
    if _repeats(pairs):
        assert not verdict
    elif b"\\" not in raw:
        assert verdict


def test_the_shortcut_on_lines_of_the_kind_it_serves():
    from metaharness.protocol.decode import _last_wins
    import msgspec

    for line in (b'{"format":"metaharness.command/1","id":"c","command":"tool.decide","decision":{"decision":"maybe"}}',
                 b'{"a":[{"b":1},{"b":2}],"b":{"a":"a"}}'):
        assert _last_wins(line, msgspec.json.decode(line)) is line
    line = b'{"a":[{"b":1,"b":2}]}'
    assert _last_wins(line, msgspec.json.decode(line)) == b'{"a":[{"b":2}]}'
    line = b'{"a":"x","b":"\\"a\\":1","a":"y"}'
    assert _last_wins(line, msgspec.json.decode(line)) == b'{"b":"\\"a\\":1","a":"y"}'
