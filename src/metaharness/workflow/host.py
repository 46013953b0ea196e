"""The workflow host: one harness session driven step by step through the library API.

What belongs here: `run_workflow()` and `resume_workflow()` — mint and seal each
step's frame, set it at the step boundary with the node's prompt as the turn's
text, judge the step when its turn ends, retry or move on, keep the budgets, and
write the ledger as it goes. The host is an embedder: it uses `metaharness.api`
(`start_run`, `RunHandle`) and `RunSpec`, nothing else of `run/`.

Rules kept:
* One session for the whole workflow (`keep_open`): a step boundary is a
  `message.inject` (the prompt) and a `frame.set` (the new frame) sent together
  (`RunHandle.send_together`), so they open the same turn.
* Every record is in the ledger before the next thing happens: `step.entered`
  before the frame is sent, the verdict and `step.ended` before the next frame is
  minted, `workflow.ended` before the session is let go.
* The step rules (index, attempt, where a verdict leads) are `mint.Walk`'s; the host
  only feeds it verdicts. A step is judged at the end of each of its turns; with
  `max_turns` N > 1 a failing step gets up to N turns (the failure sent as the next
  turn's text, the frame unchanged) before its attempt counts as failed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import inspect
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import msgspec

from metaharness.protocol import frame as frames
from metaharness.protocol.commands import FrameSet, MessageInject
from metaharness.protocol.events import (
    SessionEnded, Text, ToolRequested, ToolResult, TurnEnded, TurnStarted, UsageReport,
)
from metaharness.protocol.refusals import RefusalName
from metaharness.protocol.spec import KINDS, RunSpec
from metaharness.protocol.values import Completed, Failed, StepRef
from metaharness.run.spec import cost_unseen

from . import ledger as ledgers
from .admit import WorkflowRefused, refusal
from .document import END, LoadedWorkflow, WorkflowError, load
from .mint import Position, Walk
from .verdict import Verdict, judge

# Exit codes of `metaharness workflow run|resume` (stable; batch runners rely on them).
EXIT_CODES = {"completed": 0, "failed": 1, "budget": 1, "refused": 2, "stopped": 3}


@dataclass
class StepResult:
    index: int
    node: str
    attempt: int
    frame_digest: str
    outcome: str  # passed | failed
    reason: str | None
    verdict: Verdict | None
    then: Position | None
    cost_usd: float | None
    duration_ms: int


@dataclass
class WorkflowResult:
    outcome: str  # completed | failed | budget | refused | stopped
    reason_name: str | None
    reason: str | None
    out_dir: str | None
    steps: list[StepResult] = field(default_factory=list)
    cost_usd: float | None = None
    run_exit_code: int | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.outcome]


Callback = Callable[..., Any]


async def _call(callback: Callback | None, *args: Any) -> Any:
    if callback is None:
        return None
    value = callback(*args)
    return await value if inspect.isawaitable(value) else value


@dataclass
class _Budgets:
    max_steps: int | None = None
    max_turns: int | None = None  # turns one step may take before its attempt fails (default 1)
    max_cost_usd: float | None = None


# RunSpec fields the host sets itself for each session; every other field is a run option the user
# chose, stored in `workflow.started` (`run`) and taken again by `resume` unless overridden.
_HOST_OWNED = {"kind", "prompt", "frame", "keep_open", "events", "max_turns", "library_frame", "run_id"}
_PATHS = ("script", "vendor_dir", "retain_dir", "cwd", "record", "replay", "prices")
# Options of one invocation, not of the run: a resume sends its spans where its own --otel says.
_PER_INVOCATION = {"otel"}


def stored_options(spec: RunSpec) -> dict[str, Any]:
    """The run options of `spec` as the ledger keeps them (paths absolute, so a resume from
    another directory means the same files)."""
    out: dict[str, Any] = {}
    for option in dataclasses.fields(RunSpec):
        if option.name in _HOST_OWNED or option.name in _PER_INVOCATION:
            continue
        value = getattr(spec, option.name)
        if option.name in _PATHS and value is not None:
            value = os.path.abspath(value)
        elif option.name == "policy_files":
            value = [os.path.abspath(v) for v in value]
        out[option.name] = value
    return out


def spec_from_stored(kind: str, stored: dict[str, Any], overrides: dict[str, Any]) -> RunSpec:
    known = {f.name for f in dataclasses.fields(RunSpec)} - _HOST_OWNED
    given = {k: v for k, v in stored.items() if k in known}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise WorkflowRefused(RefusalName.OptionUnknown, f"{', '.join(unknown)} is not a run option a workflow session takes")
    return RunSpec(kind=kind, **{**given, **overrides})


def _digest(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return None


def script_cursor(turns: list[dict[str, Any]], cursor: int) -> int:
    """Where a scenario stands after one more harness turn from `cursor`: the scripted model
    answers one main request per scenario turn, and a turn of the harness ends at the first
    answer without calls (past the last scenario turn every answer is call-free)."""
    while cursor < len(turns) and turns[cursor].get("calls"):
        cursor += 1
    return cursor + 1


def _script_turns(path: str) -> list[dict[str, Any]]:
    from metaharness.protocol.scenario import ScenarioError, load_scenario

    try:
        load_scenario(path)
        with open(path, "rb") as handle:
            return json.loads(handle.read())["turns"]
    except ScenarioError as exc:
        raise WorkflowRefused(RefusalName.ScriptInvalid, str(exc)) from None


class _Host:
    def __init__(self, loaded: LoadedWorkflow, kind: str, out_dir: str, base: RunSpec, budgets: _Budgets,
                 *, on_step: Callback | None, on_event: Callback | None,
                 decide: Callable[..., Awaitable[Any] | Any] | None, stop: asyncio.Event | None,
                 on_line: Callable[[bytes], None] | None, script_start: int = 0) -> None:
        self.loaded, self.wf, self.kind, self.out = loaded, loaded.workflow, kind, out_dir
        self.base, self.budgets = base, budgets
        self.on_step, self.on_event, self.decide, self.on_line = on_step, on_event, decide, on_line
        self.stop = stop  # set: halt the session, leave the run resumable
        self.workspace = os.path.abspath(base.cwd or os.getcwd())
        self.steps: list[StepResult] = []
        self.cost: float | None = None
        self.session_cost_base: float | None = None
        # A scripted session: where in the scenario the session began, and where it stands now.
        self.script_turns: list[dict[str, Any]] | None = None  # read by precheck()
        self.script_start = self.script_cursor = script_start
        self.session_script = base.script

    def session_spec(self, frame: frames.Frame, events: str) -> RunSpec:
        return dataclasses.replace(
            self.base, kind=self.kind, prompt=self.wf.nodes[frame.node.id].prompt, frame=None,
            library_frame=frame, keep_open=True, cwd=self.workspace, events=events, script=self.session_script,
            max_turns=None, required_commands=sorted({*self.base.required_commands, "frame.set", "message.inject"}),
            # The run's meter keeps what is left of the workflow's budget live, request by request.
            max_cost_usd=(None if self.budgets.max_cost_usd is None
                          else max(1e-9, self.budgets.max_cost_usd - (self.session_cost_base or 0.0))))

    def precheck(self, frame: frames.Frame) -> None:
        """Every refusal the session's start would meet, raised before the ledger is written."""
        from metaharness.api import start_refusal

        sentence = start_refusal(self.session_spec(frame, os.devnull))
        if sentence is not None:
            name, colon, rest = sentence.partition(": ")
            if not (colon and name.isidentifier() and name[:1].isupper()):
                name, rest = "RunRefused", sentence
            raise WorkflowRefused(name, rest)
        if self.base.script:
            self.script_turns = _script_turns(self.base.script)

    def continue_script(self, session: int) -> None:
        """A scenario resumed part-way is given to the session from the turn reached, as a file in
        the run directory (the turns kept verbatim)."""
        if self.script_turns is None or self.script_start == 0:
            return
        path = os.path.join(self.out, f"scenario-{session}.json")
        with open(path, "w", encoding="utf-8") as handle:
            json.dump({"format": "metaharness.scenario/1", "turns": self.script_turns[self.script_start:]}, handle)
        self.session_script = path

    def script_record(self) -> dict[str, Any]:
        if self.script_turns is None:
            return {}
        return {"script": os.path.abspath(self.base.script), "script_digest": _digest(self.base.script),
                "script_start": self.script_start}

    # ------------------------------------------------------------------ helpers
    def _frame_file(self, index: int, position: Position) -> str:
        return os.path.join("frames", f"step-{index:04d}-{position.node}-attempt-{position.attempt}.frame.json")

    def _enter(self, ledger: ledgers.Ledger, walk: Walk) -> frames.Frame:
        """Mint and seal the next step's frame, write its file, and record the step as entered."""
        frame = walk.enter()
        position = walk.position
        rel = self._frame_file(walk.index, position)
        with open(os.path.join(self.out, rel), "wb") as handle:
            handle.write(frames.document_bytes(frame))
        ledger.write("step.entered", step=_step(walk.index, position), failure=position.failure,
                     failed_by=position.failed_by, frame_digest=frame.digest, frame=rel)
        return frame

    def _budget_stop(self, index: int) -> tuple[str, str] | None:
        b = self.budgets
        if b.max_steps is not None and index > b.max_steps:
            return "MaxStepsReached", f"--max-steps {b.max_steps}: step {index} would exceed it"
        if b.max_cost_usd is not None and self.cost is not None and self.cost > b.max_cost_usd:
            return "CostBudgetExceeded", f"--max-cost-usd {b.max_cost_usd}: the harness reported ${self.cost:.4f}"
        return None

    # ------------------------------------------------------------------ the drive
    async def drive(self, ledger: ledgers.Ledger, walk: Walk, *, session: int) -> WorkflowResult:
        from metaharness.api import RunRefused, start_run

        def end(outcome: str, name: str | None, reason: str | None) -> WorkflowResult:
            # A stopped run (host stopped, harness gone, a budget reached) is not ended: `resume`
            # continues it (with a larger budget).
            ledger.write("workflow.stopped" if outcome in ("stopped", "budget") else "workflow.ended", outcome=outcome,
                         reason_name=name, reason=reason, steps=len(self.steps), cost_usd=self.cost)
            return WorkflowResult(outcome, name, reason, self.out, self.steps, self.cost)

        over = self._budget_stop(walk.index)
        if over:
            return end("budget", *over)
        frame = self._enter(ledger, walk)
        events_name = "events.jsonl" if session == 1 else f"events-{session}.jsonl"
        try:
            run = await start_run(self.session_spec(frame, os.path.join(self.out, events_name)))
        except RunRefused as refused:  # a refusal only the spawn meets; nothing was spawned
            if self.on_line is not None:
                for line in refused.lines:
                    self.on_line(line)
            result = end("refused", refused.name, refused.sentence)
            result.run_exit_code = refused.exit_code
            return result
        stopper = asyncio.ensure_future(self._halt_on_stop(run))
        result: WorkflowResult | None = None
        answer: list[str] = []  # the model's text since its last tool call: the step's final answer
        turns = 0  # turns begun in this step
        ours = False  # whether the running turn is this step's (began under its frame)
        started = time.monotonic()
        seen = 0
        crashed: BaseException | None = None
        try:
            async with run:
                async for envelope, event in run:
                    if self.on_line is not None:  # the raw lines, exactly as the run wrote them
                        for line in run.lines[seen:]:
                            self.on_line(line)
                        seen = len(run.lines)
                    await _call(self.on_event, envelope, event)
                    if result is not None:
                        continue  # the workflow has ended; let the session wind up
                    if isinstance(event, ToolRequested):
                        answer = []
                        if event.decision_required and self.decide is not None:
                            decision = await _call(self.decide, event, frame)
                            await run.decide(event.call_id, decision)
                    elif isinstance(event, ToolResult):
                        answer = []
                    elif isinstance(event, Text):
                        answer.append(event.text)
                    elif isinstance(event, UsageReport) and event.usage.cost_usd is not None:
                        self.cost = (self.cost or 0.0) + event.usage.cost_usd
                    elif isinstance(event, SessionEnded) and (event.metered_cost_usd or event.total_cost_usd) is not None:
                        # metaharness's own figure first: the same the budget is kept by
                        session_cost = event.metered_cost_usd if event.metered_cost_usd is not None else event.total_cost_usd
                        self.cost = (self.session_cost_base or 0.0) + session_cost
                    elif isinstance(event, TurnStarted):
                        # A turn the harness begins on its own under an earlier frame is not this step's.
                        ours = event.frame_digest == frame.digest
                        if ours:
                            turns += 1
                            answer = []
                    elif isinstance(event, TurnEnded) and self.script_turns is not None and not self._stopping():
                        self.script_cursor = script_cursor(self.script_turns, self.script_cursor)
                    if isinstance(event, TurnEnded) and ours and not self._stopping():
                        # A turn our own halt cut short is not judged: the step is taken again on resume.
                        index, position = walk.index, walk.position
                        text = "\n".join(answer)
                        verdict = await judge(position.node, self.wf.nodes[position.node], self.loaded, self.workspace, text)
                        ledger.write("step.verdict", step=_step(index, position), turn=turns, passed=verdict.passed,
                                     handoff=verdict.handoff, choice=verdict.choice,
                                     check=verdict.check.record() if verdict.check else None, failure=verdict.failure,
                                     answer_tail=text[-2000:])
                        if not verdict.passed and turns < (self.budgets.max_turns or 1):
                            # The step has turns left: the same frame, one more turn, the failure said.
                            answer = []
                            await run.inject(f"This step is not done yet: {verdict.failure}")
                            continue
                        then = walk.judged(passed=verdict.passed, choice=verdict.choice, failure=verdict.failure,
                                           failed_by=verdict.failed_by, established=verdict.established)
                        await _call(self.on_step, self._record(
                            ledger, run, walk, frame, verdict, "passed" if verdict.passed else "failed",
                            verdict.failure, then, started, index=index, position=position))
                        if walk.ending is not None:
                            result = end("failed", walk.ending.name, walk.ending.reason)
                        elif walk.done:
                            result = end("completed", None, None)
                        elif over := self._budget_stop(walk.index):
                            result = end("budget", *over)
                        if result is not None:
                            await run.close_input()
                            continue
                        frame = self._enter(ledger, walk)
                        answer, turns, started = [], 0, time.monotonic()
                        # Sent together: one boundary, one turn.
                        await run.send_together(MessageInject(id="", text=self.wf.nodes[walk.position.node].prompt),
                                                FrameSet(id="", frame=msgspec.to_builtins(frame)))
        except (BrokenPipeError, ConnectionError) as exc:
            # The harness died where the run wrote to it (a step boundary): the session is over,
            # the workflow is not — it stops resumably like any other early end.
            crashed = exc
        stopper.cancel()
        if self.on_line is not None:
            for line in run.lines[seen:]:
                self.on_line(line)
        if result is None and self.stop is not None and self.stop.is_set():
            result = end("stopped", "Stopped", f"the workflow host was stopped during step {walk.index}; "
                         "`metaharness workflow resume` continues it")
        if result is None:
            stderr = "; ".join(line.strip() for line in getattr(run, "stderr", []) if line.strip())
            if not self.steps and run.exit_code == 2:
                result = end("refused", "RunRefused", "the run was refused at start" + (f": {stderr}" if stderr else ""))
            else:
                reason = (f"the harness session ended (exit code {run.exit_code}) before the workflow did"
                          + (f": {stderr}" if stderr else "") + (f": {crashed}" if crashed else ""))
                result = end("stopped", "HarnessEnded", reason)
        result.run_exit_code = run.exit_code
        return result

    def _stopping(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    async def _halt_on_stop(self, run: Any) -> None:
        if self.stop is None:
            return
        await self.stop.wait()
        await run.halt("the workflow host was stopped")

    def _record(self, ledger: ledgers.Ledger, run: Any, walk: Walk, frame: frames.Frame, verdict: Verdict | None,
                outcome: str, reason: str | None, then: Position | None, started: float, *,
                index: int | None = None, position: Position | None = None) -> StepResult:
        index = walk.index if index is None else index
        position = walk.position if position is None else position
        duration = int((time.monotonic() - started) * 1000)
        ledger.write("step.ended", step=_step(index, position), outcome=outcome, reason=reason,
                     then=None if then is None else {"node": then.node, "attempt": then.attempt,
                                                     "failure": then.failure, "failed_by": then.failed_by},
                     established=[{"text": p.text, "source": p.source} for p in (verdict.established if verdict else [])],
                     cost_usd=self.cost, duration_ms=duration,
                     **({"script_turn": self.script_cursor} if self.script_turns is not None else {}))
        run.report_step_left(frame.step, Completed() if outcome == "passed" else Failed(reason=reason or outcome))
        step = StepResult(index, position.node, position.attempt, frame.digest, outcome, reason, verdict, then,
                          self.cost, duration)
        self.steps.append(step)
        return step


def _step(index: int, position: Position) -> dict[str, Any]:
    return {"index": index, "node": position.node, "attempt": position.attempt}



# --- the library face ------------------------------------------------------------------


def _prepare_out(out_dir: str) -> str:
    out_dir = os.path.abspath(out_dir)
    if os.path.exists(out_dir) and (not os.path.isdir(out_dir) or os.listdir(out_dir)):
        raise WorkflowRefused(RefusalName.OutNotEmpty, f"{out_dir} already exists and is not an empty directory; "
                              "a workflow run writes its ledger into a directory of its own")
    return out_dir


def _admit(loaded: LoadedWorkflow, kind: str, base: RunSpec, budgets: _Budgets, decide: Any) -> None:
    from metaharness.api import describe

    if kind not in KINDS:
        raise WorkflowRefused(RefusalName.UnknownHarness, f"{kind!r} is not a harness ({', '.join(KINDS)})")
    if budgets.max_cost_usd is not None and (unseen := cost_unseen(dataclasses.replace(
            base, kind=kind, max_cost_usd=budgets.max_cost_usd))) is not None:
        raise WorkflowRefused(RefusalName.CostNotSeen, unseen)
    found = refusal(loaded, kind, decisions=base.decisions, workspace=os.path.abspath(base.cwd or os.getcwd()),
                    has_decider=decide is not None, descriptor=describe(kind))
    if found is not None:
        raise found


async def _drive_traced(host: _Host, ledger: ledgers.Ledger, walk: Walk, session: int,
                        loaded: LoadedWorkflow) -> WorkflowResult:
    """`host.drive`, under a `workflow {id}` span when live export is on (`--otel`, the OTEL_*
    variables): the session's run span, and so its steps, turns and calls, is its child."""
    from metaharness.export.otlp import live_target, otel_installed

    url, _named = live_target(host.base.otel)
    if url is None or not otel_installed():  # asked for by name, precheck refused it (OtelUnavailable)
        return await host.drive(ledger, walk, session=session)
    import sys

    from metaharness.export.otel import ParentSpan
    from metaharness.protocol.trace import TRACE_ENV

    wf = loaded.workflow
    span = ParentSpan(url, f"workflow {wf.id}", {
        "metaharness.workflow.id": wf.id, "metaharness.workflow.version": wf.version,
        "metaharness.workflow.digest": loaded.digest, "metaharness.workflow.session": session,
        "gen_ai.agent.name": host.kind}, what="the workflow")
    token = TRACE_ENV.set(span.carrier)
    outcome, error = None, None
    try:
        result = await host.drive(ledger, walk, session=session)
        outcome = result.outcome
        return result
    except BaseException as exc:
        error = type(exc).__name__
        raise
    finally:
        TRACE_ENV.reset(token)
        span.finish({"metaharness.workflow.outcome": outcome}, lambda text: print(text, file=sys.stderr, flush=True),
                    error if error else (None if outcome == "completed" else outcome))


def _first_walk(loaded: LoadedWorkflow, task: str | None) -> Walk:
    prior = [frames.PriorLine(text=task, source="the task given to the workflow")] if task else []
    return Walk(loaded.workflow, Position(node=loaded.workflow.start), 1, prior)


def start_refusal(workflow: str, *, harness: str, spec: RunSpec | None = None, task: str | None = None,
                  max_steps: int | None = None, max_turns: int | None = None,
                  max_cost_usd: float | None = None) -> str | None:
    """The sentence (`Name: why`) a `run_workflow` of these arguments would be refused with at
    start, or None: the file loaded and checked (every node's schema file too), the workflow's
    own admission, and the first step's session start checks — what `run_workflow` checks before
    it writes anything, here with nothing written and no harness started (no decider: a
    `decisions="ask"` run is refused, as on the command line)."""
    try:
        loaded = load(workflow)
        base = spec or RunSpec(kind=harness)
        budgets = _Budgets(max_steps, max_turns, max_cost_usd)
        _admit(loaded, harness, base, budgets, None)
        host = _Host(loaded, harness, os.devnull, base, budgets, on_step=None, on_event=None, decide=None,
                     stop=None, on_line=None)
        host.precheck(_first_walk(loaded, task).enter())
    except WorkflowRefused as exc:
        return f"{exc.name}: {exc.sentence}"
    except WorkflowError as exc:
        return f"{RefusalName.WorkflowInvalid}: {exc}"
    return None


async def run_workflow(
    workflow: str | LoadedWorkflow,
    *,
    harness: str,
    out: str,
    task: str | None = None,
    spec: RunSpec | None = None,
    max_steps: int | None = None,
    max_turns: int | None = None,
    max_cost_usd: float | None = None,
    on_step: Callback | None = None,
    on_event: Callback | None = None,
    decide: Callable[..., Any] | None = None,
    stop: asyncio.Event | None = None,
    on_line: Callable[[bytes], None] | None = None,
) -> WorkflowResult:
    """Run a workflow file on one harness session; the ledger and streams go to `out`.

    `spec` carries every run option that applies (script, model, cwd as the
    workspace, vendor_dir, decisions, hermetic, …); its kind, prompt, frame and
    keep_open are the host's. `on_step(StepResult)` is called as each step ends,
    `on_event(envelope, event)` for every event line (`on_line(bytes)` for the line as
    written); with `decisions="ask"`,
    `decide(tool_requested, frame)` answers each call (sync or async) with a Decision;
    `frame` is the sealed frame of the step the call belongs to. Setting
    `stop` halts the session and leaves the run resumable (outcome `stopped`).
    Raises `WorkflowRefused` (before any model request) or `WorkflowError`."""
    loaded = workflow if isinstance(workflow, LoadedWorkflow) else load(workflow)
    base = spec or RunSpec(kind=harness)
    budgets = _Budgets(max_steps, max_turns, max_cost_usd)
    _admit(loaded, harness, base, budgets, decide)
    out_dir = _prepare_out(out)
    host = _Host(loaded, harness, out_dir, base, budgets, on_step=on_step, on_event=on_event, decide=decide,
                 stop=stop, on_line=on_line)
    walk = _first_walk(loaded, task)
    prior = list(walk.prior)
    host.precheck(walk.enter())  # nothing is written before every start check has passed
    os.makedirs(os.path.join(out_dir, "frames"), exist_ok=True)
    ledger = ledgers.Ledger(out_dir)
    try:
        ledger.write("workflow.started", workflow={"id": loaded.workflow.id, "version": loaded.workflow.version},
                     file=loaded.path, digest=loaded.digest, harness=harness, task=task, session=1,
                     start_node=loaded.workflow.start, first_index=1,
                     prior=[{"text": p.text, "source": p.source} for p in prior],
                     events="events.jsonl", workspace=host.workspace,
                     options={"max_steps": max_steps, "max_turns": max_turns, "max_cost_usd": max_cost_usd},
                     run=stored_options(base), **host.script_record())
        return await _drive_traced(host, ledger, walk, 1, loaded)
    finally:
        ledger.close()


async def resume_workflow(
    out: str,
    *,
    spec: RunSpec | None = None,
    options: dict[str, Any] | None = None,
    harness: str | None = None,
    max_steps: int | None = None,
    max_turns: int | None = None,
    max_cost_usd: float | None = None,
    on_step: Callback | None = None,
    on_event: Callback | None = None,
    decide: Callable[..., Any] | None = None,
    stop: asyncio.Event | None = None,
    on_line: Callable[[bytes], None] | None = None,
) -> WorkflowResult:
    """Continue the workflow run in `out` after its last completed step, in a new session.

    The workflow file must be unchanged (same digest) — `WorkflowChanged` otherwise.
    The run options are the ones the last session started with (stored in its
    `workflow.started`): `options` overrides some of them by RunSpec field name, or
    `spec` replaces them all. Budgets not given are the ones the run started with. A
    scripted session continues its scenario at the model request the ledger reached
    (a script given anew starts at its first turn); a scenario file changed since is
    refused (`ScriptChanged`). A run stopped by a budget resumes with a larger one."""
    out_dir = os.path.abspath(out)
    try:
        records = ledgers.read(out_dir)
        point = ledgers.resume_point(records)
    except ledgers.LedgerError as exc:
        name, _, sentence = str(exc).partition(": ")
        raise WorkflowRefused(name, sentence) from None
    started = point.started
    loaded = load(started["file"])
    if loaded.digest != started["digest"]:
        raise WorkflowRefused(RefusalName.WorkflowChanged, f"{loaded.path} changed since the run started (digest "
                              f"{started['digest'][:12]}… then, {loaded.digest[:12]}… now); resume the file it ran")
    last = point.last_started
    kind = harness or last["harness"]
    stored = last.get("options", {})
    budgets = _Budgets(max_steps if max_steps is not None else stored.get("max_steps"),
                       max_turns if max_turns is not None else stored.get("max_turns"),
                       max_cost_usd if max_cost_usd is not None else stored.get("max_cost_usd"))
    overrides = dict(options or {})
    if spec is not None:
        base = spec
    else:
        base = spec_from_stored(kind, last.get("run", {}), overrides)
    if base.cwd is None:
        base = dataclasses.replace(base, cwd=last.get("workspace") or started.get("workspace"))
    # The scenario continues where the ledger's last ended step left it, unless a script was given anew.
    script_start = 0
    if base.script and "script" not in overrides and spec is None and last.get("script") == os.path.abspath(base.script):
        if _digest(base.script) != last.get("script_digest"):
            raise WorkflowRefused(RefusalName.ScriptChanged, f"the scenario {base.script} changed since the run started; "
                                  "give it again with --script to start it at its first turn")
        script_start = point.script_turn if point.script_turn is not None else last.get("script_start", 0)
    _admit(loaded, kind, base, budgets, decide)
    host = _Host(loaded, kind, out_dir, base, budgets, on_step=on_step, on_event=on_event, decide=decide,
                 stop=stop, on_line=on_line, script_start=script_start)
    host.cost = host.session_cost_base = point.cost_usd
    over = host._budget_stop(point.next_index)
    if over:
        name, sentence = over
        raise WorkflowRefused(name, f"{sentence}; resume with a larger budget")
    walk = Walk(loaded.workflow, point.position, point.next_index, point.prior)
    host.precheck(walk.enter())
    ledger = ledgers.Ledger(out_dir)
    try:
        host.continue_script(point.session)
        ledger.write("workflow.started", workflow={"id": loaded.workflow.id, "version": loaded.workflow.version},
                     file=loaded.path, digest=loaded.digest, harness=kind, task=started.get("task"),
                     session=point.session, resumed_at={"index": point.next_index, "node": point.position.node,
                                                        "attempt": point.position.attempt},
                     interrupted_step=point.interrupted_step, events=f"events-{point.session}.jsonl",
                     workspace=host.workspace,
                     options={"max_steps": budgets.max_steps, "max_turns": budgets.max_turns,
                              "max_cost_usd": budgets.max_cost_usd},
                     run=stored_options(base), **host.script_record())
        return await _drive_traced(host, ledger, walk, point.session, loaded)
    finally:
        ledger.close()
