"""What the stream says about a stop (SIGTERM/SIGINT reach `Run.request_stop`) on the ACP
adapters, against the scripted agent: a stop mid-turn is no clean end of the session — its
session.ended says so and the stream closes `error`, as on every other harness — while a stop at
a boundary after a turn is one (`completed`). (The real agents: test_e2e_acp_phase_signals.py.)"""

from __future__ import annotations

import asyncio
import json

import pytest

from metaharness.adapters import adapter_class
from metaharness.run.loop import Run
from metaharness.run.spec import RunSpec

from test_acp_seam import KINDS, vendor  # noqa: F401  (vendor: a fixture)

pytestmark = pytest.mark.timeout(60)


def stopped(kind: str, tmp_path, vendor, at: str) -> list[dict]:
    """A `--keep-open` ask run stopped when the call asks (`mid`) or once its turn ended (`between`)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    spec = RunSpec(kind=kind, prompt="SHELL", credentials="none", model_endpoint="http://127.0.0.1:9", cwd=str(ws),
                   vendor_dir=str(vendor), decisions="ask", decision_timeout_ms=30_000, keep_open=True)
    events: list[dict] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        run: Run

        def write(line: bytes) -> None:
            event = json.loads(line)
            events.append(event)
            if event["event"] == "tool.requested" and event["decision_required"]:
                if at == "mid":
                    loop.call_soon(lambda: asyncio.ensure_future(run.request_stop()))
                else:
                    deny = {"format": "metaharness.command/1", "id": "d", "command": "tool.decide",
                            "call_id": event["call_id"], "decision": {"decision": "deny", "reason": "no"}}
                    loop.call_soon(run.feed_line, json.dumps(deny).encode())
            if event["event"] == "turn.ended" and at == "between":
                loop.call_later(0.1, lambda: asyncio.ensure_future(run.request_stop()))

        run = Run(spec, write, adapter=adapter_class(kind)(spec))
        await asyncio.wait_for(run.execute(), 30)

    asyncio.run(main())
    assert events[-1]["event"] == "stream.closed"
    assert not (ws / "ran.txt").exists()
    return events


@pytest.mark.parametrize("kind", KINDS)
def test_a_stop_mid_turn_closes_error(kind, tmp_path, vendor):
    events = stopped(kind, tmp_path, vendor, "mid")
    ended = [e for e in events if e["event"] == "session.ended"]
    assert ended and ended[0]["is_error"] is True and ended[0]["terminal_reason"], ended
    assert events[-1]["reason"] == "error"


@pytest.mark.parametrize("kind", KINDS)
def test_a_stop_at_a_boundary_closes_completed(kind, tmp_path, vendor):
    events = stopped(kind, tmp_path, vendor, "between")
    assert [e for e in events if e["event"] == "session.ended"][0]["is_error"] is False
    assert events[-1]["reason"] == "completed"
