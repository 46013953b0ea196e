"""Writing a stream of event lines, and judging one (docs/reference/wire.md).

What belongs here: `encode_event_line` (the exact bytes of one line), the
`EventWriter` (the ONE place `seq` is assigned, and the only writer of
`stream.closed`; an `EventTap` may watch what it writes, the live OpenTelemetry export), and
`check_stream` (the `metaharness check` verdict).

Rules kept:
* Key order of a line: format, seq, run, [at], event, payload in the order of its
  event's table in docs/reference/wire.md. The
  payload struct is encoded by one deterministic msgspec encoder — struct fields in
  declaration order (the tag, `event`, first), dict keys sorted at every level
  (pass-through values and the by_seam/by_decider/model_usage maps) — and the
  envelope is spliced in front of it.
* msgspec's output already follows the wire's encoding rules (lowercase `\\u00XX`,
  raw non-ASCII, `/` unescaped, NaN → null, Rust float exponents); what msgspec
  does not police — a bool or float where an integer is expected, a u64 above its
  ceiling — is checked before writing (`_typeplan.check_struct`).
* `stream.closed` is written exactly once, last, with `events == seq - 1` and
  `run_id == run`; a write after it raises `StreamClosedError`.
"""

from __future__ import annotations

from typing import Any, Callable, Literal, Protocol

import msgspec
from msgspec import Struct

from ._typeplan import ValueCheckError, _build as _build_checker
from .decode import LineError, decode_event_line
from .events import EVENT_FORMAT, EVENT_TYPES, CommandResult, StreamClosed
from .values import Ok, Refusal, Refused, UnknownTermination

_ENC = msgspec.json.Encoder(order="deterministic")
_encode = _ENC.encode
_HEAD = b'{"format":"' + EVENT_FORMAT.encode() + b'","seq":'
_EVENT_TYPE_SET = frozenset(EVENT_TYPES)
_CHECKERS: dict[type, Any] = {}  # event type → its generated value checker


class StreamClosedError(RuntimeError):
    """A write was attempted after `stream.closed` (nothing may follow it)."""


def encode_event_line(seq: int, run: str, event: Any, at: str | None = None) -> bytes:
    """One event line, trailing "\\n" included. Raises ValueError/TypeError on a bad value."""
    cls = type(event)
    checker = _CHECKERS.get(cls)
    if checker is None:
        if cls not in _EVENT_TYPE_SET:
            raise TypeError(f"{cls.__name__} is not a metaharness.event/1 event")
        checker = _CHECKERS[cls] = _build_checker(cls)
    if type(seq) is not int or seq < 1:
        raise ValueError(f"seq must be a positive int, not {seq!r}")
    if cls is not CommandResult or not _plain_outcome(event.outcome):
        try:
            checker(event, "$")
        except ValueCheckError as exc:
            raise ValueError(f"{cls.__struct_config__.tag}: {exc}") from None
    run_key = _RUN_KEYS.get(run)
    if run_key is None:
        if type(run) is not str:
            raise TypeError(f"run must be a str, not {type(run).__name__}")
        run_key = _run_key(run)
    if at is None:
        return b"%b%d%b%b\n" % (_HEAD, seq, run_key, _encode(event)[1:])
    if type(at) is not str:
        raise TypeError(f"at must be a str or None, not {type(at).__name__}")
    return b"%b%d%b\"at\":%b,%b\n" % (_HEAD, seq, run_key, _encode(at), _encode(event)[1:])


def _plain_outcome(outcome: Any) -> bool:
    """A `command.result` outcome the value checker would pass without looking: an `Ok`, or
    a `Refused` holding a `Refusal` — string fields only, nothing msgspec does not police
    (tests/protocol/test_stream.py keeps that true). The loop writes one per command, so a
    flood of commands skips the generic walk."""
    kind = type(outcome)
    return kind is Ok or (kind is Refused and type(outcome.refused) is Refusal)


_RUN_KEYS: dict[str, bytes] = {}


def _run_key(run: str) -> bytes:
    """`,"run":<run>,` — cached, since a process writes few runs and many lines."""
    key = b',"run":' + _ENC.encode(run) + b","
    if len(_RUN_KEYS) < 64:
        _RUN_KEYS[run] = key
    return key


