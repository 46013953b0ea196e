"""`metaharness view` and `EventRenderer`: the terminal view, rendered through rich's recording console."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console

from metaharness.protocol.decode import decode_event_line
from metaharness.view.terminal import EventRenderer

from .conftest import FIXTURES, invoke

ROOT = Path(__file__).resolve().parents[2]


def _render(name: str, width: int = 220) -> tuple[EventRenderer, Console]:
    console = Console(record=True, width=width, file=io.StringIO(), color_system="truecolor")
    renderer = EventRenderer(console)
    for raw in (FIXTURES / name).read_bytes().splitlines(keepends=True):
        renderer.feed(raw)
    renderer.summary()
    return renderer, console


def _line(text: str, seq: int) -> str:
    (found,) = [line for line in text.splitlines() if line.startswith(f"{seq:>4} ")]
    return found


def test_one_line_per_event_with_the_facts_a_person_needs():
    renderer, console = _render("all_events.jsonl")
    text = console.export_text()
    # header from session.started
    assert "session started" in text and "claude 2.1.328" in text and "claude-sonnet-4-5" in text
    assert "decisions frame" in text and "/tmp/mh-scratch/work" in text
    # every other event has exactly one line, keyed by its seq
    for seq in range(2, 26):
        _line(text, seq)
    assert "step ▸" in _line(text, 2) and "development/default · implement #2" in _line(text, 2)
    assert "[frame]" in _line(text, 3)
    assert "~120 tokens" in _line(text, 5)
    assert "The user wants a greeting file" in _line(text, 6)
    assert "café ✓" in _line(text, 7)
    usage = _line(text, 8)
    assert "in 1,200" in usage and "out 45" in usage and "$0.0123" in usage and "req_01" in usage
    call = _line(text, 9)
    assert "Read" in call and "toolu_01" in call and "file.read" in call and "file_path=/tmp/mh-scratch/work/notes.txt" in call
    assert "file:notes.txt" in call
    assert "allow" in _line(text, 10) and "by frame via hook" in _line(text, 10)
    assert "ok · 9 B" in _line(text, 11) and "say hello" in _line(text, 11)
    deny = _line(text, 13)
    assert deny.split()[1] == "deny" and "toolu_02 (Bash)" in deny and "by frame via hook" in deny
    assert 'this step admits ["file.edit", "file.read", "file.write"] and Bash is shell' in deny
    assert "VENDOR_NOTICE" in _line(text, 14)
    assert "five_hour" in _line(text, 15)
    assert "c-1 ok, applies at the next turn" in _line(text, 16)
    assert "awaiting decision (55000 ms)" in _line(text, 17)
    replace = _line(text, 18)
    assert "replace" in replace and "by embedder via hook" in replace and "3 ms" in replace
    assert '"content":"hello\\n"' in replace
    assert "quantum_entanglement_event" in _line(text, 20)
    assert "credentials expired" in _line(text, 21)
    assert "turn 1 ◂" in _line(text, 22) and "end_turn" in _line(text, 22)
    assert "completed" in _line(text, 23)
    assert "Wrote greeting.txt." in _line(text, 24)
    assert "exited 0" in _line(text, 25)
    # closing summary
    summary = text[text.index("summary · run claude-41234"):]
    assert "1 (reported)" in summary and "4.2 s" in summary and "$0.0123 (session total as reported)" in summary
    assert "1 allowed · 1 denied · 1 replaced · 0 abstained" in summary
    assert "complete · close reason completed" in summary
    assert renderer.verdict() == "complete" and not renderer.bad_lines


def test_decisions_are_coloured_by_verdict():
    _, console = _render("all_events.jsonl")
    ansi = console.export_text(styles=True)
    # rich writes bold+colour as SGR 1;3x: green allow, red deny, yellow replace
    assert "\x1b[1;32mallow" in ansi
    assert "\x1b[1;31mdeny" in ansi
    assert "\x1b[1;33mreplace" in ansi
    _, console = _render("truncated.jsonl")
    assert "\x1b[1;34mabstain" in console.export_text(styles=True)


def test_a_long_line_wraps_under_its_content_when_narrow_and_loses_nothing():
    _, wide = _render("all_events.jsonl", width=400)
    _, console = _render("all_events.jsonl", width=80)
    text = console.export_text()
    body = text[text.index("   2 "):text.index("summary")]
    lines = [line for line in body.splitlines() if line.strip() and not line.startswith("╭")]
    assert all(len(line) <= 80 for line in lines)
    starts = [line for line in lines if line[:4].strip().isdigit()]
    assert len(starts) == 24  # seq 2..25, each starts one line
    continued = [line for line in lines if line not in starts]
    assert continued and all(line.startswith(" " * 24) and line[24] != " " for line in continued)
    # every word of every wide line is still there at 80 columns: nothing is cut
    wide_body = wide.export_text()
    wide_lines = wide_body[wide_body.index("   2 "):wide_body.index("summary")].splitlines()
    assert "".join("".join(line.split()) for line in wide_lines if not line.startswith("╭")) == \
        "".join("".join(line.split()) for line in lines)


def test_a_long_deny_reason_is_shown_whole_at_80_columns():
    import json
    reason = ("the frame's operations do not include process.exec for this step; the call was "
              "denied before it ran and the harness was told so, ending with the word LASTWORD")
    line = {"format": "metaharness.event/1", "seq": 3, "run": "r1", "event": "tool.decided", "call_id": "c1",
            "decision": {"decision": "deny", "reason": reason}, "decided_by": "frame", "seam": "hook",
            "latency_ms": None}
    console = Console(record=True, width=80, file=io.StringIO())
    renderer = EventRenderer(console)
    renderer.feed(json.dumps(line).encode())
    text = console.export_text()
    assert "LASTWORD" in text and " ".join(text.split()).count(reason) == 1, text
    assert all(len(row) <= 80 for row in text.splitlines())


def test_truncated_stream_summary():
    renderer, console = _render("truncated.jsonl")
    text = console.export_text()
    assert renderer.verdict() == "truncated"
    assert "truncated" in text and "no session.ended" in text
    assert "1 (counted from turn.started)" in text
    assert "0 allowed · 1 denied · 0 replaced · 1 abstained" in text
    assert "deny-only" in text
    assert "by deadline via owned_tool" in text


def test_census_disagreement_is_flagged(tmp_path):
    lines = (FIXTURES / "all_events.jsonl").read_text().splitlines(keepends=True)
    lines[23] = lines[23].replace('"allowed":1,"denied":1', '"allowed":2,"denied":0')
    console = Console(record=True, width=250, file=io.StringIO())
    renderer = EventRenderer(console)
    for line in lines:
        renderer.feed(line.encode())
    renderer.summary()
    assert "session.ended reports a different census: 2 allowed · 0 denied" in console.export_text()


def test_feed_event_renders_decoded_events():
    console = Console(record=True, width=200, file=io.StringIO())
    renderer = EventRenderer(console)
    for raw in (FIXTURES / "compare_codex.jsonl").read_bytes().splitlines():
        envelope, event = decode_event_line(raw)
        renderer.feed_event(envelope, event)
    renderer.summary()
    text = console.export_text()
    assert "exit 1 · error · 45 B" in _line(text, 14)
    assert "[deny-reason]" in _line(text, 11)
    assert "cost      not reported" in text
    assert renderer.verdict() == "complete"


def test_bad_lines_are_shown_by_number_and_exit_1():
    result = invoke(["view", "--width", "200", "fixtures/bad_line.jsonl"])
    assert result.exit_code == 1
    assert "line 3: malformed tool.decided" in result.stdout
    assert "   4          closed" in result.stdout  # reading continued after the bad line
    assert "4 read, 1 not valid" in result.stdout


def test_view_reads_stdin_with_dash():
    data = (FIXTURES / "compare_claude.jsonl").read_bytes()
    result = invoke(["view", "--width", "200", "-"], input=data)
    assert result.exit_code == 0
    assert "toolu_04 (Bash)" in result.stdout and "summary · run claude-5101" in result.stdout


def test_view_unreadable_file_exits_2(tmp_path):
    result = invoke(["view", str(tmp_path / "missing.jsonl")])
    assert result.exit_code == 2 and "cannot read" in result.stderr


def test_follow_tails_a_growing_file_until_stream_closed(tmp_path):
    lines = (FIXTURES / "compare_codex.jsonl").read_bytes().splitlines(keepends=True)
    path = tmp_path / "live.jsonl"
    path.write_bytes(b"".join(lines[:5]))
    env = dict(os.environ, COLUMNS="200")
    proc = subprocess.Popen(
        [sys.executable, "-m", "metaharness", "view", "--follow", "--width", "200", str(path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )
    try:
        time.sleep(0.8)
        assert proc.poll() is None, "view --follow must wait for more lines"
        with path.open("ab") as handle:
            for line in lines[5:]:
                handle.write(line[:20])  # a line arrives in two pieces
                handle.flush()
                time.sleep(0.02)
                handle.write(line[20:])
                handle.flush()
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = out.decode()
    assert proc.returncode == 0, err.decode()
    assert "rm -f notes.txt" in text and "closed" in text
    assert "complete · close reason completed" in text
    assert "21 read, 0 not valid" in text
