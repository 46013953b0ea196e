"""The stream writer and the stream verdict (the wire rule “whole stream”, the wire rule “stream.closed — the completeness marker”; checklist 2, 19, 22)."""

from __future__ import annotations

import json

import pytest

from metaharness.protocol import EventWriter, StreamClosedError, check_stream, decode_event_line, encode_event_line
from metaharness.protocol.events import StreamClosed, Text, TurnStarted, WarningEvent
from metaharness.protocol.values import Exited


def make(n: int = 3, close: bool = True, run: str = "oharness-1") -> bytes:
    out: list[bytes] = []
    w = EventWriter(out.append, run)
    for i in range(n):
        w.write(Text(text=f"t{i}"), at="2026-01-01T00:00:00.000Z" if i % 2 else None)
    if close:
        w.close("completed", Exited(code=0))
    return b"".join(out)


def test_writer_assigns_seq_and_closes_exactly_once():  # checklist 2, 19
    out: list[bytes] = []
    w = EventWriter(out.append, "claude-7")
    assert (w.run, w.lines_written, w.closed) == ("claude-7", 0, False)
    assert [w.write(TurnStarted(turn=1)), w.write(Text(text="x")), w.write(WarningEvent(code="C", message="m"))] == [1, 2, 3]
    w.close("completed", Exited(code=0))
    assert w.closed and w.lines_written == 4
    decoded = [decode_event_line(l) for l in out]
    assert [e.seq for e, _ in decoded] == [1, 2, 3, 4]
    assert {e.run for e, _ in decoded} == {"claude-7"}
    env, last = decoded[-1]
    assert last == StreamClosed(process=Exited(code=0), events=3, reason="completed", run_id="claude-7")
    assert env.at is None
    with pytest.raises(StreamClosedError):
        w.write(Text(text="late"))
    with pytest.raises(StreamClosedError):
        w.close("error")
    assert len(out) == 4


def test_close_defaults_to_unknown_process_and_empty_stream_counts_zero():
    out: list[bytes] = []
    w = EventWriter(out.append, "r")
    w.close("error")
    assert json.loads(out[0]) == {"format": "metaharness.event/1", "seq": 1, "run": "r", "event": "stream.closed",
                                  "process": {"kind": "unknown"}, "events": 0, "reason": "error", "run_id": "r"}


def test_writer_refuses_stream_closed_through_write_and_bad_values():
    out: list[bytes] = []
    w = EventWriter(out.append, "r")
    with pytest.raises(ValueError):
        w.write(StreamClosed(events=0, reason="error", run_id="r"))
    with pytest.raises(ValueError):
        w.write(TurnStarted(turn=True))
    with pytest.raises(ValueError):
        w.close("finished")
    assert out == [] and w.write(Text(text="x")) == 1  # a refused value spends no seq


def test_complete_stream():  # checklist 22
    v = check_stream(make())
    assert (v.status, v.exit_code, v.lines, v.run, v.line) == ("complete", 0, 4, "oharness-1", None)


def test_truncated_streams():  # checklist 22
    assert check_stream(make(close=False)).status == "truncated"
    assert check_stream(b"").exit_code == 3
    data = make()
    cut = data[: len(data) - 20]  # the marker line cut before its "\n"
    v = check_stream(cut)
    assert (v.status, v.exit_code) == ("truncated", 3)


def test_unterminated_last_line_that_decodes_still_counts():
    assert check_stream(make().rstrip(b"\n")).status == "complete"


