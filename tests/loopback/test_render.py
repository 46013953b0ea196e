"""Rendering neutral calls into the client's own tools (the vendor rule “rendering neutral operations into the client's own tools”)."""

from __future__ import annotations

import pytest

from metaharness.loopback.render import RenderError, render_anthropic, render_responses
from metaharness.protocol.scenario import ScenarioCall

from loopback_support import CLAUDE_TOOLS, CODEX_TOOLS, claude_tool, codex_function


def claude(op: str, tools=CLAUDE_TOOLS, workdir="/work/w", **inputs):
    return render_anthropic(ScenarioCall(op=op, input=inputs), tools, workdir=workdir, turn_index=3)


def codex(op: str, tools=CODEX_TOOLS, workdir="/nonexistent", **inputs):
    return render_responses(ScenarioCall(op=op, input=inputs), tools, workdir=workdir, turn_index=1, turn_id="t")


def test_claude_paths_are_absolute_against_workdir():
    assert claude("file.read", path="a/b.txt").arguments == {"file_path": "/work/w/a/b.txt"}
    assert claude("file.read", path="/etc/hosts").arguments == {"file_path": "/etc/hosts"}
    edit = claude("file.edit", path="../x.txt", old="o", new="n")
    assert (edit.name, edit.arguments) == ("Edit", {"file_path": "/work/x.txt", "old_string": "o", "new_string": "n"})


def test_claude_optional_keys_dropped_when_the_schema_does_not_list_them():
    bare_bash = [claude_tool("Bash", ["command"])]
    assert claude("shell", tools=bare_bash, command="ls").arguments == {"command": "ls"}
    assert claude("shell", command="ls").arguments == {"command": "ls", "description": "scenario call"}


def test_claude_agent_skill_mcp_and_todo():
    agent = claude("subagent.spawn", prompt="Find every TODO in the repository and list them")
    assert agent.name == "Agent"
    assert agent.arguments == {"description": "Find every TODO in the", "prompt": "Find every TODO in the repository and list them"}
    task_only = [claude_tool("Task", ["description", "prompt"])]
    assert claude("subagent.spawn", tools=task_only, prompt="p").name == "Task"
    assert claude("skill.load", name="pdf").arguments == {"skill": "pdf"}
    mcp_tool = claude_tool("mcp__docs__lookup", ["q"])
    call = claude("mcp.call", tools=[mcp_tool], server="docs", tool="lookup", arguments={"q": "x"})
    assert (call.name, call.arguments) == ("mcp__docs__lookup", {"q": "x"})
    todo = {"name": "TodoWrite", "input_schema": {"type": "object", "required": ["todos"], "properties": {"todos": {
        "type": "array", "items": {"type": "object", "required": ["content", "status", "activeForm"],
                                   "properties": {"content": {}, "status": {}, "activeForm": {}}}}}}}
    rendered = claude("task.todo", tools=[todo], items=["write tests", {"content": "ship", "status": "in_progress"}])
    assert rendered.arguments == {"todos": [
        {"content": "write tests", "status": "pending", "activeForm": "write tests"},
        {"content": "ship", "status": "in_progress", "activeForm": "ship"}]}


@pytest.mark.parametrize("op,inputs", [
    ("dir.list", {"path": "."}), ("search", {"pattern": "x", "path": "."}), ("web.read", {"url": "http://x.invalid"}),
    ("task.todo", {"items": []}), ("mcp.call", {"server": "s", "tool": "t", "arguments": {}}),
])
def test_claude_ops_without_offered_tool_fail_naming_turn_op_and_offer(op, inputs):
    with pytest.raises(RenderError) as error:
        claude(op, **inputs)
    assert str(error.value) == (f'scenario turn 3: operation "{op}" has no tool in this client\'s offer '
                                "(offered: Agent, Bash, Edit, Read, Skill, ToolSearch, Write)")


