"""Re-deciding recorded calls under a new frame or policy, without running anything.

What belongs here: reading recorded event streams (one file, or every `*.jsonl` under a
directory), pairing each call's first `tool.requested` with the `tool.decided` the run wrote,
deciding the call again with the run loop's own deciders, and classing the difference.

Rules it keeps: the verdict comes from the code the run loop uses, through the library API
(`metaharness.api.FrameJudge` for a frame, `PolicyJudge` for settings, deny-only applied as a run
delivers it), and the call's operations and subjects come from the recorded harness's own adapter
resolver, so a frame reads a recorded call exactly as it read the live one. Nothing is written to disk (no
decision trail). A call is compared by its verdict's kind; a deny that changes only its reason
is kept. Lines that are not events (a cassette, a blank line) are skipped; a line that is not
JSON is an error naming the file and line.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from metaharness import api
from metaharness.protocol import frame as frames
from metaharness.protocol.spec import KINDS
from metaharness.protocol.values import Deny

EVENT_FORMAT = "metaharness.event/1"
# A verdict's class: what happened to the call, as far as a gate on a policy change cares.
CLASS_OF_DECISION = {"allow": "allow", "replace": "allow", "deny": "deny", "abstain": "abstain"}
CHANGE = {  # (old class, new class) → how it changed; anything else that differs is "changed"
    "deny": "newly denied",
    "allow": "newly allowed",
}
FAIL_ON = {"allowed": {"newly allowed"}, "denied": {"newly denied"},
           "any": {"newly allowed", "newly denied", "changed"}}


class StreamError(ValueError):
    """A stream that cannot be read: the message names the file and line."""


class PolicyUnusable(ValueError):
    """The policy documents are refused, as a policy run would refuse them at start."""


@dataclass
class RecordedCall:
    stream: str
    kind: str
    run_cwd: str
    deny_only: bool
    call_id: str
    name: str
    input: Any
    old: dict[str, Any] | None = None  # the tool.decided line, or None when the run never decided it


@dataclass
class Verdict:
    klass: str  # allow | deny | abstain | ask | undecided
    decided_by: str | None
    reason: str | None = None


@dataclass
class Outcome:
    call: RecordedCall
    old: Verdict
    new: Verdict

    @property
    def change(self) -> str:
        if self.old.klass == self.new.klass:
            return "kept"
        return CHANGE.get(self.new.klass, "changed")

    def as_json(self) -> dict[str, Any]:
        return {"stream": self.call.stream, "call_id": self.call.call_id, "name": self.call.name,
                "change": self.change,
                "old": {"verdict": self.old.klass, "decided_by": self.old.decided_by, "reason": self.old.reason},
                "new": {"verdict": self.new.klass, "decided_by": self.new.decided_by, "reason": self.new.reason}}


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)
    streams: list[str] = field(default_factory=list)

    def changed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.change != "kept"]

    def summary(self) -> dict[str, int]:
        counts = {"calls": len(self.outcomes), "kept": 0, "newly denied": 0, "newly allowed": 0, "changed": 0}
        for outcome in self.outcomes:
            counts[outcome.change] += 1
        return counts

    def fails(self, fail_on: str) -> bool:
        return any(o.change in FAIL_ON[fail_on] for o in self.outcomes)


# --- reading streams ----------------------------------------------------------------------


def stream_files(path: str) -> list[str]:
    """PATH itself, or every `*.jsonl` under the directory PATH in name order."""
    if os.path.isdir(path):
        return sorted(str(p) for p in Path(path).rglob("*.jsonl") if p.is_file())
    return [path]


def _lines(path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        handle = open(path, "rb")
    except OSError as exc:
        raise StreamError(f"{path}: {exc.strerror or exc}") from None
    with handle:
        for number, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise StreamError(f"{path}:{number}: not a JSON line ({exc})") from None
            if isinstance(obj, dict) and obj.get("format") == EVENT_FORMAT:
                yield number, obj


def recorded_calls(path: str) -> list[RecordedCall]:
    """Every call of one stream, first presentation each, with the run's decision of it."""
    kind, run_cwd, deny_only = None, None, False
    calls: dict[str, RecordedCall] = {}
    for number, event in _lines(path):
        name = event.get("event")
        if name == "session.started":
            kind = event.get("adapter")
            run_cwd = event.get("cwd")
            deny_only = bool((event.get("hermetic") or {}).get("deny_only"))
        elif name == "tool.requested" and isinstance(event.get("call_id"), str):
            if kind not in KINDS:
                raise StreamError(f"{path}:{number}: a tool.requested before any session.started naming "
                                  "the harness, so the call cannot be resolved")
            calls.setdefault(event["call_id"], RecordedCall(
                stream=path, kind=kind, run_cwd=run_cwd or os.getcwd(), deny_only=deny_only,
                call_id=event["call_id"], name=str(event.get("name")), input=event.get("input")))
        elif name == "tool.decided":
            call = calls.get(event.get("call_id"))
            if call is not None and call.old is None:
                call.old = event
    return list(calls.values())


def old_verdict(decided: dict[str, Any] | None) -> Verdict:
    if decided is None:
        return Verdict("undecided", None)
    decision = decided.get("decision") or {}
    kind = decision.get("decision")
    return Verdict(CLASS_OF_DECISION.get(kind, str(kind)), decided.get("decided_by"), decision.get("reason"))


# --- deciding again -----------------------------------------------------------------------


class FrameDecider:
    """Frame mode, as the loop decides it with this frame in force (`metaharness.api.FrameJudge`)."""

    def __init__(self, frame: frames.Frame) -> None:
        self._judge = api.FrameJudge(frame)

    def __call__(self, call: RecordedCall) -> Verdict:
        return _verdict(self._judge.decide(call.kind, call.run_cwd, call.name, call.input, deny_only=call.deny_only))


class PolicyDeciderFor:
    """Policy mode, as the loop decides it with these settings and no frame in force
    (`metaharness.api.PolicyJudge`)."""

    def __init__(self, policy_files: list[str], policy_mode: str | None) -> None:
        self._judge = api.PolicyJudge(policy_files, policy_mode)

    def __call__(self, call: RecordedCall) -> Verdict:
        try:
            redecision = self._judge.decide(call.kind, call.run_cwd, call.name, call.input, deny_only=call.deny_only)
        except ValueError as exc:
            raise PolicyUnusable(str(exc)) from None
        return _verdict(redecision)

    def close(self) -> None:
        self._judge.close()


def _verdict(redecision: api.Redecision) -> Verdict:
    decision = redecision.decision
    if decision is None:  # the call would be asked of the embedder
        return Verdict("ask", redecision.decided_by, redecision.reason)
    tag = type(decision).__struct_config__.tag
    return Verdict(CLASS_OF_DECISION.get(tag, tag), redecision.decided_by,
                   decision.reason if isinstance(decision, Deny) else None)


def load_frame(path: str) -> Any:
    """The sealed frame at PATH; FrameRefusal as the run would refuse it."""
    return frames.load_frame(path)


def redecide(paths: Iterable[str], decider: Any) -> Report:
    report = Report()
    for path in paths:
        for file in stream_files(path):
            report.streams.append(file)
            for call in recorded_calls(file):
                report.outcomes.append(Outcome(call, old_verdict(call.old), decider(call)))
    return report


__all__ = ["FrameDecider", "PolicyDeciderFor", "PolicyUnusable", "Report", "StreamError", "load_frame", "redecide"]
