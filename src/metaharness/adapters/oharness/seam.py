"""The oharness call seam (`owned_tool`): a `tool_call` record → a presented call, a decision →
the `decision` line oharness reads before it runs the tool.

Rules kept:
* a `tool_call` without a string call id and tool name is not a call: the caller keeps the
  record as opaque, nothing is presented;
* a decision line carries the decision as the wire spells it and who decided; the
  abandonment denies of an interrupt carry `interrupt: true`, so oharness stops the turn as
  it reads the deny, before any further model request.
"""

from __future__ import annotations

from typing import Any

from metaharness.adapters.base import PresentedCall
from metaharness.protocol.values import Decision


def presented_call(record: dict) -> PresentedCall:
    """The call a `tool_call` record asks about (ValueError on one without ids)."""
    call_id = record["call_id"]
    if not isinstance(call_id, str) or not isinstance(record["name"], str):
        raise ValueError("tool_call without ids")
    return PresentedCall(call_id=call_id, name=record["name"], input=record.get("input"), seam="owned_tool",
                         cwd=record.get("cwd"))


def decision_line(call_id: str, decision: Decision, decided_by: str, *, interrupt: bool) -> dict[str, Any]:
    line: dict[str, Any] = {"type": "decision", "call_id": call_id, "decision": decision, "decided_by": decided_by}
    if interrupt:
        line["interrupt"] = True
    return line
