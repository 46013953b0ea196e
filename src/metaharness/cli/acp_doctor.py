"""`metaharness doctor KIND` and `metaharness conformance KIND` for the ACP kinds.

What belongs here: the checks, each yielding `(name, ok, detail)`. The doctor finds the binary
on the child PATH, checks its pin, lists the pinning and phone-home switches a run imposes, and
(without a model) spawns the agent with that pinning for `initialize` and `session/new`. The
conformance check replays a recorded ACP transcript through the real translator and seam: the
events must match the ones the live run wrote, and the seam must write exactly the answers the
live run wrote to the agent.

It lives with the CLI, not under adapters/: it builds a RunSpec and looks the adapter up in the
registry to probe a live agent, which an adapter package may not do (adapters import neither the
run nor each other).

Rules kept: nothing here calls a model (the endpoint given to the doctor's spawn is a closed
port on 127.0.0.1); a check that cannot run says why instead of raising.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any, Iterator

from metaharness.adapters import adapter_class
from metaharness.adapters.acp import launch
from metaharness.adapters.acp.seam import Seam
from metaharness.adapters.acp.translate import Translator
from metaharness.adapters.base import resolve_tool
from metaharness.protocol.harnesses import REGISTRY
from metaharness.protocol.spec import RunSpec

Check = tuple[str, bool, str]
FIXTURES = Path(__file__).resolve().parents[3] / "tests" / "fixtures"
# What the replay compares, per event: the fields the translator and the seam decide.
COMPARED = {
    "text": ("text",),
    "tool.requested": ("call_id", "name", "input", "operations", "subjects"),
    "tool.result": ("call_id", "is_error", "exit_code", "content"),
    "usage": ("usage",),
}


def _adapter(kind: str, vendor_dir: str | None = None, **fields: Any):
    spec = RunSpec(kind=kind, prompt="doctor", credentials="none", model_endpoint="http://127.0.0.1:9",
                   vendor_dir=vendor_dir, **fields)
    return adapter_class(kind)(spec)


class _Recorder:
    """A RunContext that keeps what the adapter reports, and answers each presented call
    with a decision given by `decide`."""

    def __init__(self, run_cwd: str, decide=None) -> None:
        self.run_cwd = run_cwd
        self.events: list[Any] = []
        self.decide = decide

    def session_started(self, event, *, at=None) -> None:
        self.events.append(event)

    def turn_started(self, *, at=None) -> None:
        pass

    def turn_ended(self, stop_reason, *, at=None) -> None:
        pass

    def emit(self, event, *, at=None) -> None:
        self.events.append(event)

    def present(self, call) -> None:
        self.events.append(("present", call))
        if self.decide is not None:
            self.decide(call.call_id)  # decides and delivers

    def record_call(self, call_id, name, input, *, at=None) -> None:
        self.events.append(("record", call_id, name, input))

    def session_ended(self, event, *, at=None) -> None:
        self.events.append(event)

    def warn(self, code, message) -> None:
        self.events.append(("warning", code, message))

    def opaque(self, raw_line, *, vendor_type, vendor_subtype, source_line) -> None:
        self.events.append(("opaque", vendor_type, vendor_subtype, source_line))


# --- doctor ---------------------------------------------------------------------------------

def doctor_checks(kind: str, vendor_dir: str | None, smoke: bool = False) -> Iterator[Check]:
    adapter = _adapter(kind, vendor_dir)
    path = launch.child_path(vendor_dir or launch.default_vendor_dir())
    try:
        binary = launch.resolve_binary(adapter.binary_name, path, adapter.package, adapter.pin)
    except launch.LaunchError as exc:
        yield "binary", False, str(exc)
        return
    yield "binary", True, binary
    version = launch.binary_version(binary, path)
    yield "version", version == adapter.pin, f"{version or 'unknown'} (pin {adapter.pin})"
    for name, detail in pinning(kind, Path(path.split(":")[0]).parent):
        yield name, detail is not None, detail or "missing"
    yield handshake(kind, vendor_dir)


def pinning(kind: str, modules: Path) -> list[tuple[str, str | None]]:
    """The switches a run imposes, as the doctor shows them (None: cannot be imposed here): each
    ACP vendor's own `pinning(modules)`, given the vendor's node_modules."""
    return adapter_class(kind).pinning(modules)


def handshake(kind: str, vendor_dir: str | None) -> Check:
    """Spawn the agent with the run's pinning and do initialize + session/new; no model is asked."""
    async def go() -> Check:
        adapter = _adapter(kind, vendor_dir)
        ctx = _Recorder(os.getcwd())
        try:
            adapter.plan()
            await adapter.start(ctx)
        except Exception as exc:  # a StartRefusal or a launch failure: say which
            return "acp handshake", False, getattr(exc, "sentence", None) or str(exc)
        try:
            return "acp handshake", True, (f"session {adapter.session.id}, mode {adapter.initial_mode}, "
                                           f"{adapter.agent_info.get('name', kind)} {adapter.agent_info.get('version')}")
        finally:
            await adapter.halt()
            if adapter.child is not None:
                await adapter.child.wait()
                adapter.child.cleanup()

    return asyncio.run(go())


# --- conformance ------------------------------------------------------------------------------

