"""Vendor checks (VC) against the real Codex CLI 0.171.0 (the Codex end-to-end checklist): our own
JSON-RPC client drives `codex app-server` launched exactly as the adapter launches it,
to pin the vendor behaviour the adapter's design rests on — how malformed approval
answers fail closed (X12), that unreadable or unmatched answers leave the request pending
(X13), that `turn/interrupt` alone does not stop an accepted command (X16), and the
PreToolUse-hook facts the replace relay rests on (X29, X33; the relay itself, X30, is in
test_e2e_relay.py). X31 (`codex exec` hook outcomes) is in test_e2e_exec_hook.py.

Every refused effect is asserted on disk. Each case runs inside the loopback-only network
namespace when the machine allows it, and the DNS sink's log must stay empty.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid

import pytest

from e2e_support import CODEX, E2E_ROOT
from vendor_client import AppServer, rejection_texts


APPROVAL_FAILED = 'exec_command failed: CreateProcess { message: "Rejected(\\"approval request failed\\")" }'


@pytest.fixture
def case(request):
    if not CODEX.exists():
        pytest.fail(f"the pinned codex binary is missing at {CODEX}; run "
                    "`make vendor` (the vendor installation rule)")
    directory = E2E_ROOT / f"vc-{request.node.name[:40]}-{uuid.uuid4().hex[:6]}"
    directory.mkdir(parents=True)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def shell(command: str) -> dict:
    return {"op": "shell", "input": {"command": command}}


WRITE_THEN_PATCH = [
    {"calls": [shell("echo hi > out.txt")]},
    {"calls": [{"op": "file.write", "input": {"path": "w.txt", "content": "written by apply_patch"}}]},
    {"text": "done"},
]


# --- X12 VC FC: a malformed answer fails closed -------------------------------------------

MALFORMED = {
    "unknown-word": lambda rid: {"id": rid, "result": {"decision": "yes please"}},
    "empty-object": lambda rid: {"id": rid, "result": {}},
    "null-result": lambda rid: {"id": rid, "result": None},
    "jsonrpc-error": lambda rid: {"id": rid, "error": {"code": -32000, "message": "the client failed"}},
    "legacy-approved": lambda rid: {"id": rid, "result": {"decision": "approved"}},
}


@pytest.mark.parametrize("answer", sorted(MALFORMED))
def test_x12_malformed_answer_does_not_run(case, answer):
    server = AppServer(case, WRITE_THEN_PATCH)
    try:
        server.handshake()
        server.start_turn()
        shell_request = server.approval()
        assert shell_request["method"] == "item/commandExecution/requestApproval"
        server.write(MALFORMED[answer](shell_request["id"]))
        shell_item = server.item_completed(shell_request["params"]["itemId"])
        patch_request = server.approval(start=server.index_of(shell_request) + 1)
        assert patch_request["method"] == "item/fileChange/requestApproval"
        server.write(MALFORMED[answer](patch_request["id"]))
        patch_item = server.item_completed(patch_request["params"]["itemId"])
        turn = server.turn_completed()["params"]["turn"]
        assert server.close() == 0
        assert shell_item["status"] == "failed" and shell_item.get("exitCode") is None
        assert patch_item["status"] in ("failed", "declined")
        assert turn["status"] == "completed"  # the turn continued: the model was asked again
        inputs = server.model_inputs()
        assert len(inputs) == 3
        shell_outputs = rejection_texts(inputs, shell_request["params"]["itemId"])
        patch_outputs = rejection_texts(inputs, patch_request["params"]["itemId"])
        assert shell_outputs and APPROVAL_FAILED in shell_outputs[-1], shell_outputs
        assert patch_outputs and "approval request failed" in patch_outputs[-1], patch_outputs
        assert server.dns_names() == []
    finally:
        server.close()
    time.sleep(1)
    assert not (case / "work" / "out.txt").exists()
    assert not (case / "work" / "w.txt").exists()


# --- X13 VC FC: unreadable or unmatched answers leave the request pending ------------------


def test_x13_unmatched_answers_stay_pending_then_interrupt(case):
    server = AppServer(case, [{"calls": [shell("echo hi > out.txt")]}, {"text": "done"}])
    try:
        server.handshake()
        turn_id = server.start_turn()
        request = server.approval()
        request_id = request["id"]
        assert isinstance(request_id, int)
        item_id = request["params"]["itemId"]
        server.write_raw(b"this is not json")
        server.write({"id": request_id + 1000, "result": {"decision": "accept"}})  # an id never sent
        server.write({"id": str(request_id), "result": {"decision": "accept"}})  # ids are type-exact
        time.sleep(10)
        assert server.alive()
        assert not server.notifications("serverRequest/resolved")
        assert not [m for m in server.notifications("item/completed") if m["params"]["item"]["id"] == item_id]
        assert not server.notifications("turn/completed")
        assert not (case / "work" / "out.txt").exists()
        assert len(server.model_inputs()) == 1  # the turn is blocked on the approval
        assert "Failed to deserialize JSONRPCMessage" in server.stderr()

        mark = len(server.messages)
        sent_at = time.monotonic()
        reply = server.request("turn/interrupt", {"threadId": server.thread_id, "turnId": turn_id})
        assert reply.get("result") == {}
        completed = server.turn_completed(timeout=10, start=mark)
        elapsed_ms = (server.read_at[server.index_of(completed)] - sent_at) * 1000
        assert completed["params"]["turn"]["status"] == "interrupted"
        # vendors.md measured 13 ms; the bound leaves room for a loaded 2-core machine.
        assert elapsed_ms < 1000, f"turn/interrupt → turn/completed took {elapsed_ms:.0f} ms"
        server.wait_for(lambda m: m.get("method") == "serverRequest/resolved"
                        and m["params"]["requestId"] == request_id, timeout=5)

        late = len(server.messages)
        server.write({"id": request_id, "result": {"decision": "accept"}})  # a late accept for the stale id
        time.sleep(2)
        assert server.alive()
        ran = [m for m in server.messages[late:] if m.get("method") in ("item/completed", "item/started")
               and m["params"]["item"].get("id") == item_id]
        assert ran == [] or all(m["params"]["item"]["status"] != "completed" for m in ran)
        assert server.close() == 0
        assert server.dns_names() == []
    finally:
        server.close()
    time.sleep(1)
    assert not (case / "work" / "out.txt").exists()


# --- X16 VC: turn/interrupt alone does not stop an accepted command -------------------------


def test_x16_turn_interrupt_alone_leaves_the_command_running(case):
    """Pins why the adapter kills process groups on interrupt (the vendor rule “commands”, X15)."""
    server = AppServer(case, [{"calls": [shell("sleep 4 && echo late > late.txt")]}, {"text": "after"}])
    late = case / "work" / "late.txt"
    try:
        server.handshake()
        turn_id = server.start_turn()
        request = server.approval()
        item_id = request["params"]["itemId"]
        server.write({"id": request["id"], "result": {"decision": "accept"}})
        time.sleep(1)
        mark = len(server.messages)
        reply = server.request("turn/interrupt", {"threadId": server.thread_id, "turnId": turn_id})
        assert reply.get("result") == {}
        completed = server.turn_completed(timeout=10, start=mark)
        assert completed["params"]["turn"]["status"] == "interrupted"
        assert not late.exists()
        interrupted_at = server.read_at[server.index_of(completed)]
        deadline = time.monotonic() + 8
        while not late.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        appeared_after = time.monotonic() - interrupted_at
        assert late.exists(), "the accepted command was stopped by turn/interrupt alone; the X15 kill may be unneeded"
        assert late.read_text() == "late\n"
        item = server.item_completed(item_id, timeout=10)
        assert item["status"] == "completed" and item["exitCode"] == 0
        assert server.index_of(completed) < next(i for i, m in enumerate(server.messages)
                                                 if m.get("method") == "item/completed"
                                                 and m["params"]["item"]["id"] == item_id)
        assert 1.0 < appeared_after < 6.0, f"late.txt appeared {appeared_after:.1f}s after turn/completed"
        assert server.alive()
        assert server.close() == 0
        assert server.dns_names() == []
    finally:
        server.close()


# --- X29 / X33 VC: PreToolUse hooks inside app-server (what the replace relay rests on) ---
# These pin the hook facts the relay of the vendor rule “replace on Codex, and PreToolUse hooks inside app-server” depends on, so a pin move that breaks
# them is seen here as well as in the relay's own cases.

HOOK_OUTPUTS = {
    "deny": "printf '%s' '{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"permissionDecision\":\"deny\","
            "\"permissionDecisionReason\":\"VC-DENY-REASON\"}}'",
    "crash": "exit 1",
    "rewrite": "printf '%s' '{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"permissionDecision\":\"allow\","
               "\"updatedInput\":{\"command\":\"echo rewritten > rewritten.txt\"}}}'",
    "slow": "sleep 4",
}


def hook_config(case, behaviour: str, timeout: int = 30) -> str:
    script = case / "hook.sh"
    script.write_text(f"#!/bin/sh\ncat > /dev/null\necho ran >> {case / 'hook-ran.log'}\n{HOOK_OUTPUTS[behaviour]}\n")
    script.chmod(0o755)
    return ("[[hooks.PreToolUse]]\n[[hooks.PreToolUse.hooks]]\n"
            f'type = "command"\ncommand = "{script}"\ntimeout = {timeout}\n')


@pytest.mark.parametrize("behaviour", ["deny", "crash", "rewrite", "cli-flag"])
def test_x29_pretooluse_hook_inside_app_server(case, behaviour):
    hook = "deny" if behaviour == "cli-flag" else behaviour
    flag_only = behaviour == "cli-flag"
    server = AppServer(case, [{"calls": [shell("echo hi > out.txt")]}, {"text": "done"}],
                       config_extra=hook_config(case, hook),
                       extra_args=["-c", "bypass_hook_trust=true"] if flag_only else None)
    try:
        server.handshake(thread_config=None if flag_only else {"bypass_hook_trust": True})
        server.start_turn()
        if behaviour == "deny":
            turn = server.turn_completed()["params"]["turn"]
            assert turn["status"] == "completed"
            blocked = [m for m in server.notifications("hook/completed") if m["params"]["run"]["status"] == "blocked"]
            assert blocked and any("VC-DENY-REASON" in e["text"] for e in blocked[0]["params"]["run"]["entries"])
            assert not [m for m in server.messages if str(m.get("method", "")).endswith("/requestApproval")]
            assert not [m for m in server.notifications("item/started")
                        if m["params"]["item"]["type"] == "commandExecution"]
            outputs = [json.dumps(e) for request in server.model_inputs() for e in request
                       if e.get("type") == "function_call_output"]
            assert outputs and "Command blocked by PreToolUse hook: VC-DENY-REASON" in outputs[-1]
        elif behaviour == "crash":
            request = server.approval()  # the approval is the fail-closed backstop
            failed = [m for m in server.notifications("hook/completed") if m["params"]["run"]["status"] == "failed"]
            assert failed
            server.write({"id": request["id"], "result": {"decision": "decline"}})
            assert server.item_completed(request["params"]["itemId"])["status"] == "declined"
            server.turn_completed()
        elif behaviour == "rewrite":
            request = server.approval()
            assert "echo rewritten > rewritten.txt" in request["params"]["command"]
            assert "out.txt" not in request["params"]["command"]
            server.write({"id": request["id"], "result": {"decision": "accept"}})
            assert server.item_completed(request["params"]["itemId"])["status"] == "completed"
            server.turn_completed()
            assert (case / "work" / "rewritten.txt").read_text() == "rewritten\n"
        else:
            # `-c bypass_hook_trust=true` is ignored: the untrusted hook never runs, the approval is asked.
            request = server.approval()
            assert "out.txt" in request["params"]["command"]
            server.write({"id": request["id"], "result": {"decision": "decline"}})
            server.turn_completed()
            assert not (case / "hook-ran.log").exists()
            assert not server.notifications("hook/started")
            assert "bypass_hook_trust" in server.stderr()
        if behaviour != "cli-flag":
            assert (case / "hook-ran.log").exists()
        assert server.close() == 0
        assert server.dns_names() == []
    finally:
        server.close()
    time.sleep(0.5)
    assert not (case / "work" / "out.txt").exists()


def test_x33_hook_timeout_inside_app_server(case):
    """A hook that outlives its timeout: the relay of the vendor rule “replace on Codex, and PreToolUse hooks inside app-server” may ship only because the approval still follows."""
    server = AppServer(case, [{"calls": [shell("echo hi > out.txt")]}, {"text": "done"}],
                       config_extra=hook_config(case, "slow", timeout=2))
    try:
        server.handshake(thread_config={"bypass_hook_trust": True})
        server.start_turn()
        request = server.approval(timeout=20)
        hooks = [m["params"]["run"]["status"] for m in server.notifications("hook/completed")]
        print(f"X33 record: hook/completed statuses {hooks}; the approval request followed the timed-out hook")
        assert hooks == ["failed"]  # measured on 0.171.0: the timed-out hook is reported failed, then asked
        assert not (case / "work" / "out.txt").exists()  # not run unasked
        server.write({"id": request["id"], "result": {"decision": "decline"}})
        server.turn_completed()
        assert server.close() == 0
        assert server.dns_names() == []
    finally:
        server.close()
    time.sleep(0.5)
    assert not (case / "work" / "out.txt").exists()
