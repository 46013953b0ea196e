"""The loopback against the real Claude Code 2.1.328 and Codex 0.171.0 binaries (the vendor rule “SSE sequences the clients accept”, the end-to-end checklist against the real binaries).

Each vendor is launched hermetically (the vendor rule “Claude Code environment (exact)” / the vendor rule “Codex environment and config.toml (exact)”): scratch HOME, TMPDIR and config home,
a constructed environment with every phone-home switch off, pointed at a LoopbackServer. One
text-only turn and one tool-call turn each, plus a call no offered tool renders.
Binaries come from /work/main/.vendor (npm, pinned); when they are missing the tests fail
if METAHARNESS_REQUIRE_VENDOR=1 (CI), else they are skipped with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from metaharness.loopback import LoopbackServer

from loopback_support import scenario


REPO = Path(__file__).resolve().parents[2]
VENDOR_BIN = REPO / ".vendor" / "node_modules" / ".bin"
PLACEHOLDER = "mh-placeholder-e2e"


def _binary(name: str) -> Path:
    path = VENDOR_BIN / name
    if not path.exists():
        message = f"{path} is not installed (npm install into .vendor, the vendor installation rule)"
        if os.environ.get("METAHARNESS_REQUIRE_VENDOR") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture
def scratch_root(tmp_path):
    # the vendor rule “scratch layout”: not under /tmp when avoidable (Codex's sandbox lets commands write all of /tmp).
    root = Path(tempfile.mkdtemp(prefix="mh-loopback-e2e-", dir="/var/tmp")) if Path("/var/tmp").is_dir() else tmp_path
    yield root
    if root != tmp_path:
        shutil.rmtree(root, ignore_errors=True)


def _scratch(root: Path, home_name: str) -> dict[str, Path]:
    dirs = {name: root / name for name in ("home", "tmp", home_name, "work")}
    for path in dirs.values():
        path.mkdir()
    dirs["root"] = root
    return dirs


def _path_env() -> str:
    return f"{VENDOR_BIN}:/usr/local/bin:/usr/bin:/bin"


def _run_claude(server_scenario, root, *extra: str):
    claude = _binary("claude")
    dirs = _scratch(root, "claude-home")
    server = LoopbackServer(server_scenario, workdir=str(dirs["work"]), stderr=None)
    with server:
        env = {
            "PATH": _path_env(), "HOME": str(dirs["home"]), "CLAUDE_CONFIG_DIR": str(dirs["claude-home"]),
            "TMPDIR": str(dirs["tmp"]), "LANG": "C.UTF-8", "ANTHROPIC_BASE_URL": server.url,
            "ANTHROPIC_API_KEY": PLACEHOLDER, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1", "DISABLE_AUTOUPDATER": "1",
        }
        process = subprocess.run(
            [str(claude), "-p", "do the task", "--output-format", "stream-json", "--verbose",
             "--setting-sources", "", "--strict-mcp-config", *extra],
            cwd=dirs["work"], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
            start_new_session=True)
    records = [json.loads(line) for line in process.stdout.splitlines() if line.startswith("{")]
    return process, records, server.requests, dirs["work"]


def _assistant_blocks(records):
    return [block for record in records if record.get("type") == "assistant"
            for block in record["message"]["content"]]


def test_claude_text_turn(scratch_root):
    process, records, requests, _ = _run_claude(scenario({"text": "hello from loopback"}), scratch_root)
    assert process.returncode == 0, process.stderr
    assert [block.get("text") for block in _assistant_blocks(records)] == ["hello from loopback"]
    result = records[-1]
    assert result["type"] == "result" and result["is_error"] is False and result["result"] == "hello from loopback"
    # Only main Messages requests: no /api/hello, no count_tokens, no side requests.
    assert [(entry.method, entry.path, entry.main, entry.turn) for entry in requests] == [
        ("POST", "/v1/messages?beta=true", True, 0)]
    headers = requests[0].headers
    assert headers["x-api-key"] == PLACEHOLDER
    assert headers["user-agent"] == "claude-cli/2.1.328 (external, sdk-cli)"
    assert requests[0].body["stream"] is True
    assert [message["role"] for message in requests[0].body["messages"]] == ["user", "system"]


def test_claude_tool_turns_bash_write_read_edit(scratch_root):
    flow = scenario(
        {"text": "I will write.", "calls": [{"op": "shell", "input": {"command": "echo hi > out.txt"}},
                                            {"op": "file.write", "input": {"path": "w.txt", "content": "one\ntwo\nthree\n"}}]},
        {"calls": [{"op": "file.read", "input": {"path": "w.txt"}}]},
        {"calls": [{"op": "file.edit", "input": {"path": "w.txt", "old": "two", "new": "TWO"}}]},
        {"text": "done"},
    )
    process, records, requests, work = _run_claude(flow, scratch_root, "--permission-mode", "acceptEdits")
    assert process.returncode == 0, process.stderr
    tool_uses = [block for block in _assistant_blocks(records) if block["type"] == "tool_use"]
    assert [block["name"] for block in tool_uses] == ["Bash", "Write", "Read", "Edit"]
    assert tool_uses[1]["input"]["file_path"] == str(work / "w.txt")
    assert (work / "out.txt").read_text() == "hi\n"
    assert (work / "w.txt").read_text() == "one\nTWO\nthree\n"
    assert [(entry.turn, entry.status) for entry in requests] == [(0, 200), (1, 200), (2, 200), (3, 200)]
    # The history the loopback counted: one assistant message per model response.
    second = requests[1].body["messages"]
    assert [message["role"] for message in second] == ["user", "system", "assistant", "user"]
    results = [block for block in second[-1]["content"] if block["type"] == "tool_result"]
    assert [block["tool_use_id"] for block in results] == [block["id"] for block in tool_uses[:2]]
    assert records[-1]["result"] == "done"


def test_claude_call_without_tool_fails_clearly_even_across_its_retries(scratch_root):
    flow = scenario({"calls": [{"op": "web.read", "input": {"url": "http://example.invalid/"}}]})
    process, records, requests, work = _run_claude(flow, scratch_root)
    assert records[-1]["type"] == "result" and records[-1]["is_error"] is True
    # Claude retries a 400 (fewer betas, then its full undeferred tool list, which has WebFetch);
    # every attempt is refused and no tool ran.
    assert len(requests) >= 2 and {entry.status for entry in requests} == {400}
    assert all('operation "web.read" has no tool' in entry.error for entry in requests)
    assert not any(block["type"] == "tool_use" for block in _assistant_blocks(records))
    assert list(work.iterdir()) == []


CODEX_CONFIG = """model = "{model}"
model_provider = "loopback"
check_for_update_on_startup = false

