"""The workflow document — `metaharness.workflow/1`, written as TOML or as JSON.

What belongs here: the document's typed shape, loading it from a file (TOML by
extension `.toml`, JSON otherwise), its digest, its JSON Schema, and `problems()`
— every check `metaharness workflow check` makes, each naming the node and the
field. Pure apart from reading the one file (and, for `problems`, whether a
referenced schema file loads).

Rules kept:
* `end` is the one way out that is not a node; it may appear in `next` and in
  `entities`, and no node may be called `end`.
* A node with more than one way out is a routing step: it must name `entities`,
  and the entities are exactly its ways out (the model's choice picks the next node).
* Lines (`obligations`, `establishes`, `requires`) are kept verbatim; nothing here
  rewrites them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from typing import Any, Literal, Union

import msgspec
from msgspec import Struct

from metaharness.protocol.frame import OPERATION_WORDS

WORKFLOW_FORMAT = "metaharness.workflow/1"
END = "end"
_NODE_ID = re.compile(r"[A-Za-z0-9._-]+")


class McpOperation(Struct, forbid_unknown_fields=True):
    op: Literal["mcp.call"]
    server: str
    tool: str


class NoHandoff(Struct, tag_field="kind", tag="none", forbid_unknown_fields=True):
    pass


class ArtifactHandoff(Struct, tag_field="kind", tag="artifact", forbid_unknown_fields=True, kw_only=True):
    path: str  # relative to the workspace
    non_empty: bool = False
    artifact_kind: str | None = None  # e.g. "markdown"; shown to the model


class AnswerHandoff(Struct, tag_field="kind", tag="structured_answer", forbid_unknown_fields=True, kw_only=True):
    schema: str  # a JSON Schema file, relative to the workflow file


Handoff = Union[NoHandoff, ArtifactHandoff, AnswerHandoff]


class Check(Struct, forbid_unknown_fields=True, kw_only=True):
    command: str  # run by /bin/sh in the workspace, outside the harness
    name: str = "check"
    timeout_s: float = 60.0


class Node(Struct, forbid_unknown_fields=True, kw_only=True):
    prompt: str
    obligations: list[str] = []
    operations: list[Union[str, McpOperation]] = []
    handoff: Union[Literal["none"], NoHandoff, ArtifactHandoff, AnswerHandoff] = "none"
    check: Check | None = None
    next: list[str] = []
    entities: list[str] | None = None
    max_attempts: int = 1
    establishes: list[str] = []  # lines added to `prior` once this step passes
    requires: list[str] = []  # what a step must know before it may come here (shown as `reaching`)

    @property
    def handoff_value(self) -> Handoff:
        return NoHandoff() if self.handoff == "none" else self.handoff  # type: ignore[return-value]

    @property
    def ways_out(self) -> list[str]:
        return list(self.next) if self.next else [END]

    @property
    def routing(self) -> bool:
        return self.entities is not None


class Workflow(Struct, forbid_unknown_fields=True, kw_only=True):
    format: Literal["metaharness.workflow/1"]
    id: str
    version: str
    start: str
    nodes: dict[str, Node]
    description: str = ""


class WorkflowError(Exception):
    """A workflow file that cannot be read or does not have the document's shape."""


@dataclass(frozen=True)
class Problem:
    node: str | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"node {self.node!r}, field {self.field!r}" if self.node else f"field {self.field!r}"
        return f"{where}: {self.message}"


@dataclass(frozen=True)
class LoadedWorkflow:
    """A workflow with where it came from: the file, its directory and its digest."""

    workflow: Workflow
    path: str
    digest: str  # sha256 over the file's bytes

    @property
    def base_dir(self) -> str:
        return os.path.dirname(self.path)

    def schema_path(self, handoff: AnswerHandoff) -> str:
        return os.path.join(self.base_dir, handoff.schema)


def file_digest(path: str) -> str:
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def load(path: str) -> LoadedWorkflow:
    """Read and shape-check a workflow file; raises WorkflowError with a readable sentence."""
    path = os.path.abspath(path)
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise WorkflowError(f"the workflow file {path} could not be read: {exc.strerror or exc}") from None
    try:
        if path.endswith(".toml"):
            import tomllib

            obj = tomllib.loads(data.decode("utf-8"))
        else:
            obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        kind = "TOML" if path.endswith(".toml") else "JSON"
        raise WorkflowError(f"the workflow file {path} is not valid {kind}: {exc}") from None
    return LoadedWorkflow(workflow=shape(obj), path=path, digest=hashlib.sha256(data).hexdigest())


def shape(obj: Any) -> Workflow:
    if not isinstance(obj, dict):
        raise WorkflowError("a workflow document is an object (a TOML table)")
    if obj.get("format") != WORKFLOW_FORMAT:
        got = "no format tag" if "format" not in obj else f"the format tag {obj.get('format')!r}"
        raise WorkflowError(f"{got}; a workflow document says format = {WORKFLOW_FORMAT!r}")
    raw_nodes = obj.get("nodes")
    nodes: dict[str, Node] = {}
    if isinstance(raw_nodes, dict):  # node by node, so that an error can name its node
        for name, raw in raw_nodes.items():
            try:
                nodes[name] = msgspec.convert(raw, Node, strict=True)
            except msgspec.ValidationError as exc:
                raise WorkflowError(_where(str(exc), node=name)) from None
        obj = {**obj, "nodes": {}}
    try:
        workflow = msgspec.convert(obj, Workflow, strict=True)
    except msgspec.ValidationError as exc:
        raise WorkflowError(_where(str(exc))) from None
    workflow.nodes = nodes
    return workflow


