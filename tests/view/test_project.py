"""`metaharness project`: the trace-ir/1 document of the trace-ir/1 projection rules (checklist items 66–69).

Goldens under fixtures/*.trace-ir.json are byte-exact. They were produced by this code
and then read line by line against the trace-ir/1 projection rules; the structural tests below check the same
facts independently of the goldens, so a golden cannot silently encode a mistake the
spec would catch. Regenerate after an intended change with
`cd tests/view && metaharness project fixtures/X.jsonl --out fixtures/X.trace-ir.json`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json

import pytest

from metaharness.protocol.events import EVENT_NAMES
from metaharness.view.project import dump_document, format_float, project_stream, timestamp_ms

from .conftest import FIXTURES, invoke, stream_bytes

STREAMS = ["all_events", "compare_claude", "compare_codex", "refused_start", "truncated", "empty"]

# the trace-ir/1 projection rules family table, written out again here rather than imported.
SPEC_FAMILY = {
    "session.started": "session_start",
    "session.ended": "run_outcome",
    "usage": "run_outcome",
    "text": "assistant_text",
    "thinking": "assistant_thinking",
    "thinking.estimate": "thinking_estimate",
    "injection": "synthetic_injection",
    "tool.requested": "tool_call",
    "tool.result": "tool_result",
    "rate_limit": "rate_limit",
    "opaque": "opaque",
    "stream.closed": "stream_closed",
    **{
        name: "unk"
        for name in (
            "step.entered", "step.left", "turn.started", "turn.ended",
            "tool.decided", "command.result", "warning", "auth.expired",
        )
    },
}


def _doc(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.trace-ir.json").read_bytes())


@pytest.mark.parametrize("name", STREAMS)
def test_golden_bytes_on_stdout(name):
    result = invoke(["project", f"fixtures/{name}.jsonl"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout_bytes == (FIXTURES / f"{name}.trace-ir.json").read_bytes()


@pytest.mark.parametrize("name", STREAMS)
def test_golden_bytes_with_out(name, tmp_path):
    out = tmp_path / "doc.json"
    result = invoke(["project", f"fixtures/{name}.jsonl", "--out", str(out)])
    assert result.exit_code == 0, result.stderr
    assert result.stdout_bytes == b""
    assert out.read_bytes() == (FIXTURES / f"{name}.trace-ir.json").read_bytes()


def test_projecting_twice_gives_identical_bytes():
    data = (FIXTURES / "all_events.jsonl").read_bytes()
    first = dump_document(project_stream(data, "s"))
    second = dump_document(project_stream(bytes(data), "s"))
    assert first == second


def test_stdin_projects_like_the_file_except_the_source():
    data = (FIXTURES / "compare_codex.jsonl").read_bytes()
    from_stdin = invoke(["project", "-"], input=data)
    assert from_stdin.exit_code == 0
    doc = json.loads(from_stdin.stdout_bytes)
    assert doc["metaharness"]["source"] == "-"
    golden = _doc("compare_codex")
    golden["metaharness"]["source"] = "-"
    assert doc == golden


def test_document_bytes_follow_section_13():
    raw = (FIXTURES / "all_events.trace-ir.json").read_bytes()
    assert raw.endswith(b"}\n") and not raw.endswith(b"\n\n")
    doc = json.loads(raw)
    assert list(doc) == ["format", "transcript_digest", "adapter", "events", "requests", "metaharness"]
    assert doc["format"] == "trace-ir/1"
    assert doc["adapter"] == {"name": "metaharness/project", "written_against": ["metaharness.event/1"]}
    # 2-space indent, ": " after keys, raw non-ASCII
    assert b'\n  "format": "trace-ir/1",\n' in raw
    assert "café ✓".encode() in raw and b"\\u00e9" not in raw
    # the float needing an exponent is written the Rust way (the wire rule “writing an event line” rule 6)
    assert b'"utilization": 1e-7' in raw


def test_writer_equals_json_dumps_where_no_exponent_is_involved():
    for name in ("compare_claude", "compare_codex", "truncated", "empty"):
        doc = _doc(name)
        assert dump_document(doc) == (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode()


@pytest.mark.parametrize(
    "value,text",
    [(1e-07, "1e-7"), (1e16, "1e16"), (1.5e-10, "1.5e-10"), (0.0123, "0.0123"), (2.0, "2.0"), (1e300, "1e300"),
     (float("nan"), "null"), (float("inf"), "null")],
)
def test_floats_are_written_in_rust_form(value, text):
    assert format_float(value) == text


def test_transcript_digest_is_over_the_stream_bytes():
    for name in STREAMS:
        data = (FIXTURES / f"{name}.jsonl").read_bytes()
        assert _doc(name)["transcript_digest"] == hashlib.sha256(data).hexdigest()


def test_every_event_is_a_node_with_its_family():
    lines = (FIXTURES / "all_events.jsonl").read_bytes().splitlines()
    names = [json.loads(line)["event"] for line in lines]
    assert set(names) == set(EVENT_NAMES) and len(EVENT_NAMES) == 20  # the fixture holds all twenty
    doc = _doc("all_events")
    assert len(doc["events"]) == len(lines)
    for position, (node, name, line) in enumerate(zip(doc["events"], names, lines)):
        wire = json.loads(line)
        assert list(node) == ["index", "source_line", "timestamp", "timestamp_ms", "kind"]
        assert node["index"] == position and node["source_line"] == position + 1
        assert node["timestamp"] == wire.get("at")
        kind = node["kind"]
        assert kind["family"] == SPEC_FAMILY[name]
        if kind["family"] == "unk":
            assert list(kind) == ["family", "event_kind", "reason", "payload"]
            assert kind["event_kind"] == name and kind["reason"] == "no trace-ir/1 family"
            payload = kind["payload"]
        else:
            assert list(kind)[0] == "family"
            payload = {k: v for k, v in kind.items() if k != "family"}
        for envelope_key in ("format", "seq", "run", "at", "event"):
            assert envelope_key not in payload
        # payload keys are the line's own payload keys in line (the wire rule “the events”) order, minus unknown keys
        expected = [k for k in wire if k not in ("format", "seq", "run", "at", "event", "x_vendor_extra")]
        assert list(payload) == expected


def test_payload_values_are_as_the_writer_writes_them():
    doc = _doc("all_events")
    nodes = doc["events"]
    read_call = nodes[8]["kind"]
    assert list(read_call["input"]) == ["file_path", "limit", "offset"]  # pass-through sorted (rule 4)
    assert "x_vendor_extra" not in read_call  # unknown keys are dropped as the decoder drops them
    result = nodes[10]["kind"]
    assert list(result["content"][0]) == ["text", "type"]
    assert list(result["tool_use_result"]["file"]) == ["content", "filePath", "numLines"]
    replace = nodes[17]["kind"]["payload"]["decision"]
    assert list(replace) == ["decision", "input"] and list(replace["input"]) == ["content", "file_path"]
    ended = nodes[23]["kind"]
    assert list(ended["model_usage"]) == ["claude-haiku-4", "claude-sonnet-4-5"]  # map sorted (rule 3)
    assert list(ended["census"]["by_decider"]) == ["embedder", "frame"]
    assert list(ended["permission_denials"][0]["tool_input"]) == ["command", "description"]
    # omit-when-absent fields stay omitted; null fields stay null (rule 5)
    bash_call = nodes[11]["kind"]
    assert "subjects" not in bash_call and "policy" not in bash_call and bash_call["deadline_ms"] is None


def test_timestamps():
    doc = _doc("all_events")
    by_line = {node["source_line"]: node for node in doc["events"]}
    assert by_line[1]["timestamp_ms"] == 1787453877120
    assert by_line[5]["timestamp_ms"] == 1787453877450  # +02:00 offset, microseconds truncated
    assert by_line[8]["timestamp"] == "yesterday" and by_line[8]["timestamp_ms"] is None
    assert by_line[2]["timestamp"] is None and by_line[2]["timestamp_ms"] is None


@pytest.mark.parametrize(
    "at",
    ["2026-08-23T02:57:57.120Z", "2026-08-23T04:57:57.450999+02:00", "1969-12-31T23:59:59.999Z",
     "2000-02-29T12:00:00-05:30", "2026-01-01T00:00:00z", "2026-01-01t00:00:00.1Z"],
)
def test_timestamp_ms_agrees_with_datetime(at):
    parsed = dt.datetime.fromisoformat(at.upper().replace("Z", "+00:00"))
    expected = int(parsed.timestamp()) * 1000 + parsed.microsecond // 1000
    if parsed.timestamp() < 0:
        expected = (int(parsed.timestamp() // 1)) * 1000 + parsed.microsecond // 1000
    assert timestamp_ms(at) == expected


@pytest.mark.parametrize("at", ["2026-02-30T00:00:00Z", "2026-08-23T25:00:00Z", "2026-08-23", "", "2026-08-23T02:57:57"])
def test_timestamp_ms_null_when_not_rfc3339(at):
    assert timestamp_ms(at) is None


def test_requests_one_per_usage_event():
    doc = _doc("all_events")
    assert doc["requests"] == [
        {
            "source_line": 8,
            "request_id": "req_01",
            "model": "claude-sonnet-4-5",
            "input_tokens": 1200,
            "output_tokens": 45,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 800,
            "events": [5, 6, 7],  # thinking, text, and the usage node itself
        }
    ]
    claude = _doc("compare_claude")["requests"]
    assert [r["request_id"] for r in claude] == ["req_a1", "req_a2"]
    assert claude[0]["events"] == [4, 5] and claude[1]["events"] == [17, 18]
    codex = _doc("compare_codex")["requests"]
    assert len(codex) == 1 and codex[0]["request_id"] is None
    assert codex[0]["events"] == [17]  # a null request id: only the usage node (the text has null too)
    assert codex[0]["cache_creation_input_tokens"] is None


@pytest.mark.parametrize("name", STREAMS)
def test_side_block_agrees_with_the_stream(name):
    doc = _doc(name)
    data = (FIXTURES / f"{name}.jsonl").read_bytes()
    wires = [json.loads(line) for line in data.splitlines()]
    side = doc["metaharness"]
    assert list(side) == ["source", "run", "events_total", "families", "unk_kinds", "census"]
    assert side["source"] == f"fixtures/{name}.jsonl"
    assert side["run"] == (wires[0]["run"] if wires else None)
    assert side["events_total"] == len(wires) == len(doc["events"])
    families: dict[str, int] = {}
    unk: dict[str, int] = {}
    for wire in wires:
        family = SPEC_FAMILY[wire["event"]]
        families[family] = families.get(family, 0) + 1
        if family == "unk":
            unk[wire["event"]] = unk.get(wire["event"], 0) + 1
    assert side["families"] == families and list(side["families"]) == sorted(families)
    assert side["unk_kinds"] == unk and list(side["unk_kinds"]) == sorted(unk)
    decided = [w for w in wires if w["event"] == "tool.decided"]
    census = side["census"]
    assert list(census) == ["allowed", "denied", "replaced", "abstained", "by_seam", "by_decider"]
    words = {"allow": "allowed", "deny": "denied", "replace": "replaced", "abstain": "abstained"}
    for word, key in words.items():
        assert census[key] == sum(1 for w in decided if w["decision"]["decision"] == word)
    assert sum(census["by_seam"].values()) == sum(census["by_decider"].values()) == len(decided)
    ended = [w for w in wires if w["event"] == "session.ended"]
    if ended:
        reported = ended[0]["census"]
        assert census["by_seam"] == reported["by_seam"] and census["by_decider"] == reported["by_decider"]
        assert all(census[k] == reported[k] for k in words.values())


def test_an_invalid_line_exits_2_naming_it():
    result = invoke(["project", "fixtures/bad_line.jsonl"])
    assert result.exit_code == 2
    assert result.stdout_bytes == b""
    assert "line 3" in result.stderr
    assert 'malformed tool.decided: invalid type: string "allow", expected internally tagged enum Decision' in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "data,line",
    [
        (b'{"format":"metaharness.event/1","seq":1,"run":"r","event":"text","text":"x","request_id":null}\n\xff\xfe\n', 2),
        (b'{"format":"metaharness.event/1","seq":1,"run":"r","event":"teleport"}\n', 1),
        (b'[1,2]\n', 1),
        (b'{"format":"metaharness.event/1","seq":1,"run":"r","event":"text","text":"x"}\n\n', 2),
    ],
)
def test_other_invalid_lines_exit_2(tmp_path, data, line):
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    result = invoke(["project", str(path)])
    assert result.exit_code == 2
    assert f"line {line} is not a valid metaharness.event/1 line" in result.stderr


def test_unreadable_file_and_usage_errors_exit_2(tmp_path):
    missing = invoke(["project", str(tmp_path / "nope.jsonl")])
    assert missing.exit_code == 2 and "cannot read" in missing.stderr
    two = invoke(["project", "fixtures/compare_claude.jsonl", "fixtures/compare_codex.jsonl"])
    assert two.exit_code == 2 and "one EVENTS stream" in two.stderr
    both = invoke(["project", "fixtures/empty.jsonl", "--out", str(tmp_path / "a"), "--html", str(tmp_path / "b")])
    assert both.exit_code == 2
    none = invoke(["project"])
    assert none.exit_code == 2


def test_a_final_line_without_newline_is_still_a_line():
    data = (FIXTURES / "refused_start.jsonl").read_bytes().rstrip(b"\n")
    doc = project_stream(data, "x")
    assert doc["metaharness"]["events_total"] == 2
    assert doc["transcript_digest"] == hashlib.sha256(data).hexdigest()


def test_census_counted_from_lines_even_without_session_ended():
    data = stream_bytes(
        "r",
        [
            {"event": "tool.requested", "call_id": "a", "name": "Bash", "input": {}, "decision_required": False,
             "deadline_ms": None, "seam": "hook"},
            {"event": "tool.decided", "call_id": "a", "decision": {"decision": "abstain"}, "decided_by": "adapter",
             "seam": "none", "latency_ms": None},
            {"event": "tool.requested", "call_id": "a", "name": "Bash", "input": {}, "decision_required": False,
             "deadline_ms": None, "seam": "hook"},  # identical re-presentation: no second decision, no count
        ],
    )
    census = project_stream(data, "x")["metaharness"]["census"]
    assert census == {"allowed": 0, "denied": 0, "replaced": 0, "abstained": 1,
                      "by_seam": {"none": 1}, "by_decider": {"adapter": 1}}
