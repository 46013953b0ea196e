"""`--otel`: a run, a workflow and a batch send their spans live, as they go, to a receiver in
this process (127.0.0.1), decoded with OpenTelemetry's own protobuf types and checked against the
stream; the live tree is the tree `export otel` makes of the same stream; the harness is handed
the run span's TRACEPARENT and a TRACEPARENT in the environment is the run span's parent; an
unreachable collector costs one warning, not the run; off, nothing of OpenTelemetry is imported;
without the extra, `--otel` is refused by name."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from .conftest import EXAMPLES, METAHARNESS, env, run_bugfix_workflow, run_oharness
from .test_otel import Receiver, attrs, receiver, send  # noqa: F401 (receiver is a fixture)

SHELL_SCRIPT = {"format": "metaharness.scenario/1", "turns": [
    {"text": "tp", "calls": [{"op": "shell", "input": {"command": 'printf %s "$TRACEPARENT" > tp.txt'}}]},
    {"text": "done"}]}


def clean_env(root: Path, **extra: str) -> dict[str, str]:
    """The run's environment without any OTEL_*/TRACEPARENT of whoever runs the tests."""
    base = {k: v for k, v in env(root).items() if not k.startswith("OTEL_") and k not in ("TRACEPARENT", "TRACESTATE")}
    return {**base, **extra}


def url_of(server: Receiver) -> str:
    return f"http://127.0.0.1:{server.server_port}/v1/traces"


def lines_of(events: Path) -> list[dict]:
    return [json.loads(line) for line in events.read_bytes().splitlines()]


def tree(spans: list, root) -> tuple:
    """A span and its descendants, without ids and times: name, attributes, status, events, children."""
    children = sorted(tree(spans, s) for s in spans if s.parent_span_id == root.span_id)
    values = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in attrs(root).items()))
    return (root.name, values, root.status.code, tuple(e.name for e in root.events), tuple(children))


def roots(spans: list, name_prefix: str) -> list:
    return [s for s in spans if s.name.startswith(name_prefix)]


def test_a_live_run_is_the_tree_export_otel_makes_of_its_stream(tmp_path, receiver):
    events = run_oharness(tmp_path, EXAMPLES / "same-task.scenario.json", "--frame",
                          str(EXAMPLES / "same-task.frame.json"), "--otel", url_of(receiver))
    live = receiver.spans()
    lines = lines_of(events)
    assert not [e for e in lines if e["event"] == "warning" and e["code"] == "OTEL_SPANS_DROPPED"]
    (root,) = [s for s in live if not s.parent_span_id]
    assert root.name == "invoke_agent oharness" and attrs(root)["metaharness.close_reason"] == "completed"
    tools = roots(live, "execute_tool ")
    assert len(tools) == sum(e["event"] == "tool.requested" for e in lines) == 3
    decided = {e["call_id"]: e for e in lines if e["event"] == "tool.decided"}
    for span in tools:
        a = attrs(span)
        assert a["metaharness.decision"] == decided[a["gen_ai.tool.call.id"]]["decision"]["decision"]
    assert sorted(attrs(s)["metaharness.decision"] for s in tools) == ["allow", "allow", "deny"]
    assert [e.name for s in tools for e in s.events] == ["guardrail"]
    assert len({s.trace_id for s in live}) == 1
    # the same stream, after the fact
    later = Receiver()
    import threading

    threading.Thread(target=later.serve_forever, daemon=True).start()
    try:
        done = send(events, url_of(later))
        assert done.returncode == 0, done.stderr
        after = later.spans()
    finally:
        later.shutdown()
        later.server_close()
    assert len(after) == len(live)
    (again,) = [s for s in after if not s.parent_span_id]
    assert tree(live, root) == tree(after, again)


