"""The finished streams an export reads: an events file, or a run directory's streams.

Rules it keeps: only a complete stream is exported (one `stream.closed`, last, counting the
lines before it, one run id throughout); anything else is refused with one sentence that
names the file, the line and what is wrong, and nothing is written.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from metaharness.protocol.events import EVENT_FORMAT
from metaharness.view.stream import BadLine, StreamLine, decode_stream, stream_verdict


class ExportError(ValueError):
    """Input that cannot be exported, said in one sentence."""


@dataclass(frozen=True)
class Stream:
    path: str
    lines: list[StreamLine]


# A workflow's directory holds events.jsonl, then events-2.jsonl, … for each resumed session.
_SESSION_FILE = re.compile(r"^events(?:-(\d+))?\.jsonl$")


def stream_files(path: str) -> list[str]:
    """The events files `path` names: itself, or a run directory's sessions in order."""
    if os.path.isfile(path):
        return [path]
    if not os.path.isdir(path):
        raise ExportError(f"{path}: no such file or directory")
    found = sorted((int(m.group(1) or 1), name) for name in os.listdir(path) if (m := _SESSION_FILE.match(name)))
    if not found:
        raise ExportError(f"{path}: a run directory holds events.jsonl, and this one has none")
    return [os.path.join(path, name) for _, name in found]


def read_stream(path: str) -> Stream:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise ExportError(f"{path}: {exc.strerror or exc}") from None
    try:
        lines = decode_stream(data)
    except BadLine as exc:
        if exc.number == data.count(b"\n") + 1 and not data.endswith(b"\n"):  # the last line, cut short
            raise ExportError(f"{path}: the stream is truncated (its line {exc.number} is cut short): "
                              "the run had not finished or the file was cut, so there is no whole run to export") from None
        if "unknown format tag" in exc.message:
            raise ExportError(f"{path}: line {exc.number} is in a format this metaharness does not read "
                              f"({exc.message}); export it with the metaharness that wrote it") from None
        raise ExportError(f"{path}: {exc}") from None
    if not lines:
        raise ExportError(f"{path}: the file is empty, not a {EVENT_FORMAT} stream")
    verdict = stream_verdict(lines)
    if verdict == "truncated":
        raise ExportError(f"{path}: the stream is truncated (no stream.closed line after line {len(lines)}): "
                          "the run had not finished or the file was cut, so there is no whole run to export")
    if verdict == "inconsistent":
        raise ExportError(f"{path}: the stream is inconsistent (stream.closed is not the one last line, "
                          "or its count of events does not match the lines before it)")
    runs = {line.run for line in lines}
    if len(runs) > 1:
        raise ExportError(f"{path}: the stream is inconsistent: it carries {len(runs)} run ids, a stream has one")
    return Stream(path, lines)


def read_streams(path: str) -> list[Stream]:
    return [read_stream(p) for p in stream_files(path)]
