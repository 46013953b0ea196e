"""The replace relay of the vendor rule “replace on Codex, and PreToolUse hooks inside app-server” without the vendor: the hook program against the
per-run socket, the hook declaration, and the seam's rules for a hook presentation and the
approval that follows it. The real binary runs the relay in test_e2e_relay.py."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from examples import examples

from metaharness.adapters.base import resolve_tool
from metaharness.adapters.codex import CodexAdapter
from metaharness.adapters.codex.relay import (
    PROGRAM,
    RelayServer,
    hook_timing,
    hook_toml,
    patch_changes,
    unwrap_shell,
)
from metaharness.adapters.codex.seam import RELAY_REPLACE_REASON, Seam
from metaharness.adapters.codex.tools import TOOLS
from metaharness.adapters.codex.translate import Translator
from metaharness.protocol.values import Abstain, Allow, Deny, Replace

from codex_helpers import FakeContext, make_spec

CALL = "call_0123456789abcdef"
PATCH = "*** Begin Patch\n*** Add File: notes/new.txt\n+hello\n*** Update File: a.txt\n*** Move to: b.txt\n@@\n-x\n+y\n*** End Patch\n"


def hook_payload(name: str = "Bash", command: str = "echo hi > out.txt", call_id: str = CALL, cwd: str = "/w") -> dict:
    return {"session_id": "s", "turn_id": "t", "cwd": cwd, "hook_event_name": "PreToolUse", "model": "gpt-5.5",
            "permission_mode": "bypassPermissions", "tool_name": name, "tool_input": {"command": command},
            "tool_use_id": call_id}


def run_relay(directory, secret: str, payload: bytes, wait: float = 5.0) -> subprocess.CompletedProcess:
    # The secret travels in the hook's environment, as Codex hands it down (never in argv).
    return subprocess.run([sys.executable, "-I", "-S", str(PROGRAM), str(directory), str(wait)],
                          input=payload, capture_output=True, timeout=30,
                          env={**os.environ, "METAHARNESS_RELAY_SECRET": secret})


# --- the hook program and the socket ---------------------------------------------------


@pytest.fixture
def long_dir(tmp_path):
    # Deeper than a Unix socket address can name (108 bytes): the relay must still connect.
    directory = tmp_path / ("d" * 60) / ("e" * 60)
    directory.mkdir(parents=True, mode=0o700)
    assert len(str(directory / "relay.sock")) > 108
    return directory


def serve(directory, answer):
    """Run a RelayServer on a private loop in a thread; `answer(payload)` → bytes or None (never reply)."""
    import threading

    seen: list[dict] = []
    ready = threading.Event()
    state: dict = {}

    def on_hook(payload, reply):
        seen.append(payload)
        out = answer(payload)
        if out is not None:
            reply(out)

    def main():
        loop = asyncio.new_event_loop()
        state["loop"] = loop
        server = RelayServer(directory, on_hook)
        state["server"] = server
        loop.run_until_complete(server.start())
        ready.set()
        loop.run_forever()
        loop.run_until_complete(server.stop())
        loop.close()

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    ready.wait(10)

    def stop():
        state["loop"].call_soon_threadsafe(state["loop"].stop)
        thread.join(10)

    return state["server"], seen, stop


def test_relay_round_trip_prints_the_answer(long_dir):
    deny = b'{"hookSpecificOutput":{"permissionDecision":"deny"}}'
    server, seen, stop = serve(long_dir, lambda payload: deny)
    try:
        assert oct(os.stat(server.path).st_mode & 0o777) == "0o600"
        done = run_relay(long_dir, server.secret, json.dumps(hook_payload()).encode())
        assert done.returncode == 0 and done.stdout == deny
        assert seen == [hook_payload()]
        # An abstaining answer is empty stdout: the approval that follows decides.
        server.on_hook = lambda payload, reply: reply(b"")
        done = run_relay(long_dir, server.secret, json.dumps(hook_payload()).encode())
        assert done.returncode == 0 and done.stdout == b""
    finally:
        stop()
    assert not server.path.exists()


def test_relay_failures_print_nothing_and_exit_0(long_dir, tmp_path):
    server, seen, stop = serve(long_dir, lambda payload: b"SHOULD-NOT-PRINT")
    try:
        wrong = run_relay(long_dir, "not-the-secret", json.dumps(hook_payload()).encode())
        assert (wrong.returncode, wrong.stdout) == (0, b"")
        garbage = run_relay(long_dir, server.secret, b"{not json")
        assert (garbage.returncode, garbage.stdout) == (0, b"")
        assert seen == [] and server.refused == 2
        # A server that never answers: the relay gives up after its own wait, printing nothing.
        server.on_hook = lambda payload, reply: None
        t0 = time.monotonic()
        silent = run_relay(long_dir, server.secret, json.dumps(hook_payload()).encode(), wait=0.5)
        assert (silent.returncode, silent.stdout) == (0, b"") and time.monotonic() - t0 < 5
    finally:
        stop()
    absent = run_relay(tmp_path, "x", json.dumps(hook_payload()).encode())  # no socket at all
    assert (absent.returncode, absent.stdout) == (0, b"")


def test_hook_declaration():
    table = tomllib.loads(hook_toml(Path("/scratch/codex-1"), *hook_timing(55000, 60000)))
    [entry] = table["hooks"]["PreToolUse"]
    assert "matcher" not in entry  # every tool
    [hook] = entry["hooks"]
    assert hook["type"] == "command" and hook["timeout"] == 60
    argv = shlex.split(hook["command"])
    assert argv[:4] == [sys.executable, "-I", "-S", str(PROGRAM)]
    assert argv[4] == "/scratch/codex-1" and len(argv) == 6  # no secret: argv is readable by every user
    assert 55 < float(argv[5]) < 60  # the verdict is due before the relay gives up, and it gives up before Codex stops it
    assert hook_timing(1500, 3000) == (3, 2.25) and hook_timing(2001, 4002) == (5, 3.0015)


def test_patch_changes_and_unwrap():
    assert patch_changes(PATCH) == [
        {"path": "notes/new.txt", "kind": {"type": "add", "move_path": None}},
        {"path": "a.txt", "kind": {"type": "update", "move_path": "b.txt"}},
    ]
    assert patch_changes("*** Begin Patch\n*** Delete File: gone.txt\n*** End Patch") == [
        {"path": "gone.txt", "kind": {"type": "delete", "move_path": None}}]
    assert patch_changes("no patch here") is None
    assert patch_changes("*** Begin Patch\n*** Move to: x\n*** End Patch\n") is None
    assert patch_changes("*** Begin Patch\n*** Add File: a\n+x\n") is None  # no end marker
    assert patch_changes("*** Begin Patch\n*** Copy File: a\n*** End Patch") is None  # unknown header
    assert patch_changes("*** Begin Patch\n*** Update File: a\n@@\n-x\n+y\n*** End of File\n*** End Patch\n") == [
        {"path": "a", "kind": {"type": "update", "move_path": None}}]
    assert unwrap_shell("/bin/bash -lc 'echo hi > out.txt'") == "echo hi > out.txt"
    assert unwrap_shell("/usr/bin/zsh -c 'echo hi'") == "echo hi"
    assert unwrap_shell("bash -lc 'echo hi'") is None  # not a resolved shell
    assert unwrap_shell("/usr/bin/python3 -c 'print(1)'") is None
    assert unwrap_shell("/bin/bash -lc 'echo hi' extra") is None
    assert unwrap_shell("/bin/bash -lc 'unterminated") is None


# --- the seam: a hook presentation, then its approval -----------------------------------


class FakeRpc:
    def __init__(self) -> None:
        self.answers: list[tuple] = []
        self.requests: list[tuple] = []

    def answer(self, request_id, result=None, error=None) -> bool:
        self.answers.append((request_id, result, error))
        return True

    def send_request(self, method, params):
        self.requests.append((method, params))
        future = asyncio.get_running_loop().create_future()
        future.set_result({})
        return future


def make_seam(tmp_path):
    ctx = FakeContext(str(tmp_path))
    translator = Translator(ctx)
    translator.started = True
    adapter = CodexAdapter(make_spec(tmp_path, None))
    adapter.work = str(tmp_path)
    seam = Seam(FakeRpc(), translator, ctx, lambda: "thread-1", 60000, run_cwd=adapter.spec.work_dir())
    return seam, ctx


def hook(seam, payload=None) -> list[bytes]:
    replies: list[bytes] = []
    seam.on_hook(hook_payload() if payload is None else payload, replies.append)
    return replies


def approval(seam, request_id=7, command="/bin/bash -lc 'echo hi > out.txt'", item=CALL):
    seam.on_request({"id": request_id, "method": "item/commandExecution/requestApproval",
                     "params": {"itemId": item, "turnId": "t", "command": command, "cwd": "/w"}}, b"{}", 1)


async def test_replace_is_delivered_and_the_verified_approval_accepted(tmp_path):
    seam, ctx = make_seam(tmp_path)
    replies = hook(seam)
    [call] = ctx.calls
    assert (call.call_id, call.name, call.input, call.seam, call.can_replace) == (CALL, "Bash", {"command": "echo hi > out.txt"}, "hook", True)
    # the one shape of replacement the call carries, as a value the run reads
    assert call.replace_only.refusal({"command": "true", "timeout": 5}) == RELAY_REPLACE_REASON
    assert call.replace_only.refusal({"command": "  "}) == RELAY_REPLACE_REASON
    assert call.replace_only.refusal({"command": 7}) == RELAY_REPLACE_REASON
    assert call.replace_only.refusal({"command": "true"}) is None
    seam.deliver(call.call_id, Replace(input={"command": "echo new > new.txt"}), "embedder")
    out = json.loads(replies[0])["hookSpecificOutput"]
    assert out == {"hookEventName": "PreToolUse", "permissionDecision": "allow", "updatedInput": {"command": "echo new > new.txt"}}
    approval(seam, command="/bin/bash -lc 'echo new > new.txt'")
    assert seam.rpc.answers == [(7, {"decision": "accept"}, None)]
    assert len(ctx.calls) == 1  # answered here, not presented again


async def test_an_approval_that_differs_is_presented_again_and_declined(tmp_path):
    seam, ctx = make_seam(tmp_path)
    hook(seam)
    seam.deliver(ctx.calls[0].call_id, Replace(input={"command": "echo new > new.txt"}), "embedder")
    approval(seam, command="/bin/bash -lc 'echo other > other.txt'")
    assert seam.rpc.answers == []
    [_, again] = ctx.calls
    # The same call id with the approval's own input: the loop's mutated-request rule denies it.
    assert again.call_id == CALL and again.seam == "control_request" and again.input != ctx.calls[0].input
    seam.deliver(again.call_id, Deny(reason="this call id was already presented with a different input"), "adapter")
    assert seam.rpc.answers == [(7, {"decision": "decline"}, None)]
    # Replace decided, but the vendor asks to run the original: not what was decided either.
    seam, ctx = make_seam(tmp_path)
    hook(seam)
    seam.deliver(ctx.calls[0].call_id, Replace(input={"command": "echo new > new.txt"}), "embedder")
    approval(seam)
    assert seam.rpc.answers == [] and len(ctx.calls) == 2


async def test_allow_abstain_deny_and_an_early_approval(tmp_path):
    for decision in (Allow(), Abstain()):
        seam, ctx = make_seam(tmp_path)
        replies = hook(seam)
        seam.deliver(ctx.calls[0].call_id, decision, "frame")
        assert replies == [b""]
        approval(seam)
        assert seam.rpc.answers == [(7, {"decision": "accept"}, None)]
    # Deny: the hook's deny carries the reason; an approval that still comes is declined.
    seam, ctx = make_seam(tmp_path)
    replies = hook(seam)
    seam.deliver(ctx.calls[0].call_id, Deny(reason="NOT-THIS"), "embedder")
    assert json.loads(replies[0])["hookSpecificOutput"] == {
        "hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "NOT-THIS"}
    approval(seam)
    assert seam.rpc.answers == [(7, {"decision": "decline"}, None)]
    # The approval arrives before the verdict (the relay gave up early): it waits for it.
    seam, ctx = make_seam(tmp_path)
    replies = hook(seam)
    approval(seam)
    assert seam.rpc.answers == [] and CALL in seam.pending
    seam.deliver(ctx.calls[0].call_id, Allow(), "embedder")
    assert seam.rpc.answers == [(7, {"decision": "accept"}, None)] and seam.pending == {}
    seam.deliver(ctx.calls[0].call_id, Deny(reason="late"), "embedder")  # never a second answer
    assert replies == [b""] and len(seam.rpc.answers) == 1


async def test_waiting_approval_is_declined_by_decline_all(tmp_path):
    seam, ctx = make_seam(tmp_path)
    hook(seam)
    approval(seam)
    assert seam.decline_all() == [CALL]
    assert seam.rpc.answers == [(7, {"decision": "decline"}, None)]


async def test_what_the_hook_does_not_present(tmp_path):
    seam, ctx = make_seam(tmp_path)
    for payload in (hook_payload(name="web_search"), {**hook_payload(), "hook_event_name": "PostToolUse"},
                    {**hook_payload(), "tool_input": {"cmd": "x"}}, {**hook_payload(), "tool_use_id": 5}):
        assert hook(seam, payload) == [b""]
    assert ctx.calls == []
    approval(seam)  # no hook presentation before it: presented from the approval, as in any run
    [call] = ctx.calls
    assert call.seam == "control_request" and call.input["command"] == "/bin/bash -lc 'echo hi > out.txt'"


async def test_patch_presentation_resolves_per_entry_and_is_verified(tmp_path):
    seam, ctx = make_seam(tmp_path)
    hook(seam, hook_payload(name="apply_patch", command=PATCH, cwd=str(tmp_path)))
    [call] = ctx.calls
    assert call.can_replace is False
    resolution = resolve_tool(TOOLS, "apply_patch", call.input, str(tmp_path), seam.run_cwd)
    assert resolution.subjects == [("file:notes/new.txt", [("file.write", "", "")]),
                                   ("file:b.txt", [("file.write", "", "")]), ("file:a.txt", [("file.write", "", "")])]
    seam.deliver(call.call_id, Allow(), "frame")
    same = [{"path": str(tmp_path / "notes" / "new.txt"), "kind": {"type": "add"}},
            {"path": str(tmp_path / "a.txt"), "kind": {"type": "update", "move_path": str(tmp_path / "b.txt")}}]
    seam.translator.items[CALL] = {"id": CALL, "type": "fileChange", "changes": same}
    seam.on_request({"id": 9, "method": "item/fileChange/requestApproval",
                     "params": {"itemId": CALL, "turnId": "t", "cwd": str(tmp_path)}}, b"{}", 1)
    assert seam.rpc.answers == [(9, {"decision": "accept"}, None)]
    # A patch whose entries differ from the presented text is not what was decided.
    seam, ctx = make_seam(tmp_path)
    hook(seam, hook_payload(name="apply_patch", command=PATCH, cwd=str(tmp_path)))
    seam.deliver(ctx.calls[0].call_id, Allow(), "frame")
    seam.translator.items[CALL] = {"id": CALL, "type": "fileChange",
                                   "changes": [{"path": str(tmp_path / "elsewhere.txt"), "kind": {"type": "add"}}]}
    seam.on_request({"id": 9, "method": "item/fileChange/requestApproval",
                     "params": {"itemId": CALL, "turnId": "t", "cwd": str(tmp_path)}}, b"{}", 1)
    assert seam.rpc.answers == [] and len(ctx.calls) == 2


def test_a_blocked_hook_is_the_result_of_its_call(tmp_path):
    ctx = FakeContext(str(tmp_path))
    translator = Translator(ctx)
    translator.started = True
    translator.presented.add(CALL)
    run = {"id": f"pre-tool-use:0:/scratch/codex-home/config.toml:{CALL}", "status": "blocked",
           "entries": [{"kind": "feedback", "text": "NOT-THIS"}]}
    translator.notification({"method": "hook/completed", "params": {"run": run}}, b"{}", 3)
    [result] = ctx.of("tool.result")
    assert (result.call_id, result.is_error, result.content, result.outcome_source) == (CALL, True, "NOT-THIS", "hook/completed")
    # A blocked hook for a call the seam never presented is not ours to explain: opaque.
    translator.notification({"method": "hook/completed", "params": {"run": {**run, "id": "pre-tool-use:0:x:other"}}}, b"{}", 4)
    assert len(ctx.of("tool.result")) == 1 and ctx.of("opaque")[0][0] == "hook/completed"



JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
                    max_leaves=10)
FIELDS = st.fixed_dictionaries({}, optional={
    "hook_event_name": st.sampled_from(["PreToolUse", "PostToolUse"]) | JSON,
    "tool_name": st.sampled_from(["Bash", "apply_patch", "web_search"]) | JSON,
    "tool_input": st.fixed_dictionaries({}, optional={"command": st.text(max_size=30) | JSON}) | JSON,
    "tool_use_id": st.text(max_size=12) | JSON,
    "cwd": st.text(max_size=12) | JSON,
})


@settings(max_examples=examples(300), deadline=None)
@given(FIELDS)
def test_any_hook_payload_is_presented_or_answered_once(tmp_path_factory, payload):
    """Whatever the hook forwards: no exception, and either one presentation (answered later by its
    decision) or an empty answer at once (the approval decides) — never both, never neither."""
    seam, ctx = make_seam(tmp_path_factory.mktemp("h"))
    replies = hook(seam, payload)
    if ctx.calls:
        [call] = ctx.calls
        assert replies == [] and call.seam == "hook" and call.input == {"command": payload["tool_input"]["command"]}
        seam.deliver(call.call_id, Deny(reason="no"), "frame")
        assert len(replies) == 1 and json.loads(replies[0])["hookSpecificOutput"]["permissionDecision"] == "deny"
    else:
        assert replies == [b""]


async def test_a_relay_socket_that_cannot_open_refuses_the_start(tmp_path, monkeypatch, stub_vendor):
    from metaharness.adapters.base import StartRefusal
    from metaharness.adapters.codex import relay as relay_module

    async def refuse(self):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(relay_module.RelayServer, "start", refuse)
    work = tmp_path / "work"
    work.mkdir()
    adapter = CodexAdapter(make_spec(work, stub_vendor({}), codex_replace_relay=True))
    with pytest.raises(StartRefusal) as refused:
        await adapter.start(FakeContext(str(work)))
    assert refused.value.name == "ReplaceRelayUnavailable" and "Permission denied" in refused.value.sentence
    assert adapter.child.proc is None  # refused before Codex was started
    adapter.child.cleanup()
