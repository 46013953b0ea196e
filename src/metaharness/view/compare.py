"""One or two runs as rows of tool calls, aligned for a side-by-side page.

What belongs here: extracting the calls of a decoded stream (`extract_run`) — each
with its input, decision, result, step and the cost reported so far — and aligning
two runs into rows (`align_runs`). No HTML here; `html.py` only presents these rows.

Rules it keeps:
* Alignment is by step when both runs carry steps (`step.entered`), otherwise over the
  whole sequence of calls in order. Within a unit, calls are paired by a
  longest-common-subsequence over a call *signature* that two harnesses agree on:
  the neutral operations plus the normalised subjects (or, without subjects, the main
  input value). Unpaired calls between two pairings are set side by side as a
  "different call" row as far as both sides have one; the rest are gap rows.
* A row diverges when one side is missing, the calls differ, or paired calls got a
  different verdict or a different result outcome. Every divergence carries a
  sentence saying why.
* Codex runs every shell command inside its own login shell (`/bin/bash -lc '<command>'`).
  That wrapper is the vendor's, not the model's: a Codex shell call is compared and shown
  by the command inside it, with the raw form kept beside it (`raw_command`).
* Deterministic: the same streams give the same rows (ties in the LCS are broken the
  same way every time).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import Any

from .stream import StreamLine, count_census, decision_word, payload_of, stream_verdict
from .summarise import compact_json, content_text, input_summary, one_line, signature_text, step_label


@dataclass
class Call:
    index: int  # 0-based tool-call index within the run
    seq: int
    call_id: str
    name: str
    operations: list[str]
    subjects: list[str]
    input: Any
    seam: str
    decision_required: bool
    step_key: tuple | None
    step_text: str | None
    turn: int | None
    presented: int = 1
    decision: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    cost_so_far: float | None = None
    last_seq: int = 0
    raw_command: str | None = None  # the vendor's own wrapping of a shell command, when unwrapped

    @property
    def compared_input(self) -> Any:
        """The input as compared and summarised: a vendor-wrapped command shown unwrapped."""
        if self.raw_command is None:
            return self.input
        return {**self.input, "command": unwrap_login_shell(self.raw_command)}

    @property
    def signature(self) -> tuple:
        ops = tuple(self.operations) if self.operations else ("tool:" + self.name,)
        if self.subjects:
            return (ops, tuple(self.subjects))
        return (ops, signature_text(self.compared_input))

    @property
    def input_summary(self) -> str:
        return input_summary(self.compared_input, 200)

    @property
    def input_json(self) -> str:
        return json.dumps(self.input, ensure_ascii=False, indent=2, sort_keys=True)

    @property
    def verdict(self) -> str | None:
        return self.decision["verdict"] if self.decision else None

    @property
    def outcome(self) -> str | None:
        """`ok`, `error` or `exit N` for the result; None without one."""
        if self.result is None:
            return None
        code = self.result["exit_code"]
        if code not in (None, 0):
            return f"exit {code}"
        if self.result["is_error"]:
            return "error"
        return "ok"


# Adapters whose vendor wraps every shell command in a login shell of its own.
WRAPS_SHELL_COMMANDS = {"codex"}
LOGIN_SHELLS = {"/bin/bash", "/usr/bin/bash", "bash", "/bin/sh", "/usr/bin/sh", "sh", "/bin/zsh", "zsh"}


def unwrap_login_shell(command: str) -> str | None:
    """The command inside `<shell> -lc '<command>'` (or `-c`), or None when it is not so wrapped."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if len(words) == 3 and words[0] in LOGIN_SHELLS and words[1] in ("-lc", "-c") and words[2].strip():
        return words[2]
    return None


def _vendor_wrapping(adapter: str | None, operations: list[str], input: Any) -> str | None:
    if adapter not in WRAPS_SHELL_COMMANDS or "shell" not in operations or not isinstance(input, dict):
        return None
    command = input.get("command")
    return command if isinstance(command, str) and unwrap_login_shell(command) is not None else None


