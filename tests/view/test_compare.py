"""Alignment of two runs (compare.py) and the HTML page's bytes (html.py), without a browser."""

from __future__ import annotations

import re

import pytest

from metaharness.view.compare import align_runs, extract_run, lcs_pairs
from metaharness.view.html import TooManyStreams, render_page
from metaharness.view.stream import decode_stream

from .conftest import FIXTURES, invoke, stream_bytes


def _lines(name: str):
    return decode_stream((FIXTURES / name).read_bytes())


def _call(call_id, name, op, input, subjects=None, seam="hook"):
    event = {"event": "tool.requested", "call_id": call_id, "name": name, "input": input, "operations": [op]}
    if subjects:
        event["subjects"] = subjects
    event.update({"decision_required": False, "deadline_ms": None, "seam": seam})
    return event


def _decided(call_id, verdict, seam="hook", reason=None):
    decision = {"decision": verdict}
    if reason:
        decision["reason"] = reason
    return {"event": "tool.decided", "call_id": call_id, "decision": decision, "decided_by": "frame",
            "seam": seam, "latency_ms": None}


def _step(state, index):
    return {"event": "step.entered", "step": {"workflow": "w", "state": state, "index": index, "attempt": 1},
            "frame_digest": None}


def test_lcs_pairs():
    assert lcs_pairs(list("abcd"), list("acd")) == [(0, 0), (2, 1), (3, 2)]
    assert lcs_pairs([], list("ab")) == []
    assert lcs_pairs(list("ab"), list("ba")) in ([(0, 1)], [(1, 0)])
    assert lcs_pairs(list("xaby"), list("ab")) == [(1, 0), (2, 1)]


def test_two_harnesses_line_up_by_call_signature():
    runs = [extract_run(_lines("compare_claude.jsonl"), "a", "A"), extract_run(_lines("compare_codex.jsonl"), "b", "B")]
    rows, mode = align_runs(runs)
    assert mode.startswith("by step")
    calls = [row for row in rows if row.kind == "call"]
    assert [row.status for row in calls] == ["only-left", "same", "same", "same", "only-right"]
    assert [(r.left and r.left.call_id, r.right and r.right.call_id) for r in calls] == [
        ("toolu_01", None), ("toolu_02", "call_1"), ("toolu_03", "call_2"), ("toolu_04", "call_3"), (None, "call_4")
    ]
    assert [row.reasons for row in calls] == [
        ["run B has no matching call"],
        [],
        [],
        ["result differs: ok vs exit 1"],
        ["run A has no matching call"],
    ]
    # Claude's Write and Codex's apply_patch agree on operation and normalised subject
    assert calls[1].left.signature == calls[1].right.signature == (("file.write",), ("file:greeting.txt",))
    # Bash {"command"} and exec_command {"cmd"} agree on the command
    assert calls[3].left.signature == calls[3].right.signature == (("shell",), "cat greeting.txt")


def test_call_details_are_collected():
    run = extract_run(_lines("compare_claude.jsonl"), "a", "A")
    assert run.verdict == "complete" and run.close_reason == "completed" and run.total_cost_usd == 0.0073
    edit = run.calls[2]
    assert edit.decision["verdict"] == "deny" and edit.decision["decided_by"] == "frame"
    assert edit.decision["reason"].startswith('this step admits ["file.write", "shell"]')
    assert edit.result is None and edit.cost_so_far == 0.0041
    assert run.calls[0].result["exit_code"] == 0 and run.calls[0].outcome == "ok"
    codex = extract_run(_lines("compare_codex.jsonl"), "b", "B")
    assert codex.calls[2].outcome == "exit 1" and codex.calls[2].cost_so_far is None
    assert codex.summed_cost_usd is None and codex.total_cost_usd is None


