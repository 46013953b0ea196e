"""A run as OpenTelemetry spans, after the GenAI semantic conventions: live as it goes, or after.

What belongs here: the span tree of one run (`SpanMapper`, the ONE event→span rule, fed line by
line), the finished stream's spans (`build_spans`, `metaharness export otel`) and the live tap on a
run's event writer (`LiveTap`, `--otel`), and their sending over OTLP/HTTP through the official SDK
(`opentelemetry-sdk`, `opentelemetry-exporter-otlp-proto-http`, the `otel` extra). The SDK is
imported only here, and this module only when spans are asked for.

The tree: one `invoke_agent {harness}` span per run; under it a `workflow.step {state}` span
per workflow step; under that (or the run) a `turn {n}` span per turn; under that an
`execute_tool {name}` span per call, from its request to its result, with the decision as
`metaharness.*` attributes and a `guardrail` event where the call was denied. A run whose
environment carries a W3C `TRACEPARENT` (a batch cell's, a CI job's) puts its run span under it.

Times: a span starts and ends at the `at` stamps the harness recorded; a line without one
takes the last time known before it (live: the time it was written), and a finished stream
without any is placed so that it ends at the file's modification time (its length from
`session.ended.duration_ms`). Nothing is interpolated. Arguments and results are attributes only
when asked for (`content=True`).

Live export never holds a run up: spans go through a BatchSpanProcessor (a bounded queue, a
worker thread, a short export timeout); at the run's end the flush is bounded (FLUSH_S, less when
the collector's last answer was a failure), and the
spans that did not reach the collector are counted in one OTEL_SPANS_DROPPED warning.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from typing import Any, Sequence

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from metaharness.protocol.events import event_name
from metaharness.protocol.trace import TRACE_ENV
from metaharness.protocol.harnesses import REGISTRY
from metaharness.view.stream import decision_word
from metaharness.protocol.refusals import WarningCode

from .otlp import endpoint_of  # noqa: F401 (the CLI's one import for both)
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
        if stream.lines[0].name != "session.started":
            raise ExportError(f"{stream.path}: the run ended before its session started, so there is no agent to trace")
        mapper = SpanMapper(tracer, stream.lines[0].run, where=stream.path, content=content)
        for line, at in zip(stream.lines, _clock(stream)):
            mapper.feed(line.name, line.event, at, line.number)
    provider.shutdown()
    return list(memory.get_finished_spans())


def _present(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attrs.items() if v is not None}


class SpanMapper:
    """One run's events, in order, as its spans: each span starts and ends as the events open
    and close it (`feed`). The finished-stream export and the live tap both feed one of these."""

    def __init__(self, tracer: trace.Tracer, run_id: str, *, where: str, content: bool = False,
                 parent: Any = None) -> None:
        self.tracer, self.run_id, self.where, self.content, self.parent = tracer, run_id, where, content, parent
        self.root: Any = None
        self.step: Any = None
        self.turn: Any = None
        self.calls: dict[str, Any] = {}
        self.decided: dict[str, str] = {}
        self.frame_digest: str | None = None
        self.closed = False

    def open(self, adapter: str, at: int) -> Any:
        """The run span, before its session started (live: so its context can be handed to the harness)."""
        if self.root is None:
            self.root = self.tracer.start_span(f"invoke_agent {adapter}", kind=SpanKind.CLIENT, start_time=at,
                                               context=self.parent, attributes=_present({
                                                   "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": adapter,
                                                   "metaharness.run.id": self.run_id}))
        return self.root

    def _under(self) -> Any:
        return trace.set_span_in_context(self.turn or self.step or self.root)

    def _end_call(self, call_id: str, at: int, error: bool = False) -> None:
        span = self.calls.pop(call_id, None)
        if span is not None:
            if error:
                span.set_status(Status(StatusCode.ERROR))
            span.end(end_time=at)

    def feed(self, name: str, e: Any, at: int, number: int) -> None:
        handler = _HANDLERS.get(name)
        if handler is not None and not self.closed and (self.root is not None or name == "session.started"):
            handler(self, e, at, number)

    # --- one handler per event that opens, closes or marks a span --------------------------------
    def _session_started(self, e: Any, at: int, number: int) -> None:
        root = self.open(e.adapter, at)
        root.update_name(f"invoke_agent {e.adapter}")
        root.set_attributes(_present({
            "gen_ai.agent.name": e.adapter, "gen_ai.provider.name": _provider(e.adapter, e.model),
            "gen_ai.request.model": e.model, "gen_ai.conversation.id": e.session_id,
            "metaharness.harness.version": e.harness_version}))

    def _step_entered(self, e: Any, at: int, number: int) -> None:
        s = e.step
        self.frame_digest = e.frame_digest or self.frame_digest
        self.step = self.tracer.start_span(f"workflow.step {s.state}", context=trace.set_span_in_context(self.root),
                                           start_time=at, attributes=_present({
                                               "metaharness.step.workflow": s.workflow, "metaharness.step.state": s.state,
                                               "metaharness.step.index": s.index, "metaharness.step.attempt": s.attempt,
                                               "metaharness.frame_digest": e.frame_digest}))

    def _step_left(self, e: Any, at: int, number: int) -> None:
        if self.step is None:
            return
        if self.turn is not None:
            self.turn.end(end_time=at)
            self.turn = None
        word = type(e.outcome).__struct_config__.tag
        self.step.set_attribute("metaharness.step.outcome", word)
        if word != "completed":
            self.step.set_status(Status(StatusCode.ERROR, getattr(e.outcome, "reason", None)))
        self.step.end(end_time=at)
        self.step = None

    def _turn_started(self, e: Any, at: int, number: int) -> None:
        self.frame_digest = e.frame_digest or self.frame_digest
        self.turn = self.tracer.start_span(f"turn {e.turn}", context=trace.set_span_in_context(self.step or self.root),
                                           start_time=at, attributes={"metaharness.turn": e.turn})

    def _turn_ended(self, e: Any, at: int, number: int) -> None:
        if self.turn is None:
            return
        if e.stop_reason:
            self.turn.set_attribute("metaharness.stop_reason", e.stop_reason)
        self.turn.end(end_time=at)
        self.turn = None

    def _tool_requested(self, e: Any, at: int, number: int) -> None:
        attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": e.name,
                 "gen_ai.tool.call.id": e.call_id, "gen_ai.tool.type": "function", "metaharness.seam": e.seam,
                 "metaharness.decision_required": e.decision_required}
        if isinstance(e.operations, list):
            attrs["metaharness.operations"] = e.operations
        if self.frame_digest:
            attrs["metaharness.frame_digest"] = self.frame_digest
        if self.content:
            attrs["gen_ai.tool.call.arguments"] = _json(e.input)
        self.calls[e.call_id] = self.tracer.start_span(f"execute_tool {e.name}", context=self._under(), start_time=at,
                                                       kind=SpanKind.INTERNAL, attributes=attrs)

    def _tool_decided(self, e: Any, at: int, number: int) -> None:
        span = self.calls.get(e.call_id)
        if span is None:
            raise ExportError(f"{self.where}: line {number}: call {e.call_id} is decided but was never "
                              "requested (the stream is inconsistent)")
        word = decision_word(e.decision)
        self.decided[e.call_id] = word
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
        if word == "replace" and self.content:
            span.set_attribute("metaharness.replaced_input", _json(e.decision.input))

    def _tool_result(self, e: Any, at: int, number: int) -> None:
        span = self.calls.get(e.call_id)
        if span is None:
            return
        if e.is_error is not None:
            span.set_attribute("metaharness.is_error", e.is_error)
        if self.content and e.content is not None:
            span.set_attribute("gen_ai.tool.call.result", _json(e.content))
        self._end_call(e.call_id, at, error=bool(e.is_error) and self.decided.get(e.call_id) != "deny")

    def _usage(self, e: Any, at: int, number: int) -> None:
        turn = self.turn
        for key, value in (("gen_ai.usage.input_tokens", e.usage.input_tokens),
                           ("gen_ai.usage.output_tokens", e.usage.output_tokens)):
            if value is not None and turn is not None:
                turn.set_attribute(key, (turn.attributes or {}).get(key, 0) + value)

    def _session_ended(self, e: Any, at: int, number: int) -> None:
        root, c = self.root, e.census
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

    def _stream_closed(self, e: Any, at: int, number: int) -> None:
        for call_id in list(self.calls):  # a call with no result ends with the run
            self._end_call(call_id, at)
        for span in (self.turn, self.step):
            if span is not None:
                span.end(end_time=at)
        self.turn = self.step = None
        self.root.set_attribute("metaharness.close_reason", e.reason)
        if e.reason not in ("completed", "steer-halt"):
            self.root.set_status(Status(StatusCode.ERROR, e.reason))
        self.root.end(end_time=at)
        self.closed = True


_HANDLERS = {
    "session.started": SpanMapper._session_started, "step.entered": SpanMapper._step_entered,
    "step.left": SpanMapper._step_left, "turn.started": SpanMapper._turn_started,
    "turn.ended": SpanMapper._turn_ended, "tool.requested": SpanMapper._tool_requested,
    "tool.decided": SpanMapper._tool_decided, "tool.result": SpanMapper._tool_result,
    "usage": SpanMapper._usage, "session.ended": SpanMapper._session_ended,
    "stream.closed": SpanMapper._stream_closed,
}


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


# --- live: a tap on the run's event writer ----------------------------------------------------

QUEUE = 2048  # spans waiting for the exporter; past it the oldest waiting are dropped (and counted)
EXPORT_TIMEOUT_S = 1.0  # one OTLP request, retries included
FLUSH_S = 1.5  # at the run's end, how long the last spans may take to leave
FLUSH_FAILING_S = 0.2  # … when the collector's last answer was a failure (it is down: do not wait on it)


class _Counting(SpanExporter):
    """The OTLP exporter, counting the spans the collector took."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner, self.taken, self.failing = inner, 0, False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception:  # noqa: BLE001 (a failed export is counted, never raised into the run)
            result = SpanExportResult.FAILURE
        self.failing = result is not SpanExportResult.SUCCESS  # the last request failed: the collector is down
        if not self.failing:
            self.taken += len(spans)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()


