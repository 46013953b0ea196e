"""The `qwen` adapter without its binary: the recorded Qwen Code wire replays through the
translator and seam to the live run's events and answers (and a tampered one does not), the
descriptor's rendering is the inverse of its tool table, the plan refuses a frame admitting
subagents by name, the pinning files and environment hold what the adapter promises, and the
loopback speaks Qwen Code's tool vocabulary on the Chat Completions wire.

The recording (tests/fixtures/qwen/) is a live `metaharness run qwen` of Qwen Code 0.24.4; its
`available_commands_update` carries a 548 KB skill-details object, trimmed to `"<trimmed>"`
(the translator keeps that update as an opaque line, whose contents no check compares)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from metaharness.adapters import adapter_class
from metaharness.adapters.acp.translate import failure_text
from metaharness.adapters.acp.qwen import RENDERING, SETTINGS, TOOLS, QwenAdapter
from metaharness.adapters.acp.rpc import RpcError
from metaharness.adapters.base import StartRefusal
from metaharness.cli.acp_doctor import FIXTURES, conformance_checks
from metaharness.loopback.wire_chat import render_chat
from metaharness.protocol.scenario import ScenarioCall
from metaharness.run.spec import RunSpec

from acp_support import METAHARNESS


def test_the_recorded_wire_replays_to_the_live_events_and_answers():
    checks = list(conformance_checks("qwen", None))
    assert len(checks) == 2 and all(ok for _, ok, _ in checks), checks
    done = subprocess.run([str(METAHARNESS), "conformance", "qwen"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.count("ok ") == 2, done.stdout


def test_a_tampered_recording_fails_the_replay(tmp_path):
    for path in (FIXTURES / "qwen").iterdir():
        shutil.copy(path, tmp_path / path.name)
    sent = tmp_path / "read-shell-write.sent.jsonl"
    sent.write_text(sent.read_text().replace('"optionId":"cancel"', '"optionId":"proceed_once"'))
    events = tmp_path / "read-shell-write.events.jsonl"
    events.write_text(events.read_text().replace("Now the shell.", "Now the shell!"))
    checks = {name.split(": ")[1]: ok for name, ok, _ in conformance_checks("qwen", str(tmp_path))}
    assert checks == {"events": False, "answers": False}


def test_the_registry_serves_the_adapter_and_its_descriptor():
    assert adapter_class("qwen") is QwenAdapter
    done = subprocess.run([str(METAHARNESS), "capabilities", "qwen"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    descriptor = json.loads(done.stdout)
    assert descriptor["adapter"]["id"] == "qwen" and descriptor["versions_pinned"] == ["0.24.4"]
    assert descriptor["deny_reason"]["model_sees"] == 'Tool "<name>" was canceled by the user.'


def test_the_rendering_is_the_inverse_of_the_tool_table():
    table = RENDERING
    for op, tool in table.items():
        if tool is not None:
            assert TOOLS[tool].op == op
    assert {op for op, tool in table.items() if tool} == {tool.op for tool in TOOLS.values()}
    assert table["dir.list"] == "glob" and table["subagent.spawn"] is None


def test_a_frame_admitting_subagents_is_refused_before_anything_runs(tmp_path):
    frame = {"operations": [{"op": "subagent.spawn"}, {"op": "file.read"}]}
    adapter = QwenAdapter(RunSpec(kind="qwen", prompt="x", model_endpoint="http://127.0.0.1:9", library_frame=frame,
                                  vendor_dir=str(tmp_path)))
    with pytest.raises(StartRefusal) as refused:
        adapter.plan()
    assert refused.value.name == "SubagentUnavailable"


def test_the_pinning_asks_for_every_tool_and_reads_no_workspace_or_machine_settings(tmp_path):
    from metaharness.adapters.acp import launch

    adapter = QwenAdapter(RunSpec(kind="qwen", prompt="x", model_endpoint="http://127.0.0.1:9"))
    scratch = launch.Scratch(tmp_path)
    scratch.home.mkdir()
    env = adapter.vendor_env(scratch, "http://127.0.0.1:5")
    assert env["OPENAI_BASE_URL"] == "http://127.0.0.1:5/v1" and env["OPENAI_MODEL"] == "loopback"
    assert env["QWEN_TELEMETRY_ENABLED"] == env["QWEN_USAGE_STATISTICS_ENABLED"] == "0"
    system = json.loads((tmp_path / "qwen-system-settings.json").read_text())
    assert system == json.loads((scratch.home / ".qwen" / "settings.json").read_text()) == SETTINGS
    assert set(system["permissions"]["ask"]) == set(TOOLS) and system["permissions"]["deny"] == ["Agent"]
    assert system["security"]["folderTrust"]["enabled"] is True
    assert json.loads((tmp_path / "qwen-trusted-folders.json").read_text()) == {}
    assert env["QWEN_CODE_SYSTEM_SETTINGS_PATH"] == env["QWEN_CODE_SYSTEM_DEFAULTS_PATH"]
    assert adapter.vendor_argv("qwen")[:4] == ["qwen", "--acp", "--approval-mode", "default"]


def _offer(*names: str, **properties: list[str]) -> list[dict]:
    return [{"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": {key: {"type": "string"} for key in properties.get(name, [])}}}}
            for name in names]


def test_the_chat_wire_renders_qwen_codes_vocabulary_and_keeps_opencodes():
    edit = ScenarioCall(op="file.edit", input={"path": "a.txt", "old": "x", "new": "y"})
    qwen = _offer("run_shell_command", "edit", edit=["file_path", "old_string", "new_string"])
    rendered = render_chat(edit, qwen, workdir="/w", turn_index=0)
    assert rendered.name == "edit" and rendered.arguments == {"file_path": "/w/a.txt", "old_string": "x",
                                                             "new_string": "y"}
    opencode = _offer("bash", "edit", edit=["filePath", "oldString", "newString"])
    rendered = render_chat(edit, opencode, workdir="/w", turn_index=0)
    assert rendered.arguments == {"filePath": "/w/a.txt", "oldString": "x", "newString": "y"}


def test_a_failed_prompt_names_the_failure_qwen_code_puts_in_the_error_data():
    """Qwen Code answers a prompt whose model request failed `Internal error`, the failure in the
    ACP SDK's `data.details` (as measured: `500 upstream exploded`): the sentence carries both."""
    assert failure_text(RpcError(-32603, "Internal error", {"details": "500 upstream exploded"})) == \
        "Internal error: 500 upstream exploded"
    assert failure_text(RpcError(-32603, "Internal error: boom", {"details": "boom"})) == "Internal error: boom"
    for data in (None, {}, {"details": ""}, {"details": 3}, "text"):
        assert failure_text(RpcError(-32000, "Rate limit exceeded. Try again later.", data)) == \
            "Rate limit exceeded. Try again later."