def _where(message: str, node: str | None = None) -> str:
    """msgspec's `… - at `$.next[0]`` → `node 'fix', field 'next[0]': …`."""
    text, sep, at = message.rpartition(" - at `")
    path = at.rstrip("`")[2:] if sep else ""
    if not sep:
        text = message
    if node is not None:
        return f"node {node!r}, field {path!r}: {text}" if path else f"node {node!r}: {text}"
    return f"field {path!r}: {text}" if path else text


# --- problems: what `workflow check` reports -------------------------------------------


def problems(loaded: LoadedWorkflow) -> list[Problem]:
    wf = loaded.workflow
    found: list[Problem] = []
    add = lambda node, field, message: found.append(Problem(node, field, message))  # noqa: E731
    for key in ("id", "version"):
        if not getattr(wf, key).strip():
            add(None, key, "must not be empty")
    if END in wf.nodes:
        add(END, "nodes", f"{END!r} is the way out that ends the workflow and cannot name a node")
    if wf.start not in wf.nodes:
        add(None, "start", f"names {wf.start!r}, which is not a node (nodes: {', '.join(sorted(wf.nodes)) or 'none'})")
    for name, node in wf.nodes.items():
        if not _NODE_ID.fullmatch(name) or name in (".", ".."):
            add(name, "nodes", "a node id is letters, digits, '.', '_' and '-' (it names the step's frame file)")
        if not node.prompt.strip():
            add(name, "prompt", "must not be empty: it is the step's instruction")
        for i, op in enumerate(node.operations):
            if isinstance(op, str):
                if op == "mcp.call":
                    add(name, f"operations[{i}]", "mcp.call names its server and tool: "
                        '{ op = "mcp.call", server = "…", tool = "…" }')
                elif op not in OPERATION_WORDS:
                    add(name, f"operations[{i}]", f"unknown operation {op!r} "
                        f"(known: {', '.join(w for w in OPERATION_WORDS)})")
        seen: set[str] = set()
        for i, target in enumerate(node.next):
            if target in seen:
                add(name, f"next[{i}]", f"names {target!r} twice")
            seen.add(target)
            if target != END and target not in wf.nodes:
                add(name, f"next[{i}]", f"names {target!r}, which is not a node")
        if END in node.next and len(node.next) == 1:
            pass  # `next = ["end"]` is the same as `next = []`
        if node.entities is not None:
            if sorted(node.entities) != sorted(node.ways_out) or len(set(node.entities)) != len(node.entities):
                add(name, "entities", f"must be exactly the ways out {node.ways_out} (each once); "
                    f"it is {node.entities}")
        elif len(node.ways_out) > 1:
            add(name, "entities", f"a node with several ways out ({', '.join(node.ways_out)}) is a routing step "
                "and must list them as entities for the model to choose from")
        if node.max_attempts < 1:
            add(name, "max_attempts", f"must be at least 1, it is {node.max_attempts}")
        handoff = node.handoff_value
        if isinstance(handoff, ArtifactHandoff):
            if os.path.isabs(handoff.path) or ".." in handoff.path.replace("\\", "/").split("/") or not handoff.path.strip():
                add(name, "handoff.path", f"{handoff.path!r} must be a path inside the workspace (relative, no '..')")
        elif isinstance(handoff, AnswerHandoff):
            reason = schema_problem(loaded.schema_path(handoff))
            if reason:
                add(name, "handoff.schema", reason)
        if node.check is not None:
            if not node.check.command.strip():
                add(name, "check.command", "must not be empty")
            if not node.check.timeout_s > 0:
                add(name, "check.timeout_s", f"must be more than 0, it is {node.check.timeout_s}")
    if wf.start in wf.nodes:
        for name in sorted(set(wf.nodes) - reachable(wf)):
            add(name, "nodes", f"is unreachable from the start node {wf.start!r}")
    return found


def reachable(wf: Workflow) -> set[str]:
    seen, todo = set(), [wf.start]
    while todo:
        name = todo.pop()
        if name in seen or name not in wf.nodes:
            continue
        seen.add(name)
        todo += [t for t in wf.nodes[name].next if t != END]
    return seen


def schema_problem(path: str) -> str | None:
    """Why the JSON Schema at `path` does not load, or None when it does."""
    try:
        schema = load_schema(path)
    except ValueError as exc:
        return str(exc)
    del schema
    return None


def load_schema(path: str) -> dict[str, Any]:
    """A JSON Schema file, checked against its own metaschema; ValueError names why not."""
    import jsonschema

    try:
        with open(path, "rb") as handle:
            schema = json.loads(handle.read())
    except OSError as exc:
        raise ValueError(f"the schema {path} could not be read: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"the schema {path} is not JSON: {exc}") from None
    if not isinstance(schema, (dict, bool)):
        raise ValueError(f"the schema {path} is not a JSON Schema (an object or a boolean)")
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"the schema {path} is not a valid JSON Schema: {exc.message}") from None
    return schema


def json_schema() -> dict[str, Any]:
    """The JSON Schema of `metaharness.workflow/1`, generated from the structs."""
    schema = msgspec.json.schema(Workflow)
    result: dict[str, Any] = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": WORKFLOW_FORMAT}
    result.update(schema)
    return result