def test_codex_shell_and_patch_forms(tmp_path):
    shell = codex("shell", command="echo hi > out.txt")
    assert (shell.kind, shell.name, shell.arguments) == ("function_call", "exec_command", {"cmd": "echo hi > out.txt"})
    add = codex("file.write", path="w.txt", content="one\ntwo\n")
    assert add.kind == "custom_tool_call"
    assert add.text_input == "*** Begin Patch\n*** Add File: w.txt\n+one\n+two\n*** End Patch\n"
    (tmp_path / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    update = codex("file.edit", workdir=str(tmp_path), path="notes.txt", old="beta\n", new="BETA\nBETA2")
    assert update.text_input == "*** Begin Patch\n*** Update File: notes.txt\n@@\n-beta\n+BETA\n+BETA2\n*** End Patch\n"


def test_codex_patch_refusals(tmp_path):
    (tmp_path / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    with pytest.raises(RenderError, match="not whole lines of notes.txt"):
        codex("file.edit", workdir=str(tmp_path), path="notes.txt", old="bet", new="x")
    with pytest.raises(RenderError, match="cannot add an empty file"):
        codex("file.write", path="w.txt", content="")
    with pytest.raises(RenderError, match="non-empty `old`"):
        codex("file.edit", path="w.txt", old="", new="x")


def test_codex_apply_patch_as_function_and_uncatalogued_model():
    function_patch = [codex_function("apply_patch", ["input"])]
    rendered = codex("file.write", tools=function_patch, path="a", content="x")
    assert rendered.kind == "function_call" and rendered.arguments == {"input": "*** Begin Patch\n*** Add File: a\n+x\n*** End Patch\n"}
    no_patch = [codex_function("exec_command", ["cmd"])]
    with pytest.raises(RenderError) as error:
        codex("file.write", tools=no_patch, path="a", content="x")
    assert str(error.value) == ("scenario turn 1 ('t'): operation \"file.write\" has no tool in this client's offer "
                                "(offered: exec_command)")


@pytest.mark.parametrize("op,inputs", [
    ("file.read", {"path": "a"}), ("dir.list", {"path": "."}), ("search", {"pattern": "p", "path": "."}),
    ("web.read", {"url": "u"}), ("skill.load", {"name": "n"}), ("subagent.spawn", {"prompt": "p"}),
])
def test_codex_ops_without_a_tool_fail(op, inputs):
    with pytest.raises(RenderError, match=f'operation "{op}" has no tool'):
        codex(op, **inputs)


def test_scenario_call_id_is_used_verbatim():
    call = render_anthropic(ScenarioCall(op="shell", input={"command": "ls"}, id="toolu_mine"), CLAUDE_TOOLS,
                            workdir="/", turn_index=0)
    assert call.call_id == "toolu_mine"
    call = render_responses(ScenarioCall(op="shell", input={"command": "ls"}, id="call_mine"), CODEX_TOOLS,
                            workdir="/", turn_index=0)
    assert call.call_id == "call_mine"


def _oharness_offer(wire: str) -> list[dict]:
    """oharness's own tools, as its anthropic and openai providers offer them."""
    from oharness.tools import builtin_tools

    specs = [tool.spec() for tool in builtin_tools()]
    if wire == "anthropic":
        return [{"name": s.name, "description": s.description, "input_schema": s.input_schema} for s in specs]
    return [{"type": "function", "name": s.name, "description": s.description, "parameters": s.input_schema}
            for s in specs]


@pytest.mark.parametrize("op, inputs", [
    ("file.write", {"path": "notes.txt", "content": "hello"}),
    ("file.edit", {"path": "notes.txt", "old": "hello", "new": "HELLO"}),
    ("shell", {"command": "echo hi"}),
    ("file.read", {"path": "notes.txt"}),
])
def test_oharness_gets_the_call_in_its_own_tools_on_both_wires(op, inputs):
    """The loopback used to render only Claude Code's and Codex's tools, so oharness pointed at it
    failed on its first call ('operation file.write has no tool in this client's offer')."""
    from oharness.tools import render_call

    name, expected = render_call(op, inputs)
    claude_like = render_anthropic(ScenarioCall(op=op, input=inputs), _oharness_offer("anthropic"), workdir="/w",
                                   turn_index=0)
    assert (claude_like.kind, claude_like.name, claude_like.arguments) == ("tool_use", name, expected)
    codex_like = render_responses(ScenarioCall(op=op, input=inputs), _oharness_offer("responses"), workdir="/w",
                                  turn_index=0)
    assert (codex_like.kind, codex_like.name, codex_like.arguments) == ("function_call", name, expected)


def test_the_loopback_knows_oharness_tools_as_its_adapter_does():
    from metaharness.adapters.oharness.adapter import RENDERING
    from metaharness.loopback.render import NEUTRAL_TOOLS

    assert NEUTRAL_TOOLS == {op: tool for op, tool in RENDERING.items() if tool}
