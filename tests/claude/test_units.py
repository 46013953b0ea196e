"""Unit tests of the Claude adapter's pure parts with a fake context: hook answers,
the call seam (parking, mutation, cancellation, fail-closed sweeps), the translator's
mapping rules, tool resolution, and the free conformance checks."""

from __future__ import annotations

import json

import pytest

from metaharness.adapters.claude import launch
from metaharness.adapters.base import resolve_tool
from metaharness.adapters.process import Child
from metaharness.adapters.claude.adapter import ClaudeAdapter
from metaharness.adapters.claude.tools import TOOLS
from metaharness.adapters.claude.doctor import conformance_checks
from metaharness.adapters.claude.protocol import Session, turn_blocks
from metaharness.adapters.claude.seam import CallSeam, ControlChannel, hook_output
from metaharness.adapters.claude.translate import Translator, encode_item, line_digest
from metaharness.adapters.base import StartRefusal
from metaharness.protocol.values import Abstain, Allow, Deny, Replace
from metaharness.protocol.commands import Interrupt

from report_context import ReportContext


def test_hook_outputs_are_exact():
    pre = {"hookEventName": "PreToolUse"}
    assert hook_output(Allow()) == {"hookSpecificOutput": {**pre, "permissionDecision": "allow"}}
    assert hook_output(Deny(reason="R")) == {"hookSpecificOutput": {**pre, "permissionDecision": "deny",
                                                                    "permissionDecisionReason": "R"}}
    assert hook_output(Replace(input={"command": "x"})) == {"hookSpecificOutput": {
        **pre, "permissionDecision": "allow", "updatedInput": {"command": "x"}}}
    assert hook_output(Abstain()) == {}


class Wire:
    def __init__(self):
        self.lines: list[dict] = []

    def __call__(self, data: bytes) -> None:
        assert data.endswith(b"\n") and data.count(b"\n") == 1
        self.lines.append(json.loads(data))


def callback(request_id: str, call_id: str, tool_input: dict, callback_id: str = launch.HOOK_CALLBACK_ID) -> dict:
    return {"type": "control_request", "request_id": request_id, "request": {
        "subtype": "hook_callback", "callback_id": callback_id, "tool_use_id": call_id,
        "input": {"tool_name": "Bash", "tool_input": tool_input, "tool_use_id": call_id}}}


def make_seam():
    wire = Wire()
    presented = []
    seam = CallSeam(ControlChannel(wire), presented.append)
    return seam, wire, presented


def test_decision_before_callback_is_parked_then_written_once():
    seam, wire, presented = make_seam()
    seam.on_tool_use("t1", "Bash", {"command": "ls"}, None)
    seam.deliver(presented[0].call_id, Allow())
    assert wire.lines == []
    seam.on_callback(callback("r1", "t1", {"command": "ls"}))
    assert wire.lines == [{"type": "control_response", "response": {"subtype": "success", "request_id": "r1",
                                                                    "response": hook_output(Allow())}}]
    seam.deliver(presented[0].call_id, Deny(reason="late"))
    assert len(wire.lines) == 1
    assert len(presented) == 1


def test_callback_first_presents_from_callback():
    seam, wire, presented = make_seam()
    seam.on_callback(callback("r1", "t1", {"command": "ls"}))
    assert presented[0].input == {"command": "ls"} and presented[0].seam == "hook"
    seam.deliver(presented[0].call_id, Deny(reason="no"))
    assert wire.lines[0]["response"]["response"]["hookSpecificOutput"]["permissionDecision"] == "deny"
    seam.on_tool_use("t1", "Bash", {"command": "ls"}, None)
    assert len(presented) == 1


