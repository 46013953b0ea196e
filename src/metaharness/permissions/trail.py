"""The decision trail writer: `decisions.jsonl` beside the transcript (docs/reference/permissions.md).

Rules this module keeps:
* fire-and-forget but serialised: the decision path only does a non-blocking `put_nowait`; one
  writer thread appends each line (or decision+answer pair) with one `write()` on an `O_APPEND`
  file, in enqueue order; no fsync per line;
* a failed write or a full queue is a rate-limited warning in the log, never a refused or delayed
  call; nothing reads the trail to decide anything;
* the file is created with mode 0600 and never leaves the machine (there is no upload path).
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import queue
import secrets
import threading
import time
from typing import Any, Callable

from .reasons import trail_by
from .verdict import Settlement, Verdict

__all__ = ["TrailWriter", "new_decision_id", "decision_line", "answer_line"]

log = logging.getLogger("metaharness.permissions.trail")
_STOP = object()


def new_decision_id() -> str:
    return "dec_" + secrets.token_hex(6)


def _timestamp() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def decision_line(decision_id: str, verdict: Verdict, *, call_id: str | None = None, agent: str | None = None,
                  decided_by: str | None = None) -> dict[str, Any]:
    line: dict[str, Any] = {
        "kind": "decision", "id": decision_id, "tool": verdict.tool, "behavior": verdict.behavior,
        "principal": verdict.principal, "ts": _timestamp(), "mode": verdict.mode,
        "workspace_mode": verdict.workspace_mode, "reason": verdict.reason,
    }
    if call_id is not None:
        line["call_id"] = call_id
    if verdict.rule is not None:
        line["rule"], line["scope"] = verdict.rule, verdict.scope
        if verdict.file:
            line["file"] = verdict.file
    subjects = [subject.to_json() for subject in verdict.subjects]
    line["subjects"] = subjects[:64]
    if len(subjects) > 64:
        line["subjects_truncated"] = True
    if agent is not None:
        line["agent"] = agent
    if decided_by is not None:
        line["decided_by"] = decided_by
    if verdict.principal_truncated:
        line["principal_truncated"] = True
        line["input_sha256"] = verdict.input_sha256
    return line


def answer_line(decision_id: str, outcome: str, by: str, *, remembered: str | None = None,
                note: str | None = None) -> dict[str, Any]:
    line: dict[str, Any] = {"kind": "answer", "id": decision_id, "outcome": outcome, "remembered": remembered,
                            "by": by, "ts": _timestamp()}
    if note is not None:
        line["note"] = note
    return line


class TrailWriter:
    """One per session. `record()` and `answer()` never block and never raise."""

    def __init__(self, path: str | None, *, enabled: bool = True, maxsize: int = 10_000,
                 clock: Callable[[], float] = time.monotonic, logger: logging.Logger | None = None,
                 write: Callable[[int, bytes], int] | None = None) -> None:
        self.path = path
        self.enabled = enabled and path is not None
        self._queue: queue.Queue = queue.Queue(maxsize=maxsize)
        self._clock = clock
        self._log = logger or log
        self._write = write or os.write
        self._last_warning: float | None = None
        self._suppressed = 0
        self._fd: int | None = None
        self._thread: threading.Thread | None = None
        if self.enabled:
            self._thread = threading.Thread(target=self._run, name="decision-trail", daemon=True)
            self._thread.start()

    # -- the decision path -----------------------------------------------------------------
    def record(self, verdict: Verdict, *, settlement: Settlement | None = None, call_id: str | None = None,
               agent: str | None = None, decided_by: str | None = None, remembered: str | None = None) -> str:
        """Enqueue the decision line (with its answer in the same write when `settlement` is given,
        or automatically for allow/deny verdicts). Returns the decision id."""
        decision_id = new_decision_id()
        if not self.enabled:
            return decision_id
        lines = [decision_line(decision_id, verdict, call_id=call_id, agent=agent, decided_by=decided_by)]
        if settlement is None and verdict.behavior != "ask":
            settlement = Settlement("allowed" if verdict.behavior == "allow" else "denied",
                                    trail_by(verdict.reason, "engine"))
        if settlement is not None:
            lines.append(answer_line(decision_id, settlement.outcome, settlement.by, remembered=remembered,
                                     note=settlement.note))
        self._put(lines)
        return decision_id

    def answer(self, decision_id: str, outcome: str, by: str, *, remembered: str | None = None,
               note: str | None = None) -> None:
        if self.enabled:
            self._put([answer_line(decision_id, outcome, by, remembered=remembered, note=note)])

    def _put(self, lines: list[dict[str, Any]]) -> None:
        try:
            data = "".join(json.dumps(payload, ensure_ascii=False, separators=(",", ":")) + "\n" for payload in lines)
            self._queue.put_nowait(data.encode("utf-8"))
        except queue.Full:
            self._warn("queue full, line dropped")
        except Exception as e:  # noqa: BLE001 - recording must never fail a call
            self._warn(str(e))

    # -- the writer thread -----------------------------------------------------------------
    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is _STOP:
                    return
                self._append(item)
            finally:
                self._queue.task_done()

    def _append(self, data: bytes) -> None:
        try:
            if self._fd is None:
                os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            self._write(self._fd, data)
        except Exception as e:  # noqa: BLE001
            self._warn(str(e))

    def _warn(self, message: str) -> None:
        now = self._clock()
        if self._last_warning is not None and now - self._last_warning < 10.0:
            self._suppressed += 1
            return
        extra = f" ({self._suppressed} more suppressed)" if self._suppressed else ""
        self._suppressed = 0
        self._last_warning = now
        self._log.warning("decision trail: %s%s", message, extra)

    def close(self, timeout: float = 2.0) -> None:
        """Drain the queue, bounded by `timeout` seconds."""
        if self._thread is None:
            return
        try:
            self._queue.put(_STOP, timeout=timeout)
        except queue.Full:
            pass
        self._thread.join(timeout)
        if self._fd is not None and not self._thread.is_alive():
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None
        self._thread = None
