"""A finished run as an ATIF trajectory (Harbor's Agent Trajectory Interchange Format).

What belongs here: the mapping of `metaharness.event/1` events onto ATIF v1.8, the version
Harbor 0.25.0 validates (`harbor.models.trajectories.Trajectory`). Plain JSON values out;
Harbor itself is not imported (its package needs Python 3.12 and a large tree of services),
the tests validate every trajectory with its models.

The mapping, one event at a time (the table `_ON` below):

* `session.started` → the `agent` (harness kind, version, model) and the trajectory's ids;
* `injection` → a `user` step (the frame's or the embedder's message, with its origin);
* `text`, `thinking`, `tool.requested` → an `agent` step, one per model response: a response
  ends once one of its calls has a result (what the model says or calls next is its next
  response: no event says which response a call belongs to), when its request id changes, or
  at a turn's, step's or message's boundary;
* `tool.decided` → the call's `extra.metaharness`: decision, decided_by, reason, replacement,
  seam, latency, the frame digest in force, and `ran` — a denied call says `ran: false` and its
  observation says `refused`, it never looks like a call that ran;
* `tool.result` → an `observation.results` entry on the step holding the call;
* `usage` → the step's `metrics`; `session.ended` → `final_metrics` and the census;
* `step.entered`, `step.left`, `warning`, `auth.expired` → `system` steps (a workflow's steps
  marked, with their frames' digests).

Events with no ATIF place (`rate_limit`, `command.result`, `opaque`, `thinking.estimate`) are
counted in the trajectory's `extra.metaharness.not_exported`, never dropped unsaid.
"""

from __future__ import annotations

import json
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Callable

import msgspec

from metaharness.protocol.events import EVENT_FORMAT, event_name
from metaharness.view.stream import StreamLine, count_census, decision_word

from .source import ExportError, Stream

ATIF_VERSION = "ATIF-v1.8"
HARBOR_VALIDATED_BY = "harbor==0.25.0"

# Whose `input_tokens` leaves out the cached prompt (Anthropic's API counts cache reads and
# writes apart); ATIF's prompt_tokens includes them. Every other vendor reports the total.
_INPUT_EXCLUDES_CACHE = frozenset({"claude"})


def _metaharness_version() -> str:
    try:
        return version("metaharness")
    except PackageNotFoundError:  # a source checkout without an install
        return "unknown"


def _plain(value: Any) -> Any:
    return None if value is msgspec.UNSET else msgspec.to_builtins(value)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(_plain(value), sort_keys=True, ensure_ascii=False)


def prompt_tokens(adapter: str, usage: Any) -> int | None:
    if usage.input_tokens is None:
        return None
    if adapter in _INPUT_EXCLUDES_CACHE:
        return usage.input_tokens + (usage.cache_read_input_tokens or 0) + (usage.cache_creation_input_tokens or 0)
    return usage.input_tokens


def _metrics(adapter: str, usage: Any) -> dict[str, Any]:
    metrics = {
        "prompt_tokens": prompt_tokens(adapter, usage),
        "completion_tokens": usage.output_tokens,
        "cached_tokens": usage.cache_read_input_tokens,
        "cost_usd": usage.cost_usd,
        "extra": {"metaharness": {"usage": _plain(usage)}},
    }
    return {k: v for k, v in metrics.items() if v is not None}


