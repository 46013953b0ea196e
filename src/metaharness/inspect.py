"""An Inspect agent: a harness run under metaharness inside an Inspect sample's sandbox.

What belongs here: `metaharness_agent(...)`, the one seam between Inspect (`inspect-ai`, the
`inspect` extra) and a run. It sits on top, like an embedder: it builds a `RunSpec`, turns it
into the `metaharness run` command line with `metaharness.api.spec_to_argv`, runs that command
in the sample's sandbox, reads the run's `metaharness.event/1` stream as it arrives and, with
`decisions="inspect"`, answers each call over the run's stdin.

* The harness's model requests go to Inspect's model: the agent opens `sandbox_agent_bridge`,
  whose proxy in the sandbox serves OpenAI- and Anthropic-compatible endpoints, and starts the
  run with `--model-endpoint` pointed at it (so `mockllm` and every Inspect provider work).
* Every tool call is decided by metaharness, as in `metaharness run`: a frame, policy files, or
  observe mode; or, with `decisions="inspect"`, the eval's approval policy (the run is in ask mode
  and each approver's answer is sent back: approve → allow, reject → deny, modify → replace,
  terminate → deny and halt).
* Each decision is written into the sample's transcript as an info event (source
  `metaharness`), and the whole stream, its decisions and its ATIF trajectory are kept in the
  sample's store under `metaharness:events`, `metaharness:decisions` and `metaharness:atif`.

Inspect is imported only here, and only when this module is imported.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import tempfile
from dataclasses import dataclass, field
from typing import Any, Sequence

import msgspec
from inspect_ai.agent import Agent, AgentState, agent, sandbox_agent_bridge
from inspect_ai.log import transcript
from inspect_ai.model import ChatMessageUser
from inspect_ai.tool import ToolCall
from inspect_ai.util import ExecRemoteStreamingOptions, sandbox, store

from metaharness.api import spec_to_argv
from metaharness.export.atif import trajectory
from metaharness.export.source import ExportError, read_stream
from metaharness.protocol.commands import Halt, ToolDecide
from metaharness.protocol.decode import decode_event_line, encode_command_line
from metaharness.protocol.frame import Frame, document_bytes
from metaharness.protocol.events import StreamClosed, ToolDecided, ToolRequested
from metaharness.protocol.refusals import RefusalName
from metaharness.protocol.spec import KINDS, RunSpec
from metaharness.protocol.values import Allow, Decision, Deny, Replace

__all__ = ["DECISIONS", "MetaharnessAgentError", "metaharness_agent"]

# `decisions=` → the run's --decisions. "ask" has nobody to ask inside a sample: "inspect" is the
# ask mode whose answers come from the eval's approval policy.
DECISIONS = {"frame": "frame", "policy": "policy", "observe": "observe", "inspect": "ask"}
# The model the harness is started with where it needs one; the bridge serves any name with the
# eval's model, so only oharness (which needs PROVIDER:MODEL) is given one.
HARNESS_MODEL = {"oharness": "anthropic:inspect"}
STORE_EVENTS, STORE_DECISIONS, STORE_ATIF = "metaharness:events", "metaharness:decisions", "metaharness:atif"


class MetaharnessAgentError(RuntimeError):
    """The agent was configured wrongly or its run was refused: `name` and one `sentence`."""

    def __init__(self, name: str, sentence: str) -> None:
        super().__init__(f"{name}: {sentence}")
        self.name, self.sentence = name, sentence


def _decisions(decisions: str | None, frame: Frame | dict | str | None, policy: str | Sequence[str] | None) -> str:
    chosen = decisions or ("policy" if policy and frame is None else "frame")
    if chosen == "ask":
        raise MetaharnessAgentError(RefusalName.InspectAskMode, "decisions=\"ask\" has nobody to ask inside an Inspect sample; "
                                    "use decisions=\"inspect\" to have the eval's approval policy decide")
    if chosen not in DECISIONS:
        raise MetaharnessAgentError(RefusalName.InspectDecisionsUnknown, f"decisions={chosen!r} is not one of "
                                    + ", ".join(repr(d) for d in DECISIONS))
    return chosen


_NAMED = re.compile(r"^metaharness: ([A-Z][A-Za-z0-9]+): (.+)$", re.MULTILINE)


def _refused(stderr: str) -> MetaharnessAgentError:
    """The run's refusal (its own name and sentence, from its stderr), or InspectRunRefused."""
    named = _NAMED.findall(stderr)
    if named:
        return MetaharnessAgentError(*named[-1])
    said = stderr.strip().splitlines()
    return MetaharnessAgentError(RefusalName.InspectRunRefused, said[-1] if said else "metaharness run exited 2 and said nothing")


