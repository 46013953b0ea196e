"""Minting a step's frame from the workflow document — pure.

What belongs here: `Position` (which node, which attempt, the failure that sent us
back), `mint()` that turns a node and a position into a sealed `metaharness.frame/1`
value, and the sentences the frame says about handoffs and checks.

Rules kept:
* `step.index` counts every step taken in the workflow run (across resumed
  sessions); `step.attempt` counts from 1 each time a node is entered and rises by
  one only when a judged step at that node failed.
* `prior` is given by the caller, line by line, each with the document that
  established it; `obligations` are the node's lines verbatim, plus — on a retry —
  the previous attempt's failure, verbatim, asked by the check or handoff that failed.
* `reaching` names, for each way out, what still has to hold to take it, prefixed
  with where it goes.
"""

from __future__ import annotations

from dataclasses import dataclass

from metaharness.protocol import frame as frames

from .document import END, AnswerHandoff, ArtifactHandoff, McpOperation, Node, Workflow


@dataclass(frozen=True)
class Position:
    node: str
    attempt: int = 1
    failure: str | None = None  # the verbatim reason the previous attempt here failed
    failed_by: str | None = None  # which check or handoff said so


def handoff_need(node: Node) -> str | None:
    """What the node's handoff needs, as one sentence (None for handoff none)."""
    handoff = node.handoff_value
    if isinstance(handoff, ArtifactHandoff):
        return f"the artifact {handoff.path} exists in the workspace" + (" and is not empty" if handoff.non_empty else "")
    if isinstance(handoff, AnswerHandoff):
        return f"the final answer is JSON (a ```json block is accepted) that validates against {handoff.schema}"
    return None


def check_need(node: Node) -> str | None:
    if node.check is None:
        return None
    return f"the check {node.check.name} (`{node.check.command}`, run by the host in the workspace) exits 0"


def reaching(wf: Workflow, node: Node) -> list[frames.Requirement]:
    own = [n for n in (handoff_need(node), check_need(node)) if n]
    lines: list[frames.Requirement] = []
    for way in node.ways_out:
        needs = list(own)
        if node.routing:
            needs.append(f"the last non-empty line of the final answer is {way}")
        if way != END:
            needs += wf.nodes[way].requires
        lines += [frames.Requirement(text=f"{way}: {need}") for need in needs]
    return lines


def _operation(op: str | McpOperation) -> dict:
    if isinstance(op, McpOperation):
        return {"op": "mcp.call", "server": op.server, "tool": op.tool}
    return {"op": op}


def mint(wf: Workflow, position: Position, *, index: int, prior: list[frames.PriorLine]) -> frames.Frame:
    """The sealed frame of step `index` at `position` (digest computed here)."""
    node = wf.nodes[position.node]
    handoff = node.handoff_value
    if isinstance(handoff, ArtifactHandoff):
        frame_handoff: dict = {"handoff": "artifact", "name": handoff.path}
        if handoff.artifact_kind is not None:
            frame_handoff["kind"] = handoff.artifact_kind
    elif isinstance(handoff, AnswerHandoff):
        frame_handoff = {"handoff": "structured_answer", "schema": handoff.schema}
    else:
        frame_handoff = {"handoff": "none"}
    obligations = [{"text": line} for line in node.obligations]
    if position.failure is not None:
        obligations.append({
            "text": f"attempt {position.attempt - 1} failed: {position.failure}",
            "asked_by": position.failed_by or "the workflow host",
        })
    body = {
        "workflow": {"id": wf.id, "version": wf.version},
        "node": {"id": position.node},
        "step": {"workflow": wf.id, "state": position.node, "index": index, "attempt": position.attempt},
        "prior": [{"text": p.text, "source": p.source} for p in prior],
        "obligations": obligations,
        "reaching": [{"text": r.text} for r in reaching(wf, node)],
        "next": [{"id": n} for n in node.next if n != END],
        "handoff": frame_handoff,
        "operations": [_operation(op) for op in node.operations],
    }
    if node.entities is not None:
        body["entities"] = {"source": f"the ways out of {position.node}", "members": list(node.entities)}
    return frames.seal(body)


# --- walking the workflow: the one place the step rules live --------------------------


@dataclass(frozen=True)
class Ending:
    name: str  # AttemptsExhausted
    reason: str


class Walk:
    """Where a workflow run is: the position, the next step's index, the prior lines.

    `enter()` mints the frame of the step about to be taken; `judged(...)` applies a
    verdict: a pass moves to the chosen (or only) way out at attempt 1, `end` ends
    the walk; a failure stays at the node with attempt + 1 and the failure quoted,
    until the node's `max_attempts` is used up, which ends the walk with an `Ending`.
    """

    def __init__(self, wf: Workflow, position: Position, index: int, prior: list[frames.PriorLine]) -> None:
        self.wf, self.position, self.index, self.prior = wf, position, index, list(prior)
        self.done = False
        self.ending: Ending | None = None

    def enter(self) -> frames.Frame:
        return mint(self.wf, self.position, index=self.index, prior=self.prior)

    def judged(self, *, passed: bool, choice: str | None = None, failure: str | None = None,
               failed_by: str | None = None, established: list[frames.PriorLine] = ()) -> Position | None:
        """Apply the verdict of the step just taken; return the next position (None: the walk ended)."""
        node = self.wf.nodes[self.position.node]
        self.index += 1
        if passed:
            self.prior = _merge(self.prior, list(established))
            way = choice if node.routing else node.ways_out[0]
            if way is None or way == END:
                self.done = True
                return None
            self.position = Position(node=way)
            return self.position
        if self.position.attempt >= node.max_attempts:
            self.done = True
            self.ending = Ending("AttemptsExhausted", f"node {self.position.node} failed {self.position.attempt} "
                                 f"of {node.max_attempts} attempt(s); the last: {failure}")
            return None
        self.position = Position(node=self.position.node, attempt=self.position.attempt + 1,
                                 failure=failure, failed_by=failed_by)
        return self.position


def _merge(prior: list[frames.PriorLine], added: list[frames.PriorLine]) -> list[frames.PriorLine]:
    """Prior lines in the order established, each (text, source) once."""
    seen = {(p.text, p.source) for p in prior}
    out = list(prior)
    for line in added:
        if (line.text, line.source) not in seen:
            seen.add((line.text, line.source))
            out.append(line)
    return out


merge_prior = _merge
