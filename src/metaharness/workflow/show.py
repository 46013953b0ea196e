"""`metaharness workflow show DIR`: the ledger as a rich table.

What belongs here: turning ledger records into one row per step (step, node,
attempt, verdict, cost, duration) and a caption with the workflow's outcome. Pure
apart from building the rich renderable.
"""

from __future__ import annotations

from typing import Any


def step_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per step entered, in order; a step never ended reads `unfinished`."""
    rows: dict[int, dict[str, Any]] = {}
    for record in records:
        kind = record["record"]
        if kind not in ("step.entered", "step.verdict", "step.ended"):
            continue
        index = record["step"]["index"]
        row = rows.setdefault(index, {"index": index, "node": record["step"]["node"],
                                      "attempt": record["step"]["attempt"], "verdict": "unfinished",
                                      "reason": None, "cost_usd": None, "duration_ms": None, "frame": None,
                                      "choice": None})
        if kind == "step.entered":
            row["frame"] = record.get("frame_digest")
        elif kind == "step.verdict":
            row["choice"] = record.get("choice")
        else:
            row.update(verdict=record["outcome"], reason=record.get("reason"), cost_usd=record.get("cost_usd"),
                       duration_ms=record.get("duration_ms"))
    return [rows[i] for i in sorted(rows)]


def outcome_line(records: list[dict[str, Any]]) -> str:
    started = records[0]
    ended = [r for r in records if r["record"] in ("workflow.ended", "workflow.stopped")]
    head = f"workflow {started['workflow']['id']} ({started['workflow']['version']}) on {started['harness']}"
    if not ended:
        return head + " — unfinished (no outcome recorded; `workflow resume` continues it)"
    last = ended[-1]
    if last.get("reason_name"):
        return head + f" — {last['outcome']}: {last['reason_name']}: {last['reason']}"
    return head + f" — {last['outcome']}"


def ledger_table(records: list[dict[str, Any]]):
    from rich.table import Table

    table = Table(title=outcome_line(records), title_justify="left",
                  caption="cost: so far, as the harness reported it (— where it reports none)", caption_justify="left")
    for column in ("step", "node", "attempt", "verdict", "cost", "duration", "frame"):
        table.add_column(column, justify="right" if column in ("step", "attempt", "cost", "duration") else "left",
                         no_wrap=column in ("frame", "duration", "cost"))
    styles = {"passed": "green", "failed": "red", "stopped": "yellow", "unfinished": "yellow"}
    for row in step_rows(records):
        verdict = row["verdict"] + (f" → {row['choice']}" if row["choice"] else "")
        if row["reason"]:
            verdict += f": {row['reason'].splitlines()[0]}"
        cost = f"${row['cost_usd']:.4f}" if row["cost_usd"] is not None else "—"
        ms = row["duration_ms"]
        duration = "—" if ms is None else f"{ms} ms" if ms < 1000 else f"{ms / 1000:.1f} s"
        table.add_row(str(row["index"]), row["node"], str(row["attempt"]),
                      f"[{styles.get(row['verdict'], '')}]{verdict}[/]", cost, duration, (row["frame"] or "")[:12])
    return table