def _policies(policy: str | Sequence[str] | None) -> list[str]:
    return [] if policy is None else [policy] if isinstance(policy, (str, os.PathLike)) else list(policy)


@dataclass
class _Run:
    """What one sample's run left: its event lines and decisions, as they arrived."""

    lines: list[bytes] = field(default_factory=list)
    requested: dict[str, ToolRequested] = field(default_factory=dict)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    closed: StreamClosed | None = None


def _plain(value: Any) -> Any:
    return msgspec.to_builtins(value)


def _record_decision(run: _Run, event: ToolDecided) -> None:
    asked = run.requested.get(event.call_id)
    entry = {"call_id": event.call_id, "name": asked.name if asked else None,
             "input": _plain(asked.input) if asked else None, **_plain(event.decision),
             "decided_by": event.decided_by, "seam": event.seam}
    run.decisions.append(entry)
    transcript().info(entry, source="metaharness")


async def _approve(event: ToolRequested, state: AgentState) -> list[Any]:
    """The eval's approval policy on one call, as the commands that answer it."""
    from inspect_ai.approval._apply import apply_tool_approval  # the approver chain the eval configured

    arguments = event.input if isinstance(event.input, dict) else {"input": event.input}
    call = ToolCall(id=event.call_id, function=event.name, arguments=arguments)
    _, approval = await apply_tool_approval(f"{event.name} (metaharness)", call, None, state.messages)
    word = approval.decision if approval else "approve"
    why = (approval.explanation if approval else None) or f"{word} by the Inspect approval policy"
    if word == "modify" and approval and approval.modified is not None:
        replaced = approval.modified.arguments
        decision: Decision = Replace(input=replaced.get("input", replaced) if not isinstance(event.input, dict) else replaced)
    else:
        decision = {"approve": Allow()}.get(word) or Deny(reason=why)
    commands: list[Any] = [ToolDecide(id=f"i-{event.call_id}", call_id=event.call_id, decision=decision)]
    if word == "terminate":
        commands.append(Halt(id=f"h-{event.call_id}", reason=why))
    return commands


def _prompt(state: AgentState) -> str:
    users = [m for m in state.messages if isinstance(m, ChatMessageUser)]
    if not users:
        raise MetaharnessAgentError(RefusalName.InspectNoPrompt, "the sample has no user message to give the harness as its prompt")
    return users[-1].text


def _keep(run: _Run) -> None:
    """The stream, its decisions and its ATIF trajectory into the sample's store."""
    store().set(STORE_EVENTS, [json.loads(line) for line in run.lines])
    store().set(STORE_DECISIONS, run.decisions)
    handle, path = tempfile.mkstemp(prefix="metaharness-inspect-", suffix=".jsonl")
    try:
        with os.fdopen(handle, "wb") as out:
            out.writelines(run.lines)
        store().set(STORE_ATIF, trajectory([read_stream(path)]))
    except ExportError as exc:
        transcript().info({"atif": None, "why": str(exc)}, source="metaharness")
    finally:
        os.unlink(path)


class _Carry:
    """Frames and policy files into the sandbox: a sealed `Frame` or a dict is written there; a path that exists on this
    machine is read here and copied there; any other path is taken as a path in the sandbox."""

    def __init__(self, box: Any) -> None:
        self.box, self.dir = box, None

    async def put(self, name: str, value: Any) -> str | None:
        if value is None:
            return None
        if isinstance(value, Frame):
            data: str | bytes = document_bytes(value)
        elif isinstance(value, dict):
            data = json.dumps(value)
        elif os.path.isfile(value):
            with open(value, "rb") as handle:
                data = handle.read()
        else:
            return os.fspath(value)
        if self.dir is None:
            made = await self.box.exec(["mktemp", "-d"])
            if not made.success:
                raise MetaharnessAgentError(RefusalName.InspectRunRefused, f"no scratch directory in the sandbox: {made.stderr.strip()}")
            self.dir = made.stdout.strip()
        path = f"{self.dir}/{name}"
        await self.box.write_file(path, data)
        return path

    async def close(self) -> None:
        if self.dir is not None:
            await self.box.exec(["rm", "-rf", self.dir])


