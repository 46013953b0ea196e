"""Vendor checks C15–C19 of the Claude Code end-to-end checklist (VC, all fail-closed cases): the real
Claude Code 2.1.328 driven by the suite's own minimal client (vendor_client.py) with
the adapter's exact launch (posture acceptEdits, so a write the seam does not block
runs: "not run" can only come from the seam), pinning the behaviour of the stdio `hook_callback` seam
that the adapter's fail-closed design depends on. A failing case blocks a pin move.

"Not run" is checked on disk: the denied command's file is still absent at least
2 s after the turn's `result`.
"""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from .support import scenario, shell
from .vendor_client import VendorClient, block_text

pytestmark = pytest.mark.timeout(90)

WRITE = "echo hi > out.txt"
BLOCKING = 'failed; blocking because onFailure is "block"'
DENY_INVALID = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "Deny",
                                       "permissionDecisionReason": "capitalised, so not a decision"}}


async def absent_after(path: str, seconds: float = 2.0) -> None:
    await asyncio.sleep(seconds)
    assert not os.path.exists(path), f"{path} exists: the call ran"


async def started(tmp_path, scen, **init) -> VendorClient:
    client = await VendorClient(str(tmp_path), scen).start()
    reply = await client.initialize(**init)
    assert reply["subtype"] == "success", reply
    inner = reply["response"]
    assert inner["hooks_applied"] is True and inner["hook_on_failure_supported"] is True
    assert inner["claude_code_version"] == "2.1.328"
    client.user("do the task")
    return client


async def finished(client: VendorClient) -> int:
    client.close_stdin()
    rc = await client.exit()
    if client.namespace:
        assert client.dns_log() == "", f"the vendor looked up names: {client.dns_log()}"
    return rc


@pytest.mark.parametrize("on_failure", ["block", None], ids=["block", "no-onFailure"])
async def test_c15_error_reply_blocks_only_with_on_failure_block(tmp_path, on_failure):
    client = await started(tmp_path, scenario({"calls": [shell(WRITE)]}, {"text": "done"}), on_failure=on_failure)
    callback = await client.callback()
    client.answer_error(callback, "the host failed on purpose")
    result = await client.result()
    assert await finished(client) == 0
    [(block, _record)] = client.tool_results()
    if on_failure == "block":
        assert block["is_error"] is True
        assert "[callback]: " + BLOCKING in block_text(block), block_text(block)
        assert any(r.get("type") == "system" and r.get("subtype") == "informational"
                   and "hook_callback_failed" in str(r) for r in client.records)
        await absent_after(client.path("out.txt"))
    else:
        assert block.get("is_error") is not True, block_text(block)
        assert os.path.exists(client.path("out.txt")), "without onFailure an error reply fails open (the call runs)"
        assert any(r.get("type") == "system" and r.get("subtype") == "informational"
                   and "treated as empty" in str(r) for r in client.records)
    assert result["is_error"] is False


async def test_c16_invalid_answer_blocks(tmp_path):
    client = await started(tmp_path, scenario({"calls": [shell(WRITE)]}, {"text": "done"}))
    callback = await client.callback()
    client.answer(callback, DENY_INVALID)
    await client.result()
    assert await finished(client) == 0
    [(block, _record)] = client.tool_results()
    assert block["is_error"] is True and BLOCKING in block_text(block), block_text(block)
    await absent_after(client.path("out.txt"))


async def test_c17_unanswered_callback_blocks_at_timeout_and_late_answer_is_ignored(tmp_path):
    client = await started(tmp_path, scenario({"calls": [shell(WRITE)]}, {"text": "done"}, {"text": "again"}),
                           timeout=3)
    callback = await client.callback()
    asked_at = client.read_at[client.records.index(callback)]
    cancel = await client.wait_record(lambda r: r.get("type") == "control_cancel_request"
                                      and r.get("request_id") == callback["request_id"])
    waited = client.read_at[client.records.index(cancel)] - asked_at
    assert 2.5 <= waited <= 4.5, f"blocked after {waited:.2f}s, not at the 3 s timeout"
    first = await client.result()
    [(block, _record)] = client.tool_results()
    assert block["is_error"] is True
    assert block_text(block).startswith("PreToolUse hook did not respond before its timeout"), block_text(block)
    assert all(d.get("tool_use_id") != block["tool_use_id"] for d in first.get("permission_denials") or [])
    # The late answer (5 s after the callback) is ignored; the session goes on.
    await asyncio.sleep(max(0.0, asked_at + 5 - time.monotonic()))
    mark = len(client.records)
    client.answer(callback, {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}})
    client.user("next")
    second = await client.result(start=mark)
    assert second["is_error"] is False and second["result"] == "again"
    assert await finished(client) == 0
    assert len(client.tool_results()) == 1
    await absent_after(client.path("out.txt"), 0)


async def test_c18_stdin_closed_while_pending_cancels_this_and_later_calls(tmp_path):
    client = await started(tmp_path, scenario({"calls": [shell("echo a > a.txt")]},
                                              {"calls": [shell("echo b > b.txt")]}, {"text": "done"}))
    await client.callback()
    client.close_stdin()
    rc = await client.exit()
    assert rc == 0
    assert any(r.get("type") == "result" for r in client.records), client.types()
    results = client.tool_results()
    assert len(results) == 2, client.types()
    for block, record in results:
        assert block["is_error"] is True
        assert '"non_execution_kind": "cancelled"' in _dumps(record), record
    await absent_after(client.path("a.txt"))
    assert not os.path.exists(client.path("b.txt"))


async def test_c19_non_json_line_ends_the_process(tmp_path):
    client = await started(tmp_path, scenario({"calls": [shell(WRITE)]}, {"text": "done"}))
    await client.callback()
    sent = time.monotonic()
    client.write_raw(b"not json")
    rc = await client.exit(timeout=10)
    assert rc == 1
    assert time.monotonic() - sent < 3, "claude did not exit at once"
    assert b"Error parsing streaming input line" in client.stderr
    assert not any(r.get("type") == "result" for r in client.records)
    await absent_after(client.path("out.txt"))


def _dumps(record) -> str:
    import json

    return json.dumps(record)