def test_the_harness_is_handed_the_run_span_and_a_traceparent_given_is_its_parent(tmp_path, receiver):
    script = tmp_path / "tp.scenario.json"
    script.write_text(json.dumps(SHELL_SCRIPT))
    work = tmp_path / "work"
    work.mkdir()
    given_trace, given_span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    done = subprocess.run([*METAHARNESS, "run", "oharness", "--script", str(script), "-p", "go", "--cwd", str(work),
                           "--decisions", "observe", "--otel", url_of(receiver)], capture_output=True, timeout=120,
                          env=clean_env(tmp_path, TRACEPARENT=f"00-{given_trace}-{given_span}-01"), stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr.decode()
    spans = receiver.spans()
    (root,) = roots(spans, "invoke_agent ")
    assert root.trace_id.hex() == given_trace and root.parent_span_id.hex() == given_span
    assert {s.trace_id.hex() for s in spans} == {given_trace}
    handed = (work / "tp.txt").read_text().split("-")
    assert handed[:3] == ["00", given_trace, root.span_id.hex()] and len(handed) == 4


def test_a_live_workflow_nests_its_session_under_a_workflow_span(tmp_path, receiver, monkeypatch):
    for key in [k for k in os.environ if k.startswith("OTEL_") or k == "TRACEPARENT"]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url_of(receiver))  # on by the standard variable
    out = run_bugfix_workflow(tmp_path)
    spans = receiver.spans()
    (top,) = [s for s in spans if not s.parent_span_id]
    assert top.name == "workflow bugfix" and attrs(top)["metaharness.workflow.outcome"] == "completed"
    (run,) = [s for s in spans if s.parent_span_id == top.span_id]
    assert run.name == "invoke_agent oharness"
    steps = [s for s in spans if s.parent_span_id == run.span_id]
    assert sorted(attrs(s)["metaharness.step.state"] for s in steps) == ["fix", "fix", "reproduce", "review", "review"]
    lines = lines_of(out / "events.jsonl")
    assert len(roots(spans, "execute_tool ")) == sum(e["event"] == "tool.requested" for e in lines)
    # below the workflow span, the tree `export otel` makes of the run directory
    receiver.requests.clear()
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    done = send(out, url_of(receiver))
    assert done.returncode == 0, done.stderr
    after = receiver.spans()
    (again,) = [s for s in after if not s.parent_span_id]
    assert tree(spans, run) == tree(after, again)