def _quiet() -> None:
    import logging

    # The SDK logs each failed export and each dropped span; the one warning says it instead.
    for name in ("opentelemetry.exporter.otlp.proto.http", "opentelemetry.sdk._shared_internal",
                 "opentelemetry.sdk.trace.export", "opentelemetry.sdk.trace"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def parent_context(environ: Any = os.environ) -> Any:
    """The W3C trace context in `environ` (TRACEPARENT, TRACESTATE), as a parent; None without one."""
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier = {key.lower(): environ[key] for key in ("TRACEPARENT", "TRACESTATE") if environ.get(key)}
    if "traceparent" not in carrier:
        return None
    context = TraceContextTextMapPropagator().extract(carrier)
    return context if trace.get_current_span(context).get_span_context().is_valid else None


def carrier_of(span: Any) -> dict[str, str]:
    """The span's context as the W3C env carrier: {"TRACEPARENT": …, "TRACESTATE": … when any}."""
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier, context=trace.set_span_in_context(span))
    return {key.upper(): value for key, value in carrier.items()}


class Pipeline:
    """A tracer whose spans leave through a bounded BatchSpanProcessor to `endpoint`; `finish`
    flushes within FLUSH_S and returns (spans ended, spans the collector did not take)."""

    def __init__(self, endpoint: str, *, exporter: SpanExporter | None = None) -> None:
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        _quiet()
        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter(endpoint=endpoint, timeout=EXPORT_TIMEOUT_S)
        self.endpoint = endpoint
        self.counting = _Counting(exporter)
        # No shutdown at interpreter exit: `finish` shuts it down within its bound, and the SDK's own
        # exit hook would wait again on an export still in its retries (a collector that is down).
        self.provider = TracerProvider(resource=Resource.create({"service.name": "metaharness"}), shutdown_on_exit=False)
        self.ended = 0
        pipeline = self

        class _Ends(SpanProcessor):  # counts every span handed to the queue
            def on_end(self, span: ReadableSpan) -> None:
                pipeline.ended += 1

        self.provider.add_span_processor(_Ends())
        self.provider.add_span_processor(BatchSpanProcessor(
            self.counting, max_queue_size=QUEUE, schedule_delay_millis=200,
            export_timeout_millis=EXPORT_TIMEOUT_S * 1000))
        self.tracer = self.provider.get_tracer("metaharness.live")

    def finish(self) -> tuple[int, int]:
        import threading

        done = threading.Thread(target=self.provider.shutdown, daemon=True, name="metaharness-otel-flush")
        done.start()
        done.join(FLUSH_FAILING_S if self.counting.failing else FLUSH_S)  # an export still in its retries
        # is left behind (a daemon thread), its spans counted as lost
        return self.ended, max(0, self.ended - self.counting.taken)