@dataclass
class RunView:
    label: str  # "A" or "B"
    source: str
    run: str | None
    adapter: str | None
    harness_version: str | None
    model: str | None
    decisions: str | None
    deny_only: bool
    cwd: str | None
    verdict: str
    close_reason: str | None
    ended: bool
    is_error: bool | None
    num_turns: int | None
    turns_counted: int
    duration_ms: int | None
    total_cost_usd: float | None
    summed_cost_usd: float | None
    final_answer: str | None
    census: dict[str, Any]
    events: int
    warnings: list[tuple[str, str]]
    calls: list[Call] = field(default_factory=list)
    has_steps: bool = False
    steps: list[tuple[tuple, str]] = field(default_factory=list)  # (step key, label with its verdict), in order


def extract_run(lines: list[StreamLine], source: str, label: str) -> RunView:
    started = next((line.event for line in lines if line.name == "session.started"), None)
    ended = next((line.event for line in lines if line.name == "session.ended"), None)
    closed = next((line.event for line in reversed(lines) if line.name == "stream.closed"), None)

    calls: list[Call] = []
    by_id: dict[str, list[Call]] = {}
    step_key: tuple | None = None
    step_text: str | None = None
    turn: int | None = None
    cost = 0.0
    cost_reports = 0
    has_steps = False
    turns_counted = 0
    warnings: list[tuple[str, str]] = []
    steps: dict[tuple, str] = {}  # step key → label, in the order the steps were entered
    verdicts: dict[tuple, str] = {}  # step key → how the embedder judged it (step.left)

    for line in lines:
        name, e = line.name, line.event
        if name == "step.entered":
            has_steps = True
            s = e.step
            step_key = (s.workflow, s.state, s.index, s.attempt)
            step_text = step_label(s)
            steps.setdefault(step_key, step_text)
        elif name == "step.left":
            s = e.step
            verdicts[(s.workflow, s.state, s.index, s.attempt)] = step_verdict(e.outcome)
        elif name == "turn.started":
            turn = e.turn
            turns_counted += 1
        elif name == "usage" and e.usage.cost_usd is not None:
            cost += e.usage.cost_usd
            cost_reports += 1
        elif name == "warning":
            warnings.append((e.code, e.message))
        elif name == "tool.requested":
            known = by_id.get(e.call_id)
            payload = payload_of(e)
            if known and known[-1].name == e.name and known[-1].input == payload["input"]:
                known[-1].presented += 1  # identical re-presentation: one call
                continue
            call = Call(
                index=len(calls),
                seq=line.seq,
                call_id=e.call_id,
                name=e.name,
                operations=list(e.operations) if isinstance(e.operations, list) else [],
                subjects=list(e.subjects) if isinstance(e.subjects, list) else [],
                input=payload["input"],
                seam=e.seam,
                decision_required=e.decision_required,
                step_key=step_key,
                step_text=step_text,
                turn=turn,
                last_seq=line.seq,
                cost_so_far=cost if cost_reports else None,
            )
            call.raw_command = _vendor_wrapping(started.adapter if started else None, call.operations, call.input)
            calls.append(call)
            by_id.setdefault(e.call_id, []).append(call)
        elif name == "tool.decided":
            target = _open_call(by_id, e.call_id, "decision")
            if target is not None:
                verdict = decision_word(e.decision)
                target.decision = {
                    "verdict": verdict,
                    "decided_by": e.decided_by,
                    "seam": e.seam,
                    "reason": getattr(e.decision, "reason", None),
                    "replace_input": (
                        one_line(compact_json(payload_of(e)["decision"]["input"]), 300)
                        if verdict == "replace"
                        else None
                    ),
                    "latency_ms": e.latency_ms,
                }
                target.last_seq = line.seq
                target.cost_so_far = cost if cost_reports else None
        elif name == "tool.result":
            target = _open_call(by_id, e.call_id, "result")
            if target is not None:
                body = content_text(payload_of(e)["content"])
                target.result = {
                    "exit_code": e.exit_code,
                    "is_error": e.is_error,
                    "bytes": e.bytes,
                    "content": body,
                    "outcome_source": e.outcome_source,
                }
                target.last_seq = line.seq
                target.cost_so_far = cost if cost_reports else None

    for call in calls:
        if call.step_key in verdicts:
            call.step_text = f"{call.step_text} — {verdicts[call.step_key]}"
    hermetic = started.hermetic if started is not None else None
    return RunView(
        label=label,
        source=source,
        run=lines[0].run if lines else None,
        adapter=started.adapter if started else None,
        harness_version=started.harness_version if started else None,
        model=started.model if started else None,
        decisions=hermetic.decisions if hermetic else None,
        deny_only=bool(hermetic and hermetic.deny_only),
        cwd=started.cwd if started else None,
        verdict=stream_verdict(lines) if lines else "truncated",
        close_reason=closed.reason if closed else None,
        ended=ended is not None,
        is_error=ended.is_error if ended else None,
        num_turns=ended.num_turns if ended else None,
        turns_counted=turns_counted,
        duration_ms=ended.duration_ms if ended else None,
        total_cost_usd=ended.total_cost_usd if ended else None,
        summed_cost_usd=cost if cost_reports else None,
        final_answer=ended.final_answer.text if ended and ended.final_answer else None,
        census=count_census(line.event for line in lines),
        events=len(lines),
        warnings=warnings,
        calls=calls,
        has_steps=has_steps,
        steps=[(key, f"{text} — {verdicts[key]}" if key in verdicts else text) for key, text in steps.items()],
    )


