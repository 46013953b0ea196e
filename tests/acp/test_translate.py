"""`session/update` → events, without a process: chunks joined into whole messages, thoughts,
results with exit codes, usage in both agents' shapes, mode changes, and opaque lines."""

from __future__ import annotations

import json

import msgspec

from metaharness.adapters.acp.translate import Translator, usage_of


class Ctx:
    def __init__(self) -> None:
        self.lines: list = []

    def emit(self, event, *, at=None):
        self.lines.append(msgspec.to_builtins(event))

    def record_call(self, call_id, name, input, *, at=None):
        self.lines.append({"event": "recorded", "call_id": call_id, "name": name})

    def warn(self, code, message):
        self.lines.append({"event": "warning", "code": code})

    def opaque(self, raw, *, vendor_type, vendor_subtype, source_line):
        self.lines.append({"event": "opaque", "vendor_subtype": vendor_subtype, "source_line": source_line})


def feed(translator: Translator, *updates: dict) -> None:
    for number, update in enumerate(updates, start=1):
        message = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": update}}
        translator.notification(message, json.dumps(message).encode(), number)


def chunk(kind: str, text: str) -> dict:
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}}


def test_chunks_become_whole_messages_around_calls_and_thoughts():
    ctx = Ctx()
    t = Translator(ctx)
    feed(t, chunk("agent_thought_chunk", "think"), chunk("agent_thought_chunk", "ing"),
         chunk("agent_message_chunk", "hel"), chunk("agent_message_chunk", "lo"),
         {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "bash", "status": "pending", "rawInput": {"cwd": "/w"}},
         chunk("agent_message_chunk", "after"))
    t.flush()
    assert [(e["event"], e.get("text")) for e in ctx.lines] == [("thinking", "thinking"), ("text", "hello"), ("text", "after")]
    assert t.calls["c1"].cwd == "/w" and t.calls["c1"].raw_input is None  # a cwd alone is not arguments


def test_results_with_exit_codes_once_per_call_and_unasked_calls_recorded():
    ctx = Ctx()
    arrived = []
    t = Translator(ctx, on_arguments=arrived.append)
    t.call("c1").asked = True
    feed(t, {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "in_progress",
             "rawInput": {"command": "ls", "cwd": "/w"}},
         {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed",
          "rawOutput": {"output": "a.txt", "metadata": {"exit": 0}}},
         {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed"},
         {"sessionUpdate": "tool_call", "toolCallId": "c2", "title": "read_file", "status": "in_progress", "kind": "read"})
    assert arrived == ["c1"]
    assert ctx.lines[0] == {**ctx.lines[0], "event": "tool.result", "call_id": "c1", "exit_code": 0, "content": "a.txt",
                            "is_error": False}
    assert [e["event"] for e in ctx.lines] == ["tool.result", "recorded", "warning"]
    assert ctx.lines[2]["code"] == "VENDOR_NOTICE"


def test_usage_in_both_shapes_and_the_session_end():
    assert usage_of({"usage": {"inputTokens": 11, "outputTokens": 2}}).input_tokens == 11
    assert usage_of({"_meta": {"quota": {"token_count": {"input_tokens": 7, "output_tokens": 3}}}}).output_tokens == 3
    assert usage_of({"stopReason": "end_turn"}) is None
    ctx = Ctx()
    t = Translator(ctx)
    feed(t, {"sessionUpdate": "usage_update", "used": 1, "size": 2, "cost": {"amount": 0.25, "currency": "USD"}},
         chunk("agent_message_chunk", "final words"))
    assert t.prompt_result({"stopReason": "end_turn", "usage": {"inputTokens": 5, "outputTokens": 1}}) == "end_turn"
    ended = msgspec.to_builtins(t.session_ended())
    assert ended["final_answer"]["text"] == "final words" and ended["total_cost_usd"] == 0.25
    assert ended["usage"]["input_tokens"] == 5 and ended["is_error"] is False


def test_an_agent_that_does_not_price_its_model_leaves_the_cost_unknown_not_0():
    from metaharness.adapters.acp.opencode import OpencodeAdapter

    assert OpencodeAdapter.prices_its_model is False  # metaharness gives its provider no prices
    t = Translator(Ctx(), takes_cost=OpencodeAdapter.prices_its_model)
    feed(t, {"sessionUpdate": "usage_update", "used": 1, "size": 2, "cost": {"amount": 0, "currency": "USD"}})
    t.prompt_result({"stopReason": "end_turn"})
    assert msgspec.to_builtins(t.session_ended())["total_cost_usd"] is None


def test_mode_changes_reach_the_adapter_and_unknown_updates_are_opaque():
    ctx = Ctx()
    modes = []
    t = Translator(ctx, on_mode=modes.append)
    feed(t, {"sessionUpdate": "current_mode_update", "currentModeId": "yolo"},
         {"sessionUpdate": "config_option_update", "configOptions": [{"id": "mode", "currentValue": "plan"}]},
         {"sessionUpdate": "available_commands_update", "availableCommands": []},
         {"sessionUpdate": "something_new"})
    assert modes == ["yolo", "plan"]
    assert ctx.lines == [{"event": "opaque", "vendor_subtype": "something_new", "source_line": 4}]


def test_a_failed_prompt_ends_the_session_in_error_until_a_turn_runs():
    t = Translator(Ctx())
    t.last_error = "opencode failed the prompt: Internal error: rate limit reached"
    ended = t.session_ended()
    assert ended.is_error is True and ended.terminal_reason == t.last_error
    t.prompt_result({"stopReason": "end_turn"})  # a later turn ran: the session is fine again
    assert t.session_ended().is_error is False