def at_from_unix_ms(ms: int) -> str:
    """A vendor's Unix-milliseconds timestamp as the envelope's `at`: RFC 3339 UTC
    with milliseconds, e.g. 1795957611960 → "2026-11-29T13:06:51.960Z". A rendering of the
    vendor's value, never a clock reading."""
    import time

    if type(ms) is not int:
        raise TypeError(f"milliseconds must be an int, not {type(ms).__name__}")
    seconds, millis = divmod(ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


class EventTap(Protocol):
    """A consumer of the typed events a writer writes (the live OpenTelemetry export): `event`
    after each line is written, `closing` with the `stream.closed` marker before it is written,
    returning the events (warnings) to write before it. A tap never raises."""

    def event(self, event: Any, at: str | None, seq: int) -> None: ...

    def closing(self, marker: Any) -> list[Any]: ...


class EventWriter:
    """Numbers and writes the lines of one stream; closes it exactly once."""

    def __init__(self, write: Callable[[bytes], None], run: str) -> None:
        if type(run) is not str:
            raise TypeError("run must be a str")
        self._write = write
        self._run = run
        self._next_seq = 1
        self._closed = False
        self.tap: EventTap | None = None

    @property
    def run(self) -> str:
        return self._run

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def lines_written(self) -> int:
        return self._next_seq - 1

    def write(self, event: Any, at: str | None = None) -> int:
        """Write one event; returns the seq it was given."""
        if self._closed:
            raise StreamClosedError(f"stream {self._run!r} is closed; nothing may follow stream.closed")
        if type(event) is StreamClosed:
            raise ValueError("stream.closed is written by EventWriter.close(), never by write()")
        seq = self._next_seq
        line = encode_event_line(seq, self._run, event, at)  # raises before seq is spent
        self._write(line)
        self._next_seq = seq + 1
        if self.tap is not None:
            self.tap.event(event, at, seq)
        return seq

    def close(self, reason: str, process: Any = None) -> None:
        """Write `stream.closed` (events == seq - 1, run_id == run); once only."""
        if self._closed:
            raise StreamClosedError(f"stream {self._run!r} is already closed")
        if self.tap is not None:
            tap, self.tap = self.tap, None
            for event in tap.closing(StreamClosed(process=process if process is not None else UnknownTermination(),
                                                  events=self._next_seq - 1, reason=reason,  # type: ignore[arg-type]
                                                  run_id=self._run)):
                self.write(event)
        seq = self._next_seq
        marker = StreamClosed(
            process=process if process is not None else UnknownTermination(),
            events=seq - 1,
            reason=reason,  # type: ignore[arg-type]
            run_id=self._run,
        )
        if reason not in ("completed", "budget", "killed", "error", "steer-halt"):
            raise ValueError(f"unknown close reason {reason!r}")
        line = encode_event_line(seq, self._run, marker)
        self._closed = True  # even if the sink fails, nothing may follow an attempted close
        self._write(line)
        self._next_seq = seq + 1


# --- the stream verdict ------------------------------------------------------------------

Status = Literal["complete", "truncated", "inconsistent", "invalid"]
_EXIT = {"complete": 0, "truncated": 3, "inconsistent": 1, "invalid": 1}


class StreamVerdict(Struct, frozen=True, kw_only=True):
    """What `metaharness check` concludes about one stream."""

    status: Status
    lines: int  # lines read (a cut last line that does not decode is not counted)
    run: str | None = None
    line: int | None = None  # the first bad line, 1-based (None when complete or truncated)
    reason: str = ""

    @property
    def exit_code(self) -> int:
        return _EXIT[self.status]

    @property
    def ok(self) -> bool:
        return self.status == "complete"


def check_stream(data: bytes) -> StreamVerdict:
    """Classify a captured stream: complete / truncated / inconsistent / invalid."""
    parts = data.split(b"\n")
    cut = parts.pop()  # b"" when the data ends with "\n"; else a last line without terminator
    run: str | None = None
    closed_at: int | None = None
    count = 0
    lines = [(p, True) for p in parts]
    if cut:
        lines.append((cut, False))
    for number, (raw, terminated) in enumerate(lines, start=1):
        try:
            envelope, event = decode_event_line(raw)
        except LineError as exc:
            if not terminated:  # a last line cut before its "\n": truncation, not a bad line
                return StreamVerdict(status="truncated", lines=count, run=run,
                                     reason=f"line {number} was cut off before its end")
            return StreamVerdict(status="invalid", lines=count, run=run, line=number,
                                 reason=f"line {number} is not a valid metaharness.event/1 line: {exc.message}")
        count = number
        if closed_at is not None:
            return StreamVerdict(status="inconsistent", lines=count, run=run, line=number,
                                 reason=f"line {number} follows stream.closed (line {closed_at}), which must be the last line")
        if envelope.seq != number:
            return StreamVerdict(status="invalid", lines=count, run=run, line=number,
                                 reason=f"line {number} has seq {envelope.seq}; seq must count from 1 by 1, so {number} was expected")
        if run is None:
            run = envelope.run
        elif envelope.run != run:
            return StreamVerdict(status="invalid", lines=count, run=run, line=number,
                                 reason=f"line {number} has run {_json(envelope.run)} but the stream's run is {_json(run)}")
        if type(event) is StreamClosed:
            closed_at = number
            if event.events != number - 1:
                return StreamVerdict(status="inconsistent", lines=count, run=run, line=number,
                                     reason=f"stream.closed on line {number} counts {event.events} events but {number - 1} lines precede it")
            if event.run_id != run:
                return StreamVerdict(status="inconsistent", lines=count, run=run, line=number,
                                     reason=f"stream.closed on line {number} names run_id {_json(event.run_id)} but the stream's run is {_json(run)}")
    if closed_at is None:
        return StreamVerdict(status="truncated", lines=count, run=run,
                             reason="no stream.closed line: the stream is truncated" if count else "the stream is empty: no stream.closed line")
    return StreamVerdict(status="complete", lines=count, run=run, reason="complete")


def _json(text: str) -> str:
    return msgspec.json.encode(text).decode()
