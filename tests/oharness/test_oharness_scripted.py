"""The scripted provider and the agent loop over it (in process)."""

from __future__ import annotations

import asyncio
import time

import pytest

from metaharness.protocol.scenario import FINAL_TEXT, ScenarioError, parse_scenario
from metaharness.permissions import ExternalDecision
from oharness.gate import ExternalOnlyGate
from oharness.loop import Agent
from oharness.model import ModelRequest, Stop, TextBlock, ToolCallBlock, Usage

DEFAULT = Usage({"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0})
from oharness.providers import make_provider
from oharness.providers.scripted import ScriptedProvider
from oharness.tools import ToolContext, builtin_tools


def scenario(*turns):
    import json

    return parse_scenario(json.dumps({"format": "metaharness.scenario/1", "turns": list(turns)}))


async def collect(provider, main=True):
    return [e async for e in provider.stream(ModelRequest("sys", [], [], main=main))]


async def test_turn_order_rendering_and_final_text():
    provider = ScriptedProvider("scripted:default", scenario(
        {"text": "one", "calls": [
            {"op": "shell", "input": {"command": "ls"}},
            {"op": "file.edit", "input": {"path": "a", "old": "x", "new": "y"}, "id": "mine"},
            {"op": "mcp.call", "input": {"server": "gh", "tool": "get", "arguments": {"n": 1}}},
        ]},
        {"text": "two"},
    ))
    first = await collect(provider)
    assert first == [
        TextBlock("one"),
        ToolCallBlock("call_0_0", "bash", {"command": "ls"}),
        ToolCallBlock("mine", "edit", {"path": "a", "old": "x", "new": "y"}),
        ToolCallBlock("call_0_2", "mcp__gh__get", {"n": 1}),
        DEFAULT,
        Stop("tool_use"),
    ]
    assert await collect(provider) == [TextBlock("two"), DEFAULT, Stop("end_turn")]
    assert await collect(provider) == [TextBlock(FINAL_TEXT), DEFAULT, Stop("end_turn")]
    assert await collect(provider) == [TextBlock(FINAL_TEXT), DEFAULT, Stop("end_turn")]


async def test_side_requests_do_not_consume_turns():
    provider = ScriptedProvider("scripted:default", scenario({"text": "main"}))
    assert await collect(provider, main=False) == [TextBlock("ok"), DEFAULT, Stop("end_turn")]
    assert (await collect(provider))[0] == TextBlock("main")


async def test_delay_ms_is_honoured():
    provider = ScriptedProvider("scripted:default", scenario({"text": "late", "delay_ms": 200}))
    started = time.monotonic()
    await collect(provider)
    assert time.monotonic() - started >= 0.19


def test_call_of_a_tool_not_offered_is_refused_naming_the_turn():
    provider = ScriptedProvider("scripted:default", scenario(
        {"text": "fine"},
        {"id": "second", "calls": [{"op": "mcp.call", "input": {"server": "gh", "tool": "x", "arguments": {}}}]},
    ))
    offered = {tool.name for tool in builtin_tools()}
    with pytest.raises(ScenarioError, match=r"turn 1 \('second'\), call 0 \(mcp.call\).*mcp__gh__x"):
        provider.check_offered(offered)
    provider.check_offered(offered | {"mcp__gh__x"})


def test_make_provider_refusals(tmp_path, monkeypatch):
    from oharness.model import ProviderError

    with pytest.raises(ProviderError, match="PROVIDER:MODEL"):
        make_provider("gpt-5")
    with pytest.raises(ProviderError, match="scripted model only"):
        make_provider("openai:gpt-5", str(tmp_path / "s.json"))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ProviderError, match="ANTHROPIC_API_KEY"):
        make_provider("anthropic:claude-sonnet-4-5")
    bad = tmp_path / "bad.json"
    bad.write_text('{"format":"metaharness.scenario/1","turns":[{"calls":[{"op":"shell","input":{}}]}]}')
    with pytest.raises(ScenarioError, match="turn 0, call 0"):
        make_provider("scripted:default", str(bad))


class Decider:
    """A seam that answers from a table by tool name (allow when absent)."""

    def __init__(self, answers):
        self.answers = answers
        self.asked = []

    async def decide(self, call):
        self.asked.append(call.name)
        return self.answers.get(call.name)


def make_agent(tmp_path, sink, turns, answers=None):
    provider = ScriptedProvider("scripted:default", scenario(*turns))
    seam = Decider(answers or {})
    ctx = ToolContext(cwd=str(tmp_path))
    agent = Agent(provider, builtin_tools(), sink, ExternalOnlyGate(), ctx, seam=seam)
    return agent, seam, provider


async def test_loop_runs_calls_and_feeds_results_back(tmp_path, sink):
    agent, seam, _ = make_agent(tmp_path, sink, [
        {"text": "writing", "calls": [{"op": "file.write", "input": {"path": "o.txt", "content": "hi"}}]},
        {"text": "done"},
    ])
    outcome = await agent.run_turn("go")
    assert outcome.stop_reason == "end_turn" and outcome.final_text == "done"
    assert (tmp_path / "o.txt").read_text() == "hi"
    assert sink.kinds() == ["text", "usage", "tool_call", "tool_result", "text", "usage"]
    roles = [m["role"] for m in agent.messages]
    assert roles == ["user", "assistant", "user", "assistant"]
    assert agent.messages[2]["content"][0] == {
        "type": "tool_result", "call_id": "call_0_0", "content": "wrote 2 bytes to o.txt", "is_error": False,
    }


async def test_deny_reason_reaches_the_model_and_replace_changes_input(tmp_path, sink):
    agent, _, _ = make_agent(tmp_path, sink, [
        {"calls": [
            {"op": "file.write", "input": {"path": "w.txt", "content": "x"}},
            {"op": "shell", "input": {"command": "echo original"}},
        ]},
    ], answers={
        "write": ExternalDecision("deny", reason="the frame admits only reading"),
        "bash": ExternalDecision("replace", replacement={"command": "echo replaced"}),
    })
    await agent.run_turn("go")
    results = agent.messages[2]["content"]
    assert results[0]["is_error"] and results[0]["content"] == "the frame admits only reading"
    assert not (tmp_path / "w.txt").exists()
    assert results[1]["content"].strip() == "replaced"


async def test_frame_is_in_every_system_prompt(tmp_path, sink):
    seen = []
    agent, _, provider = make_agent(tmp_path, sink, [{"calls": [{"op": "task.todo", "input": {"items": ["a"]}}]}])
    original = provider.stream

    def spy(request):
        seen.append(request.system)
        return original(request)

    provider.stream = spy
    agent.frame = "Strictly only these operations are admitted here:\n- file.read"
    await agent.run_turn("go")
    assert len(seen) == 2 and all(s.endswith("- file.read") and "The frame in force" in s for s in seen)
    agent.frame = None
    await agent.run_turn("again")
    assert "The frame in force" not in seen[-1]


async def test_subagent_calls_go_through_the_same_seam(tmp_path, sink):
    agent, seam, _ = make_agent(tmp_path, sink, [
        {"calls": [{"op": "subagent.spawn", "input": {"prompt": "look around"}}]},
        {"text": "sub looks", "calls": [{"op": "dir.list", "input": {"path": "."}}]},
        {"text": "sub done"},
        {"text": "main done"},
    ])
    outcome = await agent.run_turn("go")
    assert outcome.final_text == "main done"
    assert seam.asked == ["agent", "glob"]
    glob_call = [r for r in sink.records if r[0] == "tool_call" and r[1] == "glob"][0]
    assert glob_call[3] == "general-1"
    agent_result = [r for r in sink.records if r[0] == "tool_result" and r[1] == "agent"][0]
    assert agent_result[3] == "sub done"


async def test_interrupt_repairs_the_conversation(tmp_path, sink):
    agent, _, _ = make_agent(tmp_path, sink, [
        {"calls": [{"op": "shell", "input": {"command": "sleep 30"}}, {"op": "shell", "input": {"command": "true"}}]},
        {"text": "after"},
    ])
    task = asyncio.ensure_future(agent.run_turn("go"))
    for _ in range(200):
        if ("tool_call", "bash", {"command": "sleep 30"}, None) in sink.records:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    results = agent.messages[-1]["content"]
    assert [r["is_error"] for r in results] == [True, True]
    assert sink.records[-1][:3] == ("tool_result", "bash", True)
    outcome = await agent.run_turn("next")
    assert outcome.final_text == "after"


async def test_steer_is_delivered_with_the_next_request(tmp_path, sink):
    agent, _, _ = make_agent(tmp_path, sink, [
        {"calls": [{"op": "task.todo", "input": {"items": []}}]},
        {"text": "ok"},
    ])
    agent.shared.steers.append("focus on tests")
    await agent.run_turn("go")
    assert ("injection", "focus on tests", "steer") in sink.records
    assert agent.messages[0]["content"][-1] == {"type": "text", "text": "focus on tests"}


async def test_a_turn_reports_the_usage_the_scenario_gives_it():
    provider = ScriptedProvider("scripted:default", scenario({"text": "a", "usage": {"input_tokens": 7, "output_tokens": 3,
                                                                                     "cache_read_input_tokens": 2}}))
    assert (await collect(provider))[1] == Usage({"input_tokens": 7, "output_tokens": 3, "cache_read_input_tokens": 2,
                                                   "cache_creation_input_tokens": 0})