def step_verdict(outcome: Any) -> str:
    """A step.left outcome in words: `completed`, `failed: <reason>`, `no verdict: <reason>`."""
    word = type(outcome).__struct_config__.tag.replace("_", " ")
    reason = getattr(outcome, "reason", None)
    return f"{word}: {one_line(reason, 300)}" if reason else word


def _open_call(by_id: dict[str, list[Call]], call_id: str, slot: str) -> Call | None:
    """The earliest presentation of `call_id` still missing `slot`, else the latest one."""
    known = by_id.get(call_id)
    if not known:
        return None
    for call in known:
        if getattr(call, slot) is None:
            return call
    return known[-1]


# --- alignment --------------------------------------------------------------------------


@dataclass
class Row:
    kind: str  # "step" or "call"
    left: Any = None  # Call (or step text for a step row)
    right: Any = None
    status: str = "same"  # same | differs | only-left | only-right
    reasons: list[str] = field(default_factory=list)
    position: int = 0  # 1-based row number among call rows

    @property
    def divergent(self) -> bool:
        return self.kind == "call" and bool(self.reasons)


def lcs_pairs(a: list[tuple], b: list[tuple]) -> list[tuple[int, int]]:
    """Index pairs of one longest common subsequence of `a` and `b` (deterministic)."""
    n, m = len(a), len(b)
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            if a[i] == b[j]:
                table[i][j] = table[i + 1][j + 1] + 1
            else:
                table[i][j] = max(table[i + 1][j], table[i][j + 1])
    pairs = []
    i = j = 0
    while i < n and j < m:
        if a[i] == b[j]:
            pairs.append((i, j))
            i += 1
            j += 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


def _pair_rows(left: list[Any], right: list[Any], key) -> list[Row]:
    """Rows for two sequences: LCS matches, then "differs" rows side by side, then gaps."""
    rows: list[Row] = []
    pairs = lcs_pairs([key(x) for x in left], [key(x) for x in right]) + [(len(left), len(right))]
    i = j = 0
    for pi, pj in pairs:
        lefts, rights = left[i:pi], right[j:pj]
        for k in range(max(len(lefts), len(rights))):
            l_item = lefts[k] if k < len(lefts) else None
            r_item = rights[k] if k < len(rights) else None
            if l_item is not None and r_item is not None:
                rows.append(Row("call", l_item, r_item, "differs"))
            elif l_item is not None:
                rows.append(Row("call", l_item, None, "only-left"))
            else:
                rows.append(Row("call", None, r_item, "only-right"))
        if pi < len(left):
            rows.append(Row("call", left[pi], right[pj], "same"))
        i, j = pi + 1, pj + 1
    return rows