def test_mutated_callback_is_denied_even_if_allowed():
    seam, wire, presented = make_seam()
    seam.on_tool_use("t1", "Bash", {"command": "ls"}, None)
    seam.on_callback(callback("r1", "t1", {"command": "rm -rf /"}))
    assert wire.lines[0]["response"]["response"]["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert len(presented) == 2 and presented[1].input == {"command": "rm -rf /"}
    seam.deliver(presented[0].call_id, Allow())
    assert len(wire.lines) == 1


def test_cancelled_callback_ignores_late_answer_and_sweep_denies_waiting():
    seam, wire, presented = make_seam()
    seam.on_tool_use("t1", "Bash", {}, None)
    seam.on_tool_use("t2", "Bash", {}, None)
    seam.on_callback(callback("r1", "t1", {}))
    seam.on_callback(callback("r2", "t2", {}))
    seam.on_cancel({"type": "control_cancel_request", "request_id": "r1"})
    seam.deliver(presented[0].call_id, Allow())
    assert wire.lines == []
    assert seam.deny_unanswered("the run was halted") == ["t2"]
    assert wire.lines[0]["response"]["request_id"] == "r2"


def test_unknown_callback_id_gets_error_reply():
    seam, wire, presented = make_seam()
    seam.on_callback(callback("r9", "t9", {}, callback_id="other"))
    assert wire.lines[0]["response"]["subtype"] == "error" and presented == []


# --- translator -------------------------------------------------------------------------------

INIT = {"type": "system", "subtype": "init", "claude_code_version": "2.1.328", "session_id": "s", "model": "m",
        "permissionMode": "default", "apiKeySource": "ANTHROPIC_API_KEY", "cwd": "/w", "tools": ["Bash"],
        "mcp_servers": [], "plugins": [], "agents": ["a"], "skills": [], "slash_commands": [], "output_style": "default"}


def feed_all(t: Translator, records: list) -> list:
    out = []
    for n, rec in enumerate(records, 1):
        raw = rec if isinstance(rec, bytes) else json.dumps(rec).encode() + b"\n"
        out += t.feed(raw, n)
    return out


def test_lines_before_init_are_held_until_session_started():
    t = Translator()
    items = feed_all(t, [{"type": "system", "subtype": "informational", "content": "hello"}, INIT])
    assert [i[0] for i in items] == ["session_started", "emit", "turn_started"]
    assert items[1][1].code == "VENDOR_NOTICE"


def test_unmappable_records_become_one_opaque_each():
    t = Translator()
    feed_all(t, [INIT])
    items = feed_all(t, [b"not json\n", {"type": "mystery"}, {"type": "assistant", "message": "broken"},
                         {"type": "system", "subtype": "status"}, b"\n"])
    assert [i[0] for i in items] == ["opaque"] * 4
    assert items[0][4] == b"not json" and line_digest(b"not json\n") == line_digest(b"not json")


def test_usage_once_per_message_and_result_maps_verbatim():
    t = Translator()
    feed_all(t, [INIT])
    usage = {"input_tokens": 3, "output_tokens": 2}
    block = {"type": "assistant", "request_id": "req", "timestamp": "T", "message": {
        "id": "msg1", "model": "m", "usage": usage, "content": [{"type": "text", "text": "a"}]}}
    tool = dict(block, message=dict(block["message"], content=[{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]))
    items = feed_all(t, [block, tool])
    assert [i[0] for i in items] == ["emit", "emit", "call"]
    assert items[0][2] == "T"
    result = {"type": "result", "subtype": "success", "is_error": False, "result": "done", "total_cost_usd": 0.00042,
              "modelUsage": {"m": {"inputTokens": 5, "costUSD": 0.00042}}, "usage": {"iterations": [1, 2],
              "output_tokens_details": {"thinking_tokens": 7}}, "num_turns": 1, "stop_reason": "end_turn"}
    items = feed_all(t, [result])
    assert [i[0] for i in items] == ["turn_ended", "result"]
    ended = items[1][1]
    assert ended.total_cost_usd == 0.00042 and ended.model_usage["m"].cost_usd == 0.00042
    assert ended.usage.iterations == 2 and ended.usage.thinking_tokens == 7


def test_replay_of_steer_is_injection_and_prompt_is_opaque():
    t = Translator()
    t.expect_replay("prompt", ["go"])
    t.expect_replay("steer", ["STEER"])
    feed_all(t, [INIT])
    replay = lambda text: {"type": "user", "isReplay": True, "message": {"role": "user", "content": [{"type": "text", "text": text}]}}
    items = feed_all(t, [replay("go"), replay("STEER")])
    assert items[0][0] == "opaque"
    assert items[1][1].origin == "steer" and items[1][1].text == "STEER"
    assert t.unreplayed == 0


def test_a_replay_whose_text_no_line_has_still_consumes_one():
    """Claude Code may replay a steer an interrupt left queued with other text (a turn of its
    own): it consumed a line all the same, so no turn waits for a replay that will not come."""
    replay = lambda text: {"type": "user", "isReplay": True, "message": {"role": "user", "content": [{"type": "text", "text": text}]}}
    t = Translator()
    t.expect_replay("prompt", ["go"])
    t.expect_replay("steer", ["go left"])
    feed_all(t, [INIT])
    items = feed_all(t, [replay("go"), replay("[queued] go left, please")])
    assert items[0][0] == "opaque" and items[1][1].origin == "steer" and t.unreplayed == 0
    t.expect_replay("boundary", ["NOTE-a"])
    t.expect_replay("boundary", ["NOTE-b"])
    assert feed_all(t, [replay("NOTE-a\nNOTE-b")])[0][0] == "opaque" and t.unreplayed == 0  # merged: both taken
    t.expect_replay("steer", ["x"])
    t.expect_replay("prompt", ["y"])
    assert feed_all(t, [replay("something else")])[0][1].origin == "steer"  # nothing held: the oldest
    assert [kind for kind, _ in t.pending_replays] == ["prompt"]


def test_expired_login_comes_first():
    t = Translator(credential_source="api-key")
    feed_all(t, [INIT])
    items = feed_all(t, [{"type": "assistant", "message": {"id": "x", "content": [
        {"type": "text", "text": "Your session has expired. Please run /login"}]}}])
    assert type(items[0][1]).__name__ == "AuthExpired"


def test_encode_item_sorts_pass_through():
    t = Translator()
    feed_all(t, [INIT])
    items = feed_all(t, [{"type": "user", "tool_use_result": {"b": 1, "a": 2}, "message": {"content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}}])
    assert '"tool_use_result":{"a":2,"b":1}' in encode_item(items[0])


# --- resolution, launch, conformance -------------------------------------------------------------


def test_resolution_and_subjects():
    assert resolve_tool(TOOLS, "Write", {"file_path": "/w/a.txt"}, None, "/w").subjects == [("file:a.txt", [("file.write", "", "")])]
    assert resolve_tool(TOOLS, "Task", {}, None, "/w").operations == [("subagent.spawn", "", "")]
    assert resolve_tool(TOOLS, "Agent", {}, None, "/w").operations == [("subagent.spawn", "", "")]
    assert resolve_tool(TOOLS, "mcp__srv__do_it", {}, None, "/w").operations == [("mcp.call", "srv", "do_it")]
    assert resolve_tool(TOOLS, "ToolSearch", {}, None, "/w").operations == []


def test_initialize_reply_check_refuses_without_fail_closed():
    ok = {"subtype": "success", "response": {"hooks_applied": True, "hook_on_failure_supported": True}}
    assert launch.check_initialize_reply(ok)
    with pytest.raises(StartRefusal, match="hook_on_failure_supported; its per-call seam would fail open"):
        launch.check_initialize_reply({"subtype": "success", "response": {"hooks_applied": True,
                                                                           "claude_code_version": "2.1.328"}})


def test_descriptor_matches_protocol_table():
    d = ClaudeAdapter.descriptor()
    assert list(d.to_wire()) == ["adapter", "versions_pinned", "tiers", "commands", "decision_modes", "replace",
                                 "rendering"]
    assert all(d.command_refusal(name) is None for name in d.commands) and len(d.commands) == 7
    assert d.rendering["subagent.spawn"] == "Agent" and d.rendering["search"] is None


def test_conformance_checks_pass():
    failures = [c for c in conformance_checks() if not c[1]]
    assert failures == []


def test_conformance_detects_a_changed_fixture(tmp_path):
    import os
    import shutil
    from metaharness.adapters.claude.doctor import FIXTURES
    for name in os.listdir(FIXTURES):
        shutil.copy(os.path.join(FIXTURES, name), tmp_path / name)
    expected = tmp_path / "c26-steer.expected.jsonl"
    expected.write_text(expected.read_text().replace("STEER-1", "STEER-2"))
    failures = [c for c in conformance_checks(str(tmp_path)) if not c[1]]
    assert [c[0] for c in failures] == ["replay c26-steer"]


# --- the run loop's two hooks the claude adapter uses: turn_blocks and turn_coming -----------


class _SelfTurningAdapter(ClaudeAdapter):
    """No child: turn 1 ends while a written line waits (like a late steer), then the
    'harness' starts turn 2 by itself with a call the embedder must decide."""

    def __init__(self, spec):
        super().__init__(spec)
        self.inputs: list = []
        self.delivered: list = []
        self.coming = False
        self._done = None

    def plan(self):
        pass

    async def start(self, ctx):
        import asyncio
        from metaharness.protocol.events import SessionStarted
        from metaharness.protocol.values import HermeticAttestation, TranscriptRef

        self.ctx, self._done = ctx, asyncio.Event()
        self.child = _NoChild(self._done)
        ctx.session_started(SessionStarted(adapter="claude", offered_tools=["Bash"], transcript=TranscriptRef(),
                                           hermetic=HermeticAttestation()))

    async def begin_turn(self, text, frame=None):
        import asyncio

        self.inputs.append(text)
        self.ctx.turn_started()
        self.coming = True
        self.ctx.turn_ended("end_turn")
        asyncio.get_running_loop().call_later(0.05, self._second_turn)

    def _second_turn(self):
        from metaharness.adapters.base import PresentedCall

        self.coming = False
        self.ctx.turn_started()
        self.ctx.present(PresentedCall(call_id="c2", name="Bash", input={"command": "true"}, seam="hook"))

    def deliver(self, call_id, decision, decided_by):
        from metaharness.protocol.events import SessionEnded
        from metaharness.protocol.values import DecisionCensus

        self.delivered.append((decision, decided_by))
        self.ctx.turn_ended("end_turn")
        self.ctx.session_ended(SessionEnded(is_error=False, subtype="success", census=DecisionCensus()))

    @property
    def turn_coming(self):
        return self.coming

    async def finish(self):
        self._done.set()

    async def halt(self):
        self._done.set()


class _NoChild:
    """The child's side with no process: it ends when `done` is set."""

    def __init__(self, done):
        self.done = done

    async def wait(self):
        from metaharness.protocol.values import Exited

        await self.done.wait()
        return Exited(code=0)

    def alive(self):
        return True

    def stderr_tail(self):
        return ""

    def retain(self, _directory):
        return []

    def cleanup(self):
        pass


async def test_loop_serves_a_turn_the_harness_starts_itself_and_passes_blocks(tmp_path):
    import asyncio
    from metaharness.protocol.frame import document_bytes, seal
    from metaharness.run.loop import Run
    from metaharness.run.spec import RunSpec

    frame = tmp_path / "f.json"
    frame.write_bytes(document_bytes(seal({
        "workflow": {"id": "w", "version": "1"}, "node": {"id": "n"},
        "step": {"workflow": "w", "state": "n", "index": 1, "attempt": 1}, "prior": [], "obligations": [],
        "reaching": [], "next": [], "handoff": {"handoff": "none"}, "operations": [{"op": "shell"}]})))
    spec = RunSpec(kind="claude", prompt="go", decisions="ask", frame=str(frame), decision_timeout_ms=5000)
    adapter = _SelfTurningAdapter(spec)
    events: list[dict] = []
    holder: dict = {}

    def write(line: bytes) -> None:
        event = json.loads(line)
        events.append(event)
        if event["event"] == "tool.requested" and event["decision_required"]:
            holder["run"].feed_line(json.dumps({"format": "metaharness.command/1", "id": "d1", "command": "tool.decide",
                                                "call_id": event["call_id"], "decision": {"decision": "allow"}}).encode())

    run = holder["run"] = Run(spec, write, adapter=adapter, run_id="r")
    assert await asyncio.wait_for(run.execute(), 10) == 0
    # One block each, the frame's rendering first (the vendor rule “handshake: initialize registers the per-call seam”), not one joined string.
    assert isinstance(adapter.inputs[0], list) and len(adapter.inputs[0]) == 2 and adapter.inputs[0][1] == "go"
    assert adapter.inputs[0][0].startswith("Workflow w (1)")
    # Turn 2 was the harness's own, served fully: the embedder's decision was honoured.
    assert adapter.delivered == [(Allow(), "embedder")]
    assert [e["outcome"] for e in events if e["event"] == "command.result"] == [{"result": "ok", "applies_at": None}]
    assert [e["turn"] for e in events if e["event"] == "turn.started"] == [1, 2]
    assert events[-1]["event"] == "stream.closed" and events[-1]["reason"] == "completed"


# --- credential mode api-key (the vendor rule “credential modes”): the launch plan, no model, no network ----------

REAL_ANTHROPIC_KEY = "sk-ant-api03-REALKEY-" + "k" * 40
RECORDING_CLAUDE = """#!/usr/bin/env python3
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
if "--version" in sys.argv:
    print("2.1.328 (Claude Code)"); sys.exit(0)
with open(os.path.join(here, "child-env.json"), "w") as handle:
    json.dump(dict(os.environ), handle)
with open(os.path.join(here, "child-argv.json"), "w") as handle:
    json.dump(sys.argv, handle)
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("type") == "control_request" and msg["request"]["subtype"] == "initialize":
        print(json.dumps({"type": "control_response", "response": {"subtype": "success", "request_id": msg["request_id"],
              "response": {"claude_code_version": "2.1.328", "hooks_applied": True, "hook_on_failure_supported": True}}}),
              flush=True)
"""


def _recording_claude(tmp_path):
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    (vendor / "claude").write_text(RECORDING_CLAUDE)
    (vendor / "claude").chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    return vendor, work


async def test_api_key_mode_child_gets_the_callers_key_and_no_base_url(tmp_path, monkeypatch):
    import asyncio
    from metaharness.run.spec import RunSpec

    vendor, work = _recording_claude(tmp_path)
    monkeypatch.setenv("METAHARNESS_SCRATCH_DIR", str(tmp_path / "scratch"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", REAL_ANTHROPIC_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # the caller's own: never inherited
    adapter = ClaudeAdapter(RunSpec(kind="claude", prompt="go", credentials="api-key", cwd=str(work),
                                    vendor_dir=str(vendor)))
    adapter.plan()
    await adapter.start(ReportContext(str(work)))
    try:
        assert adapter.model_url is None  # no proxy, no loopback: the default endpoint
    finally:
        await adapter.halt()
        await asyncio.wait_for(adapter.child.wait(), 10)
        adapter.child.cleanup()
    seen = json.loads((vendor / "child-env.json").read_text())
    assert seen["ANTHROPIC_API_KEY"] == REAL_ANTHROPIC_KEY
    assert "ANTHROPIC_BASE_URL" not in seen  # the default endpoint
    # the vendor rule “Claude Code environment (exact)” without the base URL: nothing else of the caller's environment.
    assert set(seen) == {"PATH", "HOME", "CLAUDE_CONFIG_DIR", "TMPDIR", "XDG_RUNTIME_DIR", "LANG", "ANTHROPIC_API_KEY",
                        *launch.PHONE_HOME_SWITCHES} | ({"IS_SANDBOX"} if "IS_SANDBOX" in seen else set())
    assert REAL_ANTHROPIC_KEY not in " ".join(json.loads((vendor / "child-argv.json").read_text()))


@pytest.mark.parametrize("mode", ["api-key", "loopback"])
def test_missing_anthropic_key_refuses_the_start_by_name(tmp_path, monkeypatch, mode):
    import os
    import subprocess
    import sys

    from metaharness.run.spec import RunSpec

    vendor, work = _recording_claude(tmp_path)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    adapter = ClaudeAdapter(RunSpec(kind="claude", prompt="go", credentials=mode, cwd=str(work), vendor_dir=str(vendor)))
    with pytest.raises(StartRefusal) as refusal:
        adapter.plan()
    assert refusal.value.name == "NoApiKey" and "ANTHROPIC_API_KEY" in refusal.value.sentence
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    done = subprocess.run([sys.executable, "-m", "metaharness", "run", "claude", "--credentials", mode, "-p", "go",
                           "--cwd", str(work), "--vendor-dir", str(vendor)],
                          capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("metaharness: NoApiKey: "), done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(lines) == 1 and lines[0]["event"] == "stream.closed" and lines[0]["reason"] == "error", lines
    assert lines[0]["events"] == 0
    assert not (vendor / "child-env.json").exists()


# --- an interrupt or a stop reaches Claude Code before the pending call's deny --------------


def _adapter_with_a_pending_callback():
    from types import SimpleNamespace

    from metaharness.run.spec import RunSpec

    adapter = ClaudeAdapter(RunSpec(kind="claude", prompt="go"))
    wire = Wire()
    adapter.channel = ControlChannel(wire)
    presented: list = []
    adapter.seam = CallSeam(adapter.channel, presented.append)
    adapter.translator = SimpleNamespace(in_turn=True)
    adapter.session = Session(adapter.translator)
    adapter.seam.on_callback(callback("r1", "t1", {"command": "ls"}))
    return adapter, wire


def _kinds(wire: Wire) -> list[str]:
    return [line["request"]["subtype"] if line["type"] == "control_request"
            else line["response"]["response"]["hookSpecificOutput"]["permissionDecision"] for line in wire.lines]


@pytest.mark.parametrize("cause", ["interrupt", "stop"])
async def test_the_interrupt_goes_out_before_the_abandonment_deny(cause):
    import asyncio

    adapter, wire = _adapter_with_a_pending_callback()
    adapter.abandoning(cause)
    adapter.deliver("t1", Deny(reason="the run was halted"), "adapter")
    assert _kinds(wire) == ["interrupt", "deny"]
    # interrupt() / halt() then wait for that request's reply rather than sending another
    request_id = wire.lines[0]["request_id"]
    waiting = asyncio.ensure_future(adapter._interrupt_replied(1.0))
    await asyncio.sleep(0)
    adapter.channel.on_control_response({"response": {"subtype": "success", "request_id": request_id}})
    await waiting
    assert _kinds(wire) == ["interrupt", "deny"]


async def test_a_stop_between_turns_sends_no_interrupt():
    adapter, wire = _adapter_with_a_pending_callback()
    adapter.translator.in_turn = False
    adapter.abandoning("stop")
    assert _kinds(wire) == []


@pytest.mark.parametrize("how", ["output ended", "stdin closed", "channel failed"])
async def test_an_interrupt_that_reaches_nobody_is_never_ok(how):
    """Claude Code has exited (its output ended, or the channel closed under the request): the
    interrupt raises, so the run answers TOO_LATE instead of ok."""
    import asyncio

    adapter, wire = _adapter_with_a_pending_callback()
    if how == "output ended":
        adapter.child = Child()
        adapter.child.output_ended = True
    elif how == "stdin closed":
        adapter.channel.closed = True
    interrupting = asyncio.ensure_future(adapter.control(Interrupt(id="i", reason="test")))
    await asyncio.sleep(0)
    if how == "channel failed":
        assert _kinds(wire) == ["deny", "interrupt"]  # sent; its reply will never come
        adapter.channel.fail_waiting("claude's output ended")
    with pytest.raises(BrokenPipeError):
        await interrupting
    if how == "output ended":
        assert _kinds(wire) == ["deny"]  # nothing sent to a child that is gone, the pending call answered


async def test_an_interrupt_that_claude_code_answers_is_ok():
    import asyncio

    adapter, wire = _adapter_with_a_pending_callback()
    interrupting = asyncio.ensure_future(adapter.control(Interrupt(id="i", reason="test")))
    await asyncio.sleep(0)
    request_id = [line for line in wire.lines if line["type"] == "control_request"][0]["request_id"]
    adapter.channel.on_control_response({"response": {"subtype": "success", "request_id": request_id}})
    assert await interrupting is None


def test_only_the_retry_and_timeout_settings_of_the_callers_environment_reach_claude(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "0")
    monkeypatch.setenv("API_TIMEOUT_MS", "2000")
    monkeypatch.setenv("CLAUDE_CODE_SOMETHING_ELSE", "1")
    env = launch.build_env(launch.Scratch(str(tmp_path)), "/usr/bin", base_url=None, api_key="k")
    assert env["CLAUDE_CODE_MAX_RETRIES"] == "0" and env["API_TIMEOUT_MS"] == "2000"
    assert "CLAUDE_CODE_SOMETHING_ELSE" not in env
    monkeypatch.delenv("CLAUDE_CODE_MAX_RETRIES")
    assert "CLAUDE_CODE_MAX_RETRIES" not in launch.build_env(launch.Scratch(str(tmp_path)), "/usr/bin",
                                                               base_url=None, api_key="k")


# --- the session's control rules, sans-IO (protocol.py) ----------------------------------------


def _session(in_turn=False, unreplayed=0):
    translator = Translator()
    translator.in_turn = in_turn
    for n in range(unreplayed):
        translator.expect_replay("prompt", [f"line {n}"])
    return Session(translator)


@pytest.mark.parametrize("moment,in_turn,out,sent", [
    ("interrupt", False, False, True), ("interrupt", True, True, True),
    ("stop", True, False, True), ("stop", False, False, False), ("stop", False, True, False),
    ("halt", True, False, True), ("halt", False, True, True), ("halt", False, False, False),
])
def test_when_the_interrupt_goes_out(moment, in_turn, out, sent):
    assert _session(in_turn=in_turn).interrupts(moment, out) is sent


def test_stdin_closes_only_once_finishing_with_nothing_written_waiting():
    session = _session(unreplayed=1)
    assert not session.may_close() and session.turn_coming()
    session.closing = True
    assert not session.may_close() and not session.turn_coming()  # a closing session starts no turn
    session.translator.pending_replays.clear()
    session.translator.in_turn = True
    assert not session.may_close()
    session.translator.in_turn = False
    assert session.may_close()


def test_a_turns_blocks_are_never_empty():
    assert turn_blocks("go") == ["go"]
    assert turn_blocks(["frame", "", "go"]) == ["frame", "go"]
    assert turn_blocks("") == [" "] and turn_blocks([]) == [" "] and turn_blocks(["", ""]) == [" "]


def test_the_end_of_the_output_writes_the_held_lines_and_the_last_result_once():
    from metaharness.protocol.events import SessionEnded
    from metaharness.protocol.values import DecisionCensus

    session = _session()
    held = [("emit", "an event", None), ("turn_started", None), ("opaque", None, None, 1, b"x")]
    session.translator.held = list(held)
    ended = SessionEnded(is_error=False, subtype="success", census=DecisionCensus())
    session.translator.last_result, session.translator.last_result_at = ended, "t"
    assert session.ended_items() == [held[0], held[2], ("session_ended", ended, "t")]
    assert session.ended_items() == []
    refused = _session()
    refused.ended = True  # a refused start writes no end
    assert refused.ended_items() == []
