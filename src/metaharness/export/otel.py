"""A finished run as OpenTelemetry spans, after the GenAI semantic conventions.

What belongs here: the span tree of one run and its sending over OTLP/HTTP through the
official SDK (`opentelemetry-sdk`, `opentelemetry-exporter-otlp-proto-http`, the `otel`
extra). The SDK is imported only here, and this module only by `metaharness export otel`.

The tree: one `invoke_agent {harness}` span per run; under it a `workflow.step {state}` span
per workflow step; under that (or the run) a `turn {n}` span per turn; under that an
`execute_tool {name}` span per call, from its request to its result, with the decision as
`metaharness.*` attributes and a `guardrail` event where the call was denied.

Times: a span starts and ends at the `at` stamps the harness recorded; a line without one
takes the last time known before it, and a stream without any is placed so that it ends at
the file's modification time (its length from `session.ended.duration_ms`). Nothing is
interpolated. Arguments and results are attributes only when asked for (`content=True`).
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from typing import Any, Sequence

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from metaharness.protocol.harnesses import REGISTRY
from metaharness.view.stream import decision_word

from .source import ExportError, Stream

# gen_ai.provider.name per harness; oharness's model is PROVIDER:MODEL and names its own.
_PROVIDER = {kind: entry.provider for kind, entry in REGISTRY.items() if entry.provider}


def _provider(adapter: str, model: str | None) -> str | None:
    if adapter == "oharness" and model and ":" in model:
        return model.split(":", 1)[0]
    return _PROVIDER.get(adapter)


def _ns(at: str) -> int | None:
    try:
        return int(datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp() * 1e9)
    except ValueError:
        return None


def _clock(stream: Stream) -> list[int]:
    """Each line's time in ns: its own stamp, else the last one before it."""
    stamps = [_ns(line.at) if line.at else None for line in stream.lines]
    known = [s for s in stamps if s is not None]
    if known:
        now = known[0]
    else:
        ended = next((l.event for l in stream.lines if l.name == "session.ended"), None)
        length = (ended.duration_ms or 0) if ended is not None else 0
        now = int(os.stat(stream.path).st_mtime * 1e9) - length * 1_000_000
        stamps[-1] = now + length * 1_000_000
    out = []
    for stamp in stamps:
        now = max(now, stamp) if stamp is not None else now
        out.append(now)
    return out


def _json(value: Any) -> str:
    import msgspec

    return value if isinstance(value, str) else json.dumps(msgspec.to_builtins(value), sort_keys=True)


