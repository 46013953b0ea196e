"""One cell's result: what its stream says, and the `results.jsonl` file of a batch.

What belongs here: `CellResult` (one line of results.jsonl), `summarise_stream`
(turns, calls by decider, calls the harness itself refused, the first failed model
request, cost, tokens, the `metaharness check` verdict, all read from the cell's
events), the table of what counts as an infrastructure failure
(the only kind `--retries` reruns), and reading/appending results.jsonl.

Rules kept: figures come only from the stream; a figure the stream does not report
stays `None`, never 0. A check that failed is a verdict, never an infrastructure
failure. When a cell has several lines (a skipped cell later run, a retry after a
resume), the last one is the cell's result.
"""

from __future__ import annotations

import json
import os
from typing import Any, Literal

import msgspec
from msgspec import Struct

from metaharness.protocol.refusals import RefusalName, WarningCode

RESULT_FORMAT = "metaharness.batch-result/1"

Status = Literal["ran", "skipped", "interrupted"]
Verdict = Literal["pass", "fail", "timeout", "none"]


class Calls(Struct, kw_only=True):
    requested: int = 0
    allowed: int = 0
    denied: int = 0
    replaced: int = 0
    abstained: int = 0
    # decider → {"allowed": n, "denied": n, …}: who decided what
    by_decider: dict[str, dict[str, int]] = msgspec.field(default_factory=dict)


class Refused(Struct, kw_only=True):
    """A call that was denied: what it was, and why."""
    name: str
    subject: str  # the call's input, summarised as the run views summarise it
    reason: str | None = None
    decided_by: str | None = None


MAX_REFUSED = 20  # refused calls kept per cell (the count in `calls.denied` is always complete)


class CellResult(Struct, kw_only=True):
    format: str = RESULT_FORMAT
    task: str
    harness: str
    kind: str
    repeat: int
    status: Status = "ran"
    skipped: str | None = None  # why a cell never ran ("budget")
    exit_code: int | None = None
    close_reason: str | None = None
    stream: str = "missing"  # complete | truncated | inconsistent | missing
    check: Verdict = "none"
    check_exit_code: int | None = None
    check_tail: str | None = None  # the last lines of the check's output, when it did not pass
    passed: bool = False
    timed_out: bool = False
    refusal: str | None = None  # the run's own refusal sentence, when it refused to start
    turns: int = 0
    calls: Calls = msgspec.field(default_factory=Calls)
    refused: list[Refused] = msgspec.field(default_factory=list)
    harness_refused: int = 0  # calls the harness's own permission system refused (VENDOR_PERMISSION_DENIED)
    model_failure: str | None = None  # the first failed model request (MODEL_REQUEST_FAILED), in one line
    cost_usd: float | None = None
    budget: str | None = None  # the run's BUDGET_REACHED sentence, when its spend cap stopped it (or the batch's, when it halted the cell)
    input_tokens: int | None = None
    output_tokens: int | None = None
    wall_ms: int | None = None
    started_at: float | None = None  # seconds since the epoch, when the last attempt's run started
    attempts: int = 0
    retried_for: list[str] = msgspec.field(default_factory=list)
    infra: str | None = None  # an infrastructure failure the last attempt ended in

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.task, self.harness, self.repeat)


# Fields that differ from one execution of the same plan to the next.
TIMING_FIELDS = ("wall_ms", "started_at")

_DECISION_COUNTER = {"allow": "allowed", "deny": "denied", "replace": "replaced", "abstain": "abstained"}

# Start refusals that come from the vendor's side (a handshake that failed), and so may
# succeed on a second try; any other refusal is the plan's and would fail again.
RETRYABLE_REFUSALS = (RefusalName.VendorCapability,)


def cell_dir(out: str, key: tuple[str, str, int]) -> str:
    task, harness, repeat = key
    return os.path.join(out, task, harness, str(repeat))


