"""People see the steps: the terminal view and the HTML page show every step boundary
with its verdict (a step without tool calls too), and the demo is a workflow run."""

from __future__ import annotations

import html
import json
import subprocess
import sys

from rich.console import Console

from metaharness.view import EventRenderer, decode_stream, render_page

from workflow_support import Case, write

FAILING_THEN_OK = '''start = "w"
[nodes.w]
prompt = "Write out.md."
operations = ["file.write"]
handoff = { kind = "artifact", path = "out.md" }
max_attempts = 2
next = ["say"]
[nodes.say]
prompt = "Say done."
'''


def _case(tmp_path) -> Case:
    case = Case(tmp_path, FAILING_THEN_OK, {"text": "skipped it"}, {"calls": [write("out.md", "x")]},
                {"text": "written"}, {"text": "done"})
    assert case.run().outcome == "completed"
    return case


def test_html_page_shows_each_step_with_its_verdict(tmp_path):
    case = _case(tmp_path)
    page = html.unescape(render_page([("events.jsonl", decode_stream((case.out / "events.jsonl").read_bytes()))])
                         .decode())
    first = page.index("t · w #1 — failed: handoff: the artifact out.md does not exist in the workspace")
    second = page.index("t · w #2 (attempt 2) — completed")
    third = page.index("t · say #3 — completed")  # a step with no tool call still shows its boundary
    assert first < second < third


def test_terminal_view_shows_step_boundaries_and_verdicts(tmp_path):
    case = _case(tmp_path)
    console = Console(width=200, record=True, highlight=False)
    renderer = EventRenderer(console)
    for line in (case.out / "events.jsonl").read_bytes().splitlines(keepends=True):
        renderer.feed(line)
    text = console.export_text()
    assert "step ▸    t · w #1" in text
    assert "step ◂    t · w #1  failed: handoff: the artifact out.md does not exist in the workspace" in text
    assert "step ◂    t · w #2 (attempt 2)  completed" in text


def test_demo_is_the_bundled_workflow_run_through_the_host(tmp_path):
    work, out = tmp_path / "ws", tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "metaharness", "demo", "--json", "--workspace", str(work),
                           "--out", str(out)], capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (out / "events.jsonl").read_bytes() == proc.stdout
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    decided = [e for e in events if e["event"] == "tool.decided"]
    # survey: the eager write is refused with the frame's reason, the reads are allowed
    assert decided[0]["decision"]["decision"] == "deny"
    assert decided[0]["decision"]["reason"].startswith('this step admits ["dir.list", "file.read", "search"]')
    assert [d["decision"]["decision"] for d in decided[1:]] == ["allow", "allow", "allow"]
    assert [e["step"]["state"] for e in events if e["event"] == "step.entered"] == ["survey", "write-up"]
    assert [e["outcome"]["outcome"] for e in events if e["event"] == "step.left"] == ["completed", "completed"]
    assert (work / "summary.md").read_text().startswith("# Summary")
    ledger = [json.loads(line) for line in (out / "workflow.jsonl").read_text().splitlines()]
    verdicts = [r for r in ledger if r["record"] == "step.verdict"]
    assert verdicts[1]["handoff"]["kind"] == "artifact" and verdicts[1]["handoff"]["passed"]
    write_up = json.loads((out / "frames" / "step-0002-write-up-attempt-1.frame.json").read_text())
    assert {"text": "notes.txt has been read", "source": "step survey"} in write_up["prior"]
    check = subprocess.run([sys.executable, "-m", "metaharness", "check", str(out / "events.jsonl")],
                           capture_output=True, timeout=30)
    assert check.returncode == 0


def test_demo_live_view(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "metaharness", "demo", "--workspace", str(tmp_path / "ws"),
                           "--out", str(tmp_path / "run")], capture_output=True, text=True, timeout=120,
                          env={"COLUMNS": "120", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "deny" in out and "by frame" in out
    assert "census" in out and "3 allowed" in out and "1 denied" in out
    assert "survey #1  completed" in out and "write-up #2  completed" in out
    assert "workflow demo/summarise (1) on oharness — completed" in out
