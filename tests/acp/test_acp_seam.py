"""The ACP seam's fail-closed paths, against a scripted agent (`fake_acp_agent.py`) launched by
the real adapters: every permission request gets exactly one answer, nothing runs that was not
allowed, and an agent that dies, hangs, switches mode or sends garbage leaves no call undecided."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from metaharness.adapters import adapter_class
from metaharness.run.loop import Run
from metaharness.run.spec import RunSpec

AGENT = Path(__file__).with_name("fake_acp_agent.py")
KINDS = ("opencode", "gemini")
pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def vendor(tmp_path) -> Path:
    directory = tmp_path / "vendor"
    directory.mkdir()
    for kind in KINDS:
        script = directory / kind
        script.write_text(f"#!/bin/sh\nexec {sys.executable} {AGENT} --flavour {kind} \"$@\"\n")
        script.chmod(0o755)
    return directory


def logging_probes(vendor: Path, kind: str, *agent_args: str) -> Path:
    """`kind`'s script noting each `--version` asked of it in the returned log."""
    log = vendor / "version-probes.log"
    (vendor / kind).write_text(f"#!/bin/sh\ncase \"$*\" in *--version*) echo probed >> {log};; esac\n"
                               f"exec {sys.executable} {AGENT} --flavour {kind} {' '.join(agent_args)} \"$@\"\n")
    return log


class Driven:
    def __init__(self, lines: list[bytes], code: int, ws: Path) -> None:
        self.events = [json.loads(line) for line in lines]
        self.code = code
        self.ws = ws

    def of(self, name: str) -> list[dict]:
        return [e for e in self.events if e["event"] == name]

    def decided(self) -> dict[str, dict]:
        return {e["call_id"]: e for e in self.of("tool.decided")}

    def answers(self) -> list[dict]:
        wire = [json.loads(line) for line in (self.ws / "agent-wire.log").read_text().splitlines() if line.strip()]
        return [m for m in wire if "result" in m and isinstance(m["result"], dict) and "outcome" in m["result"]]

    def sent_methods(self) -> list[str]:
        wire = [json.loads(line) for line in (self.ws / "agent-wire.log").read_text().splitlines() if line.strip()]
        return [m.get("method") for m in wire if isinstance(m, dict) and "method" in m]


def drive(kind: str, tmp_path: Path, vendor: Path, prompt: str, *, answer=None, takeup: float = 0.5,
          hold: float = 0.5, before_answer=None, **spec_fields) -> Driven:
    """One in-process run; `answer(event)` returns a decision for each call asking for one
    (`before_answer(adapter, event)` runs first)."""
    ws = tmp_path / "ws"
    ws.mkdir(parents=True, exist_ok=True)
    spec = RunSpec(kind=kind, prompt=prompt, credentials="none", model_endpoint="http://127.0.0.1:9",
                   cwd=str(ws), vendor_dir=str(vendor), **spec_fields)
    adapter = type("Timed", (adapter_class(kind),), {"takeup_s": takeup, "hold_s": hold})(spec)
    lines: list[bytes] = []

    async def main() -> int:
        loop = asyncio.get_running_loop()
        run: Run

        def write(line: bytes) -> None:
            lines.append(line)
            event = json.loads(line)
            if answer is not None and event["event"] == "tool.requested" and event["decision_required"]:
                if before_answer is not None:
                    before_answer(adapter, event)
                decision = answer(event)
                if decision is not None:
                    command = {"format": "metaharness.command/1", "id": f"d-{event['call_id']}",
                               "command": "tool.decide", "call_id": event["call_id"], "decision": decision}
                    loop.call_soon(run.feed_line, json.dumps(command).encode())

        run = Run(spec, write, adapter=adapter)
        loop.call_later(0.1, run.stdin_ended) if not spec_fields.get("keep_open") else None
        return await run.execute()

    code = asyncio.run(main())
    return Driven(lines, code, ws)


ALLOW = {"decision": "allow"}
DENY = {"decision": "deny", "reason": "not here"}
ALLOW_OPTION = {"opencode": "once", "gemini": "proceed_once"}
REJECT_OPTION = {"opencode": "reject", "gemini": "cancel"}


@pytest.mark.parametrize("kind", KINDS)
def test_allow_and_deny_select_the_once_options_and_never_always(kind, tmp_path, vendor):
    allowed = drive(kind, tmp_path / "a", vendor, "SHELL", answer=lambda e: ALLOW, decisions="ask")
    assert allowed.code == 0 and (allowed.ws / "ran.txt").exists()
    assert [a["result"]["outcome"] for a in allowed.answers()] == [{"outcome": "selected", "optionId": ALLOW_OPTION[kind]}]
    denied = drive(kind, tmp_path / "d", vendor, "SHELL", answer=lambda e: DENY, decisions="ask")
    assert denied.code == 0 and not (denied.ws / "ran.txt").exists()
    assert [a["result"]["outcome"] for a in denied.answers()] == [{"outcome": "selected", "optionId": REJECT_OPTION[kind]}]
    (result,) = denied.of("tool.result")
    assert result["is_error"] is True


