"""Only the embedder decides (issue 19), on oharness: the agent's own shell tries to
decide its next call — forged decisions and vendor control messages written into every
fd of every process of the run it can find, output stolen, environments read,
metaharness signalled — and nothing it does decides a call or changes the run.

The attack (tests/fixtures/adversary/attack.py) runs detached from the shell tool of an
allowed call and keeps trying while the next call, which the embedder never answers,
waits for its deadline. It touches only the processes of this run."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import pytest

from metaharness.adapters.process import confinement

PY = sys.executable
ATTACK = os.path.join(os.path.dirname(__file__), "..", "fixtures", "adversary", "attack.py")
DEADLINE_MS = 6000
ATTACK_S = 2.5


def _scenario(tmp_path, pid_file: str) -> str:
    report = tmp_path / "report.json"
    host_ns = os.readlink("/proc/self/ns/pid")  # the attack never leaves the run (see attack.py)
    attack = (f"setsid {PY} {os.path.abspath(ATTACK)} {report} {ATTACK_S} victim {pid_file} '{host_ns}' "
              f"</dev/null >{tmp_path}/attack.log 2>&1 &")
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": [
        {"calls": [{"id": "attack", "op": "shell", "input": {"command": attack}}]},
        {"calls": [{"id": "victim", "op": "shell", "input": {"command": f"touch {tmp_path}/PWNED"}}]},
        {"text": "done"},
    ]}))
    return str(path)


def _check_stream(events: list[dict], tmp_path) -> dict:
    assert events[-1]["event"] == "stream.closed"
    decided = {e["call_id"]: e for e in events if e["event"] == "tool.decided"}
    assert decided["attack"]["decided_by"] == "embedder"
    assert decided["victim"]["decided_by"] == "deadline", decided["victim"]  # nobody else answered it
    assert decided["victim"]["decision"]["decision"] == "deny"
    assert not (tmp_path / "PWNED").exists()
    assert not [e for e in events if e["event"] == "command.result" and e["id"].startswith("forged")]
    assert not [e for e in events if e["event"] == "warning" and e["code"] == "UNDECIDED_CALL_RAN"]
    victim = [e for e in events if e["event"] == "tool.result" and e["call_id"] == "victim"]
    assert all(e["is_error"] for e in victim)  # the deny reached the model as the call's error
    report = json.loads((tmp_path / "report.json").read_text())
    # Every fd 0/1 of the harness (and of metaharness, where visible) is a socket: it does not reopen.
    assert not [k for k, target in report["opened_write"].items() if target.startswith("socket:")], report
    assert not [k for k, target in report["stole"].items() if target.startswith("socket:")], report
    # It found the channel and was refused — or, oharness being non-dumpable to an agent without
    # capabilities, could not even list the harness's fds.
    assert report["refused"] or report["fds_hidden"], report
    assert set(report["refused"].values()) <= {"ENXIO"}, report
    return report


def _wait_for(path, proc=None, timeout=60) -> None:
    end = time.monotonic() + timeout
    while not os.path.exists(path):
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.05)


@pytest.mark.skipif(not confinement()[0], reason="no PID namespace on this machine: " + confinement()[1])
def test_cli_run_with_pipes_from_the_embedder_in_a_namespace(tmp_path):
    """An embedder that speaks to `metaharness run` over ordinary pipes: the agent cannot
    even name metaharness's pid from inside its namespace."""
    pid_file = str(tmp_path / "mh.pid")
    proc = subprocess.Popen(
        [PY, "-m", "metaharness", "run", "oharness", "--decisions", "ask", "--decision-timeout-ms", str(DEADLINE_MS),
         "--script", _scenario(tmp_path, pid_file), "--cwd", str(tmp_path), "-p", "go"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with open(pid_file + ".tmp", "w") as handle:
        handle.write(str(proc.pid))
    os.rename(pid_file + ".tmp", pid_file)
    events = []
    assert proc.stdout is not None and proc.stdin is not None
    for raw in proc.stdout:
        event = json.loads(raw)
        events.append(event)
        if event["event"] == "tool.requested" and event["call_id"] == "attack":
            proc.stdin.write((json.dumps({"format": "metaharness.command/1", "id": "ok-attack",
                                          "command": "tool.decide", "call_id": "attack",
                                          "decision": {"decision": "allow"}}) + "\n").encode())
            proc.stdin.flush()
        if event["event"] == "session.ended":
            proc.stdin.close()
    proc.wait(30)
    report = _check_stream(events, tmp_path)
    assert report["private_namespace"]
    assert not report["mh_pid_visible"]
    assert report["signal_metaharness"] != "reachable"
    assert proc.pid not in report["environ_read"]


async def test_api_subprocess_run_without_a_namespace(tmp_path, monkeypatch):
    """The Python API's subprocess transport over a socketpair, confinement turned off: the
    agent sees metaharness and every fd of the run, and still decides nothing."""
    from metaharness.api import start_run
    from metaharness.protocol.events import ToolRequested
    from metaharness.protocol.values import Allow
    from metaharness.run.spec import RunSpec

    monkeypatch.setenv("METAHARNESS_NAMESPACE", "off")
    pid_file = str(tmp_path / "mh.pid")
    spec = RunSpec(kind="oharness", script=_scenario(tmp_path, pid_file), decisions="ask",
                   decision_timeout_ms=DEADLINE_MS, cwd=str(tmp_path), prompt="go")
    run = await start_run(spec, subprocess=True)
    with open(pid_file, "w") as handle:
        handle.write(str(run._proc.pid))
    async with run:
        async for _envelope, event in run:
            if isinstance(event, ToolRequested) and event.call_id == "attack" and event.decision_required:
                await run.decide("attack", Allow())
    events = [json.loads(line) for line in run.lines]
    report = await asyncio.to_thread(_check_stream, events, tmp_path)
    assert not report["private_namespace"]
    assert report["mh_pid_visible"]  # no namespace: it saw metaharness and tried its fds too
    assert any(key.startswith(f"{run._proc.pid}/") for key in report["refused"]), report