def _judge(row: Row, labels: tuple[str, str]) -> None:
    a, b = labels
    if row.status == "only-left":
        row.reasons.append(f"run {b} has no matching call")
        return
    if row.status == "only-right":
        row.reasons.append(f"run {a} has no matching call")
        return
    left, right = row.left, row.right
    if row.status == "differs":
        row.reasons.append(
            f"different calls: {'/'.join(left.signature[0])} vs {'/'.join(right.signature[0])}"
            if left.signature[0] != right.signature[0]
            else "same operations on a different subject"
        )
    if left.verdict != right.verdict:
        row.reasons.append(f"decision differs: {left.verdict or 'none'} vs {right.verdict or 'none'}")
    if left.outcome != right.outcome:
        row.reasons.append(f"result differs: {left.outcome or 'no result'} vs {right.outcome or 'no result'}")


def align_runs(runs: list[RunView]) -> tuple[list[Row], str]:
    """Rows for one run (as is) or two runs (aligned); also says how they were aligned."""
    if len(runs) == 1:
        rows: list[Row] = []
        run = runs[0]
        if not run.has_steps:
            rows = [Row("call", call, None) for call in run.calls]
        else:  # every step boundary with its verdict, a step without calls included
            early = [call for call in run.calls if call.step_key is None]
            if early:
                rows.append(Row("step", "before the first step", None))
                rows += [Row("call", call, None) for call in early]
            by_step: dict[Any, list[Call]] = {}
            for call in run.calls:
                by_step.setdefault(call.step_key, []).append(call)
            for key, text in run.steps:
                rows.append(Row("step", text, None))
                rows += [Row("call", call, None) for call in by_step.get(key, [])]
        _number(rows)
        return rows, "one run"

    left, right = runs
    labels = (left.label, right.label)
    if left.has_steps and right.has_steps:
        mode = "by step, then by call signature within each step"
        rows = []
        l_units, r_units = _steps(left.calls), _steps(right.calls)
        unit_rows = _pair_rows(l_units, r_units, key=lambda unit: unit[0])
        for unit_row in unit_rows:
            l_unit, r_unit = unit_row.left, unit_row.right
            same = unit_row.status == "same"
            if l_unit is not None and r_unit is not None and not same:
                # two different steps at the same place: show them one after the other
                for lone in (Row("call", l_unit, None, "only-left"), Row("call", None, r_unit, "only-right")):
                    rows.extend(_unit_rows(lone.left, lone.right, labels))
                continue
            rows.extend(_unit_rows(l_unit, r_unit, labels))
    else:
        mode = "by tool-call order (longest common subsequence of call signatures)"
        if left.has_steps != right.has_steps:
            mode += "; only one run carries steps"
        rows = _pair_rows(left.calls, right.calls, key=lambda call: call.signature)
        for row in rows:
            _judge(row, labels)
    _number(rows)
    return rows, mode


def _steps(calls: list[Call]) -> list[tuple[Any, str, list[Call]]]:
    units: list[tuple[Any, str, list[Call]]] = []
    for call in calls:
        if not units or units[-1][0] != call.step_key:
            units.append((call.step_key, call.step_text or "before the first step", []))
        units[-1][2].append(call)
    return units


def _unit_rows(l_unit: Any, r_unit: Any, labels: tuple[str, str]) -> list[Row]:
    header = Row("step", l_unit[1] if l_unit else None, r_unit[1] if r_unit else None)
    if l_unit is None:
        header.status = "only-right"
        header.reasons.append(f"step only in run {labels[1]}")
    elif r_unit is None:
        header.status = "only-left"
        header.reasons.append(f"step only in run {labels[0]}")
    rows = [header]
    calls = _pair_rows(l_unit[2] if l_unit else [], r_unit[2] if r_unit else [], key=lambda c: c.signature)
    for row in calls:
        _judge(row, labels)
    return rows + calls


def _number(rows: list[Row]) -> None:
    position = 0
    for row in rows:
        if row.kind == "call":
            position += 1
            row.position = position
