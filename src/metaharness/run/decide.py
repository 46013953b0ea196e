"""Frame-mode verdicts and the fixed reason sentences of decisions (docs/reference/wire.md).

Pure: given the frame in force and a call's resolution, say allow or deny and why.
The sentences here are wire facts quoted by the spec; change them only with it.
"""

from __future__ import annotations

import json

from metaharness.protocol import frame as frames
from metaharness.protocol.refusals import Sentence
from metaharness.protocol.subjects import OpKey, scope_refusal
from metaharness.protocol.values import Abstain, Allow, Decision, Deny

UNCOVERED = (
    "{tool} is outside the operation vocabulary this step was framed with, so this step does not admit it"
)
NOT_ADMITTED = (
    "this step admits {admitted} and {tool} is {ops}, which it does not; "
    "a refusal is the answer, not an obstacle"
)
DEADLINE = (
    "metaharness's own {n}ms decision deadline expired before an answer arrived; it is strictly less "
    "than the vendor's {m}ms timeout so the refusal is metaharness's and not an ambiguity"
)
ABANDONED = "{why} before this call was decided, so nothing ran"
MUTATED = Sentence.REQUEST_MUTATED
REPLAYED = "{call_id} was decided or its window closed; a decision cannot be replayed"
UNKNOWN_CALL = "{call_id} does not correlate to an open request"
ENDING = "the run is ending"  # a command read (or left unanswered) once the run winds up
UNREACHABLE = "the harness can no longer be reached: {why}"
UNDELIVERED = UNREACHABLE + "; this decision reached no one, and the call closes with the run's end"
NO_FRAME_WARNING = (
    "this run is in frame mode and no frame is in force, so nothing narrowed this call; "
    "the record says so rather than claiming a frame decided it"
)


def op_label(key: OpKey) -> str:
    return key[0] if key[0] != "mcp.call" else f"mcp.call {key[1]}/{key[2]}"


def admitted_list(keys: list[OpKey]) -> str:
    return "[" + ", ".join(json.dumps(op_label(k), ensure_ascii=False) for k in keys) + "]"


FrameTerms = tuple[list[OpKey], list[tuple[list[str], set[OpKey]]]]


def frame_terms(frame: frames.Frame) -> FrameTerms:
    """What a frame admits, as `frame_verdict` reads it: (operations in canonical order, subject rules)."""
    admitted = [frames.op_key(op) for op in frames.normalise_operations(frame.operations)]
    scope = [
        (list(rule.subjects), {frames.op_key(op) for op in rule.operations})
        for rule in (frame.subjects.rules if isinstance(frame.subjects, frames.SubjectScope) else [])
    ]
    return admitted, scope


def as_delivered(decision: Decision, deny_only: bool) -> Decision:
    """A deny-only run never grants: an allow is delivered as abstain."""
    return Abstain() if deny_only and isinstance(decision, Allow) else decision


def frame_verdict(
    admitted: list[OpKey],
    scope_rules: list[tuple[list[str], set[OpKey]]],
    tool: str,
    operations: list[OpKey],
    subjects: list[tuple[str, list[OpKey]]],
) -> tuple[Allow | Deny, bool]:
    """(decision, uncovered). `admitted` is the frame's operation set in canonical order."""
    if not operations:
        return Deny(reason=UNCOVERED.format(tool=tool)), True
    admitted_set = set(admitted)
    missing = sorted({op for op in operations if op not in admitted_set})
    if missing:
        ops = "/".join(op_label(k) for k in missing)
        return Deny(reason=NOT_ADMITTED.format(admitted=admitted_list(admitted), tool=tool, ops=ops)), False
    refusal = scope_refusal(scope_rules, subjects)
    if refusal is not None:
        subject, ops_on, patterns, rule_admits = refusal
        reason = (
            f"this step's subject scope refuses {subject}: {tool} is "
            f"{'/'.join(op_label(k) for k in sorted(set(ops_on)))} on it, and the first rule matching it "
            f"({', '.join(patterns)}) admits {admitted_list(sorted(rule_admits))}; "
            "a refusal is the answer, not an obstacle"
        )
        return Deny(reason=reason), False
    return Allow(), False
