"""Reading wire lines: event lines and command (stdin) lines (docs/reference/wire.md).

What belongs here: the one decoding algorithm for both directions, the
stdin rules for command lines, the command-line encoder for library clients, and
the well-formedness checks of a command that need no adapter.

Rules kept:
* `decode_command_line` never raises: every non-blank line gives one parsed
  command or one `CommandRefusal` (code MALFORMED), under the line's string `id`
  when it parsed as an object carrying one, else under `-`. A blank line gives None.
* The checks run in the decoding algorithm's order and the first failure wins, with the fixed
  message forms of that table; payload details use serde's words where msgspec has
  an obvious equivalent (`_typeplan.translate_error`).
* The common case is fast: a valid line is decoded typed by msgspec in two short
  passes; only a line that fails takes the slow path that names the failing step.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Union

import msgspec
from msgspec import Struct

from ._typeplan import U64_MAX, ValueCheckError, ceiling_checker, check_struct, translate_error
from .commands import COMMAND_BY_NAME, COMMAND_FORMAT, COMMAND_TYPES, Command, ToolDecide, FrameSet
from .events import EVENT_BY_NAME, EVENT_FORMAT, Event
from .refusals import CommandCode
from .values import U64, Deny

if TYPE_CHECKING:
    from .frame import Frame

RESERVED_ID = "-"
RESERVED_ID_REASON = 'the id "-" is reserved for lines whose id could not be read'

_BLANK = b" \t\r\n"
_COMMAND_PREFIX = b'{"format":"metaharness.command/1",'  # 34 bytes
_COMMAND_PREFIX_SPACED = b'{"format": "metaharness.command/1",'  # 35 bytes: json.dumps' default separators
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class LineError(ValueError):
    """A wire line that fails decoding; `message` is the fixed-form failure message."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Envelope(Struct, kw_only=True):
    """The event envelope as read from a line."""

    format: str
    seq: U64
    run: str
    at: str | None = None


class CommandRefusal(Struct, frozen=True):
    """A stdin line refused MALFORMED: answer `id` with `reason`."""

    id: str
    reason: str
    code: str = CommandCode.MALFORMED


# One item of a run's command queue: a decoded command, or the refusal of a line.
CommandLine = Union[Command, CommandRefusal]


class _CommandHead(Struct):
    format: str


# The msgspec decoders are built on first use (building ~30 of them at import would
# cost ~10 ms of start-up); the hot paths then call their bound `decode` methods held
# in module globals. Each placeholder below builds everything and retries once.
_ENVELOPE_DECODER: Any = None
_EVENT_DECODERS: dict[str, Any] = {}
_COMMAND_DECODERS: dict[str, Any] = {}


def _build_decoders() -> None:
    global _decode_event, _decode_envelope, _decode_command_typed, _decode_command_head, _ENVELOPE_DECODER
    d = msgspec.json.Decoder
    _ENVELOPE_DECODER = d(Envelope)
    _EVENT_DECODERS.update({name: d(cls) for name, cls in EVENT_BY_NAME.items()})
    _COMMAND_DECODERS.update({name: d(cls) for name, cls in COMMAND_BY_NAME.items()})
    _decode_event = d(Event).decode
    _decode_envelope = _ENVELOPE_DECODER.decode
    _decode_command_typed = d(Command).decode
    _decode_command_head = d(_CommandHead).decode


def _decode_event(raw: bytes) -> Any:
    _build_decoders()
    return _decode_event(raw)


def _decode_envelope(raw: bytes) -> Any:
    _build_decoders()
    return _decode_envelope(raw)


def _decode_command_typed(raw: bytes) -> Any:
    _build_decoders()
    return _decode_command_typed(raw)


def _decode_command_head(raw: bytes) -> Any:
    _build_decoders()
    return _decode_command_head(raw)


_CEILINGS: dict[type, Any] = {}  # event type → its u64-ceiling checker (None: nothing to check), built on first use
_UNBUILT = object()
_ENC = msgspec.json.Encoder(order="deterministic")


def _q(text: str) -> str:
    return msgspec.json.encode(text).decode()  # JSON string literal, as json.dumps(ensure_ascii=False)


