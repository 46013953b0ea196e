"""`metaharness run oharness` as a subprocess, driven by a test embedder over stdin/stdout:
real oharness child, scripted model, real files (issue: run loop + oharness)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from .conftest import make_frame

PY = sys.executable


def scenario(tmp_path, turns) -> str:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": turns}))
    return str(path)


def start(args, cwd):
    return subprocess.Popen([PY, "-m", "metaharness", "run", "oharness", *args, "--cwd", str(cwd)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


class Embedder:
    """Reads event lines one at a time and answers them."""

    def __init__(self, proc):
        self.proc = proc
        self.events: list[dict] = []

    def next(self) -> dict | None:
        line = self.proc.stdout.readline()
        if not line:
            return None
        event = json.loads(line)
        self.events.append(event)
        return event

    def send(self, obj) -> None:
        self.proc.stdin.write((json.dumps(obj) + "\n").encode())
        self.proc.stdin.flush()

    def until(self, name) -> dict:
        while True:
            event = self.next()
            assert event is not None, f"stream ended before {name}: {[e['event'] for e in self.events]}"
            if event["event"] == name:
                return event

    def drain(self) -> list[dict]:
        while self.next() is not None:
            pass
        return self.events


def decide(call_id, decision, id="d"):
    return {"format": "metaharness.command/1", "id": id, "command": "tool.decide", "call_id": call_id,
            "decision": decision}


def test_ask_mode_decided_by_typing_json_lines(tmp_path):
    script = scenario(tmp_path, [
        {"text": "writing", "calls": [{"op": "shell", "input": {"command": "echo hi > out.txt"}},
                                      {"op": "shell", "input": {"command": "echo no > denied.txt"}}]},
        {"text": "done"},
    ])
    proc = start(["--script", script, "--decisions", "ask", "-p", "go"], tmp_path)
    emb = Embedder(proc)
    first = emb.until("tool.requested")
    assert first["decision_required"] is True and first["deadline_ms"] == 55000 and first["seam"] == "owned_tool"
    emb.send(decide(first["call_id"], {"decision": "allow"}, "a"))
    second = emb.until("tool.requested")
    emb.send(decide(second["call_id"], {"decision": "deny", "reason": "not that file"}, "b"))
    proc.stdin.close()
    events = emb.drain()
    assert proc.wait(20) == 0
    assert (tmp_path / "out.txt").read_text() == "hi\n"
    assert not (tmp_path / "denied.txt").exists()
    results = [e for e in events if e["event"] == "tool.result"]
    assert results[0]["exit_code"] == 0
    assert results[1]["is_error"] is True and "not that file" in json.dumps(results[1]["content"])
    assert events[-1]["event"] == "stream.closed" and events[-1]["reason"] == "completed"


def test_frame_mode_from_file_and_check_accepts_stream(tmp_path):
    from metaharness.protocol import frame as frames

    frame_path = tmp_path / "f.json"
    frame_path.write_bytes(frames.document_bytes(frames.seal(make_frame([{"op": "file.read"}]))))
    (tmp_path / "a.txt").write_text("A")
    script = scenario(tmp_path, [{"calls": [{"op": "file.read", "input": {"path": "a.txt"}},
                                            {"op": "file.write", "input": {"path": "b.txt", "content": "B"}}]}])
    events_path = tmp_path / "events.jsonl"
    proc = start(["--script", script, "--frame", str(frame_path), "--events", str(events_path), "-p", "x"], tmp_path)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out == events_path.read_bytes()
    assert not (tmp_path / "b.txt").exists()
    check = subprocess.run([PY, "-m", "metaharness", "check", str(events_path)], capture_output=True)
    assert check.returncode == 0, check.stderr


def test_sigkill_of_harness_process_still_closes_stream(tmp_path):
    script = scenario(tmp_path, [{"calls": [{"op": "shell", "input": {"command": "sleep 30"}}]}])
    proc = start(["--script", script, "--decisions", "observe", "-p", "x"], tmp_path)
    emb = Embedder(proc)
    started = emb.until("session.started")
    emb.until("tool.decided")
    # the oharness child is the metaharness process's only python child
    children = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
    assert children, "no harness child found"
    for pid in children:
        os.kill(int(pid), signal.SIGKILL)
    events = emb.drain()
    assert proc.wait(20) == 3
    assert events[-1]["event"] == "stream.closed"
    assert events[-1]["process"] == {"kind": "signaled", "signal": 9}
    assert events[-1]["reason"] == "error"
    assert any(e["event"] == "warning" and e["code"] == "NO_TERMINAL_RECORD" for e in events)
    del started


def test_sigterm_and_sigint_still_close_stream(tmp_path):
    for sig in (signal.SIGTERM, signal.SIGINT):
        script = scenario(tmp_path, [{"calls": [{"op": "shell", "input": {"command": "sleep 30"}}]}])
        proc = start(["--script", script, "--decisions", "ask", "-p", "x"], tmp_path)
        emb = Embedder(proc)
        emb.until("tool.requested")
        proc.send_signal(sig)
        events = emb.drain()
        assert proc.wait(20) == 3
        assert events[-1]["event"] == "stream.closed"
        decided = [e for e in events if e["event"] == "tool.decided"]
        assert decided and decided[0]["decided_by"] == "adapter"


def test_closed_stdin_does_not_end_a_plain_run(tmp_path):
    script = scenario(tmp_path, [{"text": "hello"}])
    proc = subprocess.run([PY, "-m", "metaharness", "run", "oharness", "--script", script, "-p", "x",
                           "--cwd", str(tmp_path)], stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    events = [json.loads(l) for l in proc.stdout.splitlines()]
    assert proc.returncode == 0
    assert [e["event"] for e in events][-2:] == ["session.ended", "stream.closed"]
    assert any(e["event"] == "text" and e["text"] == "hello" for e in events)


def test_keep_open_ends_on_stdin_eof(tmp_path):
    script = scenario(tmp_path, [{"text": "one"}, {"text": "two"}])
    proc = start(["--script", script, "--keep-open", "-p", "x"], tmp_path)
    emb = Embedder(proc)
    emb.until("turn.ended")
    emb.send({"format": "metaharness.command/1", "id": "m", "command": "message.inject", "text": "more"})
    emb.until("turn.ended")
    proc.stdin.close()
    events = emb.drain()
    assert proc.wait(20) == 0
    assert [e["turn"] for e in events if e["event"] == "turn.started"] == [1, 2]


def test_usage_error_writes_nothing_on_stdout(tmp_path):
    for args in (["--nope"], ["--audit"], ["--policy-mode", "plan"], ["--decisions", "maybe"]):
        proc = subprocess.run([PY, "-m", "metaharness", "run", "oharness", *args], capture_output=True, timeout=30)
        assert proc.returncode == 2, args
        assert proc.stdout == b""
        assert b"Traceback" not in proc.stderr


def test_malformed_scenario_refused_before_start_naming_turn(tmp_path):
    script = scenario(tmp_path, [{"text": "ok"}, {"id": "bad", "calls": [{"op": "shell", "input": {}}]}])
    proc = subprocess.run([PY, "-m", "metaharness", "run", "oharness", "--script", script, "-p", "x"],
                          capture_output=True, timeout=30)
    assert proc.returncode == 2
    assert b"turn 1 ('bad')" in proc.stderr
    events = [json.loads(l) for l in proc.stdout.splitlines()]
    assert [e["event"] for e in events] == ["stream.closed"]


def test_capabilities_cli():
    out = subprocess.run([PY, "-m", "metaharness", "capabilities", "oharness"], capture_output=True, timeout=30)
    descriptor = json.loads(out.stdout)
    assert list(descriptor) == ["adapter", "versions_pinned", "tiers", "commands", "decision_modes", "replace",
                                "rendering"]
    rendered = subprocess.run([PY, "-m", "metaharness", "capabilities", "oharness", "--render"],
                              capture_output=True, text=True, timeout=30).stdout.splitlines()
    assert rendered[0] == "dir.list         -> glob"
    assert "mcp.call         -> mcp__<server>__<tool> (resolved by name)" in rendered
    bad = subprocess.run([PY, "-m", "metaharness", "capabilities", "nope"], capture_output=True, timeout=30)
    assert bad.returncode == 2


def test_pinned_version_is_the_installed_distribution_version():
    # The adapter pins oharness's version as a constant (importlib.metadata is slow to import);
    # oharness's own __version__, the pin and the distribution's version must never drift apart.
    from importlib.metadata import version

    import oharness
    from metaharness.adapters.oharness import OHarnessAdapter

    assert oharness.__version__ == version("metaharness")
    assert OHarnessAdapter.descriptor().versions_pinned == (f"oharness {version('metaharness')}",)


def test_session_directory_is_deleted_with_the_run_unless_retained(tmp_path):
    script = scenario(tmp_path, [{"text": "hello"}])
    for retain in (None, tmp_path / "kept"):
        args = [PY, "-m", "metaharness", "run", "oharness", "--script", script, "-p", "x", "--cwd", str(tmp_path)]
        if retain is not None:
            args += ["--retain-dir", str(retain)]
        proc = subprocess.run(args, capture_output=True, timeout=30)
        assert proc.returncode == 0
        started = json.loads(proc.stdout.splitlines()[0])
        transcript = started["transcript"]["path"]
        # session.started names the transcript where it is kept, or nothing: never a deleted file.
        if retain is None:
            assert transcript is None
        else:
            assert transcript == str(retain / "oharness-session" / "transcript.jsonl")
            assert os.path.exists(transcript)
