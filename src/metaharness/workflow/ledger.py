"""The ledger — `workflow.jsonl`, one `metaharness.workflow-run/1` record a line.

What belongs here: writing records (appended, flushed and fsynced as they happen,
so a host killed at any moment loses nothing it already decided), reading them
back, and `resume_point()` — where a resumed run continues from, computed from
the records alone.

Records, in the order a run writes them:
  workflow.started  {workflow, file, digest, harness, task, session, events, options, run,
                     script, script_digest, script_start}  (run: the session's run options)
  step.entered      {step: {index, node, attempt}, failure, frame_digest, frame}
  step.verdict      {step, turn, passed, handoff, choice, check, failure, answer_tail}  (one per turn judged)
  step.ended        {step, outcome, reason, then, established, cost_usd, duration_ms, script_turn}
  workflow.ended    {outcome, reason_name, reason, steps, cost_usd}
  workflow.stopped  (the same fields) — the run did not end: a stop, or a budget; `resume` continues it
`script_turn` is, for a scripted session, the scenario turn its next model request would get.
`then` is where the workflow goes next: {node, attempt, failure, failed_by}, or null
when the step ended it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

from metaharness.protocol.frame import PriorLine
from metaharness.protocol.refusals import RefusalName

from .mint import Position, merge_prior

LEDGER_FORMAT = "metaharness.workflow-run/1"
LEDGER_NAME = "workflow.jsonl"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) 


class Ledger:
    def __init__(self, out_dir: str) -> None:
        self.path = os.path.join(out_dir, LEDGER_NAME)
        self._handle = open(self.path, "a", encoding="utf-8")

    def write(self, record: str, **fields: Any) -> dict[str, Any]:
        line = {"format": LEDGER_FORMAT, "record": record, "at": _now(), **fields}
        self._handle.write(json.dumps(line, ensure_ascii=False, sort_keys=False) + "\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())
        return line

    def close(self) -> None:
        self._handle.close()


class LedgerError(Exception):
    pass


def read(out_dir: str) -> list[dict[str, Any]]:
    path = os.path.join(out_dir, LEDGER_NAME)
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise LedgerError(f"{RefusalName.NoLedger}: {path} could not be read: {exc.strerror or exc}") from None
    records = []
    lines = text.split("\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            if number == len(lines):
                break  # a last line cut short by a kill (no newline yet): everything before it stands
            raise LedgerError(f"{RefusalName.LedgerInvalid}: {path} line {number} is not JSON") from None
        if not isinstance(record, dict) or record.get("format") != LEDGER_FORMAT:
            raise LedgerError(f"{RefusalName.LedgerInvalid}: {path} line {number} is not a {LEDGER_FORMAT} record")
        records.append(record)
    if not records or records[0].get("record") != "workflow.started":
        raise LedgerError(f"{RefusalName.LedgerInvalid}: {path} does not begin with workflow.started")
    return records


@dataclass
class ResumePoint:
    started: dict[str, Any]  # the first workflow.started
    position: Position
    next_index: int
    prior: list[PriorLine]
    session: int
    cost_usd: float | None
    interrupted_step: int | None = None  # a step entered and never ended
    steps: list[dict[str, Any]] = field(default_factory=list)
    last_started: dict[str, Any] = field(default_factory=dict)  # the latest session's workflow.started
    script_turn: int | None = None  # its scenario's turn after the last step it ended


def position_of(then: dict[str, Any]) -> Position:
    return Position(node=then["node"], attempt=then["attempt"], failure=then.get("failure"),
                    failed_by=then.get("failed_by"))


def resume_point(records: list[dict[str, Any]]) -> ResumePoint:
    """Where a resumed run continues; LedgerError when the run already ended."""
    ended = [r for r in records if r["record"] == "workflow.ended"]
    if ended:
        raise LedgerError(f"{RefusalName.WorkflowEnded}: this workflow run already ended ({ended[-1]['outcome']}: "
                          f"{ended[-1].get('reason') or 'completed'}); there is nothing to resume")
    started = records[0]
    prior = [PriorLine(text=p["text"], source=p.get("source")) for p in started.get("prior", [])]
    position = Position(node=started["start_node"])
    next_index = started.get("first_index", 1)
    open_step: dict[str, Any] | None = None
    cost = started.get("cost_usd_before")
    last_started, script_turn = started, None
    for record in records:
        kind = record["record"]
        if kind == "workflow.started":
            last_started, script_turn = record, None
        elif kind == "step.entered":
            open_step = record
            next_index = record["step"]["index"] + 1
            position = Position(node=record["step"]["node"], attempt=record["step"]["attempt"],
                                failure=record.get("failure"), failed_by=record.get("failed_by"))
        elif kind == "step.ended":
            open_step = None
            prior = merge_prior(prior, [PriorLine(text=p["text"], source=p.get("source")) for p in record["established"]])
            cost = record.get("cost_usd", cost)
            script_turn = record.get("script_turn", script_turn)
            if record["then"] is None:
                raise LedgerError(f"{RefusalName.WorkflowEnded}: the last step ended the workflow; there is nothing to resume")
            position = position_of(record["then"])
    sessions = [r for r in records if r["record"] == "workflow.started"]
    return ResumePoint(started=started, position=position, next_index=next_index, prior=prior,
                       session=len(sessions) + 1, cost_usd=cost,
                       interrupted_step=open_step["step"]["index"] if open_step else None,
                       last_started=last_started, script_turn=script_turn)
