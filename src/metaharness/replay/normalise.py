"""Comparing a replayed run's event stream with the recorded one: the documented normalisation.

What belongs here: `normalise(event)` — an event with the parts blanked that legitimately
differ between two runs of the same conversation — and `differences(recorded, replayed)`.

Rules it keeps: only three kinds of value are blanked, each by its key, wherever it occurs:
times (`at` and the measured durations), ids a run mints for itself (the run id, the harness's
session id, the scratch paths of its transcript, the digest of an opaque vendor line, which
embeds them) and costs; plus, in `session.started`, the attestation's sentence about how the
model was reached (a credential proxy while recording, the replay server while replaying —
the one thing a replay changes on purpose). Everything else — every line, in order, with its
`seq`, every call, input, decision, reason, result and text — must be equal.
"""

from __future__ import annotations

from typing import Any, Iterable

BLANK = "<normalised>"
TIMES = frozenset({"at", "duration_ms", "duration_api_ms", "ttft_ms", "time_to_request_ms", "latency_ms"})
IDS = frozenset({"run", "run_id", "session_id", "transcript"})
COSTS = frozenset({"total_cost_usd", "cost_usd", "costUSD"})
BLANKED = TIMES | IDS | COSTS
# (event, key) pairs blanked in that event only.
IN_EVENT = frozenset({("opaque", "digest")})
# The attestation rows that name the model route (claude h6, codex h4), by their row id.
ROUTE_ROWS = frozenset({"h4", "h6"})


def _blank(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: BLANK if k in BLANKED and v is not None else _blank(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_blank(item) for item in value]
    return value


def normalise(event: dict[str, Any]) -> dict[str, Any]:
    out = _blank(event)
    name = out.get("event")
    for event_name, key in IN_EVENT:
        if name == event_name and key in out:
            out[key] = BLANK
    if name == "session.started":
        hermetic = out.get("hermetic")
        if isinstance(hermetic, dict):
            hermetic["imposed"] = [dict(row, how=BLANK) if isinstance(row, dict) and row.get("row") in ROUTE_ROWS
                                   else row for row in hermetic.get("imposed") or []]
    return out


def differences(recorded: Iterable[dict[str, Any]], replayed: Iterable[dict[str, Any]]) -> list[str]:
    """One sentence per line that differs after normalisation (empty: the streams agree)."""
    a, b = [normalise(e) for e in recorded], [normalise(e) for e in replayed]
    found = [f"line {i + 1}: recorded {x!r}, replayed {y!r}" for i, (x, y) in enumerate(zip(a, b)) if x != y]
    if len(a) != len(b):
        found.append(f"the recorded stream has {len(a)} lines and the replayed one {len(b)}")
    return found