@pytest.mark.parametrize("kind", KINDS)
def test_two_pending_requests_answered_out_of_order(kind, tmp_path, vendor):
    held: list[dict] = []

    def second_first(event):
        # Hold the first request; answer the second, then the first (deny).
        held.append(event)
        if len(held) == 1:
            return None
        return ALLOW

    driven = drive(kind, tmp_path, vendor, "TWO", answer=second_first, decisions="ask", decision_timeout_ms=1500)
    assert driven.code == 0
    assert not (driven.ws / "ran-1.txt").exists() and (driven.ws / "ran-2.txt").exists()
    answers = [(a["id"], a["result"]["outcome"]["optionId"]) for a in driven.answers()]
    assert answers == [(102, ALLOW_OPTION[kind]), (101, REJECT_OPTION[kind])]  # the first one by its deadline
    assert driven.decided()[held[0]["call_id"]]["decided_by"] == "deadline"


@pytest.mark.parametrize("kind", KINDS)
def test_a_child_that_dies_mid_call_leaves_nothing_undecided(kind, tmp_path, vendor):
    driven = drive(kind, tmp_path, vendor, "DIE", decisions="ask")
    assert driven.code == 3  # no terminal record: the harness died
    (decided,) = driven.of("tool.decided")
    assert decided["decision"]["decision"] == "deny" and decided["decided_by"] == "adapter"
    assert not driven.of("session.ended")
    assert driven.of("stream.closed")[0]["process"] == {"kind": "exited", "code": 7}
    assert not (driven.ws / "ran.txt").exists()


def killed_and_gone(adapter, _event) -> None:
    """SIGKILL the agent and wait (the loop held) until it has exited: its output is not read to
    the end yet, so the run has not noticed when the decision comes."""
    from metaharness.adapters.process.tree import has_exited

    os.killpg(adapter.child.proc.pid, signal.SIGKILL)
    give_up = time.monotonic() + 10
    while not has_exited(adapter.child.proc) and time.monotonic() < give_up:
        time.sleep(0.005)


@pytest.mark.parametrize("kind", KINDS)
def test_an_allow_sent_after_the_agent_died_is_too_late_and_never_claimed(kind, tmp_path, vendor):
    driven = drive(kind, tmp_path, vendor, "SHELL", answer=lambda e: ALLOW, before_answer=killed_and_gone,
                   decisions="ask")
    (decided,) = driven.of("tool.decided")
    assert decided["decision"]["decision"] == "deny" and decided["decided_by"] == "adapter"
    (result,) = driven.of("command.result")
    refusal = result["outcome"]["refused"]
    assert refusal["code"] == "TOO_LATE" and refusal["reason"].startswith("the harness can no longer be reached: ")
    assert driven.answers() == []  # nothing was written to the dead agent
    assert driven.code == 3 and not (driven.ws / "ran.txt").exists()


@pytest.mark.parametrize("kind", KINDS)
def test_a_mode_switch_ends_the_run_before_the_next_call_is_allowed(kind, tmp_path, vendor):
    driven = drive(kind, tmp_path, vendor, "MODE", answer=lambda e: ALLOW, decisions="ask")
    warnings = [w for w in driven.of("warning") if w["code"] == "VENDOR_ERROR"]
    assert warnings and "mode" in warnings[0]["message"]
    assert not (driven.ws / "ran.txt").exists()
    assert all(a["result"]["outcome"]["outcome"] == "cancelled" for a in driven.answers())
    assert driven.of("stream.closed")


@pytest.mark.parametrize("kind", KINDS)
def test_a_refusal_the_agent_ignores_escalates_to_cancel_then_closed_stdin(kind, tmp_path, vendor):
    driven = drive(kind, tmp_path, vendor, "IGNORE", answer=lambda e: DENY, decisions="ask", takeup=0.5)
    assert (driven.ws / "cancel-seen").exists()
    notices = [w["message"] for w in driven.of("warning") if w["code"] == "VENDOR_NOTICE"]
    assert any("cancelled" in m for m in notices) and any("stdin was closed" in m for m in notices)
    assert driven.sent_methods().count("session/cancel") == 1
    assert not (driven.ws / "ran.txt").exists()
    assert driven.of("session.ended")  # we closed its stdin: the session ended, it did not die


@pytest.mark.parametrize("kind", KINDS)
def test_no_answer_at_all_is_denied_by_the_deadline(kind, tmp_path, vendor):
    driven = drive(kind, tmp_path, vendor, "SHELL", decisions="ask", decision_timeout_ms=300)
    (decided,) = driven.of("tool.decided")
    assert decided["decided_by"] == "deadline"
    assert [a["result"]["outcome"]["optionId"] for a in driven.answers()] == [REJECT_OPTION[kind]]
    assert not (driven.ws / "ran.txt").exists()


def test_late_arguments_are_waited_for_and_presented_whole(tmp_path, vendor):
    seen = []
    driven = drive("opencode", tmp_path, vendor, "LATE", answer=lambda e: seen.append(e) or ALLOW,
                   decisions="ask", hold=5)
    (requested,) = seen
    assert requested["input"]["path"] == "/etc" and requested["subjects"] == ["file:/etc"]
    assert requested["operations"] == ["dir.list"]