def test_rows_align_by_step_when_both_runs_carry_steps():
    a = stream_bytes("a", [
        _step("plan", 1), _call("a1", "Read", "file.read", {"file_path": "x"}, ["file:x"]), _decided("a1", "allow"),
        _step("build", 2), _call("a2", "Bash", "shell", {"command": "make"}), _decided("a2", "allow"),
        _call("a3", "Bash", "shell", {"command": "make test"}), _decided("a3", "allow"),
        _step("ship", 3), _call("a4", "Bash", "shell", {"command": "git push"}), _decided("a4", "deny", reason="no"),
    ])
    b = stream_bytes("b", [
        _step("plan", 1), _call("b1", "read_file", "file.read", {"path": "x"}, ["file:x"]), _decided("b1", "allow"),
        _step("build", 2), _call("b2", "run_shell", "shell", {"command": "make test"}), _decided("b2", "deny", reason="r"),
    ])
    runs = [extract_run(decode_stream(a), "a", "A"), extract_run(decode_stream(b), "b", "B")]
    rows, mode = align_runs(runs)
    assert mode == "by step, then by call signature within each step"
    shape = [(row.kind, row.status, row.left.call_id if row.kind == "call" and row.left else None,
              row.right.call_id if row.kind == "call" and row.right else None) for row in rows]
    assert shape == [
        ("step", "same", None, None),
        ("call", "same", "a1", "b1"),
        ("step", "same", None, None),
        ("call", "only-left", "a2", None),  # make: missing in B -> gap row
        ("call", "same", "a3", "b2"),  # make test: paired, but decided differently
        ("step", "only-left", None, None),  # the ship step exists only in A
        ("call", "only-left", "a4", None),
    ]
    assert rows[4].reasons == ["decision differs: allow vs deny"]
    assert rows[5].left == "w · ship #3" and rows[5].right is None
    assert [row.position for row in rows if row.kind == "call"] == [1, 2, 3, 4]
    assert sum(row.divergent for row in rows) == 3  # step headers are never counted


def test_rows_align_by_call_order_without_steps():
    a = stream_bytes("a", [_call("1", "Bash", "shell", {"command": "ls"}), _call("2", "Bash", "shell", {"command": "pwd"})])
    b = stream_bytes("b", [_call("x", "Bash", "shell", {"command": "pwd"}), _call("y", "Write", "file.write", {"file_path": "q"}, ["file:q"])])
    runs = [extract_run(decode_stream(a), "a", "A"), extract_run(decode_stream(b), "b", "B")]
    rows, mode = align_runs(runs)
    assert mode.startswith("by tool-call order")
    assert [(r.status, r.left and r.left.call_id, r.right and r.right.call_id) for r in rows] == [
        ("only-left", "1", None), ("same", "2", "x"), ("only-right", None, "y")
    ]
    # calls that differ at the same place are set side by side, marked
    c = stream_bytes("c", [_call("z", "Bash", "shell", {"command": "ls"}), _call("w", "Bash", "shell", {"command": "id"})])
    rows, _ = align_runs([runs[0], extract_run(decode_stream(c), "c", "B")])
    assert [(r.status, r.reasons) for r in rows] == [
        ("same", []), ("differs", ["same operations on a different subject"])
    ]


def test_identical_re_presentation_is_one_call():
    data = stream_bytes("r", [
        _call("1", "Bash", "shell", {"command": "ls"}), _decided("1", "allow"),
        _call("1", "Bash", "shell", {"command": "ls"}),
    ])
    run = extract_run(decode_stream(data), "s", "A")
    assert len(run.calls) == 1 and run.calls[0].presented == 2


def test_page_is_deterministic_and_self_contained():
    streams = [("fixtures/compare_claude.jsonl", _lines("compare_claude.jsonl")),
               ("fixtures/compare_codex.jsonl", _lines("compare_codex.jsonl"))]
    page = render_page(streams)
    assert page == render_page(streams)
    text = page.decode()
    assert text.startswith("<!DOCTYPE html>")
    assert not re.search(r"<(link|img|iframe)\b", text)
    assert not re.search(r"<script[^>]*\bsrc=", text)
    assert "http://" not in text and "https://" not in text and "@import" not in text
    assert text.count('class="call-row') == 5
    assert text.count(" gap-row") == 2
    assert text.count("call-row divergent") == 3
    assert 'id="next-divergence"' in text
    # every value is escaped: the deny reason's quotes arrive as entities
    assert "this step admits [&#34;file.write&#34;, &#34;shell&#34;]" in text


def test_page_escapes_what_the_stream_says():
    data = stream_bytes("r", [_call("1", "Bash", "shell", {"command": "echo '<script>alert(1)</script>'"}),
                              _decided("1", "deny", reason="<b>no</b>")])
    text = render_page([("s", decode_stream(data))]).decode()
    assert "<script>alert(1)" not in text and "&lt;script&gt;alert(1)" in text
    assert "<b>no</b>" not in text


