"""Issue 19 on the real opencode and Gemini CLI: only the embedder decides, whatever the agent's
own shell tries against the seam.

The adversary is tests/fixtures/adversary/attack.py, started detached (setsid) by an allowed
shell call; for as long as the next call waits for a decision the embedder never sends, it
writes forged metaharness commands, vendor control messages and — for ACP — answers to the
agent's `session/request_permission` requests and `session/set_mode` requests into every fd of
every process of the run it can find, tries to read their output, reads their environment and
probes whether it can signal metaharness. The test hands it the victim call's id and the ACP
session id once it sees them, so its forgeries are exact. It touches only this run's processes.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from acp_support import AcpRun, scenario
from test_e2e_acp import case, kind  # noqa: F401  (fixtures: each kind, a fresh case directory)

pytestmark = pytest.mark.timeout(240)

ATTACK = Path(__file__).resolve().parents[1] / "fixtures" / "adversary" / "attack.py"
ATTACK_S = 10.0  # how long the adversary keeps trying: it must outlast the vendor's way to the victim call
DEADLINE_MS = 14000  # the victim's deadline: only this may decide it


def requested(e: dict) -> bool:
    return e["event"] == "tool.requested" and e["decision_required"]


def test_the_agents_shell_cannot_decide_its_next_call(kind, case):
    ws = case / "ws"
    report, pid_file, oracle = case / "report.json", case / "mh.pid", case / "victim.json"
    host_ns = os.readlink("/proc/self/ns/pid")
    # Gemini CLI kills the command's process group as soon as the shell exits: the shell waits a
    # moment so the adversary is in a session of its own by then (it outlives the call).
    attack = (f"setsid -f {sys.executable} {ATTACK} {report} {ATTACK_S} {oracle} {pid_file} '{host_ns}' acp "
              f"</dev/null >{case}/attack.log 2>&1; sleep 1")
    scenario(case / "scenario.json", [
        {"text": "attacking", "calls": [{"op": "shell", "id": "attack", "input": {"command": attack}}]},
        {"text": "victim", "calls": [{"op": "shell", "id": "victim", "input": {"command": "echo pwned > PWNED"}}]},
        {"text": "done"}])
    mh = AcpRun(kind, case, ["-p", "do the task", "--script", str(case / "scenario.json"), "--cwd", str(ws),
                             "--decisions", "ask", "--decision-timeout-ms", str(DEADLINE_MS)])
    pid_file.write_text(str(mh.proc.pid))  # the run's top process: the attack stays below it
    first = mh.wait_for(requested)
    assert "attack.py" in json.dumps(first["input"])
    mh.send("tool.decide", "ok-attack", call_id=first["call_id"], decision={"decision": "allow"})
    try:
        second = mh.wait_for(lambda e: requested(e) and e["call_id"] != first["call_id"], timeout=120)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; warnings: {mh.of('warning')}; results: {mh.of('tool.result')}; "
                             f"ended: {mh.of('session.ended')}") from None
    session_id = mh.of("session.started")[0].get("session_id")
    oracle.write_text(json.dumps({"call_id": second["call_id"], "session_id": session_id}))
    pending_since = time.time()  # the victim waits for a decision from here on
    decided_event = mh.wait_for(lambda e: e["event"] == "tool.decided" and e["call_id"] == second["call_id"],
                                timeout=DEADLINE_MS / 1000 + 60)
    assert mh.finish() == 0, mh.stderr()
    mh.assert_complete()

    decided = mh.decided()
    assert decided[first["call_id"]]["decided_by"] == "embedder"
    assert decided_event["decided_by"] == "deadline", decided_event  # nobody but the deadline answered it
    assert decided_event["decision"]["decision"] == "deny"
    assert not (ws / "PWNED").exists()
    assert not [e for e in mh.events if e["event"] == "warning" and e["code"] == "UNDECIDED_CALL_RAN"]
    assert not [e for e in mh.of("command.result") if e["id"].startswith("forged")]
    # Our answers to the agent's permission requests are ours alone: one per call, the victim's a refusal.
    allow, reject = {"opencode": ("once", "reject"), "gemini": ("proceed_once", "cancel")}[kind]
    assert [a.get("optionId") for a in mh.answers()] == [allow, reject], mh.answers()
    # No control changed: the agent never left its pinned mode (a switch ends the run with a
    # VENDOR_ERROR warning), and no forged request was answered.
    assert not [e for e in mh.events if e["event"] == "warning" and e["code"] == "VENDOR_ERROR"]
    assert not [m for m in mh.sent() if str(m.get("id", "")).startswith("forged")]

    for _ in range(200):
        if report.exists():
            break
        time.sleep(0.1)
    log = (case / "attack.log").read_text() if (case / "attack.log").exists() else "(no log)"
    assert report.exists(), f"the attack wrote no report: {log}; results: {mh.of('tool.result')}"
    found = json.loads(report.read_text())
    # The adversary was at work while the victim waited, with the victim's real id in hand.
    assert found["ended_at"] > pending_since, (found["ended_at"], pending_since)
    assert found["victim_forged"] == second["call_id"], found
    assert found["targets"], found  # it found processes to attack: the harness at least
    # The harness's ACP channel is a socketpair: where fds 0 and 1 did not open, ENXIO refused
    # them; and no pipe or socket of the run opened for writing or was read from at all (a
    # process's own event-loop wakeup pipes excepted, which the adversary leaves alone).
    # (A non-dumpable harness — opencode under its guard — hides even the list of its fds.)
    assert (found["refused"] or found["fds_hidden"]) and set(found["refused"].values()) <= {"ENXIO"}, found
    assert not [k for k, t in found["opened_write"].items() if t.startswith(("socket:", "pipe:"))], found
    assert not [k for k, t in found["stole"].items() if t.startswith(("socket:", "pipe:"))], found
    # Where the platform confines the agent (its own PID namespace), metaharness is out of its
    # sight: not listed, not signalable, its environment unread.
    if found["private_namespace"]:
        assert not found["mh_pid_visible"] and found["signal_metaharness"] != "reachable", found
        assert mh.proc.pid not in found["environ_read"], found