def dropped_message(ended: int, lost: int, endpoint: str, what: str = "the run") -> str:
    return (f"{lost} of the {ended} span(s) of {what} did not reach the OpenTelemetry collector at {endpoint} "
            f"(unreachable, an error answer, or the queue full); {what} went on without them")


class LiveTap:
    """The run's spans, live: fed by the run's event writer (protocol.stream.EventTap), its
    run span opened at once so the harness can be handed its context (`carrier`)."""

    def __init__(self, kind: str, run_id: str, endpoint: str, *, stderr: Any, content: bool = False,
                 environ: Any = os.environ, pipeline: Pipeline | None = None) -> None:
        import time

        self._now = time.time_ns
        self.pipeline = pipeline or Pipeline(endpoint)
        self.stderr = stderr
        self.mapper = SpanMapper(self.pipeline.tracer, run_id, where="the live run", content=content,
                                 parent=parent_context(TRACE_ENV.get() or environ))
        self.carrier = carrier_of(self.mapper.open(kind, self._now()))

    def _at(self, at: str | None) -> int:
        return (_ns(at) if at else None) or self._now()

    def event(self, event: Any, at: str | None, seq: int) -> None:
        try:
            self.mapper.feed(event_name(event), event, self._at(at), seq)
        except Exception:  # noqa: BLE001 (a span that cannot be made is not the run's failure)
            pass

    def closing(self, marker: Any) -> list[Any]:
        from metaharness.protocol.events import WarningEvent

        try:
            self.mapper.feed("stream.closed", marker, self._now(), marker.events + 1)
        except Exception:  # noqa: BLE001
            pass
        ended, lost = self.pipeline.finish()
        if not lost:
            return []
        message = dropped_message(ended, lost, self.pipeline.endpoint)
        self.stderr(f"metaharness: {message}")
        return [WarningEvent(code=WarningCode.OTEL_SPANS_DROPPED, message=message)]