def test_inconsistent_streams():  # checklist 22
    lines = make().splitlines(keepends=True)
    # marker repeated
    out: list[bytes] = []
    twice = b"".join(lines) + encode_event_line(5, "oharness-1", StreamClosed(events=4, reason="error", run_id="oharness-1"))
    v = check_stream(twice)
    assert (v.status, v.line, v.exit_code) == ("inconsistent", 5, 1)
    # marker not last
    not_last = b"".join(lines) + encode_event_line(5, "oharness-1", Text(text="after"))
    assert (check_stream(not_last).status, check_stream(not_last).line) == ("inconsistent", 5)
    # wrong count
    wrong = b"".join(lines[:3]) + encode_event_line(4, "oharness-1", StreamClosed(events=2, reason="completed", run_id="oharness-1"))
    v = check_stream(wrong)
    assert (v.status, v.line) == ("inconsistent", 4) and "counts 2" in v.reason
    # run_id disagrees with run
    bad_id = b"".join(lines[:3]) + encode_event_line(4, "oharness-1", StreamClosed(events=3, reason="completed", run_id="other"))
    assert check_stream(bad_id).status == "inconsistent"


def test_invalid_lines_gaps_and_run_changes():
    lines = make().splitlines(keepends=True)
    v = check_stream(lines[0] + b'{"format":"metaharness.event/1"}\n' + b"".join(lines[2:]))
    assert (v.status, v.line, v.exit_code) == ("invalid", 2, 1)
    assert "line 2" in v.reason and "unknown event name" in v.reason
    v = check_stream(lines[0] + b"\n" + b"".join(lines[1:]))
    assert (v.status, v.line) == ("invalid", 2)
    gap = lines[0] + b"".join(lines[2:])
    v = check_stream(gap)
    assert (v.status, v.line) == ("invalid", 2) and "seq 3" in v.reason
    other_run = lines[0] + encode_event_line(2, "other", Text(text="x")) + b"".join(lines[2:])
    v = check_stream(other_run)
    assert (v.status, v.line) == ("invalid", 2) and '"other"' in v.reason
    # an invalid line before the end wins over a missing marker
    assert check_stream(lines[0] + b"junk\n" + lines[1]).status == "invalid"


def test_at_from_unix_ms():  # checklist 3: codex's emittedAtMs rendered, not a clock reading
    from metaharness.protocol import at_from_unix_ms

    assert at_from_unix_ms(1795957611960) == "2026-11-29T13:06:51.960Z"
    assert at_from_unix_ms(0) == "1970-01-01T00:00:00.000Z"
    assert at_from_unix_ms(1787453878487) == "2026-08-23T02:57:58.487Z"
    with pytest.raises(TypeError):
        at_from_unix_ms(1.5)


def test_a_plain_command_result_skips_only_a_walk_that_finds_nothing():
    # encode_event_line writes an Ok or a Refused-with-a-Refusal outcome without the value
    # checker; that is sound only while those structs hold nothing the checker polices.
    import msgspec
    import msgspec.inspect as mi

    from metaharness.protocol._typeplan import _build
    from metaharness.protocol.events import CommandResult
    from metaharness.protocol.stream import encode_event_line
    from metaharness.protocol.values import Ok, Refusal, Refused, Usage, refused

    policed = (mi.IntType, mi.FloatType, mi.BoolType, mi.StructType, mi.UnionType, mi.ListType, mi.DictType)
    for cls in (Ok, Refusal):
        for field in mi.type_info(cls).fields:
            kinds = field.type.types if isinstance(field.type, mi.UnionType) else (field.type,)
            assert not any(isinstance(k, policed) and not isinstance(k, mi.UnionType) for k in kinds), (cls, field)
    assert [f.name for f in mi.type_info(Refused).fields] == ["refused"]
    for outcome in (Ok(), Ok(applies_at="next turn"), refused("UNKNOWN_CALL", "nope")):
        event = CommandResult(id="c1", outcome=outcome)
        _build(CommandResult)(event, "$")  # the walk it skips passes
        assert encode_event_line(3, "r", event) == (
            b'{"format":"metaharness.event/1","seq":3,"run":"r",' + msgspec.json.encode(event)[1:] + b"\n")
    # Anything else in the outcome is still walked.
    with pytest.raises(ValueError):
        encode_event_line(3, "r", CommandResult(id="c1", outcome=Refused(refused=Usage(input_tokens=True))))
