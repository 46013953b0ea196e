"""Intake (run/host.py) and the command worker's bursts (run/queue.py), without timing:

* stdin is split into lines however the reads cut it (a line split across reads, a burst
  ending mid-line, a last line without its newline), a line over LINE_LIMIT is refused
  under `-` and its bytes skipped up to its newline — from a pipe and from a regular file
  (which the loop cannot watch);
* with the backlog full the intake stops reading, so the pipe keeps the rest;
* a pipe is non-blocking while the run reads it and blocking again after;
* the event writer joins one loop pass's lines into one write and one flush, and no line
  is held while the loop waits;
* a burst cut short by a halt still has every line answered once, before `stream.closed`.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import struct
import termios
import threading

import pytest

from metaharness.protocol.decode import CommandRefusal
from metaharness.run import host
from metaharness.run.host import TOO_LONG, Intake, make_writer
from metaharness.run.queue import NoIntake
from metaharness.run.spec import RunSpec

from .fake import FakeAdapter, Turn, cmd, drive


class _Sink:
    """What Intake hands to: records bursts and the end of stdin (a stand-in for Run)."""

    def __init__(self) -> None:
        self.bursts: list[list] = []
        self.ended = asyncio.Event()
        self.intake = None

    def attach(self, intake) -> None:  # as Run.attach: the intake it is told of taken bursts through
        self.intake = intake

    def feed_lines(self, lines: list) -> None:
        self.bursts.append(lines)

    def stdin_ended(self) -> None:
        self.ended.set()

    @property
    def lines(self) -> list:
        return [line for burst in self.bursts for line in burst]


def _writer(fd: int, pieces: list[bytes]) -> threading.Thread:
    def write() -> None:
        for piece in pieces:
            os.write(fd, piece)
        os.close(fd)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


async def _intake(pieces: list[bytes], *, chunk: int, free: bool = True) -> _Sink:
    read_fd, write_fd = os.pipe()
    sink = _Sink()
    intake = Intake(asyncio.get_running_loop(), sink, read_fd, chunk=chunk)  # type: ignore[arg-type]
    if free:  # the worker's part: a burst frees its slots when taken
        feed = sink.feed_lines

        def take(lines: list) -> None:
            feed(lines)
            sink.intake.taken(len(lines))

        sink.feed_lines = take  # type: ignore[method-assign]
    intake.start()
    _writer(write_fd, pieces)
    await asyncio.wait_for(sink.ended.wait(), 20)
    os.close(read_fd)
    return sink


@pytest.mark.parametrize("chunk", [1, 3, 7, 64 * 1024])
async def test_lines_come_out_whole_however_the_reads_cut_them(chunk):
    # A line split across writes and reads, blank lines kept (the worker skips them), a
    # burst ending mid-line, and a last line without "\n" that is still a line.
    pieces = [b'{"id":"a"}\n{"id"', b':"b"}\n\n  \n{"id":"c', b'"}\n', b'{"id":"d"}']
    sink = await _intake(pieces, chunk=chunk)
    assert sink.lines == [b'{"id":"a"}', b'{"id":"b"}', b"", b"  ", b'{"id":"c"}', b'{"id":"d"}']


async def test_many_lines_of_one_read_are_one_burst():
    sink = await _intake([b"".join(b"line%d\n" % i for i in range(100))], chunk=64 * 1024)
    assert len(sink.bursts) == 1 and sink.lines == [b"line%d" % i for i in range(100)]


@pytest.mark.parametrize("chunk", [4, 64 * 1024])
async def test_a_line_over_the_limit_is_refused_and_skipped_to_its_newline(monkeypatch, chunk):
    monkeypatch.setattr(host, "LINE_LIMIT", 10)
    pieces = [b"short\n", b"x" * 25, b"y" * 30 + b"\nafter\n", b"z" * 11 + b"\nlast"]
    sink = await _intake(pieces, chunk=chunk)
    refusal = CommandRefusal("-", TOO_LONG)
    assert sink.lines == [b"short", refusal, b"after", refusal, b"last"]


def _unread(fd: int) -> int:
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]


async def test_a_full_backlog_stops_the_reading_until_the_worker_takes_lines():
    read_fd, write_fd = os.pipe()
    sink = _Sink()
    # 8-byte reads of 2-byte lines: 4 lines a burst; a bound of 3 lines lets one burst in.
    intake = Intake(asyncio.get_running_loop(), sink, read_fd, backlog=3, chunk=8)  # type: ignore[arg-type]
    payload = b"x\n" * 400
    os.write(write_fd, payload)
    intake.start()
    for _ in range(2000):  # the intake reads one burst, hands it, and stops reading
        await asyncio.sleep(0.005)
        if _unread(read_fd) == len(payload) - 8 and sink.bursts:
            break
    await asyncio.sleep(0.1)  # had it gone on reading, it would have by now
    assert _unread(read_fd) == len(payload) - 8
    assert sink.lines == [b"x"] * 4
    sink.intake.taken(4)  # the worker takes the burst: reading resumes
    for _ in range(2000):
        await asyncio.sleep(0.005)
        if len(sink.lines) == 8:
            break
    assert sink.lines == [b"x"] * 8
    os.close(write_fd)
    sink.intake.taken(10**6)
    await asyncio.wait_for(sink.ended.wait(), 20)
    os.close(read_fd)
    assert sink.lines == [b"x"] * 400


class _Out:
    """A stdout that records its calls (a BrokenPipeError once asked)."""

    def __init__(self, broken: bool = False) -> None:
        self.calls: list[tuple[str, bytes]] = []
        self.broken = broken

    def write(self, data: bytes) -> int:
        self.calls.append(("write", bytes(data)))
        if self.broken:
            raise BrokenPipeError
        return len(data)

    def flush(self) -> None:
        self.calls.append(("flush", b""))

    @property
    def data(self) -> bytes:
        return b"".join(data for call, data in self.calls if call == "write")


async def test_a_loop_pass_of_lines_is_one_write_and_one_flush(tmp_path):
    out = _Out()
    tee = tmp_path / "events.jsonl"
    write, close = make_writer(out, str(tee), loop=asyncio.get_running_loop())
    for i in range(3):
        write(b"line %d\n" % i)
    assert out.calls == []  # held until the pass ends
    await asyncio.sleep(0)
    assert out.calls == [("write", b"line 0\nline 1\nline 2\n"), ("flush", b"")]
    write(b"line 3\n")
    close()  # close writes what is held
    assert out.data == b"line 0\nline 1\nline 2\nline 3\n"
    assert tee.read_bytes() == out.data


async def test_no_line_is_held_while_the_loop_waits():
    loop = asyncio.get_running_loop()
    out = _Out()
    write, close = make_writer(out, None, loop=loop)
    written: list[bytes] = []
    held_at_wait: list[bytes] = []
    selector = loop._selector  # type: ignore[attr-defined]
    real_select = selector.select

    def select(timeout=None):
        if timeout is None or timeout > 0:  # the loop is about to wait
            if out.data != b"".join(written):
                held_at_wait.append(b"".join(written)[len(out.data):])
        return real_select(timeout)

    selector.select = select
    try:
        async def writer() -> None:
            for i in range(50):
                for j in range(i % 4):
                    line = b"%d.%d\n" % (i, j)
                    written.append(line)
                    write(line)
                await asyncio.sleep(0.001 if i % 2 else 0)

        await writer()
        await asyncio.sleep(0.01)
    finally:
        selector.select = real_select
    close()
    assert held_at_wait == []
    assert out.data == b"".join(written)


def test_without_a_loop_each_line_is_written_and_flushed_at_once():
    out = _Out()
    write, close = make_writer(out, None)
    write(b"a\n")
    assert out.calls == [("write", b"a\n"), ("flush", b"")]
    close()


async def test_a_broken_stdout_does_not_stop_the_tee(tmp_path):
    tee = tmp_path / "events.jsonl"
    write, close = make_writer(_Out(broken=True), str(tee), loop=asyncio.get_running_loop())
    write(b"a\n")
    await asyncio.sleep(0)
    write(b"b\n")
    close()
    assert tee.read_bytes() == b"a\nb\n"


async def test_a_burst_cut_short_by_a_halt_is_answered_line_by_line_before_the_close():
    spec = RunSpec(kind="oharness", prompt="go", decisions="ask", keep_open=True)
    burst = [cmd("message.inject", id="m1", text="x"), b"", b"{broken", cmd("halt", id="h", reason="enough"),
             cmd("message.inject", id="m2", text="y"), b"  ", b"\xff", cmd("tool.decide", id="d", call_id="nope",
                                                                         decision={"decision": "allow"})]

    def embedder(run, event):
        if event["event"] == "session.started":
            run.feed_lines(list(burst))
            run.feed_lines([cmd("message.inject", id="m3", text="z")])

    events, _code, _adapter, *_ = await drive(spec, FakeAdapter(spec, [Turn([], hold=True)]), on_event=embedder)
    results = [e for e in events if e["event"] == "command.result"]
    assert [r["id"] for r in results] == ["m1", "-", "m2", "-", "d", "m3", "h"]
    late = {r["id"]: r["outcome"] for r in results if r["id"] in ("m2", "d", "m3")}
    assert all(outcome["refused"]["code"] == "TOO_LATE" for outcome in late.values())
    assert events[-2]["id"] == "h" and events[-1]["event"] == "stream.closed"


async def test_the_worker_frees_a_bursts_slots_when_it_takes_it():
    spec = RunSpec(kind="oharness", prompt="go", decisions="ask", keep_open=True)
    freed: list[int] = []

    class Counting(NoIntake):
        def taken(self, lines: int) -> None:
            freed.append(lines)

    def embedder(run, event):
        if event["event"] == "session.started":
            run.attach(Counting())
            run.feed_lines([b"{1", b"{2", b""])
            run.feed_lines([cmd("halt", id="h", reason="done")])

    events, *_ = await drive(spec, FakeAdapter(spec, [Turn([], hold=True)]), on_event=embedder)
    assert freed == [3, 1]
    assert [e["id"] for e in events if e["event"] == "command.result"] == ["-", "-", "h"]


async def test_a_stop_between_slices_answers_the_rest_of_the_burst_once_each_in_order(monkeypatch):
    """The worker notes where it is in a burst only before it waits (a carried command, a yield
    between slices): a wind-up that comes during a yield (its drain not waiting) answers exactly the
    lines not yet taken."""
    from metaharness.run import queue

    monkeypatch.setattr(queue, "WORKER_SLICE_S", 0.0)  # a yield after every line
    monkeypatch.setattr(queue, "DRAIN_BOUND_S", 0.0)  # the wind-up does not wait for the worker
    spec = RunSpec(kind="oharness", prompt="go", decisions="ask", keep_open=True)
    burst = [cmd("tool.decide", id=f"d{i}", call_id="nope", decision={"decision": "allow"}) if i % 3
             else b"{broken %d" % i for i in range(40)]
    stopped: list[bool] = []

    def embedder(run, event):
        if event["event"] == "session.started":
            run.feed_lines(list(burst))
        elif event["event"] == "command.result" and not stopped and event["id"] == "d5":
            stopped.append(True)
            asyncio.ensure_future(run.request_stop())

    events, *_ = await drive(spec, FakeAdapter(spec, [Turn([], hold=True)]), on_event=embedder)
    results = [e for e in events if e["event"] == "command.result"]
    assert [r["id"] for r in results] == [f"d{i}" if i % 3 else "-" for i in range(40)]
    codes = [r["outcome"]["refused"]["code"] for r in results]
    assert codes[:6] == ["MALFORMED", "UNKNOWN_CALL", "UNKNOWN_CALL", "MALFORMED", "UNKNOWN_CALL", "UNKNOWN_CALL"]
    assert "TOO_LATE" in codes  # the rest was answered at the wind-up, not taken as usual
    assert events[-1]["event"] == "stream.closed"


class _StuckPosture(FakeAdapter):
    """A harness that never confirms a posture change; asking for one stops the run (as a
    SIGTERM would), so the run winds up with the worker stuck mid-burst."""

    stop = None  # the run's request_stop, given by the test

    async def set_posture(self, command):
        asyncio.ensure_future(self.stop())
        await asyncio.Event().wait()


async def test_the_rest_of_a_burst_the_worker_is_stuck_in_is_answered_at_wind_up():
    spec = RunSpec(kind="oharness", prompt="go", decisions="ask", keep_open=True)
    burst = [cmd("permission.set", id="p", posture="plan"), cmd("message.inject", id="m1", text="x"), b"{bad",
             b"", cmd("message.inject", id="m2", text="y")]

    def embedder(run, event):
        if event["event"] == "session.started":
            adapter.stop = run.request_stop
            run.feed_lines(list(burst))
            run.feed_lines([cmd("message.inject", id="m3", text="z")])

    adapter = _StuckPosture(spec, [Turn([], hold=True)])
    events, *_ = await drive(spec, adapter, on_event=embedder)
    results = [e for e in events if e["event"] == "command.result"]
    assert [r["id"] for r in results] == ["p", "m1", "-", "m2", "m3"]
    assert all("refused" in r["outcome"] for r in results)
    assert events[-1]["event"] == "stream.closed"


class _SlowIntake(Intake):
    """An intake slow to its first read (a busy loop's scheduling): the run may meet its end
    before the intake has read what stdin holds."""

    def start(self) -> None:
        self._loop.call_later(1.0, super().start)


class _NoCatchUp(NoIntake):
    """The intake's slots freed as bursts are taken, but never asked to catch up."""

    def __init__(self, intake: Intake) -> None:
        self.intake = intake

    def taken(self, lines: int) -> None:
        self.intake.taken(lines)


@pytest.mark.parametrize("catch_up", [True, False])
async def test_a_line_in_stdin_when_the_run_ends_is_answered(catch_up):
    # The lines are in the pipe before the run starts; the run ends at once (one empty turn)
    # while the intake waits to begin reading. The wind-up asks the intake to catch up,
    # so each line is answered before `stream.closed`; without the catch-up none would be.
    read_fd, write_fd = os.pipe()
    os.write(write_fd, cmd("message.inject", id="m1", text="x") + b"\n" + cmd(
        "tool.decide", id="d", call_id="nope", decision={"decision": "allow"}) + b"\n")
    spec = RunSpec(kind="oharness", prompt="go")
    intakes: list[Intake] = []

    def embedder(run, event):
        if event["event"] == "session.started":
            intake = _SlowIntake(asyncio.get_running_loop(), run, read_fd)
            if not catch_up:
                run.attach(_NoCatchUp(intake))
            intakes.append(intake)
            intake.start()

    try:
        events, *_ = await drive(spec, FakeAdapter(spec, [Turn([])]), on_event=embedder)
    finally:
        for intake in intakes:
            intake.close()
        os.close(write_fd)
    answered = [e["id"] for e in events if e["event"] == "command.result"]
    assert events[-1]["event"] == "stream.closed"
    if catch_up:
        assert answered == ["m1", "d"]
        assert [r["outcome"]["refused"]["code"] for r in events if r["event"] == "command.result"] == ["TOO_LATE"] * 2
    else:  # the race the catch-up closes, shown to be real
        assert answered == []
    assert asyncio.get_running_loop().remove_reader(read_fd) is False  # close() stopped the reading
    os.close(read_fd)


async def test_a_regular_file_is_read_to_its_end(tmp_path):
    # epoll cannot watch a regular file: it is read a chunk per loop pass instead.
    path = tmp_path / "commands.jsonl"
    path.write_bytes(b"".join(b'{"id":"%d"}\n' % i for i in range(500)) + b'{"id":"last"}')
    sink = _Sink()
    with open(path, "rb") as handle:
        intake = Intake(asyncio.get_running_loop(), sink, handle.fileno(), chunk=100)  # type: ignore[arg-type]
        sink_feed = sink.feed_lines
        sink.feed_lines = lambda lines: (sink_feed(lines), intake.taken(len(lines)))  # type: ignore[method-assign]
        intake.start()
        await asyncio.wait_for(sink.ended.wait(), 20)
        intake.close()
    assert sink.lines == [b'{"id":"%d"}' % i for i in range(500)] + [b'{"id":"last"}']
    assert len(sink.bursts) > 1  # a chunk per pass, not the whole file at once


async def test_a_pipe_is_non_blocking_while_read_and_blocking_again_after():
    read_fd, write_fd = os.pipe()
    sink = _Sink()
    intake = Intake(asyncio.get_running_loop(), sink, read_fd)  # type: ignore[arg-type]
    intake.start()
    assert os.get_blocking(read_fd) is False
    os.write(write_fd, b"a\n")
    for _ in range(400):
        await asyncio.sleep(0.005)
        if sink.lines:
            break
    assert sink.lines == [b"a"]
    intake.close()
    assert os.get_blocking(read_fd) is True
    os.close(write_fd)
    os.close(read_fd)
