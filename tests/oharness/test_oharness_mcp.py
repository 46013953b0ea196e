"""MCP tools over a stdio server declared in .oharness/settings.json (official SDK)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from oharness.loop import Agent
from oharness.session import open_session

SERVER = str(Path(__file__).parent / "fixtures" / "mcp_echo_server.py")


def write_settings(root, servers):
    (root / ".oharness").mkdir(exist_ok=True)
    (root / ".oharness" / "settings.json").write_text(json.dumps({"mcpServers": servers}))


def scenario(root, turns):
    path = root / "s.json"
    path.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": turns}))
    return str(path)


async def test_mcp_tools_are_offered_and_called(tmp_path, sink):
    write_settings(tmp_path, {"echo": {"command": sys.executable, "args": [SERVER]},
                              "broken": {"command": str(tmp_path / "no-such-program")}})
    script = scenario(tmp_path, [
        {"calls": [{"op": "mcp.call", "input": {"server": "echo", "tool": "echo", "arguments": {"text": "hi"}}},
                   {"op": "mcp.call", "input": {"server": "echo", "tool": "fail", "arguments": {"text": "x"}}}]},
        {"text": "done"},
    ])
    # bypass: this test is about MCP wiring; the permission engine would otherwise refuse the
    # calls headless (manual mode, no allow rule → ask → unavailable).
    session = await open_session(model="scripted:default", script=script, cwd=str(tmp_path), mode="bypass", sink=sink)
    try:
        names = [tool.name for tool in session.tools]
        assert "mcp__echo__echo" in names and "mcp__echo__fail" in names
        assert {"name": "echo", "status": "connected"} in session.mcp_statuses
        assert {"name": "broken", "status": "failed"} in session.mcp_statuses
        outcome = await session.agent.run_turn("go")
    finally:
        await session.close()
    assert outcome.final_text == "done"
    results = [r for r in sink.records if r[0] == "tool_result"]
    assert results[0] == ("tool_result", "mcp__echo__echo", False, "echo: hi")
    assert results[1][2] is True and "fail" in results[1][3]  # the server words the error


async def test_bad_mcp_settings_refuse_the_start(tmp_path, sink):
    import pytest

    from oharness.session import StartError

    write_settings(tmp_path, {"a__b": {"command": "x"}})
    with pytest.raises(StartError, match="settings.json.*a__b"):
        await open_session(model="scripted:default", script=None, cwd=str(tmp_path), mode=None, sink=sink)