class _ReplayRpc:
    """The seam's view of the channel during a replay: answers are collected, not written."""

    def __init__(self) -> None:
        self.answers: list[dict] = []
        self.line_count = 0
        self.stdin_closed = False

    def answer(self, request_id: Any, result: Any = None, error: dict | None = None) -> bool:
        self.answers.append({"id": request_id, "result": result} if error is None else {"id": request_id, "error": error})
        return True

    def notify(self, method: str, params: Any) -> None:
        pass

    def close_stdin(self) -> None:
        self.stdin_closed = True


def conformance_checks(kind: str, fixtures: str | None) -> Iterator[Check]:
    directory = Path(fixtures) if fixtures else FIXTURES / kind
    names = sorted(p.name.removesuffix(".transcript.jsonl") for p in directory.glob("*.transcript.jsonl"))
    if not names:
        yield "fixtures", False, f"no recorded ACP transcripts in {directory}"
        return
    for name in names:
        yield from replay_case(kind, directory, name)


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def replay_case(kind: str, directory: Path, name: str) -> Iterator[Check]:
    transcript = (directory / f"{name}.transcript.jsonl").read_bytes().splitlines()
    sent = _lines(directory / f"{name}.sent.jsonl")
    recorded = _lines(directory / f"{name}.events.jsonl")
    started = next(e for e in recorded if e["event"] == "session.started")
    decisions = {e["call_id"]: e["decision"] for e in recorded if e["event"] == "tool.decided"}
    produced, answers = asyncio.run(_replay(kind, transcript, sent, started["cwd"], decisions))
    expected = [_compared(e["event"], e) for e in recorded if e["event"] in COMPARED]
    yield f"{name}: events", produced == expected, (
        f"{len(expected)} events as the live run wrote them" if produced == expected
        else f"replay differs: {_first_difference(produced, expected)}")
    live = [m for m in sent if "result" in m or "error" in m]
    live = [{k: m[k] for k in ("id", "result", "error") if k in m} for m in live]
    yield f"{name}: answers", answers == live, (
        f"{len(live)} answers to agent requests as the live run wrote them" if answers == live
        else f"the seam answered {answers}, the live run {live}")


async def _replay(kind: str, transcript: list[bytes], sent: list[dict], cwd: str, decisions: dict) -> tuple[list, list]:
    import msgspec

    from metaharness.protocol.values import Decision

    adapter = _adapter(kind, cwd=cwd)
    adapter.work = cwd
    ctx = _Recorder(cwd, decide=lambda call_id: adapter.deliver(call_id, msgspec.convert(decisions[call_id], Decision), "frame"))
    rpc = _ReplayRpc()
    adapter.translator = Translator(ctx, on_arguments=lambda call_id: seam.arguments_arrived(call_id))
    seam = Seam(rpc, ctx, kind, 60000, call_of=adapter._call_of, settled=lambda call_id: True,
                cancel_turn=lambda: None, hold_s=3600)
    adapter.seam = seam
    prompts = {m["id"] for m in sent if m.get("method") == "session/prompt"}
    for number, raw in enumerate(transcript, start=1):
        rpc.line_count = number
        message = json.loads(raw)
        if "method" in message and "id" in message:
            seam.on_request(message, raw, number)
        elif "method" in message:
            adapter.translator.notification(message, raw, number)
        elif message.get("id") in prompts and "result" in message:
            adapter.translator.prompt_result(message["result"])
    seam.stop_timers()
    produced = []
    for event in ctx.events:
        if isinstance(event, tuple) and event[0] == "present":
            call = event[1]
            resolution = resolve_tool(adapter.tools, call.name, call.input, call.cwd, adapter.spec.work_dir())
            ops = list(dict.fromkeys(op[0] for op in sorted(resolution.operations)))
            subjects = [s for s, _ in resolution.subjects]
            produced.append(_compared("tool.requested", {"call_id": call.call_id, "name": call.name,
                                                         "input": call.input, "operations": ops or None,
                                                         "subjects": subjects or None}))
        elif not isinstance(event, tuple):
            wire = msgspec.to_builtins(event)
            if wire.get("event") in COMPARED:
                produced.append(_compared(wire["event"], wire))
    return produced, rpc.answers


def _compared(kind: str, event: dict) -> tuple:
    return (kind, *(json.dumps(event.get(key), sort_keys=True) for key in COMPARED[kind]))


def _first_difference(produced: list, expected: list) -> str:
    for index, (a, b) in enumerate(zip(produced, expected)):
        if a != b:
            return f"event {index + 1}: replay {a}, live {b}"
    return f"replay has {len(produced)} events, the live run {len(expected)}"


class _Kind:
    """What `metaharness doctor/conformance <kind>` calls for one ACP kind."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def doctor_checks(self, vendor_dir: str | None, smoke: bool = False) -> Iterator[Check]:
        return doctor_checks(self.kind, vendor_dir, smoke)

    def conformance_checks(self, fixtures: str | None) -> Iterator[Check]:
        return conformance_checks(self.kind, fixtures)


def __getattr__(name: str) -> _Kind:
    """`acp_doctor:<kind>` for each ACP kind whose registry entry names its doctor here."""
    entry = REGISTRY.get(name)
    if entry is None or entry.doctor != f"{__name__}:{name}":
        raise AttributeError(name)
    return _Kind(name)
