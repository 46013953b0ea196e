"""Start refusals: what a workflow run refuses before any model request, each by name.

What belongs here: `refusal()` — the checks run before the harness is started, in
order, returning the first `WorkflowRefused` (name, sentence naming the node) or
None — and the table of which harnesses report a cost the host can budget.

Rules kept:
* Nothing here starts a process or talks to a model; the descriptor comes from
  the library (`metaharness.api.describe`).
* Toward denying: an operation the adapter renders to no vendor tool cannot be
  enforced as written and is refused; `subagent.spawn` is refused on every
  harness, since a subagent's tool set would be a route around the step's frame.
"""

from __future__ import annotations

import os
from typing import Any

from metaharness.protocol.refusals import RefusalName

from .document import AnswerHandoff, ArtifactHandoff, LoadedWorkflow, McpOperation, load_schema, problems

class WorkflowRefused(Exception):
    def __init__(self, name: str, sentence: str) -> None:
        super().__init__(f"{name}: {sentence}")
        self.name = name
        self.sentence = sentence


def refusal(loaded: LoadedWorkflow, kind: str, *, decisions: str, workspace: str,
            has_decider: bool, descriptor: dict[str, Any]) -> WorkflowRefused | None:
    for name, node in loaded.workflow.nodes.items():  # named on its own, ahead of the other problems
        handoff = node.handoff_value
        if isinstance(handoff, AnswerHandoff):
            try:
                load_schema(loaded.schema_path(handoff))
            except ValueError as exc:
                return WorkflowRefused(RefusalName.SchemaUnloadable, f"node {name!r}: {exc}")
    found = problems(loaded)
    if found:
        return WorkflowRefused(RefusalName.WorkflowInvalid, f"{loaded.path} has {len(found)} problem(s): "
                               + "; ".join(str(p) for p in found))
    if decisions == "observe":
        return WorkflowRefused(RefusalName.ObserveCannotFrame, "observe mode enforces nothing, so no step's frame could hold")
    if decisions == "ask" and not has_decider:
        return WorkflowRefused(RefusalName.AskWithoutDecider, "ask mode needs an embedder that decides calls "
                               "(run_workflow(..., decide=…)); the command line has none")
    for command in ("frame.set", "message.inject"):
        if descriptor["commands"].get(command) != "honoured":
            return WorkflowRefused(RefusalName.FrameSetRefused, f"the {kind} adapter does not honour {command}, "
                                   "which a workflow needs at every step boundary")
    rendering = descriptor["rendering"]
    for name, node in loaded.workflow.nodes.items():
        for op in node.operations:
            word = "mcp.call" if isinstance(op, McpOperation) else op
            if word == "subagent.spawn":
                return WorkflowRefused(RefusalName.OperationNotEnforceable, f"node {name!r} admits subagent.spawn; a "
                                       "subagent's own tools would escape the step's frame, so no harness admits it")
            if word != "mcp.call" and rendering.get(word) is None:
                return WorkflowRefused(RefusalName.OperationNotEnforceable, f"node {name!r} admits {word}, which the {kind} "
                                       "adapter renders to no tool of its own, so its frame cannot be enforced as written")
    for name, node in loaded.workflow.nodes.items():
        needs = "a check" if node.check is not None else (
            "an artifact handoff" if isinstance(node.handoff_value, ArtifactHandoff) else None)
        if needs and not (os.path.isdir(workspace) and os.access(workspace, os.R_OK | os.X_OK)):
            return WorkflowRefused(RefusalName.WorkspaceUnreachable, f"node {name!r} has {needs}, and the workspace "
                                   f"{workspace} is not a directory this host can reach")
    return None
