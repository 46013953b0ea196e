"""The `trace-ir/1` projection of an event stream (docs/guides/reading-runs.md).

What belongs here: building the document from a stream's bytes (`project_stream`) and
writing it as bytes (`dump_document`). The document is byte-stable: the same input
gives the same bytes — nothing comes from a clock, randomness or dict iteration over
unordered data. Key orders are the documented ones; the only sorted maps are `families`,
`unk_kinds` and the census maps.

The writer is our own small pretty-printer rather than `json.dumps(indent=2)` only
because the wire asks floats with an exponent in the Rust form (`1e-7`, not
`1e-07`); for documents without such floats its bytes equal `json.dumps(doc,
indent=2, ensure_ascii=False) + "\\n"` (a test holds it to that).
"""

from __future__ import annotations

import calendar
import hashlib
import json
import math
import re
from typing import Any

from .stream import CensusCounter, StreamLine, decode_stream, payload_of

FAMILY: dict[str, str] = {
    "session.started": "session_start",
    "session.ended": "run_outcome",
    "usage": "run_outcome",
    "text": "assistant_text",
    "thinking": "assistant_thinking",
    "thinking.estimate": "thinking_estimate",
    "injection": "synthetic_injection",
    "tool.requested": "tool_call",
    "tool.result": "tool_result",
    "rate_limit": "rate_limit",
    "opaque": "opaque",
    "step.entered": "unk",
    "step.left": "unk",
    "turn.started": "unk",
    "turn.ended": "unk",
    "tool.decided": "unk",
    "command.result": "unk",
    "warning": "unk",
    "auth.expired": "unk",
    "stream.closed": "stream_closed",
}

UNK_REASON = "no trace-ir/1 family"

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))",
    re.ASCII,
)


def timestamp_ms(at: str | None) -> int | None:
    """`at` read as RFC 3339, in Unix milliseconds (finer fractions truncated); None if it does not parse."""
    if at is None:
        return None
    match = _RFC3339.fullmatch(at)
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    fraction, zulu, sign, off_h, off_m = match.group(7, 8, 9, 10, 11)
    if not (1 <= month <= 12 and 1 <= day <= calendar.monthrange(year, month)[1]):
        return None
    if hour > 23 or minute > 59 or second > 60:
        return None
    offset_minutes = 0
    if not zulu:
        if int(off_h) > 23 or int(off_m) > 59:
            return None
        offset_minutes = (int(off_h) * 60 + int(off_m)) * (1 if sign == "+" else -1)
    days = _days_from_civil(year, month, day)
    seconds = days * 86400 + hour * 3600 + minute * 60 + second - offset_minutes * 60
    millis = int((fraction or "0")[:3].ljust(3, "0"))
    return seconds * 1000 + millis


def _days_from_civil(year: int, month: int, day: int) -> int:
    # Proleptic Gregorian day count from 1970-01-01 (H. Hinnant's algorithm), valid for any year.
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def node_kind(line: StreamLine) -> dict[str, Any]:
    name = line.name
    family = FAMILY[name]
    payload = payload_of(line.event)
    if family == "unk":
        return {"family": "unk", "event_kind": name, "reason": UNK_REASON, "payload": payload}
    return {"family": family, **payload}


def project_lines(lines: list[StreamLine], data: bytes, source: str) -> dict[str, Any]:
    nodes: list[dict[str, Any]] = []
    request_ids: list[str | None] = []  # per node: its payload's request_id, if it has one
    families: dict[str, int] = {}
    unk_kinds: dict[str, int] = {}
    census = CensusCounter()
    for index, line in enumerate(lines):
        kind = node_kind(line)
        at = line.at
        nodes.append(
            {
                "index": index,
                "source_line": line.number,
                "timestamp": at,
                "timestamp_ms": timestamp_ms(at),
                "kind": kind,
            }
        )
        payload = kind["payload"] if kind["family"] == "unk" else kind
        request_ids.append(payload.get("request_id") if isinstance(payload.get("request_id"), str) else None)
        families[kind["family"]] = families.get(kind["family"], 0) + 1
        if kind["family"] == "unk":
            unk_kinds[line.name] = unk_kinds.get(line.name, 0) + 1
        if line.name == "tool.decided":
            census.add(line.event)

    requests = []
    for index, line in enumerate(lines):
        if line.name != "usage":
            continue
        event = line.event
        usage = event.usage
        if event.request_id is None:
            members = [index]
        else:
            members = [i for i, rid in enumerate(request_ids) if rid == event.request_id]
        requests.append(
            {
                "source_line": line.number,
                "request_id": event.request_id,
                "model": event.model,
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "cache_read_input_tokens": usage.cache_read_input_tokens,
                "cache_creation_input_tokens": usage.cache_creation_input_tokens,
                "events": members,
            }
        )

    return {
        "format": "trace-ir/1",
        "transcript_digest": hashlib.sha256(data).hexdigest(),
        "adapter": {"name": "metaharness/project", "written_against": ["metaharness.event/1"]},
        "events": nodes,
        "requests": requests,
        "metaharness": {
            "source": source,
            "run": lines[0].run if lines else None,
            "events_total": len(lines),
            "families": {k: families[k] for k in sorted(families)},
            "unk_kinds": {k: unk_kinds[k] for k in sorted(unk_kinds)},
            "census": census.as_dict(),
        },
    }


def project_stream(data: bytes, source: str) -> dict[str, Any]:
    """The `trace-ir/1` document for a stream's bytes; raises `BadLine` naming the first invalid line."""
    return project_lines(decode_stream(data), data, source)


# --- bytes -----------------------------------------------------------------------------

_EXPONENT = re.compile(r"e([+-])0*(\d+)")


def format_float(value: float) -> str:
    """Shortest round-trip form with the exponent written the Rust way."""
    if not math.isfinite(value):
        return "null"
    text = repr(value)
    return _EXPONENT.sub(lambda m: "e" + ("-" if m.group(1) == "-" else "") + m.group(2), text)


def _write(value: Any, indent: int, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(str(int(value)))
    elif isinstance(value, float):
        out.append(format_float(value))
    elif isinstance(value, str):
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        pad = " " * (indent + 2)
        out.append("{\n")
        for position, (key, item) in enumerate(value.items()):
            if position:
                out.append(",\n")
            out.append(pad + json.dumps(str(key), ensure_ascii=False) + ": ")
            _write(item, indent + 2, out)
        out.append("\n" + " " * indent + "}")
    elif isinstance(value, (list, tuple)):
        if not value:
            out.append("[]")
            return
        pad = " " * (indent + 2)
        out.append("[\n")
        for position, item in enumerate(value):
            if position:
                out.append(",\n")
            out.append(pad)
            _write(item, indent + 2, out)
        out.append("\n" + " " * indent + "]")
    else:
        raise TypeError(f"cannot write {type(value).__name__} in a trace-ir/1 document")


def dump_document(doc: dict[str, Any]) -> bytes:
    """Pretty JSON, 2-space indent, raw non-ASCII, exactly one trailing newline."""
    out: list[str] = []
    _write(doc, 0, out)
    out.append("\n")
    return "".join(out).encode("utf-8")
