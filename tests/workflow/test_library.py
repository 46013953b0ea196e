"""The library face: `run_workflow` with per-step and per-event callbacks, an embedder
deciding calls in ask mode while the host drives the frames, several turns per step,
and the budgets the host keeps (cost through a stand-in session that reports costs)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import metaharness.api
from metaharness.protocol.events import ToolDecided, ToolRequested, TurnEnded, TurnStarted, Text, UsageReport
from metaharness.protocol.values import Allow, Deny, Usage
from metaharness.run.spec import RunSpec
from metaharness.workflow import WorkflowRefused, run_workflow

from workflow_support import Case, shell, write

TWO = '''start = "a"
[nodes.a]
prompt = "Write a.md."
operations = ["file.write", "shell"]
handoff = { kind = "artifact", path = "a.md" }
next = ["b"]
[nodes.b]
prompt = "Say done."
'''


def test_callbacks_and_ask_mode_decisions(tmp_path):
    case = Case(tmp_path, TWO, {"calls": [shell("touch nope.txt"), write("a.md", "a\n")]}, {"text": "a done"},
                {"text": "done"})
    steps, events, asked = [], [], []

    async def decide(event: ToolRequested, frame) -> Any:
        asked.append((event.operations, frame.step.index, frame.node.id))
        return Deny(reason="the embedder keeps the shell closed") if event.operations == ["shell"] else Allow()

    result = case.run(spec={"decisions": "ask"}, on_step=steps.append,
                      on_event=lambda envelope, event: events.append(event), decide=decide)
    assert result.outcome == "completed" and result.exit_code == 0
    assert [(s.index, s.node, s.attempt, s.outcome) for s in steps] == [(1, "a", 1, "passed"), (2, "b", 1, "passed")]
    assert steps[0].verdict.handoff["passed"] and steps[0].frame_digest == case.records("step.entered")[0]["frame_digest"]
    assert asked == [(["shell"], 1, "a"), (["file.write"], 1, "a")]
    decided = [e for e in events if isinstance(e, ToolDecided)]
    assert [(type(d.decision).__name__, d.decided_by) for d in decided] == [("Deny", "embedder"), ("Allow", "embedder")]
    assert not (case.work / "nope.txt").exists()
    case.assert_sound()


# --- a stand-in session that reports costs --------------------------------------------------


class CostlyRun:
    """Plays a harness through the RunHandle surface the host uses: each turn costs $0.6."""

    def __init__(self, spec: RunSpec, stray: bool = False) -> None:
        self.spec, self.queue, self.turn, self.stray = spec, asyncio.Queue(), 0, stray
        self.digest = spec.library_frame.digest
        self.exit_code: int | None = None
        self.stderr: list[str] = []
        self.sent: list[tuple[str, Any]] = []
        self._turn(spec.library_frame.digest)

    def _turn(self, digest: str, text: str = "worked") -> None:
        self.turn += 1
        for event in (TurnStarted(turn=self.turn, frame_digest=digest), UsageReport(usage=Usage(cost_usd=0.6)), Text(text=text),
                      TurnEnded(turn=self.turn)):
            self.queue.put_nowait((None, event))

    async def inject(self, text: str) -> None:
        self.sent.append(("inject", text))

    async def set_frame(self, frame: dict) -> None:
        self.sent.append(("frame.set", frame["step"]["index"]))
        if self.stray:  # a turn the harness begins on its own, still under the previous frame
            self._turn(self.digest, text="end")
        self.digest = frame["digest"]
        self._turn(frame["digest"])

    async def send_together(self, *commands) -> None:
        for command in commands:
            if type(command).__name__ == "MessageInject":
                await self.inject(command.text)
            else:
                await self.set_frame(command.frame)

    async def decide(self, *args) -> None:
        raise AssertionError("nothing to decide")

    def report_step_left(self, step, outcome) -> None:
        self.sent.append(("step.left", step.index))

    async def close_input(self) -> None:
        self.queue.put_nowait(None)

    async def halt(self, reason: str) -> None:
        self.queue.put_nowait(None)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc) -> None:
        self.exit_code = 0

    def __aiter__(self):
        return self._events()

    async def _events(self):
        while (item := await self.queue.get()) is not None:
            yield item


def test_cost_budget_stops_before_the_step_that_would_exceed_it(tmp_path, monkeypatch):
    runs: list[CostlyRun] = []

    async def start_run(spec):
        runs.append(CostlyRun(spec))
        return runs[-1]

    monkeypatch.setattr(metaharness.api, "start_run", start_run)
    case = Case(tmp_path, '''start = "w"
[nodes.w]
prompt = "work"
next = ["w2"]
[nodes.w2]
prompt = "more"
next = ["w3"]
[nodes.w3]
prompt = "even more"
''')
    result = case.run(max_cost_usd=1.0)
    assert (result.outcome, result.reason_name) == ("budget", "CostBudgetExceeded")
    assert result.exit_code == 1
    assert case.steps() == [(1, "w", 1, "passed"), (2, "w2", 1, "passed")]
    assert [r["cost_usd"] for r in case.records("step.ended")] == [0.6, 1.2]
    assert runs[0].sent == [("step.left", 1), ("inject", "more"), ("frame.set", 2), ("step.left", 2)]
    assert runs[0].spec.keep_open and runs[0].spec.library_frame.step.index == 1
    assert runs[0].spec.max_cost_usd == 1.0  # the session's meter keeps the budget live


def test_a_run_the_harness_refuses_is_refused_before_the_ledger(tmp_path):
    case = Case(tmp_path, TWO)
    with pytest.raises(WorkflowRefused) as caught:
        case.run(spec={"script": str(tmp_path / "missing.json")})
    assert caught.value.name == "ScenarioInvalid" and "missing.json" in caught.value.sentence
    assert not case.out.exists(), "a refused start wrote its out directory"
    # the same directory is then used by a start that is not refused
    assert case.run().outcome in ("completed", "failed")


def test_a_turn_begun_under_an_earlier_frame_is_not_judged_as_the_new_step(tmp_path, monkeypatch):
    async def start_run(spec):
        return CostlyRun(spec, stray=True)

    monkeypatch.setattr(metaharness.api, "start_run", start_run)
    case = Case(tmp_path, '''start = "w"
[nodes.w]
prompt = "work"
next = ["pick"]
[nodes.pick]
prompt = "pick end or w"
entities = ["end", "w"]
next = ["end", "w"]
''')
    result = case.run()
    # the stray turn said "end"; the step's own turn said "worked", which names no member
    assert (result.outcome, result.reason_name) == ("failed", "AttemptsExhausted")
    assert [r["turn"] for r in case.records("step.verdict")] == [1, 1]
    assert case.records("step.verdict")[1]["answer_tail"] == "worked"