def summarise_stream(data: bytes) -> dict[str, Any]:
    """The result fields that the cell's event stream decides."""
    from metaharness.protocol.stream import check_stream
    from metaharness.view.summarise import input_summary

    verdict = check_stream(data).status if data else "missing"
    calls = Calls()
    requested: dict[str, tuple[str, str]] = {}
    refused: list[Refused] = []
    turns = 0
    harness_refused = 0
    model_failure: str | None = None
    ended: dict[str, Any] | None = None
    closed: dict[str, Any] | None = None
    usage_cost: float | None = None
    usage_in: int | None = None
    usage_out: int | None = None
    budget: str | None = None
    budget_cost: float | None = None
    for raw in data.splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        name = line.get("event") if isinstance(line, dict) else None
        if name == "turn.started":
            turns += 1
        elif name == "tool.requested":
            if line.get("call_id") not in requested:  # a call presented again is still one call
                calls.requested += 1
            requested[str(line.get("call_id"))] = (str(line.get("name")), input_summary(line.get("input"), 160))
        elif name == "tool.decided":
            decision = line.get("decision") or {}
            counter = _DECISION_COUNTER.get(decision.get("decision"))
            if counter == "denied" and len(refused) < MAX_REFUSED:
                tool, subject = requested.get(str(line.get("call_id")), ("?", ""))
                refused.append(Refused(name=tool, subject=subject, reason=decision.get("reason"),
                                       decided_by=line.get("decided_by")))
            if counter:
                setattr(calls, counter, getattr(calls, counter) + 1)
                per = calls.by_decider.setdefault(str(line.get("decided_by")), {})
                per[counter] = per.get(counter, 0) + 1
        elif name == "usage":
            usage = line.get("usage") or {}
            usage_cost = _add(usage_cost, usage.get("cost_usd"))
            usage_in = _add(usage_in, usage.get("input_tokens"))
            usage_out = _add(usage_out, usage.get("output_tokens"))
        elif name == "warning":
            if line.get("code") == WarningCode.VENDOR_PERMISSION_DENIED:
                harness_refused += 1
            elif line.get("code") == WarningCode.MODEL_REQUEST_FAILED and model_failure is None:
                model_failure = _model_failure_line(line)
            elif line.get("code") == WarningCode.BUDGET_REACHED and budget is None:
                budget, budget_cost = line.get("message"), line.get("metered_cost_usd")
        elif name == "session.ended":
            ended = line
        elif name == "stream.closed":
            closed = line
    ended_usage = (ended or {}).get("usage") or {}
    # metaharness's own figure first (priced from the traffic it saw; a run stopped at its budget
    # has it on BUDGET_REACHED), else the vendor's
    cost = _first((ended or {}).get("metered_cost_usd"), budget_cost, (ended or {}).get("total_cost_usd"))
    return {
        "stream": verdict,
        "close_reason": (closed or {}).get("reason"),
        "turns": turns,
        "calls": calls,
        "refused": refused,
        "harness_refused": harness_refused,
        "model_failure": model_failure,
        "cost_usd": cost if cost is not None else usage_cost,
        "budget": budget,
        "input_tokens": _first(ended_usage.get("input_tokens"), usage_in),
        "output_tokens": _first(ended_usage.get("output_tokens"), usage_out),
    }


def _model_failure_line(warning: dict[str, Any]) -> str:
    """A MODEL_REQUEST_FAILED warning in one line: provider, kind, status, then the provider's words."""
    failure = warning.get("model_failure") if isinstance(warning.get("model_failure"), dict) else {}
    head = " ".join(str(part) for part in (failure.get("provider"), failure.get("kind"),
                                           failure.get("http_status")) if part is not None)
    words = failure.get("provider_message") or warning.get("message") or ""
    return one_line(f"{head}: {words}" if head else str(words))


LINE_LIMIT = 300  # characters of one reason line


def one_line(text: str, limit: int = LINE_LIMIT) -> str:
    """`text` on one line (whitespace runs folded), cut to `limit` characters with an ellipsis."""
    folded = " ".join(str(text).split())
    return folded if len(folded) <= limit else folded[: limit - 1] + "…"


def _add(total: Any, value: Any) -> Any:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return total
    return value if total is None else total + value


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def infrastructure_failure(exit_code: int | None, stream: str, refusal: str | None,
                           timed_out: bool, close_reason: str | None = None, *,
                           halted_for_budget: bool = False) -> str | None:
    """Why an attempt failed for reasons outside the task (retryable), or None.

    A cell that hit its timeout, whose run stopped at its budget (close reason budget, exit 3
    as after a halt), or that the batch halted once its budget was spent, is a result, not a
    failure of the machinery."""
    if timed_out or halted_for_budget or (close_reason == "budget" and stream == "complete"):
        return None
    if exit_code == 2 and refusal is not None:  # refused before anything ran: the plan's doing, unless the vendor's
        if refusal.split(":")[0] in RETRYABLE_REFUSALS:
            return f"the start was refused by the vendor: {refusal}"
        return None
    if stream in ("missing", "truncated"):
        return f"the run's stream is {stream} (exit {exit_code})"
    if exit_code == 3:
        return "the harness ended without a terminal record (exit 3)"
    return None