class _Builder:
    """Walks one run's lines in order and builds the trajectory's steps."""

    def __init__(self) -> None:
        self.steps: list[dict[str, Any]] = []
        self.agent: dict[str, Any] | None = None
        self.adapter = ""
        self.ids: dict[str, str | None] = {}
        self.open: dict[str, Any] | None = None  # the agent step a response is still adding to
        self.calls: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}  # call id → (step, tool call)
        self.frame_digest: str | None = None
        self.workflow_step: dict[str, Any] | None = None
        self.turn: int | None = None
        self.usage_events: list[Any] = []
        self.ended: Any = None
        self.closed: Any = None
        self.not_exported: dict[str, int] = {}
        self.path = ""

    # -- steps ---------------------------------------------------------------------------
    def _context(self) -> dict[str, Any]:
        context: dict[str, Any] = {}
        if self.turn is not None:
            context["turn"] = self.turn
        if self.workflow_step is not None:
            context["workflow_step"] = self.workflow_step
        if self.frame_digest is not None:
            context["frame_digest"] = self.frame_digest
        return context

    def _step(self, line: StreamLine, source: str, message: str, **extra: Any) -> dict[str, Any]:
        step: dict[str, Any] = {"step_id": len(self.steps) + 1, "source": source, "message": message}
        if line.at:
            step["timestamp"] = line.at
        step["extra"] = {"metaharness": {"seq": line.seq, **self._context(), **extra}}
        self.steps.append(step)
        return step

    def _agent_step(self, line: StreamLine, request_id: str | None) -> dict[str, Any]:
        step = self.open
        if step is not None:
            known = step["extra"]["metaharness"].get("request_id")
            answered = bool(step.get("observation", {}).get("results"))
            if answered or (request_id and known and request_id != known):
                step = None
        if step is None:
            step = self.open = self._step(line, "agent", "")
        if request_id and "request_id" not in step["extra"]["metaharness"]:
            step["extra"]["metaharness"]["request_id"] = request_id
        return step

    def _boundary(self) -> None:
        self.open = None

    # -- events --------------------------------------------------------------------------
    def session_started(self, line: StreamLine, e: Any) -> None:
        if self.agent is not None:
            return  # a resumed workflow session: the agent is the first session's
        self.adapter = e.adapter
        self.agent = {"name": e.adapter, "version": e.harness_version or "unknown"}
        if e.model:
            self.agent["model_name"] = e.model
        hermetic = _plain(e.hermetic)
        self.agent["extra"] = {"metaharness": {k: v for k, v in {
            "adapter_class": e.adapter_class, "permission_mode": e.permission_mode, "cwd": e.cwd,
            "offered_tools": e.offered_tools, "decisions": hermetic.get("decisions"), "hermetic": hermetic.get("mode"),
        }.items() if v is not None}}
        self.ids = {"session_id": e.session_id or line.run, "run": line.run}

    def step_entered(self, line: StreamLine, e: Any) -> None:
        self._boundary()
        self.workflow_step = _plain(e.step)
        if e.frame_digest:
            self.frame_digest = e.frame_digest
        s = e.step
        self._step(line, "system", f"Workflow {s.workflow}: entered state {s.state} (step {s.index}, attempt {s.attempt})",
                   marker="step.entered")

    def step_left(self, line: StreamLine, e: Any) -> None:
        self._boundary()
        outcome = _plain(e.outcome)
        word = outcome.get("outcome")
        reason = f": {outcome['reason']}" if outcome.get("reason") else ""
        self._step(line, "system", f"Workflow {e.step.workflow}: left state {e.step.state} ({word}{reason})",
                   marker="step.left", outcome=outcome)
        self.workflow_step = None

    def turn_started(self, line: StreamLine, e: Any) -> None:
        self._boundary()
        self.turn = e.turn
        if e.frame_digest:
            self.frame_digest = e.frame_digest

    def turn_ended(self, line: StreamLine, e: Any) -> None:
        if self.open is not None and e.stop_reason:
            self.open["extra"]["metaharness"]["stop_reason"] = e.stop_reason
        self._boundary()

    def injection(self, line: StreamLine, e: Any) -> None:
        self._boundary()
        self._step(line, "user", e.text, origin=e.origin)

    def text(self, line: StreamLine, e: Any) -> None:
        step = self._agent_step(line, e.request_id)
        step["message"] = step["message"] + e.text if step["message"] else e.text

    def thinking(self, line: StreamLine, e: Any) -> None:
        step = self._agent_step(line, e.request_id)
        step["reasoning_content"] = step.get("reasoning_content", "") + e.text

    def tool_requested(self, line: StreamLine, e: Any) -> None:
        if e.call_id in self.calls:
            raise ExportError(f"{self.path}: line {line.number}: call {e.call_id} is requested twice "
                              "(the stream is inconsistent)")
        step = self._agent_step(line, None)
        arguments = _plain(e.input)
        call = {
            "tool_call_id": e.call_id,
            "function_name": e.name,
            "arguments": arguments if isinstance(arguments, dict) else {"input": arguments},
            "extra": {"metaharness": {k: v for k, v in {
                "seq": line.seq, "seam": e.seam, "decision_required": e.decision_required,
                "operations": _plain(e.operations) or None, "subjects": _plain(e.subjects) or None,
                "deadline_ms": e.deadline_ms, "frame_digest": self.frame_digest, "decision": None,
            }.items() if v is not None}},
        }
        step.setdefault("tool_calls", []).append(call)
        self.calls[e.call_id] = (step, call)

    def tool_decided(self, line: StreamLine, e: Any) -> None:
        found = self.calls.get(e.call_id)
        if found is None:
            raise ExportError(f"{self.path}: line {line.number}: call {e.call_id} is decided but was never requested "
                              "(the stream is inconsistent)")
        mine = found[1]["extra"]["metaharness"]
        if mine.get("decision") is not None:
            raise ExportError(f"{self.path}: line {line.number}: call {e.call_id} is decided twice "
                              "(the stream is inconsistent)")
        word = decision_word(e.decision)
        mine.update(decision=word, decided_by=e.decided_by, decided_seq=line.seq, seam=e.seam,
                    ran=word != "deny")
        if word == "deny":
            mine["reason"] = e.decision.reason
        if word == "replace":
            mine["replaced_input"] = _plain(e.decision.input)
        if e.latency_ms is not None:
            mine["latency_ms"] = e.latency_ms

    def tool_result(self, line: StreamLine, e: Any) -> None:
        found = self.calls.get(e.call_id)
        if found is None:  # a result with no presented call (a vendor's own tool): on the step in progress
            step = self._agent_step(line, None)
            decision = None
        else:
            step = found[0]
            decision = found[1]["extra"]["metaharness"].get("decision")
        result: dict[str, Any] = {"source_call_id": e.call_id if found else None}
        content = _text(e.content)
        if content is not None:
            result["content"] = content
        status = "refused" if decision == "deny" else ("error" if e.is_error else "ok")
        result["extra"] = {"metaharness": {k: v for k, v in {
            "seq": line.seq, "status": status, "call_id": e.call_id, "is_error": e.is_error,
            "exit_code": e.exit_code, "outcome_source": e.outcome_source, "bytes": e.bytes,
            "tool_use_result": _plain(e.tool_use_result),
        }.items() if v is not None}}
        if found is None:
            result.pop("source_call_id")
        step.setdefault("observation", {"results": []})["results"].append(result)

    def refusals_unanswered(self) -> None:
        """A denied call the harness reported no result for still shows, in its step's
        observation, that it was refused and why (a reader of observations alone sees it)."""
        for call_id, (step, call) in self.calls.items():
            mine = call["extra"]["metaharness"]
            if mine.get("decision") != "deny":
                continue
            results = step.setdefault("observation", {"results": []})["results"]
            if any(r.get("source_call_id") == call_id for r in results):
                continue
            results.append({"source_call_id": call_id, "content": f"refused by {mine['decided_by']}: {mine['reason']}",
                             "extra": {"metaharness": {"status": "refused", "call_id": call_id,
                                                       "from": "tool.decided"}}})

    def usage(self, line: StreamLine, e: Any) -> None:
        self.usage_events.append(e.usage)
        target = self.open if self.open is not None else next(
            (s for s in reversed(self.steps) if s["source"] == "agent"), None)
        if target is None:
            return  # counted in final_metrics only
        if "metrics" in target:  # a second report for one response: keep both, add the figures
            target["extra"]["metaharness"].setdefault("more_usage", []).append(_plain(e.usage))
            return
        target["metrics"] = _metrics(self.adapter, e.usage)
        if e.model:
            target["model_name"] = e.model

    def warning(self, line: StreamLine, e: Any) -> None:
        self._boundary()
        self._step(line, "system", f"warning {e.code}: {e.message}", marker="warning", code=e.code)

    def auth_expired(self, line: StreamLine, e: Any) -> None:
        self._boundary()
        self._step(line, "system", f"the harness's credentials expired{': ' + e.detail if e.detail else ''}",
                   marker="auth.expired")

    def session_ended(self, line: StreamLine, e: Any) -> None:
        self._boundary()
        self.ended = e

    def stream_closed(self, line: StreamLine, e: Any) -> None:
        self.closed = e


