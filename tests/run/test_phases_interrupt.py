"""`interrupt` while a call waits for its decision stops the oharness turn before any
further model request (issue 19) — counted at the model server: oharness talks to the
local fake model server (`LoopbackServer`, 127.0.0.1) through its Chat Completions provider, and
the server logs every request it gets. (The scripted model of tests/run/test_phases.py
can only show that the next answer was not used; this shows it was never asked for.)
The same check on the vendor harnesses: tests/claude/test_e2e_seam_holds.py,
tests/codex/test_e2e_seam_holds.py, tests/acp/test_e2e_acp_phases.py."""

from __future__ import annotations

import asyncio
import json

from metaharness.loopback.server import LoopbackServer
from metaharness.protocol.scenario import parse_scenario
from metaharness.run.loop import Run
from metaharness.run.spec import RunSpec

SCENARIO = {"format": "metaharness.scenario/1", "turns": [
    {"text": "running it", "calls": [{"op": "shell", "input": {"command": "echo hi > pwned.txt"}}]},
    {"text": "SECOND-REQUEST"},
]}


async def _interrupted_run(tmp_path) -> tuple[list[dict], int, int]:
    server = LoopbackServer(parse_scenario(json.dumps(SCENARIO)), workdir=str(tmp_path), stderr=None)
    url = await server.start()
    try:
        spec = RunSpec(kind="oharness", model="chat:fake-model", model_endpoint=url, decisions="ask",
                       decision_timeout_ms=60_000, cwd=str(tmp_path), prompt="go")
        events: list[dict] = []
        asked: list[int] = []
        holder: dict[str, Run] = {}

        def write(raw: bytes) -> None:
            event = json.loads(raw)
            events.append(event)
            if event["event"] == "tool.requested" and event["decision_required"]:
                asked.append(len(server.main_requests()))
                holder["run"].feed_line(json.dumps({"format": "metaharness.command/1", "id": "i",
                                                    "command": "interrupt", "reason": "stop"}).encode())

        run = Run(spec, write, run_id="interrupt-run")
        holder["run"] = run
        run.stdin_ended()
        await asyncio.wait_for(run.execute(), 60)
        await asyncio.sleep(0.5)  # a request sent as the run ended would still be logged
        assert asked, [json.dumps(e)[:300] for e in events[1:]]
        return events, asked[0], len(server.main_requests())
    finally:
        await server.stop()


async def test_interrupt_on_a_pending_call_makes_no_further_model_request(tmp_path):
    for attempt in range(3):  # the race this guards against was lost 20 of 20 times
        work = tmp_path / str(attempt)
        work.mkdir()
        events, before, after = await _interrupted_run(work)
        assert events[-1]["event"] == "stream.closed"
        assert before == 1, before  # the call came from the first request
        assert after == before, f"oharness asked the model again after the interrupt ({after} requests)"
        ended = [e for e in events if e["event"] == "turn.ended"]
        assert ended and ended[0]["stop_reason"] == "interrupted"
        assert not (work / "pwned.txt").exists()
        names = [e["event"] for e in events]
        result = next(i for i, e in enumerate(events) if e["event"] == "command.result" and e["id"] == "i")
        assert result < names.index("turn.ended")