LIVE_POLL_S = 0.5  # how often a running cell's spend is read while a batch budget is kept live


def spend_so_far(data: bytes, prices: Any) -> float:
    """What a running cell has spent by now, from the stream written so far (`LiveSpend`'s rule)."""
    return LiveSpend(prices).feed(data + b"\n")  # the last line too, when it is whole


class LiveSpend:
    """What a running cell has spent, read as its stream grows (each byte read once): its run's
    own figure once it has one (the first BUDGET_REACHED or session.ended that carries it), else
    its `usage` events priced with `prices` (a `metaharness.loopback.pricing.PriceTable`, the
    table the run prices with) — the harness's usage reports as they come; a response of a model
    not in the table counts as the cost its harness puts on it, else as nothing. A line not yet
    ended by its newline waits for the rest."""

    def __init__(self, prices: Any) -> None:
        self.prices = prices
        self._restart(None)

    def _restart(self, file: tuple[int, int] | None) -> None:
        self.file = file  # the stream's (device, inode)
        self.offset = 0
        self.partial = b""
        self.priced = 0.0
        self.final: float | None = None

    @property
    def spent(self) -> float:
        return self.final if self.final is not None else self.priced

    def read(self, path: str) -> float:
        """Read what `path` gained since the last read; the spend so far (OSError when unreadable).
        A stream begun again (another file, or one shorter than what was read) is read afresh."""
        with open(path, "rb") as handle:
            stat = os.fstat(handle.fileno())
            if (stat.st_dev, stat.st_ino) != self.file or stat.st_size < self.offset:
                self._restart((stat.st_dev, stat.st_ino))
            handle.seek(self.offset)
            data = handle.read()
        self.offset += len(data)
        return self.feed(data)

    def feed(self, data: bytes) -> float:
        *lines, self.partial = (self.partial + data).split(b"\n")
        for raw in lines:
            if self.final is None:
                self._line(raw)
        return self.spent

    def _line(self, raw: bytes) -> None:
        try:
            line = json.loads(raw)
        except ValueError:
            return  # a torn line
        if not isinstance(line, dict):
            return
        name = line.get("event")
        if name == "usage":
            usage = line.get("usage") or {}
            model = line.get("model")
            if isinstance(model, str) and ":" in model:  # PROVIDER:MODEL is priced by its model
                model = model.split(":", 1)[1]
            self.priced += self.prices.cost(model, usage) or usage.get("cost_usd") or 0.0
        elif name in ("warning", "session.ended") and line.get("metered_cost_usd") is not None and (
                name == "session.ended" or line.get("code") == WarningCode.BUDGET_REACHED):
            self.final = float(line["metered_cost_usd"])


# --- results.jsonl ---------------------------------------------------------------------

_DECODER = msgspec.json.Decoder(CellResult)
_ENCODER = msgspec.json.Encoder()


def encode_result(result: CellResult) -> bytes:
    return _ENCODER.encode(result) + b"\n"


def read_results(path: str) -> dict[tuple[str, str, int], CellResult]:
    """The last result line of each cell; a torn final line (a killed batch) is ignored."""
    found: dict[tuple[str, str, int], CellResult] = {}
    try:
        with open(path, "rb") as handle:
            for raw in handle:
                try:
                    result = _DECODER.decode(raw)
                except msgspec.DecodeError:
                    continue
                found[result.key] = result
    except FileNotFoundError:
        pass
    return found


class ResultsFile:
    """results.jsonl, appended one line per finished cell and flushed at once."""

    def __init__(self, path: str) -> None:
        self._handle = open(path, "ab")
        # A line torn by a killed batch must not glue itself to the next one.
        if self._handle.tell() > 0:
            with open(path, "rb") as check:
                check.seek(-1, os.SEEK_END)
                if check.read(1) != b"\n":
                    self._handle.write(b"\n")

    def append(self, result: CellResult) -> None:
        self._handle.write(encode_result(result))
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        self._handle.close()
