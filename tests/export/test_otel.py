"""`metaharness export otel`: a finished run as GenAI spans, sent over OTLP/HTTP to a receiver
in this process (127.0.0.1), decoded with OpenTelemetry's own protobuf types and checked
against the stream: names, parents, attributes and counts; an unreachable collector is one
sentence; the SDK is never imported on the other paths."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from .conftest import EXAMPLES, METAHARNESS, env, run_bugfix_workflow, run_oharness


class Receiver(http.server.ThreadingHTTPServer):
    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                message = ExportTraceServiceRequest()
                message.ParseFromString(body)
                server.requests.append(message)
                server.paths.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)

    def spans(self) -> list:
        return [span for r in self.requests for rs in r.resource_spans for ss in rs.scope_spans for span in ss.spans]


@pytest.fixture
def receiver():
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def attrs(span) -> dict:
    out = {}
    for kv in span.attributes:
        value = kv.value
        kind = value.WhichOneof("value")
        out[kv.key] = list(v.string_value for v in value.array_value.values) if kind == "array_value" else getattr(value, kind)
    return out


def send(source, url, *extra, cwd=None):
    return subprocess.run([*METAHARNESS, "export", "otel", str(source), "--endpoint", url, *extra],
                          capture_output=True, text=True, timeout=60, cwd=cwd)


def test_a_frame_decided_run_becomes_the_span_tree(tmp_path, receiver):
    events = run_oharness(tmp_path, EXAMPLES / "same-task.scenario.json", "--frame", str(EXAMPLES / "same-task.frame.json"))
    url = f"http://127.0.0.1:{receiver.server_port}/v1/traces"
    done = send(events, url)
    assert done.returncode == 0, done.stderr
    assert receiver.paths == ["/v1/traces"]
    spans = receiver.spans()
    by_id = {s.span_id: s for s in spans}
    (root,) = [s for s in spans if not s.parent_span_id]
    assert root.name == "invoke_agent oharness"
    a = attrs(root)
    assert a["gen_ai.agent.name"] == "oharness" and a["gen_ai.provider.name"] == "scripted"
    assert a["gen_ai.request.model"] == "scripted:default" and a["metaharness.close_reason"] == "completed"
    assert (a["metaharness.census.allowed"], a["metaharness.census.denied"]) == (2, 1)
    lines = [json.loads(line) for line in events.read_bytes().splitlines()]
    tools = [s for s in spans if s.name.startswith("execute_tool ")]
    requested = [e for e in lines if e["event"] == "tool.requested"]
    decided = {e["call_id"]: e for e in lines if e["event"] == "tool.decided"}
    assert sorted(attrs(s)["gen_ai.tool.call.id"] for s in tools) == sorted(e["call_id"] for e in requested)
    for span in tools:
        a = attrs(span)
        d = decided[a["gen_ai.tool.call.id"]]
        assert span.name == f"execute_tool {a['gen_ai.tool.name']}"
        assert (a["metaharness.decision"], a["metaharness.decided_by"]) == (d["decision"]["decision"], d["decided_by"])
        assert a["metaharness.frame_digest"] == lines[1]["frame_digest"]
        assert "gen_ai.tool.call.arguments" not in a  # only when asked for
        parent = by_id[span.parent_span_id]
        assert parent.name == "turn 1"
        denied = d["decision"]["decision"] == "deny"
        assert [e.name for e in span.events] == (["guardrail"] if denied else [])
        if denied:
            assert a["metaharness.reason"] == d["decision"]["reason"]
    turns = [s for s in spans if s.name.startswith("turn ")]
    assert len(turns) == sum(e["event"] == "turn.started" for e in lines)
    step = by_id[turns[0].parent_span_id]
    assert step.name == "workflow.step write-notes" and step.parent_span_id == root.span_id
    assert len({s.trace_id for s in spans}) == 1


def test_content_is_sent_only_when_asked_and_a_workflow_nests_its_steps(tmp_path, receiver):
    out = run_bugfix_workflow(tmp_path)
    done = send(out, f"http://127.0.0.1:{receiver.server_port}/v1/traces", "--content")
    assert done.returncode == 0, done.stderr
    spans = receiver.spans()
    by_id = {s.span_id: s for s in spans}
    steps = [s for s in spans if s.name.startswith("workflow.step ")]
    ordered = sorted(steps, key=lambda s: attrs(s)["metaharness.step.index"])
    assert [attrs(s)["metaharness.step.state"] for s in ordered] == ["reproduce", "fix", "review", "fix", "review"]
    assert all(attrs(s)["metaharness.step.outcome"] == "completed" and len(attrs(s)["metaharness.frame_digest"]) == 64
               for s in steps)
    for span in (s for s in spans if s.name.startswith("execute_tool ")):
        assert "gen_ai.tool.call.arguments" in attrs(span) and "gen_ai.tool.call.result" in attrs(span)
        turn = by_id[span.parent_span_id]
        assert by_id[turn.parent_span_id].name.startswith("workflow.step ")


def test_an_unreachable_collector_is_one_sentence(tmp_path):
    events = run_oharness(tmp_path, EXAMPLES / "same-task.scenario.json")
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = send(events, f"http://127.0.0.1:{port}/v1/traces", "--timeout", "1")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "did not take" in done.stderr, done.stderr


def test_the_sdk_is_imported_only_by_export_otel():
    program = ("import sys, metaharness.export.atif, metaharness.export.source, metaharness.cli.export, "
               "metaharness.batch.cell; print(any(m.startswith('opentelemetry') for m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "False", done.stderr