@agent
def metaharness_agent(harness: str, *, frame: Frame | dict | str | None = None, policy: str | Sequence[str] | None = None,
                      decisions: str | None = None, policy_mode: str | None = None, model: str | None = None, cwd: str | None = None,
                      command: Sequence[str] = ("metaharness",), vendor_dir: str | None = None,
                      posture: str | None = None, max_turns: int | None = None, env: dict[str, str] | None = None,
                      port: int = 13131, sandbox_name: str | None = None) -> Agent:
    """An Inspect agent running `harness` under metaharness in the sample's sandbox.

    Args:
        harness: a harness kind, one of `metaharness.protocol.harnesses.KINDS` (the registry's).
        frame: a sealed frame: a `Frame` (`metaharness.protocol.frame.seal`), its document as a
            dict, or a path. A value, or a path to a file on this machine, is copied into the
            sandbox for the run; another path is one in the sandbox.
            Frame mode is the default.
        policy: one or more policy (OHarness permission settings) files, paths carried the same
            way; policy mode when no frame is given.
        decisions: "frame", "policy", "observe", or "inspect" (the eval's approval policy decides).
        policy_mode: the permission mode of policy mode (`metaharness run --policy-mode`).
        model: the model the harness asks for (the bridge serves every name with the eval's model).
        cwd: the harness's working directory in the sandbox (the sandbox's own by default).
        command: how `metaharness` is started in the sandbox.
        vendor_dir: the directory holding the vendor CLIs in the sandbox (`--vendor-dir`).
        posture, max_turns: as `metaharness run --posture/--max-turns`.
        env: more environment for the run in the sandbox.
        port: the port of the bridge's model proxy in the sandbox.
        sandbox_name: the sandbox to run in (the sample's default one if None).
    """
    if harness not in KINDS:
        raise MetaharnessAgentError(RefusalName.InspectHarnessUnknown, f"harness={harness!r} is not one of {', '.join(KINDS)}")
    chosen = _decisions(decisions, frame, policy)
    policies = _policies(policy)

    async def execute(state: AgentState) -> AgentState:
        carry = _Carry(sandbox(sandbox_name))
        try:
            return await run_in(carry, state)
        finally:
            await carry.close()

    async def run_in(carry: _Carry, state: AgentState) -> AgentState:
        box = carry.box
        frame_path = await carry.put("frame.json", frame)
        policy_paths = [await carry.put(f"policy-{i}.json", p) for i, p in enumerate(policies, 1)]
        spec = RunSpec(kind=harness, prompt=_prompt(state), frame=frame_path, decisions=DECISIONS[chosen],
                       policy_files=policy_paths, policy_mode=policy_mode, model=model or HARNESS_MODEL.get(harness), cwd=cwd,
                       vendor_dir=vendor_dir, posture=posture, max_turns=max_turns,
                       model_endpoint=f"http://127.0.0.1:{port}")
        argv = [*command, *spec_to_argv(spec)]
        run = _Run()
        bridge_approval = None
        if chosen == "inspect":  # the eval's approvers decide through the run, not a second time at the bridge
            from inspect_ai.approval import ApprovalPolicy, auto_approver
            bridge_approval = [ApprovalPolicy(approver=auto_approver(), tools="*")]
        async with sandbox_agent_bridge(state, port=port, sandbox=sandbox_name, approval=bridge_approval) as bridge:
            transcript().info({"command": shlex.join(argv), "decisions": chosen}, source="metaharness")
            proc = await box.exec_remote(argv, ExecRemoteStreamingOptions(
                stdin_open=chosen == "inspect", cwd=cwd, env=env))
            pending, stderr, exit_code = b"", [], None
            writing = chosen == "inspect"  # stdin stays open while the run may need an answer
            try:
                async for chunk in proc:
                    if chunk.type == "stderr":
                        stderr.append(chunk.data)
                    elif chunk.type == "completed":
                        exit_code = chunk.exit_code
                    elif chunk.type == "stdout":
                        pending += chunk.data.encode()
                        *whole, pending = pending.split(b"\n")
                        for raw in whole:
                            answers = await _on_line(run, raw + b"\n", bridge.state)
                            if writing and answers:
                                await proc.write_stdin(b"".join(encode_command_line(c) for c in answers))
                            if writing and (run.closed is not None or any(isinstance(c, Halt) for c in answers)):
                                writing = False
                                await proc.close_stdin()
            finally:
                _keep(run)
            if exit_code == 2 and not run.decisions:
                raise _refused("".join(stderr))
            transcript().info({"exit_code": exit_code, "decisions": len(run.decisions),
                               "closed": run.closed.reason if run.closed else None}, source="metaharness")
            return bridge.state

    async def _on_line(run: _Run, raw: bytes, state: AgentState) -> list[Any]:
        run.lines.append(raw)
        _, event = decode_event_line(raw)
        if isinstance(event, ToolRequested):
            run.requested[event.call_id] = event
            if event.decision_required and chosen == "inspect":
                return await _approve(event, state)
        elif isinstance(event, ToolDecided):
            _record_decision(run, event)
        elif isinstance(event, StreamClosed):
            run.closed = event
        return []

    return execute