[analytics]
enabled = false

[features]
plugins = false

[model_providers.loopback]
name = "loopback"
base_url = "{url}/v1"
wire_api = "responses"
env_key = "LOOPBACK_API_KEY"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 20000
"""


def _run_codex(server_scenario, root, *, minimal: bool = False, setup=None):
    codex = _binary("codex")
    dirs = _scratch(root, "codex-home")
    if setup is not None:
        setup(dirs["work"])
    server = LoopbackServer(server_scenario, workdir=str(dirs["work"]), minimal=minimal, stderr=None)
    with server:
        (dirs["codex-home"] / "config.toml").write_text(CODEX_CONFIG.format(model="gpt-5.5", url=server.url))
        env = {"PATH": _path_env(), "HOME": str(dirs["home"]), "CODEX_HOME": str(dirs["codex-home"]),
               "TMPDIR": str(dirs["tmp"]), "LANG": "C.UTF-8", "LOOPBACK_API_KEY": PLACEHOLDER}
        process = subprocess.run(
            [str(codex), "exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write", "do the task"],
            cwd=dirs["work"], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
            start_new_session=True)
    events = [json.loads(line) for line in process.stdout.splitlines() if line.startswith("{")]
    return process, events, server.requests, dirs["work"]


@pytest.mark.parametrize("minimal", [False, True], ids=["full-sse", "minimal-sse"])
def test_codex_text_turn(scratch_root, minimal):
    process, events, requests, _ = _run_codex(scenario({"text": "hello from loopback"}), scratch_root, minimal=minimal)
    assert process.returncode == 0, process.stderr
    messages = [event["item"]["text"] for event in events
                if event.get("type") == "item.completed" and event["item"]["type"] == "agent_message"]
    assert messages == ["hello from loopback"]
    assert events[-1]["type"] == "turn.completed" and events[-1]["usage"]["output_tokens"] == 5
    assert [(entry.method, entry.path, entry.main, entry.turn) for entry in requests] == [("POST", "/v1/responses", True, 0)]
    assert requests[0].headers["authorization"] == f"Bearer {PLACEHOLDER}"
    assert requests[0].headers["originator"] == "codex_exec"
    offered = [tool.get("name") for tool in requests[0].body["tools"]]
    assert "exec_command" in offered and "apply_patch" in offered


def test_codex_tool_turns_shell_add_and_update(scratch_root):
    flow = scenario(
        {"text": "I will write.", "calls": [{"op": "shell", "input": {"command": "echo hi > out.txt"}},
                                            {"op": "file.write", "input": {"path": "w.txt", "content": "one\ntwo\n"}}]},
        {"calls": [{"op": "file.edit", "input": {"path": "notes.txt", "old": "beta", "new": "BETA"}}]},
        {"text": "done"},
    )
    process, events, requests, work = _run_codex(
        flow, scratch_root, setup=lambda work: (work / "notes.txt").write_text("alpha\nbeta\ngamma\n"))
    assert process.returncode == 0, process.stderr
    completed = [event["item"] for event in events if event.get("type") == "item.completed"]
    assert [item["type"] for item in completed] == [
        "agent_message", "command_execution", "file_change", "file_change", "agent_message"]
    assert completed[1]["exit_code"] == 0
    assert [change["kind"] for change in completed[2]["changes"]] == ["add"]
    assert [change["kind"] for change in completed[3]["changes"]] == ["update"]
    assert (work / "out.txt").read_text() == "hi\n"
    assert (work / "w.txt").read_text() == "one\ntwo\n"
    assert (work / "notes.txt").read_text() == "alpha\nBETA\ngamma\n"
    assert [(entry.turn, entry.status) for entry in requests] == [(0, 200), (1, 200), (2, 200)]
    kinds = [item.get("type") for item in requests[1].body["input"]][-5:]
    assert kinds == ["message", "function_call", "custom_tool_call", "function_call_output", "custom_tool_call_output"]


def test_codex_call_without_tool_fails_clearly(scratch_root):
    process, events, requests, work = _run_codex(
        scenario({"calls": [{"op": "file.read", "input": {"path": "x.txt"}}]}), scratch_root)
    assert process.returncode == 1
    failed = [event for event in events if event.get("type") == "turn.failed"]
    assert failed and 'operation \\"file.read\\" has no tool' in failed[0]["error"]["message"]
    assert [entry.status for entry in requests] == [400]  # request_max_retries = 0: no retry
    assert list(work.iterdir()) == []


def test_codex_app_server_text_and_approved_shell_turn(scratch_root):
    """The adapter's seam (the vendor rule “the Codex adapter”): app-server over stdio, `untrusted`, one approval answered `accept`."""
    codex = _binary("codex")
    dirs = _scratch(scratch_root, "codex-home")
    flow = scenario({"text": "first", "calls": [{"op": "shell", "input": {"command": "echo hi > out.txt"}, "id": "call_e2e"}]},
                    {"text": "done"})
    server = LoopbackServer(flow, workdir=str(dirs["work"]), stderr=None)
    seen: list[dict] = []
    with server:
        (dirs["codex-home"] / "config.toml").write_text(CODEX_CONFIG.format(model="gpt-5.5", url=server.url))
        env = {"PATH": _path_env(), "HOME": str(dirs["home"]), "CODEX_HOME": str(dirs["codex-home"]),
               "TMPDIR": str(dirs["tmp"]), "LANG": "C.UTF-8", "LOOPBACK_API_KEY": PLACEHOLDER}
        process = subprocess.Popen([str(codex), "app-server"], cwd=dirs["work"], env=env, stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)

        def send(message: dict) -> None:
            process.stdin.write(json.dumps(message) + "\n")
            process.stdin.flush()

        try:
            send({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "metaharness", "title": None, "version": "0"},
                                                              "capabilities": {"experimentalApi": False, "requestAttestation": False}}})
            send({"method": "initialized"})
            send({"id": 2, "method": "thread/start", "params": {"cwd": str(dirs["work"]), "approvalPolicy": "untrusted",
                                                                 "sandbox": "workspace-write"}})
            for line in process.stdout:
                message = json.loads(line)
                seen.append(message)
                if "method" in message and "id" in message:  # a server request: the approval
                    send({"id": message["id"], "result": {"decision": "accept"}})
                elif message.get("id") == 2:
                    thread = message["result"]["thread"]["id"]
                    send({"id": 3, "method": "turn/start", "params": {"threadId": thread, "input": [
                        {"type": "text", "text": "do the task", "text_elements": []}]}})
                elif message.get("method") == "turn/completed":
                    break
        finally:
            process.stdin.close()
            process.wait(10)
    approvals = [m for m in seen if m.get("method") == "item/commandExecution/requestApproval"]
    assert len(approvals) == 1 and approvals[0]["params"]["itemId"] == "call_e2e"
    texts = [m["params"]["item"]["text"] for m in seen
             if m.get("method") == "item/completed" and m["params"]["item"]["type"] == "agentMessage"]
    assert texts == ["first", "done"]
    assert seen[-1]["params"]["turn"]["status"] == "completed"
    assert (dirs["work"] / "out.txt").read_text() == "hi\n"
    assert [(entry.turn, entry.status, entry.headers["originator"]) for entry in server.requests] == [
        (0, 200, "metaharness"), (1, 200, "metaharness")]