def invalid_utf8_offset(raw: bytes) -> int:
    """0-based offset of the first invalid UTF-8 sequence in the whole line (-1 if none)."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start
    return -1


def utf8_reason(offset: int) -> str:
    return f"the line is not valid UTF-8: the first invalid byte sequence starts at byte offset {offset}"


def _parse_value(raw: bytes) -> tuple[Any, str | None]:
    """Step 1 on the slow path: (the untyped value, None), or (None, the failure message).
    Returned, not raised: a refused line's slow path takes no second exception."""
    try:
        return msgspec.json.decode(raw), None
    except UnicodeDecodeError:
        return None, "not a JSON object: " + utf8_reason(invalid_utf8_offset(raw))
    except msgspec.DecodeError as exc:
        text = str(exc)
        if ("truncated" in text or "surrogate" in text) and b"\\" in raw and _SURROGATE_ESCAPE.search(raw):
            # msgspec reports a lone surrogate escape as "truncated"; say what it is
            return None, "not a JSON object: lone surrogate in a \\u escape (an unpaired UTF-16 surrogate is not text)"
        return None, "not a JSON object: " + text
    except RecursionError:
        return None, "not a JSON object: the value is nested too deeply"


def _parse(raw: bytes) -> Any:
    """Step 1 on the slow path: the untyped value, or LineError."""
    obj, failure = _parse_value(raw)
    if failure is not None:
        raise LineError(failure)
    return obj


class _Repeated(Exception):
    pass


def _no_repeats(pairs: list) -> None:
    if len({key for key, _ in pairs}) != len(pairs):
        raise _Repeated
    return None


def _last_position(pairs: list) -> dict:
    out: dict = {}
    for key, value in pairs:
        out.pop(key, None)  # the last occurrence wins, and stands where it stood
        out[key] = value
    return out


_REPEATS_READER: Any = None  # json.JSONDecoder(object_pairs_hook=_no_repeats), built on first use
_LAST_READER: Any = None  # json.JSONDecoder(object_pairs_hook=_last_position)


def _surely_unrepeated(raw: bytes, obj: Any) -> bool:
    """True when `raw` surely repeats no key, told without a second parse (the reader below
    costs more than the rest of a refused line's slow path). With no backslash in `raw` every
    `"` delimits a string, so `raw` holds half as many strings (keys and values) as it holds
    `"`. `obj`, msgspec's parse, holds each of them once — but for a repeated key, whose
    earlier occurrences it drops: the counts agree exactly when no key repeats. Any other
    count, or a backslash, leaves it to the reader."""
    if b"\\" in raw:
        return False
    strings = 0
    stack = [obj]
    while stack:
        value = stack.pop()
        if type(value) is dict:
            strings += len(value)
            value = value.values()
        for item in value:
            kind = type(item)
            if kind is str:
                strings += 1
            elif kind is dict or kind is list:
                stack.append(item)
    return raw.count(b'"') == 2 * strings


def _last_wins(raw: bytes, obj: Any) -> bytes:
    """Duplicate keys: the last one wins — at every level, for every key. When `raw` repeats
    a key, the typed decode reads instead the object that holds only each key's last
    occurrence, in the place it had: with two faults in a line the one named first is then the
    same as for that object (msgspec's own parse, `obj`, keeps a key where it first stood)."""
    global _REPEATS_READER, _LAST_READER
    if _surely_unrepeated(raw, obj):
        return raw
    if _REPEATS_READER is None:
        # One reader for every line: json.loads(..., object_pairs_hook=) builds a new decoder
        # and scanner per call, which cost more than the rest of a refused line's slow path;
        # json is imported here, as only this path needs it.
        import json

        _REPEATS_READER = json.JSONDecoder(object_pairs_hook=_no_repeats)
        _LAST_READER = json.JSONDecoder(object_pairs_hook=_last_position)
    text = raw.decode("utf-8", "surrogatepass")  # as json.loads reads bytes
    try:
        _REPEATS_READER.decode(text)
    except _Repeated:
        try:
            return msgspec.json.encode(_LAST_READER.decode(text))
        except (ValueError, RecursionError, TypeError, OverflowError):
            return msgspec.json.encode(obj)
    except (ValueError, RecursionError):  # msgspec parsed it; a stricter reader cannot see repeats
        pass
    return raw