def build_spans(streams: list[Stream], *, content: bool = False) -> list[ReadableSpan]:
    """The run's spans, finished, in the order they ended."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "metaharness"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("metaharness.export")
    for stream in streams:
        _one_run(tracer, stream, _clock(stream), content)
    provider.shutdown()
    return list(memory.get_finished_spans())


def _one_run(tracer: trace.Tracer, stream: Stream, times: list[int], content: bool) -> None:
    first = stream.lines[0].event
    if stream.lines[0].name != "session.started":
        raise ExportError(f"{stream.path}: the run ended before its session started, so there is no agent to trace")
    adapter, model = first.adapter, first.model
    attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": adapter,
             "gen_ai.provider.name": _provider(adapter, model), "gen_ai.request.model": model,
             "gen_ai.conversation.id": first.session_id, "metaharness.run.id": stream.lines[0].run,
             "metaharness.harness.version": first.harness_version}
    root = tracer.start_span(f"invoke_agent {adapter}", kind=SpanKind.CLIENT, start_time=times[0],
                             attributes={k: v for k, v in attrs.items() if v is not None})
    step = turn = None
    calls: dict[str, Any] = {}
    decided: dict[str, Any] = {}
    frame_digest = None

    def parent() -> Any:
        return trace.set_span_in_context(turn or step or root)

    def end_call(call_id: str, at: int, error: bool = False) -> None:
        span = calls.pop(call_id, None)
        if span is not None:
            if error:
                span.set_status(Status(StatusCode.ERROR))
            span.end(end_time=at)

    for line, at in zip(stream.lines, times):
        e, name = line.event, line.name
        if name == "step.entered":
            s = e.step
            frame_digest = e.frame_digest or frame_digest
            step = tracer.start_span(f"workflow.step {s.state}", context=trace.set_span_in_context(root), start_time=at,
                                     attributes={k: v for k, v in {
                                         "metaharness.step.workflow": s.workflow, "metaharness.step.state": s.state,
                                         "metaharness.step.index": s.index, "metaharness.step.attempt": s.attempt,
                                         "metaharness.frame_digest": e.frame_digest}.items() if v is not None})
        elif name == "step.left" and step is not None:
            if turn is not None:
                turn.end(end_time=at)
                turn = None
            word = type(e.outcome).__struct_config__.tag
            step.set_attribute("metaharness.step.outcome", word)
            if word != "completed":
                step.set_status(Status(StatusCode.ERROR, getattr(e.outcome, "reason", None)))
            step.end(end_time=at)
            step = None
        elif name == "turn.started":
            frame_digest = e.frame_digest or frame_digest
            turn = tracer.start_span(f"turn {e.turn}", context=trace.set_span_in_context(step or root), start_time=at,
                                     attributes={"metaharness.turn": e.turn})
        elif name == "turn.ended" and turn is not None:
            if e.stop_reason:
                turn.set_attribute("metaharness.stop_reason", e.stop_reason)
            turn.end(end_time=at)
            turn = None
        elif name == "tool.requested":
            attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": e.name,
                     "gen_ai.tool.call.id": e.call_id, "gen_ai.tool.type": "function", "metaharness.seam": e.seam,
                     "metaharness.decision_required": e.decision_required}
            if isinstance(e.operations, list):
                attrs["metaharness.operations"] = e.operations
            if frame_digest:
                attrs["metaharness.frame_digest"] = frame_digest
            if content:
                attrs["gen_ai.tool.call.arguments"] = _json(e.input)
            calls[e.call_id] = tracer.start_span(f"execute_tool {e.name}", context=parent(), start_time=at,
                                                 kind=SpanKind.INTERNAL, attributes=attrs)
        elif name == "tool.decided":
            span = calls.get(e.call_id)
            if span is None:
                raise ExportError(f"{stream.path}: line {line.number}: call {e.call_id} is decided but was never "
                                  "requested (the stream is inconsistent)")
            word = decision_word(e.decision)
            decided[e.call_id] = word
            span.set_attribute("metaharness.decision", word)
            span.set_attribute("metaharness.decided_by", e.decided_by)
            if e.latency_ms is not None:
                span.set_attribute("metaharness.latency_ms", e.latency_ms)
            if word == "deny":
                span.set_attribute("metaharness.reason", e.decision.reason)
                span.add_event("guardrail", timestamp=at, attributes={
                    "metaharness.decision": "deny", "metaharness.decided_by": e.decided_by,
                    "metaharness.reason": e.decision.reason})
                span.set_status(Status(StatusCode.ERROR, f"refused by {e.decided_by}"))
            if word == "replace" and content:
                span.set_attribute("metaharness.replaced_input", _json(e.decision.input))
        elif name == "tool.result":
            span = calls.get(e.call_id)
            if span is not None:
                if e.is_error is not None:
                    span.set_attribute("metaharness.is_error", e.is_error)
                if content and e.content is not None:
                    span.set_attribute("gen_ai.tool.call.result", _json(e.content))
                end_call(e.call_id, at, error=bool(e.is_error) and decided.get(e.call_id) != "deny")
        elif name == "usage":
            for key, value in (("gen_ai.usage.input_tokens", e.usage.input_tokens),
                               ("gen_ai.usage.output_tokens", e.usage.output_tokens)):
                if value is not None and turn is not None:
                    turn.set_attribute(key, (turn.attributes or {}).get(key, 0) + value)
        elif name == "session.ended":
            c = e.census
            for key, value in (("allowed", c.allowed), ("denied", c.denied), ("replaced", c.replaced),
                               ("abstained", c.abstained)):
                root.set_attribute(f"metaharness.census.{key}", value)
            if e.usage is not None:
                for key, value in (("gen_ai.usage.input_tokens", e.usage.input_tokens),
                                   ("gen_ai.usage.output_tokens", e.usage.output_tokens)):
                    if value is not None:
                        root.set_attribute(key, value)
            if e.total_cost_usd is not None:
                root.set_attribute("metaharness.total_cost_usd", e.total_cost_usd)
        elif name == "stream.closed":
            for call_id in list(calls):  # a call with no result ends with the run
                end_call(call_id, at)
            for span in (turn, step):
                if span is not None:
                    span.end(end_time=at)
            root.set_attribute("metaharness.close_reason", e.reason)
            if e.reason not in ("completed", "steer-halt"):
                root.set_status(Status(StatusCode.ERROR, e.reason))
            root.end(end_time=at)


def endpoint_of(endpoint: str | None) -> str:
    """The traces URL: the one given, else the standard OTEL_* variables, else the local default."""
    if endpoint:
        return endpoint
    if os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
    base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318")
    return base.rstrip("/") + "/v1/traces"


def send(spans: Sequence[ReadableSpan], endpoint: str, *, timeout_s: float = 10.0,
         exporter: SpanExporter | None = None) -> None:
    """Send the spans in one OTLP/HTTP request; ExportError (one sentence) when it fails."""
    import logging

    # The exporter logs each retry; the one sentence below says what happened instead.
    logging.getLogger("opentelemetry.exporter.otlp.proto.http").setLevel(logging.CRITICAL)
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=endpoint, timeout=timeout_s)
    try:
        result = exporter.export(spans)
    finally:
        exporter.shutdown()
    if result is not SpanExportResult.SUCCESS:
        raise ExportError(f"the OTLP endpoint {endpoint} did not take the {len(spans)} span(s) "
                          "(unreachable, or it answered with an error); nothing was sent")