class ParentSpan:
    """A span over runs (a workflow's, a batch's), live through a pipeline of its own, with child
    spans (a batch's cells) and the W3C env carrier of each, to hand to the runs started under it.
    `finish` ends it and flushes within FLUSH_S; spans lost are said in one stderr line."""

    def __init__(self, endpoint: str, name: str, attributes: dict[str, Any], *, what: str,
                 environ: Any = os.environ) -> None:
        self.what = what
        self.pipeline = Pipeline(endpoint)
        self.span = self.pipeline.tracer.start_span(name, kind=SpanKind.INTERNAL, attributes=_present(attributes),
                                                    context=parent_context(TRACE_ENV.get() or environ))
        self.carrier = carrier_of(self.span)

    def child(self, name: str, attributes: dict[str, Any]) -> Any:
        return self.pipeline.tracer.start_span(name, kind=SpanKind.INTERNAL, attributes=_present(attributes),
                                               context=trace.set_span_in_context(self.span))

    @staticmethod
    def end(span: Any, attributes: dict[str, Any], error: str | None = None) -> None:
        span.set_attributes(_present(attributes))
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error))
        span.end()

    def finish(self, attributes: dict[str, Any], stderr: Any, error: str | None = None) -> None:
        self.end(self.span, attributes, error)
        ended, lost = self.pipeline.finish()
        if lost:
            stderr(f"metaharness: {dropped_message(ended, lost, self.pipeline.endpoint, self.what)}")