def _format_message(obj: dict[str, Any], tag: str) -> str | None:
    found = obj.get("format")
    if not isinstance(found, str):
        return f"no format tag, expected {_q(tag)}"
    if found != tag:
        return f"unknown format tag {_q(found)}, expected {_q(tag)}"
    return None


def _typed(decoder: msgspec.json.Decoder, raw: bytes, root: type, obj: Any, name: str) -> Any:
    """Step 5: the whole object against its named type, or LineError."""
    try:
        value = decoder.decode(raw)
    except msgspec.ValidationError as exc:
        raise LineError(f"malformed {name}: {translate_error(str(exc), root, obj)}") from None
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as exc:  # parsed once already; defensive
        raise LineError(f"malformed {name}: {exc}") from None
    try:
        check_struct(value)  # the u64 ceiling msgspec cannot express
    except ValueCheckError as exc:
        raise LineError(f"malformed {name}: {exc.message}") from None
    return value


# --- events ----------------------------------------------------------------------------


def decode_event_line(raw: bytes) -> tuple[Envelope, Any]:
    """One `metaharness.event/1` line → (Envelope, Event); LineError with the fixed-form message."""
    try:
        event = _decode_event(raw)
        envelope = _decode_envelope(raw)
        if envelope.format == EVENT_FORMAT and envelope.seq <= U64_MAX:
            checker = _CEILINGS.get(type(event), _UNBUILT)
            if checker is _UNBUILT:
                checker = _CEILINGS[type(event)] = ceiling_checker(type(event))
            if checker is not None:
                checker(event, "$")
            return envelope, event
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError, ValueCheckError):
        pass
    return _decode_event_slow(raw)


def _decode_event_slow(raw: bytes) -> tuple[Envelope, Any]:
    if _ENVELOPE_DECODER is None:
        _build_decoders()
    obj = _parse(raw)
    if not isinstance(obj, dict):
        raise LineError("not a JSON object: the line is JSON but not an object")
    if message := _format_message(obj, EVENT_FORMAT):
        raise LineError(message)
    name = obj.get("event")
    if not isinstance(name, str):
        name = ""
    cls = EVENT_BY_NAME.get(name)
    if cls is None:
        raise LineError(f"unknown event name {_q(name)}")
    raw = _last_wins(raw, obj)
    envelope = _typed(_ENVELOPE_DECODER, raw, Envelope, obj, name)
    event = _typed(_EVENT_DECODERS[name], raw, cls, obj, name)
    return envelope, event


# --- commands --------------------------------------------------------------------------


def decode_command_line(raw: bytes) -> CommandLine | None:
    """One stdin line (without its "\\n") → Command, CommandRefusal, or None when blank.

    Never raises."""
    try:
        if type(raw) is not bytes:
            raw = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else bytes(raw)
        # A trailing "\n" left on by the caller is JSON whitespace to msgspec and blank
        # to the blank test, so it needs no stripping here.
        if not raw.isascii():
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                return CommandRefusal(RESERVED_ID, utf8_reason(exc.start))
        try:
            command = _decode_command_typed(raw)
        except msgspec.ValidationError as exc:
            return _decode_command_slow(raw, str(exc))
        except (msgspec.DecodeError, RecursionError):
            if not raw.strip(_BLANK):
                return None  # a blank line is no command and gets no answer
            return _decode_command_slow(raw)
        # Repeated keys need no check here: msgspec's typed decode keeps each field's last
        # occurrence, and refuses (ValidationError, the slow path above) a union tag — `command`,
        # the decision's `decision` — whose occurrences disagree, so a line it accepts holds
        # what its last occurrences say (pinned in tests/protocol/test_duplicate_keys.py).
        # Scanning each line for repeated tag keys cost a third of a valid line's decode.
        # The format tag is nearly always the first key; when the line holds no other "format"
        # (the last one is the first, at byte 1) that settles it without a second pass.
        # A later duplicate would win, so any other occurrence takes the decoder's word.
        # (`{"format": "…",` too: Python's json.dumps writes its default separators.)
        if (raw.rfind(b'"format"') == 1 and (raw[:34] == _COMMAND_PREFIX or raw[:35] == _COMMAND_PREFIX_SPACED)) \
                or _format_is_ours(raw):
            if command.id == RESERVED_ID:
                return CommandRefusal(RESERVED_ID, RESERVED_ID_REASON)
            return command
        return _decode_command_slow(raw)
    except Exception as exc:  # a refusal is the answer to any line; never an exception
        return CommandRefusal(RESERVED_ID, f"not a JSON object: {type(exc).__name__}: {exc}")


