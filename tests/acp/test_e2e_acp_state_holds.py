"""Issue 19 on the real opencode and Gemini CLI: what the agent's shell writes into the harness's
own state decides none of its later calls.

The agent's shell (one allowed call) starts tests/fixtures/adversary/state_seed.py detached: it
writes the most permissive grant the vendor knows into every place the harness might read one
(global and workspace config, agent files, policy files, trusted folders, the state database)
and, while the next call waits for its decision, answers every permission request it finds on a
loopback HTTP server of the harness. The next call must still be presented, be decided by the
embedder — a refusal — and not run.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from metaharness.adapters.process import confinement

from acp_support import VENDOR, AcpRun, scenario
from test_e2e_acp import case  # noqa: F401  (fixture: a fresh case directory)

pytestmark = pytest.mark.timeout(240)

SEED = Path(__file__).resolve().parents[1] / "fixtures" / "adversary" / "state_seed.py"
SEED_S = 6.0  # how long the adversary answers permission requests: it must outlast the victim's wait
WAIT_S = 4.0  # how long the embedder lets the victim wait before refusing it


# opencode's `acp` command serves its own HTTP API on a loopback port, guarded by a per-run
# password. The adapter's guard plugin keeps it out of the agent's shells and makes opencode
# non-dumpable, so an agent without capabilities cannot read it from /proc/<opencode>/environ.
# The child runs without capabilities whenever it gets a user namespace of its own — as root
# too, mapped to an unprivileged uid; only a root child outside one (no user namespaces on the
# machine) overrides non-dumpable and answers its own permission requests.
ROOT_CHILD = os.geteuid() == 0 and "--user" not in confinement()[0]
OPENCODE_HOLE = pytest.mark.xfail(ROOT_CHILD, strict=True, raises=AssertionError, reason=(
    "a root child outside a user namespace reads opencode's server password from /proc/<opencode pid>/environ "
    "and answers its own permission requests on opencode's loopback HTTP API"))


# (vendor, how long the adversary answers permission requests on loopback servers: 0 seeds only)
SETUPS = {"opencode-state": ("opencode", 0.0), "opencode-server": ("opencode", SEED_S), "gemini": ("gemini", SEED_S)}


@pytest.fixture(params=["opencode-state", pytest.param("opencode-server", marks=OPENCODE_HOLE), "gemini"])
def setup(request) -> tuple[str, float]:
    vendor, _ = SETUPS[request.param]
    if not (VENDOR / vendor).exists():
        pytest.fail(f"{vendor} is not installed in .vendor; run make vendor")
    return SETUPS[request.param]


@pytest.fixture
def kind(setup) -> str:  # the case directory is named after it
    return setup[0]


def requested(e: dict) -> bool:
    return e["event"] == "tool.requested" and e["decision_required"]


def test_seeded_state_decides_no_later_call(setup, case):
    kind, answer_s = setup
    ws = case / "ws"
    report = case / "seed.json"
    # Gemini CLI kills the command's process group when the shell exits: the shell waits a moment.
    seed = (f"setsid -f {sys.executable} {SEED} {report} {answer_s} {kind} {ws} "
            f"</dev/null >{case}/seed.log 2>&1; sleep 1")
    scenario(case / "scenario.json", [
        {"text": "seeding", "calls": [{"op": "shell", "id": "seed", "input": {"command": seed}}]},
        {"text": "victim", "calls": [{"op": "shell", "id": "victim", "input": {"command": "echo pwned > PWNED"}}]},
        {"text": "done"}])
    mh = AcpRun(kind, case, ["-p", "do the task", "--script", str(case / "scenario.json"), "--cwd", str(ws),
                             "--decisions", "ask", "--decision-timeout-ms", "60000"])
    first = mh.wait_for(requested)
    assert "state_seed.py" in json.dumps(first["input"])
    mh.send("tool.decide", "ok-seed", call_id=first["call_id"], decision={"decision": "allow"})
    second = mh.wait_for(lambda e: requested(e) and e["call_id"] != first["call_id"], timeout=120)
    assert "echo pwned" in json.dumps(second["input"])
    pending_since = time.time()
    time.sleep(WAIT_S)  # the adversary is at work meanwhile
    try:
        mh.send("tool.decide", "no-victim", call_id=second["call_id"],
                decision={"decision": "deny", "reason": "not this one"})
    except BrokenPipeError:  # the run already ended: someone else decided, which the checks below name
        pass
    else:
        mh.wait_for(lambda e: e["event"] == "tool.decided" and e["call_id"] == second["call_id"], timeout=60)
    assert mh.finish() == 0, mh.stderr()
    mh.assert_complete()

    decided = mh.decided()
    assert decided[first["call_id"]]["decided_by"] == "embedder"
    assert not (ws / "PWNED").exists(), f"the victim ran; warnings: {mh.of('warning')}"
    victim = decided.get(second["call_id"], {})
    assert victim.get("decided_by") == "embedder", victim
    assert victim["decision"]["decision"] == "deny"
    assert not [e for e in mh.events if e["event"] == "warning" and e["code"] in ("UNDECIDED_CALL_RAN", "VENDOR_ERROR")]
    allow, reject = {"opencode": ("once", "reject"), "gemini": ("proceed_once", "cancel")}[kind]
    assert [a.get("optionId") for a in mh.answers()] == [allow, reject], mh.answers()

    for _ in range(100):
        if report.exists():
            break
        time.sleep(0.1)
    log = (case / "seed.log").read_text() if (case / "seed.log").exists() else "(no log)"
    assert report.exists(), f"the adversary wrote no report: {log}"
    found = json.loads(report.read_text())
    assert found["seeded"], found  # it wrote its grants before the victim was asked
    if kind == "opencode":  # the state database too: saved "always" approvals for every permission
        assert [e for e in found["seeded"] if "opencode.db:permission += allow" in e], found["seeded"]
    if answer_s:
        assert found["ended_at"] > pending_since + 1, found  # it was at work while the victim waited
    # A process without the harness's password is refused by every control server it found, and
    # the agent's shell did not inherit the password.
    assert all(status == 401 for status in found["servers"].values()), found
    assert found.get("password_from") != "own environment", found
    # No permission request of the harness was answered by anyone but metaharness.
    assert not found["answered"], found
