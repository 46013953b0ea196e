"""`metaharness loopback serve` as a standalone process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import httpx
import pytest

from loopback_support import CLAUDE_TOOLS

METAHARNESS = [sys.executable, "-m", "metaharness"]


def _start(*args: str, cwd) -> subprocess.Popen:
    return subprocess.Popen([*METAHARNESS, "loopback", "serve", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_serve_prints_url_answers_and_stops_on_signal(tmp_path, signum):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": [
        {"calls": [{"op": "file.read", "input": {"path": "notes.txt"}}]}]}))
    log = tmp_path / "log.jsonl"
    process = _start("--scenario", str(script), "--log", str(log), "--workdir", str(tmp_path), cwd=tmp_path)
    try:
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.rsplit(":", 1)[1].isdigit()
        reply = httpx.post(url + "/v1/messages", json={"model": "m", "max_tokens": 5, "stream": False, "tools": CLAUDE_TOOLS,
                                                      "messages": [{"role": "user", "content": "hi"}]})
        assert reply.json()["content"][0]["input"] == {"file_path": str(tmp_path / "notes.txt")}
    finally:
        process.send_signal(signum)
        out, err = process.communicate(timeout=10)
    assert process.returncode == 0, err
    assert out == ""
    assert json.loads(log.read_text().splitlines()[0])["turn"] == 0


def test_serve_refuses_bad_scenario_in_one_sentence(tmp_path):
    script = tmp_path / "bad.json"
    script.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": [{"calls": [{"op": "teleport", "input": {}}]}]}))
    process = _start("--scenario", str(script), cwd=tmp_path)
    out, err = process.communicate(timeout=20)
    assert process.returncode == 2 and out == ""
    assert err == "metaharness loopback: turn 0, call 0: unknown operation 'teleport'\n"
    missing = _start("--scenario", str(tmp_path / "nope.json"), cwd=tmp_path)
    out, err = missing.communicate(timeout=20)
    assert missing.returncode == 2 and err.startswith("metaharness loopback: the scenario") and err.count("\n") == 1


def test_serve_refuses_a_port_in_use(tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": []}))
    first = _start("--scenario", str(script), cwd=tmp_path)
    try:
        port = first.stdout.readline().strip().rsplit(":", 1)[1]
        second = _start("--scenario", str(script), "--port", port, cwd=tmp_path)
        out, err = second.communicate(timeout=20)
        assert second.returncode == 2 and err.startswith(f"metaharness loopback: cannot serve on 127.0.0.1:{port}")
        assert "Traceback" not in err
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=10)
    assert os.path.exists(script)