def test_arguments_that_never_arrive_are_rejected_not_guessed(tmp_path, vendor):
    driven = drive("opencode", tmp_path, vendor, "NOARGS", answer=lambda e: ALLOW, decisions="ask", hold=0.3)
    (requested,) = driven.of("tool.requested")
    assert requested["decision_required"] is False and requested["seam"] == "none"  # recorded, not presented
    assert [a["result"]["outcome"]["optionId"] for a in driven.answers()] == ["reject"]
    assert any(w["code"] == "PENDING_CALL_ABANDONED" for w in driven.of("warning"))


@pytest.mark.parametrize("kind", KINDS)
def test_garbage_and_unreadable_requests_are_opaque_and_refused(kind, tmp_path, vendor):
    garbage = drive(kind, tmp_path / "g", vendor, "GARBAGE", answer=lambda e: ALLOW, decisions="ask")
    assert garbage.code == 0 and (garbage.ws / "ran.txt").exists()
    assert len(garbage.of("opaque")) == 2  # the garbage line and the answer to nothing
    unreadable = drive(kind, tmp_path / "u", vendor, "UNREADABLE", answer=lambda e: ALLOW, decisions="ask")
    outcomes = {a["id"]: a["result"]["outcome"] for a in unreadable.answers()}
    assert outcomes[50] == {"outcome": "cancelled"}  # no reject option offered: refused as cancelled
    assert outcomes[100]["optionId"] == ALLOW_OPTION[kind]


@pytest.mark.parametrize("kind", KINDS)
def test_steer_and_permission_set_are_refused_by_name_at_start(kind, tmp_path, vendor):
    for command in ("steer", "permission.set"):
        driven = drive(kind, tmp_path / command, vendor, "SHELL", required_commands=[command])
        assert driven.code == 2
        (result,) = driven.of("command.result")
        assert result["id"] == f"start/{command}" and result["outcome"]["refused"]["code"] == "UNSUPPORTED_CONTROL"


@pytest.mark.parametrize("kind", KINDS)
def test_replace_and_deny_only_are_refused_at_start(kind, tmp_path, vendor):
    replace = drive(kind, tmp_path / "r", vendor, "SHELL", required_commands=["replace"])
    assert replace.code == 2 and replace.of("command.result")[0]["id"] == "start/replace"
    deny_only = drive(kind, tmp_path / "o", vendor, "SHELL", deny_only=True)
    assert deny_only.code == 2 and not deny_only.of("session.started")


@pytest.mark.parametrize("kind", KINDS)
def test_a_frame_admitting_subagents_is_refused_at_start(kind, tmp_path, vendor):
    from acp_support import frame

    path = frame(tmp_path / "f.json", ["shell", "subagent.spawn"])
    driven = drive(kind, tmp_path, vendor, "SHELL", frame=str(path))
    assert driven.code == 2 and not driven.of("session.started")
    assert not (tmp_path / "ws" / "agent-wire.log").exists()  # nothing was spawned


def test_gemini_refuses_subject_rules_over_search_and_listing(tmp_path, vendor):
    from acp_support import frame

    scoped = frame(tmp_path / "scoped.json", ["file.read", "search"], rules=[(["file:src/**"], ["file.read", "search"])])
    assert drive("gemini", tmp_path / "g", vendor, "SHELL", frame=str(scoped)).code == 2
    assert drive("opencode", tmp_path / "o", vendor, "SHELL", frame=str(scoped), decisions="frame").code == 0
    unscoped = frame(tmp_path / "unscoped.json", ["file.read", "search"])
    assert drive("gemini", tmp_path / "u", vendor, "SHELL", frame=str(unscoped)).code == 0


@pytest.mark.parametrize("kind", KINDS)
def test_the_version_initialize_names_is_the_runs_and_no_probe_starts_the_agent_twice(kind, tmp_path, vendor):
    log = logging_probes(vendor, kind)
    run = drive(kind, tmp_path, vendor, "SHELL", answer=lambda event: ALLOW)
    assert run.of("session.started")[0]["harness_version"] == ("0.61.0" if kind == "gemini" else "1.18.33")
    assert not log.exists()


@pytest.mark.parametrize("kind", KINDS)
def test_an_agent_that_names_no_version_is_asked_its_version(kind, tmp_path, vendor):
    log = logging_probes(vendor, kind, "--anonymous")
    run = drive(kind, tmp_path, vendor, "SHELL", answer=lambda event: ALLOW)
    started = run.of("session.started")[0]
    assert started["harness_version"] == ("0.61.0" if kind == "gemini" else "1.18.33")
    assert log.read_text().splitlines() == ["probed"]


def test_strict_version_reads_the_version_before_the_agent_starts(tmp_path, vendor):
    log = logging_probes(vendor, "opencode")
    run = drive("opencode", tmp_path, vendor, "SHELL", answer=lambda event: ALLOW, strict_version=True)
    assert run.of("session.started")[0]["harness_version"] == "1.18.33"
    assert log.read_text().splitlines() == ["probed"]