_ON: dict[str, Callable[[_Builder, StreamLine, Any], None]] = {
    "session.started": _Builder.session_started,
    "session.ended": _Builder.session_ended,
    "step.entered": _Builder.step_entered,
    "step.left": _Builder.step_left,
    "turn.started": _Builder.turn_started,
    "turn.ended": _Builder.turn_ended,
    "text": _Builder.text,
    "thinking": _Builder.thinking,
    "injection": _Builder.injection,
    "tool.requested": _Builder.tool_requested,
    "tool.decided": _Builder.tool_decided,
    "tool.result": _Builder.tool_result,
    "usage": _Builder.usage,
    "warning": _Builder.warning,
    "auth.expired": _Builder.auth_expired,
    "stream.closed": _Builder.stream_closed,
}


def _final_metrics(b: _Builder, ended: list[Any]) -> dict[str, Any]:
    usages = [e.usage for e in ended if e.usage is not None] or b.usage_events
    def total(pick: Callable[[Any], int | None]) -> int | None:
        figures = [pick(u) for u in usages]
        return sum(f for f in figures if f is not None) if any(f is not None for f in figures) else None
    costs = [e.total_cost_usd for e in ended if e.total_cost_usd is not None]
    metrics = {
        "total_prompt_tokens": total(lambda u: prompt_tokens(b.adapter, u)),
        "total_completion_tokens": total(lambda u: u.output_tokens),
        "total_cached_tokens": total(lambda u: u.cache_read_input_tokens),
        "total_cost_usd": sum(costs) if costs else None,
        "total_steps": len(b.steps),
    }
    return {k: v for k, v in metrics.items() if v is not None}