def _format_is_ours(raw: bytes) -> bool:
    try:
        return _decode_command_head(raw).format == COMMAND_FORMAT
    except msgspec.DecodeError:
        return False


def _decode_command_slow(raw: bytes, union_error: str | None = None) -> Any:
    """The decoding steps in order for a line the fast path did not accept.

    `union_error` is msgspec's complaint from decoding against the tagged union; once
    the name is known to be valid it is the named command's own complaint, so step 5
    reuses it instead of decoding a third time."""
    if _ENVELOPE_DECODER is None:
        _build_decoders()
    obj, failure = _parse_value(raw)
    if failure is not None:
        return CommandRefusal(RESERVED_ID, failure)
    if not isinstance(obj, dict):
        return CommandRefusal(RESERVED_ID, "not a JSON object: the line is JSON but not an object")
    line_id = obj.get("id")
    answer_id = line_id if isinstance(line_id, str) else RESERVED_ID
    if message := _format_message(obj, COMMAND_FORMAT):
        return CommandRefusal(answer_id, message)
    name = obj.get("command")
    if not isinstance(name, str):
        name = ""
    cls = COMMAND_BY_NAME.get(name)
    if cls is None:
        return CommandRefusal(answer_id, f"unknown command name {_q(name)}")
    canonical = _last_wins(raw, obj)
    if canonical is not raw:
        raw, union_error = canonical, None  # msgspec's complaint was about an earlier occurrence
    if union_error is not None and raw.count(b'"command"') == 1:  # a duplicate tag: decode again
        return CommandRefusal(answer_id, f"malformed {name}: {translate_error(union_error, cls, obj)}")
    try:
        command = _typed(_COMMAND_DECODERS[name], raw, cls, obj, name)
    except LineError as exc:
        return CommandRefusal(answer_id, exc.message)
    if command.id == RESERVED_ID:
        return CommandRefusal(RESERVED_ID, RESERVED_ID_REASON)
    return command


def well_formedness(command: CommandLine) -> tuple[Frame | None, str | None]:
    """A command's well-formedness check (independent of the adapter): (the frame a `frame.set`
    carries, parsed and verified — else None; the MALFORMED reason, or None).

    A deny whose reason is blank after trimming; a `frame.set` whose frame has a
    wrong `format` tag, is misshapen, or whose digest does not verify."""
    if type(command) is ToolDecide and type(command.decision) is Deny and not command.decision.reason.strip():
        return None, ("malformed tool.decide: a deny needs a non-empty reason; "
                      "it is the only part the model can act on")
    if type(command) is FrameSet:
        from .frame import FrameCommandError, frame_from_command

        try:
            return frame_from_command(command.frame), None
        except FrameCommandError as exc:
            return None, exc.reason
    return None, None


def well_formedness_refusal(command: CommandLine) -> str | None:
    """The MALFORMED reason of `well_formedness`, or None."""
    return well_formedness(command)[1]


def encode_command_line(command: Any) -> bytes:
    """A command as one stdin line: format, id, command, payload; trailing "\\n"."""
    if type(command) not in COMMAND_TYPES:
        raise TypeError(f"{type(command).__name__} is not a metaharness.command/1 command")
    body = _ENC.encode(command)  # {"command":"<name>","id":<id>,<payload>…}
    name = type(command).__struct_config__.tag
    encoded_id = _ENC.encode(command.id)
    head_len = len(b'{"command":') + len(_ENC.encode(name)) + len(b',"id":') + len(encoded_id)
    rest = body[head_len:]  # "" or ",<payload>…}" — closing brace included
    return (
        b'{"format":"' + COMMAND_FORMAT.encode() + b'","id":' + encoded_id
        + b',"command":' + _ENC.encode(name) + rest + b"\n"
    )