def test_a_live_batch_puts_each_cell_run_under_its_cell_under_the_batch(tmp_path, receiver):
    for name in ("same-task.scenario.json", "same-task.frame.json"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    plan = tmp_path / "plan.toml"
    plan.write_text('format = "metaharness.batch/1"\nrepeats = 2\n\n[[tasks]]\nid = "same-task"\n'
                    'prompt = "do the task"\nscript = "same-task.scenario.json"\nframe = "same-task.frame.json"\n\n'
                    '[[harnesses]]\nkind = "oharness"\n')
    out = tmp_path / "out"
    done = subprocess.run([*METAHARNESS, "batch", "run", str(plan), "--out", str(out), "--jobs", "2",
                           "--otel", url_of(receiver)], capture_output=True, text=True, timeout=300, env=clean_env(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    spans = receiver.spans()
    by_id = {s.span_id: s for s in spans}
    (top,) = [s for s in spans if not s.parent_span_id]
    assert top.name == "batch out" and attrs(top)["metaharness.batch.done"] == 2
    cells = [s for s in spans if s.parent_span_id == top.span_id]
    assert sorted(s.name for s in cells) == ["cell same-task oharness #1", "cell same-task oharness #2"]
    assert all(attrs(s)["metaharness.cell.status"] == "ran" for s in cells)
    runs = roots(spans, "invoke_agent ")
    assert sorted(by_id[s.parent_span_id].name for s in runs) == sorted(s.name for s in cells)
    assert len({s.trace_id for s in spans}) == 1
    streams = [lines_of(p) for p in out.rglob("events.jsonl")]
    assert len(streams) == 2
    assert sorted(attrs(s)["metaharness.run.id"] for s in runs) == sorted(lines[0]["run"] for lines in streams)
    assert len(roots(spans, "execute_tool ")) == sum(e["event"] == "tool.requested" for lines in streams for e in lines)


def test_an_unreachable_collector_is_one_warning_and_the_run_goes_on(tmp_path):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run([*METAHARNESS, "run", "oharness", "--script", str(EXAMPLES / "same-task.scenario.json"),
                           "-p", "go", "--cwd", str(work), "--otel", f"http://127.0.0.1:{port}/v1/traces"],
                          capture_output=True, timeout=60, env=clean_env(tmp_path), stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr.decode()
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    dropped = [e for e in lines if e["event"] == "warning" and e["code"] == "OTEL_SPANS_DROPPED"]
    assert len(dropped) == 1 and lines[-2] == dropped[0] and lines[-1]["event"] == "stream.closed"
    spans = 1 + sum(e["event"] in ("turn.started", "tool.requested") for e in lines)  # run, turns, calls
    assert dropped[0]["message"].startswith(f"{spans} of the {spans} span(s) of the run did not reach")
    said = [line for line in done.stderr.decode().splitlines() if "OpenTelemetry collector" in line]
    assert said == [f"metaharness: {dropped[0]['message']}"]


def test_off_a_run_imports_nothing_of_opentelemetry(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    program = f"""
import asyncio, sys
from metaharness.api import start_run
from metaharness.run.spec import RunSpec
async def main():
    run = await start_run(RunSpec(kind="oharness", script={str(EXAMPLES / "same-task.scenario.json")!r},
                                  prompt="go", cwd={str(work)!r}, decisions="observe"))
    async with run:
        names = [type(event).__name__ async for _envelope, event in run]
    return names
names = asyncio.run(main())
assert names[-1] == "StreamClosed", names
print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120,
                          env=clean_env(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    # and the standard switch keeps it off even with an endpoint set
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120,
                          env=clean_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9",
                                        OTEL_SDK_DISABLED="true"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


REFUSED = ("metaharness: OtelUnavailable: --otel needs the otel extra (opentelemetry-sdk and its OTLP/HTTP "
           "exporter), which is not installed: pip install 'metaharness[otel]'")


def shadowed(tmp_path: Path) -> dict[str, str]:
    """An environment whose `opentelemetry` has neither the SDK nor the exporter."""
    shadow = tmp_path / "shadow" / "opentelemetry"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")
    return clean_env(tmp_path, PYTHONPATH=str(shadow.parent))


def test_without_the_extra_otel_is_refused_by_name(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run([*METAHARNESS, "run", "oharness", "--script", str(EXAMPLES / "same-task.scenario.json"),
                           "-p", "go", "--cwd", str(work), "--otel"], capture_output=True, text=True, timeout=60,
                          env=shadowed(tmp_path), stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert [line for line in done.stderr.splitlines() if "OtelUnavailable" in line] == [REFUSED]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [e["event"] for e in lines] == ["stream.closed"] and not list(work.iterdir())


def test_without_the_extra_a_workflow_and_a_batch_are_refused_before_they_write(tmp_path):
    environ = shadowed(tmp_path)
    work = tmp_path / "work"
    shutil.copytree(EXAMPLES / "bugfix" / "workspace", work)
    plan = tmp_path / "plan.toml"
    shutil.copy(EXAMPLES / "same-task.scenario.json", tmp_path / "s.json")
    plan.write_text('format = "metaharness.batch/1"\n\n[[tasks]]\nid = "t"\nprompt = "go"\nscript = "s.json"\n\n'
                    '[[harnesses]]\nkind = "oharness"\n')
    commands = {
        tmp_path / "wf": ["workflow", "run", str(EXAMPLES / "bugfix" / "bugfix.workflow.toml"), "--harness", "oharness",
                          "--script", str(EXAMPLES / "bugfix" / "bugfix.scenario.json"), "--cwd", str(work),
                          "--out", str(tmp_path / "wf"), "-p", "go", "--otel"],
        tmp_path / "out": ["batch", "run", str(plan), "--out", str(tmp_path / "out"), "--otel"],
    }
    for out, argv in commands.items():
        done = subprocess.run([*METAHARNESS, *argv], capture_output=True, text=True, timeout=60, env=environ,
                              stdin=subprocess.DEVNULL)
        assert done.returncode == 2, done.stdout + done.stderr
        assert [line for line in done.stderr.splitlines() if "OtelUnavailable" in line] == [REFUSED], done.stderr
        assert not out.exists()


def test_when_live_export_is_on_and_where_it_goes():
    from metaharness.export.otlp import live_target

    traces, base = "http://collector:4318/v1/traces", "http://collector:4318/"
    table = [  # (--otel, environment) → (URL or None, asked for by name)
        (None, {}, (None, False)),
        ("http://here/v1/traces", {}, ("http://here/v1/traces", True)),
        ("default", {}, ("http://localhost:4318/v1/traces", True)),
        ("default", {"OTEL_EXPORTER_OTLP_ENDPOINT": base}, (traces, True)),
        (None, {"OTEL_EXPORTER_OTLP_ENDPOINT": base}, (traces, False)),
        (None, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t/x", "OTEL_EXPORTER_OTLP_ENDPOINT": base},
         ("http://t/x", False)),
        (None, {"OTEL_EXPORTER_OTLP_ENDPOINT": base, "OTEL_SDK_DISABLED": "true"}, (None, False)),
        (None, {"OTEL_EXPORTER_OTLP_ENDPOINT": base, "OTEL_TRACES_EXPORTER": "none"}, (None, False)),
        ("http://here/v1/traces", {"OTEL_SDK_DISABLED": "true"}, ("http://here/v1/traces", True)),  # by name wins
        (None, {"OTEL_EXPORTER_OTLP_ENDPOINT": base, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, (None, False)),
        (None, {"OTEL_EXPORTER_OTLP_ENDPOINT": base, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, (traces, False)),
        (None, {"OTEL_EXPORTER_OTLP_ENDPOINT": base, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, (traces, False)),
    ]
    for option, environ, expected in table:
        assert live_target(option, environ) == expected, (option, environ)


def test_a_call_span_leaves_while_the_run_still_waits(tmp_path, receiver):
    """Live, not at the end: the first call's span reaches the collector while the run waits for
    the second call's decision (which is only given once it has)."""
    import time

    work = tmp_path / "work"
    work.mkdir()
    child = subprocess.Popen([*METAHARNESS, "run", "oharness", "--script", str(EXAMPLES / "same-task.scenario.json"),
                              "-p", "go", "--cwd", str(work), "--decisions", "ask", "--otel", url_of(receiver)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_env(tmp_path))
    assert child.stdin is not None and child.stdout is not None
    asked: list[str] = []
    seen_before_second: set[str] = set()
    for raw in child.stdout:
        event = json.loads(raw)
        if event["event"] == "tool.requested" and event["decision_required"]:
            if asked:  # the first call has run: its span must be at the collector before we go on
                give_up = time.monotonic() + 30
                while time.monotonic() < give_up and asked[0] not in seen_before_second:
                    seen_before_second = {attrs(s).get("gen_ai.tool.call.id") for s in receiver.spans()}
                    time.sleep(0.05)
            asked.append(event["call_id"])
            child.stdin.write(json.dumps({"format": "metaharness.command/1", "id": f"c{len(asked)}",
                                          "command": "tool.decide", "call_id": event["call_id"],
                                          "decision": {"decision": "allow"}}).encode() + b"\n")
            child.stdin.flush()
    child.stdin.close()
    assert child.wait(timeout=60) == 0, child.stderr.read().decode() if child.stderr else ""
    assert len(asked) == 3 and asked[0] in seen_before_second
    assert asked[2] not in seen_before_second
