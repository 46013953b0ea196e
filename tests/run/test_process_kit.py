"""The child-process kit every adapter shares (adapters/process/): the process tree and the stop,
the vendor's timeout, the child's PATH and binary, and the one JSON-RPC line framing."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from metaharness.adapters import process
from metaharness.adapters.process import tree
from metaharness.adapters.claude import launch as claude_launch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import phase_commands as pc  # noqa: E402  (the process-tree helpers the vendor phase tests share)



def test_the_tree_is_collected_and_killed_group_by_group(tmp_path):
    pidfile = tmp_path / "grandchild"
    # The child leads its own group; its child starts a session (a group) of its own.
    child = subprocess.Popen(["sh", "-c", f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 60' & wait"],
                             start_new_session=True)
    try:
        for _ in range(200):
            if pidfile.exists() and pidfile.read_text().strip():
                break
            time.sleep(0.01)
        grandchild = int(pidfile.read_text())
        below = process.descendant_groups(child.pid)
        assert grandchild in below and child.pid not in below
        assert process.descendant_groups(child.pid, with_root=True) == below | {child.pid}
        process.kill_tree(child.pid)
        child.wait(timeout=10)
        for _ in range(200):
            if not pc.running(grandchild):
                break
            time.sleep(0.01)
        assert not pc.running(grandchild)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_our_own_group_is_never_killed():
    process.kill_groups({os.getpgrp(), 0, 1})  # would kill this test run if it were not spared


def test_the_vendor_timeout_is_strictly_longer_than_the_deadline():
    for deadline in (1, 2000, 2500, 2501, 55000):
        assert process.vendor_timeout_ms(deadline) > deadline
    assert [process.vendor_timeout_ms(d) for d in (2000, 2500, 2501)] == [4000, 5000, 7501]
    assert [process.whole_seconds(ms) for ms in (1, 1000, 1001, 60000)] == [1, 1, 2, 60]
    # Claude's hook timeout is the same formula in whole seconds.
    assert {d: claude_launch.hook_timeout_s(d) for d in (55000, 2000, 2500, 2501)} == {55000: 60, 2000: 4, 2500: 5, 2501: 8}


# --- the child's PATH and binary: one rule for every adapter ------------------------------------


def test_every_adapter_gives_its_child_the_one_path(tmp_path):
    from metaharness.adapters.acp import launch as acp_launch
    from metaharness.adapters.codex import launch as codex_launch

    vendor = str(tmp_path / "vendor")
    path = process.child_path(vendor)
    parts = path.split(":")
    assert parts[0] == vendor and {"/usr/local/bin", "/usr/bin", "/bin"} <= set(parts)
    assert len(parts) == len(set(parts))  # each directory once
    assert claude_launch.child_path(vendor) == codex_launch.child_path(vendor) == acp_launch.child_path(vendor) == path


def test_a_missing_binary_is_named_with_what_to_install(tmp_path):
    import pytest

    from metaharness.adapters.base import StartRefusal
    from metaharness.adapters.codex import launch as codex_launch

    empty = str(tmp_path)
    with pytest.raises(process.BinaryMissing, match=r"codex is not on the child PATH .*install @openai/codex@"):
        codex_launch.resolve_binary(empty)
    with pytest.raises(StartRefusal) as refused:
        claude_launch.resolve_binary(empty)
    assert refused.value.name == "VendorMissing" and "install @anthropic-ai/claude-code@" in refused.value.sentence
    tool = tmp_path / "tool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert process.resolve_binary("tool", empty, package="p", pin="1", needs_node=False) == str(tool)
    with pytest.raises(process.BinaryMissing, match="node is not on the child PATH"):
        process.resolve_binary("tool", empty, package="p", pin="1")


# --- stopping: wait, then kill what is left -------------------------------------------------------


async def test_wait_or_kill_kills_the_tree_after_the_grace(tmp_path):
    import asyncio

    pidfile = tmp_path / "grandchild"
    proc = await asyncio.create_subprocess_exec(
        "sh", "-c", f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 60' & exec sleep 60", start_new_session=True)
    for _ in range(200):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        await asyncio.sleep(0.01)
    grandchild = int(pidfile.read_text())
    assert await process.wait_or_kill(proc, 0.2) is False
    assert await asyncio.wait_for(proc.wait(), 10) == -9
    for _ in range(200):
        if not pc.running(grandchild):
            break
        await asyncio.sleep(0.01)
    assert not pc.running(grandchild)


async def test_wait_or_kill_lets_a_child_exit_by_itself():
    import asyncio

    proc = await asyncio.create_subprocess_exec("sh", "-c", "exit 3", start_new_session=True)
    assert await process.wait_or_kill(proc, 10) is True and proc.returncode == 3


async def test_a_child_is_known_to_have_exited_before_asyncio_reaps_it():
    """A command read in the loop pass where the child died must not be carried to it: the
    kernel is asked, while the child's returncode is still None (nothing yielded to the loop)."""
    import asyncio
    import signal

    proc = await asyncio.create_subprocess_exec("sleep", "60")
    assert not process.has_exited(proc)
    os.kill(proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while pc.running(proc.pid) and time.monotonic() < deadline:  # no await: the loop cannot run
        time.sleep(0.01)
    assert proc.returncode is None  # asyncio has not been told yet
    assert process.has_exited(proc)
    assert await asyncio.wait_for(proc.wait(), 10) == -9  # the peek left the status for asyncio


# --- JSON-RPC line framing, one module under two dialects ---------------------------------------


class _Writer:
    def __init__(self) -> None:
        self.lines: list[dict] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        import json

        self.lines.append(json.loads(data))

    async def drain(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def _channel(module, reader):
    import io

    seen: dict[str, list] = {"request": [], "notification": [], "unreadable": []}
    writer, transcript = _Writer(), io.BytesIO()
    kwargs = dict(on_request=lambda m, raw, n: seen["request"].append((m, n)),
                  on_notification=lambda m, raw, n: seen["notification"].append((m, n)))
    if module.__name__.endswith("acp.rpc"):
        kwargs["on_unreadable"] = lambda raw, n: seen["unreadable"].append((raw, n))
    return module.RpcChannel(reader, writer, transcript, **kwargs), writer, transcript, seen


async def test_both_dialects_frame_lines_and_settle_requests_alike():
    import asyncio

    from metaharness.adapters.acp import rpc as acp_rpc
    from metaharness.adapters.codex import rpc as codex_rpc

    for module, first_id, header in ((acp_rpc, 0, True), (codex_rpc, 1, False)):
        reader = asyncio.StreamReader()
        channel, writer, transcript, seen = _channel(module, reader)
        task = asyncio.ensure_future(channel.read_forever())
        future = channel.send_request("m", {"a": 1})
        assert writer.lines[-1] == {"jsonrpc": "2.0", "id": first_id, "method": "m", "params": {"a": 1}}
        reader.feed_data(b'{"id": "x", "method": "ask"}\n{"method": "note"}\n')
        reader.feed_data(b'{"id": %d, "result": 7}\nnot json\n' % first_id)
        assert await future == 7
        assert channel.answer("x", {"ok": True}) and not channel.answer("x", {"ok": False})  # once only
        expected = {"id": "x", "result": {"ok": True}}
        assert writer.lines[-1] == ({"jsonrpc": "2.0", **expected} if header else expected)
        pending = channel.send_request("late", None)
        reader.feed_eof()
        await task
        try:
            await pending
        except module.RpcClosed:
            pass
        else:
            raise AssertionError("a request still pending when the output ended must fail")
        assert transcript.getvalue().count(b"\n") == 4 and channel.line_count == 4
        assert [m["method"] for m, _ in seen["request"]] == ["ask"] and seen["request"][0][1] == 1
        if module is acp_rpc:
            assert seen["unreadable"] == [(b"not json", 4)]
        else:  # Codex: an unreadable line reaches the translator marked, to be made opaque
            assert seen["notification"][-1] == ({"method": None, "_unreadable": True}, 4)


async def test_the_dialects_differ_only_where_the_protocols_do():
    import asyncio

    from metaharness.adapters.acp import rpc as acp_rpc
    from metaharness.adapters.codex import rpc as codex_rpc

    for module, stray_seen in ((acp_rpc, True), (codex_rpc, False)):
        reader = asyncio.StreamReader()
        channel, _writer, _transcript, seen = _channel(module, reader)
        reader.feed_data(b'{"id": 99, "result": 1}\n')  # an answer to nothing we asked
        reader.feed_eof()
        await channel.read_forever()
        got = seen["unreadable"] if module is acp_rpc else [n for m, n in seen["notification"]]
        assert bool(got) is stray_seen, module.__name__


def test_a_childs_stderr_tail_is_its_last_three_lines_or_nothing(tmp_path):
    from metaharness.adapters.process import stderr_file_tail

    log = tmp_path / "stderr.txt"
    log.write_text("one\ntwo\nthree\nfour\n\n")
    assert stderr_file_tail(log) == "two | three | four"
    log.write_text("")
    assert stderr_file_tail(log) == ""
    assert stderr_file_tail(tmp_path / "missing") == ""


# A child of several threads: a SIGKILLed one takes a while to tear them down, and until the
# last is gone its end of our pipe stays open (a write to it succeeds).
THREADED = ("import threading, time\n"
            "for _ in range(8): threading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n"
            "print('up', flush=True)\n"
            "time.sleep(600)\n")


def test_a_child_sent_sigkill_is_gone_before_it_has_exited():
    """The window between the SIGKILL and the child's exit: the kernel says it has not exited
    (waitid), its stdin still takes a write, yet it can never read it — `is_gone` says so in
    every interleaving, and the window itself is reached (the stopped child is killed, and
    asked at once, before its threads are torn down)."""
    import signal

    windows = 0
    for _attempt in range(40):
        child = subprocess.Popen([sys.executable, "-c", THREADED], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            assert child.stdout.readline() == b"up\n"
            assert not process.is_gone(child) and not tree.killed(child.pid)
            os.kill(child.pid, signal.SIGSTOP)  # it cannot read what is written from here on
            os.kill(child.pid, signal.SIGKILL)
            not_exited = os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
            if not_exited:
                os.write(child.stdin.fileno(), b'{"decision": "allow"}\n')  # the reader is still there
            assert process.is_gone(child)  # whether or not it has exited yet
            if not_exited and not process.has_exited(child):
                windows += 1
        finally:
            child.kill()
            child.wait()
            child.stdin.close()
            child.stdout.close()
        if windows >= 3:
            break
    assert windows >= 3, "the SIGKILL-to-exit window was never reached"
    assert process.is_gone(child) and tree.killed(child.pid)  # reaped: gone from /proc