def trajectory(streams: list[Stream]) -> dict[str, Any]:
    """One run (a workflow's sessions in order) as one ATIF trajectory, plain JSON values."""
    b = _Builder()
    sessions: list[dict[str, Any]] = []
    ended: list[Any] = []
    decided = []
    for stream in streams:
        b.path, b.ended, b.closed, b.frame_digest, b.turn = stream.path, None, None, None, None
        for line in stream.lines:
            name = line.name
            handler = _ON.get(name)
            if handler is None:
                b.not_exported[name] = b.not_exported.get(name, 0) + 1
                continue
            handler(b, line, line.event)
            if name == "tool.decided":
                decided.append(line.event)
        b._boundary()
        b.refusals_unanswered()
        if b.ended is not None:
            ended.append(b.ended)
        sessions.append({k: v for k, v in {
            "file": stream.path, "run": stream.lines[-1].run, "close_reason": b.closed.reason,
            "process": _plain(b.closed.process), "events": b.closed.events,
            "census": _plain(b.ended.census) if b.ended is not None else None,
            "num_turns": b.ended.num_turns if b.ended is not None else None,
            "duration_ms": b.ended.duration_ms if b.ended is not None else None,
            "is_error": b.ended.is_error if b.ended is not None else None,
            "stop_reason": (b.ended.stop_reason or b.ended.subtype) if b.ended is not None else None,
        }.items() if v is not None})
    if b.agent is None:
        first = streams[0]
        raise ExportError(f"{first.path}: the run ended ({b.closed.reason}) before its session started, "
                          "so there is no agent and no step to export")
    if not b.steps:
        raise ExportError(f"{streams[-1].path}: the run has no message, model output or tool call to export "
                          "(an ATIF trajectory holds at least one step)")
    # A call the harness ran without asking metaharness (nothing decided it) is listed, not hidden.
    undecided = [cid for cid, (_, call) in b.calls.items() if call["extra"]["metaharness"].get("decision") is None]
    out: dict[str, Any] = {
        "schema_version": ATIF_VERSION,
        "session_id": b.ids["session_id"],
        "trajectory_id": b.ids["run"],
        "agent": b.agent,
        "steps": b.steps,
    }
    final = _final_metrics(b, ended)
    if final:
        out["final_metrics"] = final
    last = ended[-1] if ended else None
    out["extra"] = {"metaharness": {k: v for k, v in {
        "exported_by": f"metaharness {_metaharness_version()}",
        "format": EVENT_FORMAT,
        "census": count_census(decided),
        "sessions": sessions,
        "final_answer": last.final_answer.text if last is not None and last.final_answer is not None else None,
        "undecided_calls": undecided or None,
        "not_exported": dict(sorted(b.not_exported.items())) or None,
    }.items() if v is not None}}
    return out


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