def test_single_run_page_has_no_divergence_button():
    text = render_page([("fixtures/all_events.jsonl", _lines("all_events.jsonl"))]).decode()
    assert "next-divergence" not in text
    assert text.count('class="call-row') == 3
    assert "development/default · implement #2" in text


def test_three_streams_are_refused_by_name(tmp_path):
    with pytest.raises(TooManyStreams):
        render_page([("a", []), ("b", []), ("c", [])])
    page = tmp_path / "p.html"
    result = invoke(["project", "--html", str(page), "fixtures/compare_claude.jsonl",
                     "fixtures/compare_codex.jsonl", "fixtures/all_events.jsonl"])
    assert result.exit_code == 2
    assert "compares at most two streams, and 3 were given" in result.stderr
    assert "fixtures/all_events.jsonl" in result.stderr
    assert not page.exists()


def test_html_cli_writes_the_page_and_refuses_bad_lines(tmp_path):
    page = tmp_path / "p.html"
    ok = invoke(["project", "--html", str(page), "fixtures/compare_claude.jsonl", "fixtures/compare_codex.jsonl"])
    assert ok.exit_code == 0 and ok.stdout_bytes == b""
    first = page.read_bytes()
    invoke(["project", "--html", str(page), "fixtures/compare_claude.jsonl", "fixtures/compare_codex.jsonl"])
    assert page.read_bytes() == first
    bad = invoke(["project", "--html", str(tmp_path / "q.html"), "fixtures/bad_line.jsonl"])
    assert bad.exit_code == 2 and "line 3" in bad.stderr
    empty = invoke(["project", "--html", str(tmp_path / "e.html"), "fixtures/empty.jsonl"])
    assert empty.exit_code == 0 and "No tool calls" in (tmp_path / "e.html").read_text()


def _started(adapter):
    return {"event": "session.started", "adapter": adapter, "adapter_class": "harness", "cwd": "/w",
            "transcript": {"path": None, "digest": None, "bytes": None},
            "hermetic": {"mode": "off", "decisions": "frame", "imposed": [], "unavailable": [], "ambient_inputs": [],
                         "installed_plugins": [], "deny_only": False}}


def test_codex_login_shell_wrapper_is_unwrapped_and_its_raw_form_shown():
    from metaharness.view.compare import unwrap_login_shell

    claude = [_started("claude"), _call("toolu_1", "Bash", "shell", {"command": "echo hi > out.txt"}),
              _decided("toolu_1", "allow")]
    codex = [_started("codex"),
             _call("call_1", "Bash", "shell", {"command": "/bin/bash -lc 'echo hi > out.txt'", "cwd": "/w"},
                   seam="control_request"),
             _decided("call_1", "allow", seam="control_request")]
    a = decode_stream(stream_bytes("claude-1", claude))
    b = decode_stream(stream_bytes("codex-1", codex))
    rows, _ = align_runs([extract_run(a, "a", "A"), extract_run(b, "b", "B")])
    calls = [row for row in rows if row.kind == "call"]
    assert [(row.status, row.reasons) for row in calls] == [("same", [])]
    assert calls[0].right.raw_command == "/bin/bash -lc 'echo hi > out.txt'"
    assert calls[0].right.input_summary.startswith("command=echo hi > out.txt")
    assert calls[0].left.raw_command is None
    page = render_page([("a", a), ("b", b)]).decode()
    assert "as the vendor ran it: <code>/bin/bash -lc &#39;echo hi &gt; out.txt&#39;</code>" in page
    # Only the vendor's own wrapper: a different command inside it still differs.
    assert unwrap_login_shell("/bin/bash -lc 'it'\\''s'") == "it's"
    assert unwrap_login_shell("bash -lc 'a' extra") is None and unwrap_login_shell("echo 'unterminated") is None


def test_a_model_written_wrapper_on_another_harness_is_not_unwrapped():
    claude = [_started("claude"), _call("toolu_1", "Bash", "shell", {"command": "bash -lc 'ls'"})]
    run = extract_run(decode_stream(stream_bytes("claude-1", claude)), "a", "A")
    assert run.calls[0].raw_command is None
