"""One child's whole life (adapters/process/lifecycle.py), against real processes: the spawn on
its channel, the lines read and kept, the end in its one order (output, reaping, the tree swept,
the adapter's own end, the release), a stop's grace then kill, and what is kept and removed."""

from __future__ import annotations

import asyncio
import os
import sys
import time

import pytest

from metaharness.adapters.process import Child, Scratch, make_scratch
from metaharness.protocol.values import Exited, Signaled, UnknownTermination



def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True

ECHO = [sys.executable, "-u", "-c",
        "import sys\nsys.stderr.write('first words\\nlast words\\n')\nfor line in sys.stdin: sys.stdout.write('got ' + line)"]


class Service:
    def __init__(self, fail: bool = False) -> None:
        self.stopped = 0
        self.fail = fail

    async def stop(self) -> None:
        self.stopped += 1
        if self.fail:
            raise RuntimeError("this service cannot stop")


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    monkeypatch.setenv("METAHARNESS_SCRATCH_DIR", str(tmp_path / "base"))
    return make_scratch("lifecycle", dirs=("vendor-home",))


async def _read_all(child: Child, seen: list) -> None:
    async for number, raw in child.lines():
        seen.append((number, raw))


async def test_lines_are_read_and_kept_then_the_end_runs_in_its_order(scratch):
    child = Child(scratch, transcript=scratch.transcript)
    failing, service = child.serve(Service(fail=True)), child.serve(Service())
    kept_file = child.open(scratch / "sent.jsonl", "w")
    await child.spawn(ECHO, env={"PATH": "/usr/bin:/bin"}, cwd=str(scratch.root))
    seen: list = []
    child.read(_read_all(child, seen))
    child.write(b"one")
    child.write(b"two\n")
    await child.drain()
    assert child.alive() and not child.output_ended
    child.close_stdin()
    order: list[str] = []

    async def exited() -> None:  # the adapter's own end: after the reaping, before the release
        order.append(f"exited: reaped={child.proc.returncode is not None} released={kept_file.closed}")

    child.ending = exited  # handed over once, at the adapter's start
    termination = await asyncio.wait_for(child.wait(), 10)
    assert termination == Exited(code=0)
    assert seen == [(1, b"got one\n"), (2, b"got two\n")]
    assert scratch.transcript.read_bytes() == b"got one\ngot two\n"
    assert order == ["exited: reaped=True released=False"]
    assert kept_file.closed and failing.stopped == 1 and service.stopped == 1  # the rest stop when one fails
    assert child.output_ended and not child.alive()
    assert child.stderr_tail() == "first words | last words"  # from the scratch's stderr.log
    assert await child.wait() is termination and service.stopped == 1  # once


async def test_the_lines_sent_are_kept_until_the_release(scratch):
    child = Child(scratch)
    child.record_sent({"id": 1, "result": {"outcome": "é"}})
    child.record_sent({"method": "session/cancel"})
    assert scratch.sent.read_text(encoding="utf-8") == '{"id":1,"result":{"outcome":"é"}}\n{"method":"session/cancel"}\n'
    await child.release()
    child.record_sent({"method": "late"})  # the run's files are closed: not kept, not raised
    assert "late" not in scratch.sent.read_text()


async def test_a_child_without_a_scratch_keeps_its_stderr_tail_in_memory():
    child = Child()
    await child.spawn(ECHO, env={"PATH": "/usr/bin:/bin"}, cwd=None)
    child.read(_read_all(child, []))
    child.close_stdin()
    assert await asyncio.wait_for(child.wait(), 10) == Exited(code=0)
    assert child.stderr_tail() == "first words\nlast words"


async def test_a_wait_with_nothing_spawned_releases_the_services():
    child = Child()
    service = child.serve(Service())
    assert await child.wait() == UnknownTermination()
    assert service.stopped == 1


async def test_a_halt_gives_grace_then_kills_the_tree(scratch, tmp_path):
    pidfile = tmp_path / "grandchild"
    child = Child(scratch)
    # Ignores the end of its input; its grandchild runs in a session of its own.
    await child.spawn(["sh", "-c", f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 60' & exec sleep 60"],
                      env={"PATH": "/usr/bin:/bin"}, cwd=None)
    child.read(_read_all(child, []))
    for _ in range(500):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        await asyncio.sleep(0.01)
    groups = child.descendant_groups()  # the grandchild's among them (pids are the namespace's own, if confined)
    assert groups
    child.close_stdin()
    started = time.monotonic()
    await child.halt(0.3, groups)
    assert 0.25 <= time.monotonic() - started < 5
    assert isinstance(await asyncio.wait_for(child.wait(), 10), Signaled)
    for _ in range(200):
        if not any(_group_alive(group) for group in groups):
            break
        await asyncio.sleep(0.01)
    assert not any(_group_alive(group) for group in groups)


async def test_a_kill_stops_at_once_and_releases(scratch):
    child = Child(scratch)
    service = child.serve(Service())
    await child.spawn(["sleep", "60"], env={"PATH": "/usr/bin:/bin"}, cwd=None)
    child.read(_read_all(child, []))
    await asyncio.wait_for(child.kill(), 10)
    assert child.proc.returncode is not None and child.output_ended and service.stopped == 1
    with pytest.raises(BrokenPipeError):
        child.write(b"anyone there?")


def test_retain_copies_files_and_trees_and_cleanup_removes_the_root(scratch, tmp_path, monkeypatch):
    (scratch.transcript).write_text("t\n")
    (scratch / "vendor-home" / "state.json").write_text("{}")
    child = Child(scratch)
    kept = tmp_path / "kept"
    for source, name in [(scratch.transcript, "vendor-transcript.jsonl"), (scratch / "vendor-home", "home"),
                         (scratch / "absent", "absent")]:
        child.keep(source, name)
    failures = child.retain(str(kept))
    assert failures == []
    assert (kept / "vendor-transcript.jsonl").read_text() == "t\n"
    assert (kept / "home" / "state.json").read_text() == "{}"
    assert not (kept / "absent").exists()
    (kept / "blocked").write_text("a file where a directory should go")
    assert child.retain(str(kept / "blocked"))  # said, not raised
    monkeypatch.setenv("METAHARNESS_SCRATCH_DIR", "")  # the base not chosen: the root goes
    child.cleanup()
    assert not scratch.root.exists()


def test_one_scratch_layout(tmp_path, monkeypatch):
    monkeypatch.setenv("METAHARNESS_SCRATCH_DIR", str(tmp_path / "base"))
    scratch = make_scratch("kind", dirs=("a/b",))
    assert scratch.root.name.startswith("kind-") and scratch.root.parent == tmp_path / "base"
    assert all(path.is_dir() for path in (scratch.home, scratch.tmp, scratch / "a" / "b"))
    assert oct(scratch.home.stat().st_mode & 0o777) == "0o700"
    assert [scratch.transcript.name, scratch.sent.name, scratch.stderr.name] == \
        ["transcript.jsonl", "sent.jsonl", "stderr.log"]
    assert Scratch(str(scratch.root)) == scratch  # a root given as text is the same layout
