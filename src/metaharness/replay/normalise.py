"""Comparing a replayed run's event stream with the recorded one: the documented normalisation.

What belongs here: `normalise(event)` — an event with the parts blanked that legitimately
differ between two runs of the same conversation — and `differences(recorded, replayed)`.

Rules it keeps: only times, ids and costs are blanked, each by its key, wherever it occurs:
times (`at` and measured durations and clock readings, metaharness's and the vendor's), ids a
run mints for itself (the run id, the harness's session and turn ids, a process id, the scratch
paths of its transcript) and costs — metaharness's own figure (`metered_cost_usd`) blanked even where
it is null, and the `COST_DISAGREES` warning that compares the figures dropped (and with it
`stream.closed.events`, the line count), since a recording is priced and a replay spends nothing. Two parts more: in `session.started`, the attestation's
sentence about how the model was reached (a credential proxy while recording, the replay server
while replaying — the one thing a replay changes on purpose); and an `opaque` line — a vendor
record metaharness does not interpret — is compared by its kind only (its digest hashes the raw
record with the vendor's own times and ids in it, and its position in the vendor's transcript
moves with control lines that are not events), and opaque lines are compared in their own order,
not against metaharness's lines: the vendor writes them on its own clock. Everything else —
every other line, in order, every call, input, decision, reason, result and text — must be equal.
"""

from __future__ import annotations

from typing import Any, Iterable

from metaharness.protocol.refusals import WarningCode

BLANK = "<normalised>"
TIMES = frozenset({"at", "duration_ms", "duration_api_ms", "ttft_ms", "time_to_request_ms", "latency_ms",
                   "startedAtMs", "completedAtMs", "durationMs"})
IDS = frozenset({"run", "run_id", "session_id", "turn_id", "processId", "transcript"})
COSTS = frozenset({"total_cost_usd", "cost_usd", "costUSD"})
BLANKED = TIMES | IDS | COSTS
METERED = "metered_cost_usd"  # null on a replay (nothing is spent), a figure on a recording
OPAQUE_BLANKED = ("digest", "source_line", "seq")
# The attestation rows that name the model route (claude h6, codex h4), by their row id.
ROUTE_ROWS = frozenset({"h4", "h6"})


def _blank(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: BLANK if (k in BLANKED and v is not None) or k == METERED else _blank(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_blank(item) for item in value]
    return value


def normalise(event: dict[str, Any]) -> dict[str, Any]:
    out = _blank(event)
    name = out.get("event")
    if name == "opaque":
        out.update({key: BLANK for key in OPAQUE_BLANKED})
    if name == "stream.closed" and "events" in out:
        out["events"] = BLANK  # counts the COST_DISAGREES line a recording may have and its replay not
    if name == "session.started":
        hermetic = out.get("hermetic")
        if isinstance(hermetic, dict):
            hermetic["imposed"] = [dict(row, how=BLANK) if isinstance(row, dict) and row.get("row") in ROUTE_ROWS
                                   else row for row in hermetic.get("imposed") or []]
    return out


def _split(events: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    own, opaque = [], []
    for event in events:
        if event.get("event") == "warning" and event.get("code") == WarningCode.COST_DISAGREES:
            continue
        normal = normalise(event)
        if normal.get("event") == "opaque":
            opaque.append(normal)
        else:
            normal.pop("seq", None)  # positions are compared by order; opaque lines move them
            own.append(normal)
    return own, opaque


def differences(recorded: Iterable[dict[str, Any]], replayed: Iterable[dict[str, Any]]) -> list[str]:
    """One sentence per line that differs after normalisation (empty: the streams agree)."""
    found: list[str] = []
    for what, a, b in zip(("line", "opaque line"), _split(recorded), _split(replayed)):
        found += [f"{what} {i + 1}: recorded {x!r}, replayed {y!r}" for i, (x, y) in enumerate(zip(a, b)) if x != y]
        if len(a) != len(b):
            found.append(f"the recorded stream has {len(a)} {what}s and the replayed one {len(b)}")
    return found
