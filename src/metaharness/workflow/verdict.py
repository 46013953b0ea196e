"""Judging a step when its turn has ended: the handoff, the routing answer, the check.

What belongs here: reading the final answer (a ```json block is accepted),
validating it with `jsonschema`, the artifact test, the routing choice, running a
node's `check` command in the workspace with its timeout, and the `Verdict` value
that the ledger records and the next frame quotes.

Rules kept:
* The handoff is judged first, then the routing answer, then the check; the first
  failure is the step's failure, stated in one sentence that the retry's frame
  carries verbatim.
* A check runs outside the harness and outside the frame: `/bin/sh -c COMMAND` in
  the workspace, in its own process group, killed whole at its timeout. Its output
  (stdout and stderr together) is kept as a tail of at most `TAIL_CHARS`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import signal
from dataclasses import dataclass, field
from typing import Any

from metaharness.protocol.frame import PriorLine

from .document import AnswerHandoff, ArtifactHandoff, Check, LoadedWorkflow, Node, load_schema

TAIL_CHARS = 2000
_FENCE = re.compile(r"```json[ \t]*\n(.*?)```", re.DOTALL)


@dataclass
class CheckResult:
    name: str
    exit_code: int | None  # None when it timed out or could not start
    timed_out: bool
    output_tail: str
    error: str | None = None

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    def failure(self) -> str:
        tail = self.output_tail.rstrip()
        tail_text = f"; the tail of its output:\n{tail}" if tail else "; it printed nothing"
        if self.error is not None:
            return f"check {self.name} could not run: {self.error}"
        if self.timed_out:
            return f"check {self.name} timed out (killed)" + tail_text
        return f"check {self.name} exited {self.exit_code}" + tail_text

    def record(self) -> dict[str, Any]:
        return {"name": self.name, "exit": self.exit_code, "timed_out": self.timed_out,
                "output_tail": self.output_tail, "passed": self.passed, "error": self.error}


@dataclass
class Verdict:
    passed: bool
    handoff: dict[str, Any]  # {"kind", "passed", "evidence" | "reason"}
    choice: str | None = None  # the routing answer, when the node routes
    check: CheckResult | None = None
    failure: str | None = None
    failed_by: str | None = None
    established: list[PriorLine] = field(default_factory=list)


def _tail(text: str) -> str:
    return text[-TAIL_CHARS:]


def answer_json(answer: str) -> Any:
    """The JSON value of a final answer: the last ```json block, else the whole text."""
    blocks = _FENCE.findall(answer)
    text = blocks[-1] if blocks else answer.strip()
    return json.loads(text)


def judge_handoff(node: Node, loaded: LoadedWorkflow, workspace: str, answer: str) -> dict[str, Any]:
    handoff = node.handoff_value
    if isinstance(handoff, ArtifactHandoff):
        target = os.path.join(workspace, handoff.path)
        if not os.path.lexists(target):
            return {"kind": "artifact", "passed": False, "path": handoff.path,
                    "reason": f"the artifact {handoff.path} does not exist in the workspace"}
        try:
            with open(target, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            return {"kind": "artifact", "passed": False, "path": handoff.path,
                    "reason": f"the artifact {handoff.path} could not be read: {exc.strerror or exc}"}
        if handoff.non_empty and not data.strip():
            return {"kind": "artifact", "passed": False, "path": handoff.path,
                    "reason": f"the artifact {handoff.path} is empty"}
        return {"kind": "artifact", "passed": True, "path": handoff.path,
                "evidence": {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}}
    if isinstance(handoff, AnswerHandoff):
        import jsonschema

        try:
            value = answer_json(answer)
        except ValueError as exc:
            return {"kind": "structured_answer", "passed": False, "schema": handoff.schema,
                    "reason": f"the final answer is not JSON: {exc}"}
        schema = load_schema(loaded.schema_path(handoff))  # loadable: checked at start
        validator = jsonschema.validators.validator_for(schema)(schema)
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
        if error is not None:
            where = error.json_path
            return {"kind": "structured_answer", "passed": False, "schema": handoff.schema,
                    "reason": f"the final answer does not validate against {handoff.schema}: at {where}: {error.message}"}
        return {"kind": "structured_answer", "passed": True, "schema": handoff.schema, "evidence": {"answer": value}}
    return {"kind": "none", "passed": True}


def routing_choice(node: Node, answer: str) -> tuple[str | None, str | None]:
    """(the member chosen, None) or (None, why not)."""
    members = node.entities or []
    lines = [line.strip() for line in answer.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    if last in members:
        return last, None
    shown = repr(last) if last else "nothing (the answer is empty)"
    return None, f"the last non-empty line of the final answer is {shown}, not exactly one of {', '.join(members)}"


async def run_check(check: Check, workspace: str) -> CheckResult:
    try:
        proc = await asyncio.create_subprocess_exec(
            "/bin/sh", "-c", check.command, cwd=workspace, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, start_new_session=True)
    except OSError as exc:
        return CheckResult(check.name, None, False, "", error=exc.strerror or str(exc))
    chunks: list[bytes] = []

    async def read() -> None:
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(65536):
            chunks.append(chunk)
            if sum(map(len, chunks)) > 4 * TAIL_CHARS:  # keep memory bounded, keep the tail
                joined = b"".join(chunks)[-2 * TAIL_CHARS:]
                chunks[:] = [joined]

    reader = asyncio.ensure_future(read())
    timed_out = False
    try:
        await asyncio.wait_for(proc.wait(), check.timeout_s)
    except asyncio.TimeoutError:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        await proc.wait()
    try:
        await asyncio.wait_for(reader, 5)
    except asyncio.TimeoutError:
        reader.cancel()
    output = _tail(b"".join(chunks).decode("utf-8", "replace"))
    return CheckResult(check.name, None if timed_out else proc.returncode, timed_out, output)


async def judge(node_id: str, node: Node, loaded: LoadedWorkflow, workspace: str, answer: str) -> Verdict:
    handoff = judge_handoff(node, loaded, workspace, answer)
    if not handoff["passed"]:
        return Verdict(False, handoff, failure="handoff: " + handoff["reason"], failed_by=f"the handoff of {node_id}")
    choice = None
    if node.routing:
        choice, why = routing_choice(node, answer)
        if choice is None:
            return Verdict(False, handoff, failure="routing: " + str(why), failed_by=f"the routing of {node_id}")
    check = None
    if node.check is not None:
        check = await run_check(node.check, workspace)
        if not check.passed:
            return Verdict(False, handoff, choice, check, failure=check.failure(), failed_by=f"check {check.name}")
    return Verdict(True, handoff, choice, check, established=_established(node_id, node, handoff, choice, check))


def _established(node_id: str, node: Node, handoff: dict, choice: str | None, check: CheckResult | None) -> list[PriorLine]:
    """The prior lines a passed step adds, each with the document that established it."""
    if handoff["kind"] == "artifact":
        source = handoff["path"]
    elif handoff["kind"] == "structured_answer":
        source = handoff["schema"]
    elif check is not None:
        source = f"check {check.name}"
    else:
        source = f"step {node_id}"
    lines = [PriorLine(text=line, source=source) for line in node.establishes]
    if handoff["kind"] == "artifact":
        lines.append(PriorLine(text=f"{node_id} produced the artifact {handoff['path']}", source=handoff["path"]))
    elif handoff["kind"] == "structured_answer":
        answer = json.dumps(handoff["evidence"]["answer"], sort_keys=True, ensure_ascii=False)
        lines.append(PriorLine(text=f"{node_id} answered {answer}", source=handoff["schema"]))
    if check is not None:
        lines.append(PriorLine(text=f"{node_id}: check {check.name} passed (exit 0)", source=f"check {check.name}"))
    if choice is not None:
        lines.append(PriorLine(text=f"{node_id} chose {choice}", source=f"step {node_id}"))
    return lines
