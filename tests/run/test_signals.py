"""SIGTERM and SIGINT to `metaharness run` at chosen moments end the run with
`stream.closed` last, in bounded time (host.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import phase_commands as pc  # noqa: E402  (the process-tree helpers the vendor phase tests share)

BOUND_S = 30


def _scenario(tmp_path) -> str:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": [
        {"calls": [{"op": "shell", "input": {"command": "echo one"}}]}, {"text": "done"}]}))
    return str(path)


def _start(tmp_path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "metaharness", "run", "oharness", "--keep-open", "--decisions", "ask",
         "--script", _scenario(tmp_path), "--cwd", str(tmp_path), "-p", "go"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


def _finish(proc: subprocess.Popen, first: list[bytes] = ()) -> list[dict]:
    watchdog = threading.Timer(BOUND_S, proc.kill)
    watchdog.start()
    try:
        assert proc.stdout is not None
        out = proc.stdout.read()  # through the same buffered reader the first lines came from
        proc.wait()
    finally:
        watchdog.cancel()
    assert proc.returncode != -signal.SIGKILL, "metaharness did not end after the signal"
    return [json.loads(line) for line in [*first, *out.splitlines()] if line.strip()]


def _assert_closed(events: list[dict]) -> None:
    assert events, "nothing was written"
    assert events[-1]["event"] == "stream.closed"
    assert events[-1]["events"] == len(events) - 1


def _catches(pid: int, sig: int) -> bool:
    with open(f"/proc/{pid}/status") as handle:
        caught = next(line for line in handle if line.startswith("SigCgt:")).split()[1]
    return bool(int(caught, 16) & (1 << (sig - 1)))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("delay", [0.0, 0.05, 0.3, 0.8])
def test_signal_at_a_moment_closes_the_stream(tmp_path, sig, delay):
    """From the moment `metaharness run` catches the signal (before anything is spawned):
    start-up, spawn, or the first turn, depending on the delay and the machine's load."""
    proc = _start(tmp_path)
    deadline = time.monotonic() + BOUND_S
    while not _catches(proc.pid, signal.SIGTERM):  # Python catches SIGINT from birth; ours come together
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.002)
    time.sleep(delay)
    proc.send_signal(sig)
    _assert_closed(_finish(proc))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("moment", ["session.started", "tool.requested"])
def test_signal_after_a_line_closes_the_stream(tmp_path, sig, moment):
    proc = _start(tmp_path)
    first = []
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        assert line, "the stream ended before the moment"
        first.append(line)
        if json.loads(line)["event"] == moment:
            break
    proc.send_signal(sig)
    events = _finish(proc, first)
    _assert_closed(events)
    if moment == "tool.requested":
        decided = [e for e in events if e["event"] == "tool.decided"]
        assert decided and decided[0]["decided_by"] == "adapter"  # abandoned, never left undecided


def test_a_second_signal_during_wind_up_still_closes(tmp_path):
    proc = _start(tmp_path)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _assert_closed(_finish(proc))




def test_a_killed_metaharness_takes_the_harness_with_it(tmp_path):
    """SIGKILL cannot be caught: the child ends with metaharness (its parent-death signal, the
    end of its namespace, and end of input on its channel all lead there — this checks the
    outcome, not which came first), so a call can never run on undecided."""
    proc = _start(tmp_path)
    assert proc.stdout is not None
    while json.loads(proc.stdout.readline())["event"] != "tool.requested":
        pass
    children = pc.descendants(proc.pid)
    assert children
    proc.kill()
    proc.wait(10)
    deadline = time.monotonic() + 10
    while any(pc.running(pid) for pid in children):
        assert time.monotonic() < deadline, [pid for pid in children if pc.running(pid)]
        time.sleep(0.05)
