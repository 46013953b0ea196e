"""The frame — `metaharness.frame/1` (the user reference: docs/reference/frame.md).

What belongs here: the frame's typed value (operations tagged by `op`, handoffs
tagged by `handoff`), its canonical form and digest, the canonical document bytes, the ordered load
checks with their named refusals, the checks of a `frame.set`'s frame, and the one
shared rendering function.

Rules kept:
* Operation sets are always held normalised — deduplicated and sorted by
  `(op, server, tool)` in code-point order — so the digest of a frame does
  not depend on how a producer ordered its list.
* Writing a frame out never reseals it: `document_bytes` writes the digest held.
* Every load failure is a `FrameRefusal` named `FrameUnreadable` or `FrameInvalid`
  with the load-check detail, checked in the load-check order; nothing else escapes.
Pure: the only I/O is `load_frame` reading one file.
"""

from __future__ import annotations

from typing import Any, Iterable, Union

import msgspec
from msgspec import UNSET, Struct, UnsetType

from ._typeplan import translate_error
from .refusals import RefusalName
from .values import StepRef

FRAME_FORMAT = "metaharness.frame/1"

# --- operations ---------------------------------------------------------------------


class _Op(Struct, tag_field="op", frozen=True):
    pass


class FileRead(_Op, tag="file.read", frozen=True):
    pass


class FileWrite(_Op, tag="file.write", frozen=True):
    pass


class FileEdit(_Op, tag="file.edit", frozen=True):
    pass


class DirList(_Op, tag="dir.list", frozen=True):
    pass


class Search(_Op, tag="search", frozen=True):
    pass


class Shell(_Op, tag="shell", frozen=True):
    pass


class WebRead(_Op, tag="web.read", frozen=True):
    pass


class SkillLoad(_Op, tag="skill.load", frozen=True):
    pass


class SubagentSpawn(_Op, tag="subagent.spawn", frozen=True):
    pass


class TaskTodo(_Op, tag="task.todo", frozen=True):
    pass


class McpCall(_Op, tag="mcp.call", frozen=True):
    server: str
    tool: str


Operation = Union[
    FileRead, FileWrite, FileEdit, DirList, Search, Shell, WebRead, SkillLoad, SubagentSpawn, TaskTodo, McpCall
]
OPERATION_TYPES: tuple[type, ...] = Operation.__args__  # type: ignore[attr-defined]
_OP_BY_NAME: dict[str, type] = {t.__struct_config__.tag: t for t in OPERATION_TYPES}

# The ten parameterless operations in canonical order: code-point order of their names.
OPERATION_NAMES: tuple[str, ...] = tuple(sorted(n for n in _OP_BY_NAME if n != "mcp.call"))
# Every operation word, parameterless and `mcp.call`, in canonical order.
OPERATION_WORDS: tuple[str, ...] = tuple(sorted(_OP_BY_NAME))


def op_name(op: Any) -> str:
    return type(op).__struct_config__.tag


def op_key(op: Any) -> tuple[str, str, str]:
    """The canonical sort key: (op, server, tool), server and tool "" outside `mcp.call`."""
    if type(op) is McpCall:
        return ("mcp.call", op.server, op.tool)
    return (type(op).__struct_config__.tag, "", "")


def op_from_key(key: tuple[str, str, str]) -> Any:
    name, server, tool = key
    cls = _OP_BY_NAME.get(name)
    if cls is None:
        raise ValueError(f"unknown operation {_q(name)}")
    return McpCall(server=server, tool=tool) if cls is McpCall else cls()


def normalise_operations(ops: Iterable[Any]) -> list[Any]:
    """Deduplicate and sort by (op, server, tool) in code-point order (the canonical order)."""
    by_key = {op_key(op): op for op in ops}
    return [by_key[k] for k in sorted(by_key)]


# --- handoff ---------------------------------------------------------------------------


class HandoffNone(Struct, tag_field="handoff", tag="none", frozen=True):
    pass


class HandoffArtifact(Struct, tag_field="handoff", tag="artifact", frozen=True, kw_only=True):
    name: str
    kind: str | None = None


class HandoffStructuredAnswer(Struct, tag_field="handoff", tag="structured_answer", frozen=True, kw_only=True):
    schema: str


Handoff = Union[HandoffNone, HandoffArtifact, HandoffStructuredAnswer]

# --- the frame ------------------------------------------------------------------------


class WorkflowRef(Struct, kw_only=True):
    id: str
    version: str


class NodeRef(Struct, kw_only=True):
    id: str


class PriorLine(Struct, kw_only=True):
    text: str
    source: str | None = None


class Requirement(Struct, kw_only=True):
    """An `obligations` or `reaching` line."""

    text: str
    asked_by: str | None = None


class SubjectRule(Struct, kw_only=True):
    subjects: list[str]
    operations: list[Operation]

    def __post_init__(self) -> None:
        self.operations = normalise_operations(self.operations)


class SubjectScope(Struct, kw_only=True):
    rules: list[SubjectRule]


class Entities(Struct, kw_only=True):
    source: str
    members: list[str]


class Frame(Struct, kw_only=True):
    workflow: WorkflowRef
    node: NodeRef
    step: StepRef
    prior: list[PriorLine]
    obligations: list[Requirement]
    reaching: list[Requirement]
    next: list[NodeRef]
    handoff: Handoff
    operations: list[Operation]
    subjects: SubjectScope | None | UnsetType = UNSET  # null is read as "no scope"
    entities: Entities | None = None
    digest: str

    def __post_init__(self) -> None:
        self.operations = normalise_operations(self.operations)
        if self.subjects is not UNSET and self.subjects is not None and not self.subjects.rules:
            self.subjects = UNSET  # no rules: omitted, exactly like no scope
        elif self.subjects is None:
            self.subjects = UNSET


class _FrameBody(Struct):
    """Every frame field except `digest`, in the same order: what the digest covers."""

    workflow: WorkflowRef
    node: NodeRef
    step: StepRef
    prior: list[PriorLine]
    obligations: list[Requirement]
    reaching: list[Requirement]
    next: list[NodeRef]
    handoff: Handoff
    operations: list[Operation]
    subjects: SubjectScope | UnsetType = UNSET
    entities: Entities | None = None


class _FrameDocHead(Struct):
    format: str


class _Decoders:
    """Built on first use so that importing stays cheap."""

    def __getattr__(self, name: str) -> Any:
        self.frame = msgspec.json.Decoder(Frame)
        self.head = msgspec.json.Decoder(_FrameDocHead)
        return self.__dict__[name]


_D = _Decoders()
_SORTED = msgspec.json.Encoder(order="sorted")  # struct fields and dict keys sorted at every level

# --- refusals ----------------------------------------------------------------------------


class FrameRefusal(Exception):
    """A frame document refused at load: name is FrameUnreadable or FrameInvalid, detail says why."""

    def __init__(self, name: str, detail: str) -> None:
        super().__init__(detail)
        self.name = name
        self.detail = detail

    def sentence(self, path: str) -> str:
        """The refusal sentence for a document at `path` (the run refusal and `frame verify`)."""
        if self.name == RefusalName.FrameUnreadable:
            return f"the frame document {path} could not be read: {self.detail}"
        return f"the frame document {path} is not a sealed metaharness.frame/1 document: {self.detail}"

    def seal_sentence(self, path: str) -> str:
        """The refusal sentence of `frame seal`, whose input is not yet sealed."""
        if self.name == RefusalName.FrameUnreadable:
            return f"the frame object {path} could not be read: {self.detail}"
        return f"the frame object {path} cannot be sealed: {self.detail}"

    def __str__(self) -> str:
        return f"{self.name}: {self.detail}"


class FrameCommandError(ValueError):
    """A `frame.set` frame that does not verify; `reason` is the MALFORMED reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _q(text: str) -> str:
    return msgspec.json.encode(text).decode()  # the same escapes as json.dumps(ensure_ascii=False)


def _format_detail(value: Any, *, present: bool) -> str | None:
    """The format-tag load check's detail, or None when the tag is right."""
    if not present:
        return f"no format tag, expected {_q(FRAME_FORMAT)}"
    if not isinstance(value, str):
        return f"unknown format tag \"<not a string>\", expected {_q(FRAME_FORMAT)}"
    if value != FRAME_FORMAT:
        return f"unknown format tag {_q(value)}, expected {_q(FRAME_FORMAT)}"
    return None


def _mismatch_detail(stated: str, computed: str) -> str:
    return (
        f"the stated digest {stated} does not describe the contents (computed {computed}); "
        "the frame was never sealed or was edited after sealing"
    )


# --- canonical form, digest, document ---------------------------------------------------


def canonical_bytes(frame: Frame) -> bytes:
    """The canonical form the digest is taken over: compact, keys sorted at every level, without
    `digest` and `format`."""
    subjects = frame.subjects
    if subjects is not UNSET and subjects is not None:
        if subjects.rules:
            subjects = SubjectScope(
                rules=[SubjectRule(subjects=r.subjects, operations=r.operations) for r in subjects.rules]
            )
        else:
            subjects = UNSET
    else:
        subjects = UNSET
    body = _FrameBody(
        frame.workflow,
        frame.node,
        frame.step,
        frame.prior,
        frame.obligations,
        frame.reaching,
        frame.next,
        frame.handoff,
        normalise_operations(frame.operations),
        subjects,
        frame.entities,
    )
    return _SORTED.encode(body)


def compute_digest(frame: Frame) -> str:
    import hashlib  # deferred: importing the package stays cheap

    return hashlib.sha256(canonical_bytes(frame)).hexdigest()


def document_bytes(frame: Frame) -> bytes:
    """The on-disk document bytes, with the digest held (never resealed)."""
    import json  # deferred: only document writing needs json's pretty printer

    doc = msgspec.to_builtins(frame)
    doc["format"] = FRAME_FORMAT
    return (json.dumps(doc, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def missing_fields(obj: Any, struct: type = None) -> list[str]:  # type: ignore[assignment]
    """Every required key missing from `obj` read as `struct` (default Frame), as JSON paths.

    Walks nested objects, lists and tagged unions (by their tag), so a producer sees
    every gap of a hand-written frame at once instead of one per attempt."""
    import msgspec.inspect as mi

    found: list[str] = []

    def walk(value: Any, info: Any, where: str) -> None:
        if isinstance(info, mi.UnionType):
            for member in info.types:
                if isinstance(member, mi.StructType) and isinstance(value, dict):
                    if member.tag_field is None or value.get(member.tag_field) == member.tag:
                        walk(value, member, where)
                        return
            return
        if isinstance(info, mi.ListType) and isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, info.item_type, f"{where}[{index}]")
        elif isinstance(info, mi.StructType) and isinstance(value, dict):
            for field in info.fields:
                path = f"{where}.{field.encode_name}" if where else field.encode_name
                if field.encode_name in value:
                    walk(value[field.encode_name], field.type, path)
                elif field.required:
                    found.append(path)

    walk(obj, mi.type_info(struct or Frame), "")
    return found


def _shape(obj: dict[str, Any]) -> Frame:
    try:
        return msgspec.convert(obj, Frame, strict=True)
    except msgspec.ValidationError as exc:
        raise FrameRefusal(RefusalName.FrameInvalid, "not a frame: " + translate_error(str(exc), Frame, obj)) from None


def _utf8_offset(data: bytes | str) -> int:
    try:
        (data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data).decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start
    return -1


def _parse_json(data: bytes | str) -> Any:
    try:
        return msgspec.json.decode(data)
    except UnicodeDecodeError:
        offset = _utf8_offset(data)
        raise FrameRefusal(
            RefusalName.FrameInvalid,
            f"not a JSON object: the document is not valid UTF-8: the first invalid byte sequence starts at byte offset {offset}",
        ) from None
    except (msgspec.DecodeError, RecursionError) as exc:
        raise FrameRefusal(RefusalName.FrameInvalid, f"not a JSON object: {exc}") from None


def parse_frame_document(data: bytes | str) -> Frame:
    """The load checks after reading, on a document's bytes; raises FrameRefusal("FrameInvalid", detail)."""
    # Fast path: a well-formed document decodes typed in two short passes.
    try:
        if _D.head.decode(data).format == FRAME_FORMAT:
            frame = _D.frame.decode(data)
            computed = compute_digest(frame)
            if computed != frame.digest:
                raise FrameRefusal(RefusalName.FrameInvalid, _mismatch_detail(frame.digest, computed))
            return frame
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        pass  # the slow path names the first failing step
    obj = _parse_json(data)
    if not isinstance(obj, dict):
        raise FrameRefusal(RefusalName.FrameInvalid, "not a JSON object: the document is JSON but not an object")
    if detail := _format_detail(obj.get("format"), present="format" in obj):
        raise FrameRefusal(RefusalName.FrameInvalid, detail)
    frame = _shape(obj)
    computed = compute_digest(frame)
    if computed != frame.digest:
        raise FrameRefusal(RefusalName.FrameInvalid, _mismatch_detail(frame.digest, computed))
    return frame


def load_frame(path: Any) -> Frame:
    """Every load check for a file: FrameUnreadable, then the document checks."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise FrameRefusal(RefusalName.FrameUnreadable, exc.strerror or str(exc)) from None
    return parse_frame_document(data)


def seal(obj: Any) -> Frame:
    """A frame object (`format`, `digest` optional) → a sealed Frame.

    Without `digest` the digest is computed; with one it must verify (sealing never
    repairs an edited frame). Every missing field is reported at once. Refusals are FrameRefusal("FrameInvalid", …)."""
    if not isinstance(obj, dict):
        raise FrameRefusal(RefusalName.FrameInvalid, "not a JSON object: the document is JSON but not an object")
    if "format" in obj and (detail := _format_detail(obj["format"], present=True)):
        raise FrameRefusal(RefusalName.FrameInvalid, detail)
    missing = [path for path in missing_fields(obj) if path != "digest"]
    if missing:
        fields = ", ".join(f"`{path}`" for path in missing)
        raise FrameRefusal(RefusalName.FrameInvalid, f"missing field{'s' if len(missing) > 1 else ''} {fields}")
    if "digest" in obj:
        frame = _shape(obj)
        computed = compute_digest(frame)
        if computed != frame.digest:
            raise FrameRefusal(RefusalName.FrameInvalid, _mismatch_detail(frame.digest, computed))
        return frame
    frame = _shape({**obj, "digest": ""})
    frame.digest = compute_digest(frame)
    return frame


def frame_from_command(obj: Any) -> Frame:
    """The checks of the `frame` of a `frame.set`; raises FrameCommandError(reason)."""
    prefix = "malformed frame.set: "
    if not isinstance(obj, dict):
        raise FrameCommandError(prefix + "not a frame: the frame is not a JSON object")
    if "format" in obj:
        value = obj["format"]
        if not isinstance(value, str):
            raise FrameCommandError(prefix + f"no format tag, expected {_q(FRAME_FORMAT)}")
        if value != FRAME_FORMAT:
            raise FrameCommandError(prefix + f"unknown format tag {_q(value)}, expected {_q(FRAME_FORMAT)}")
    try:
        frame = _shape(obj)
    except FrameRefusal as exc:
        raise FrameCommandError(prefix + exc.detail) from None
    computed = compute_digest(frame)
    if computed != frame.digest:
        raise FrameCommandError(prefix + _mismatch_detail(frame.digest, computed))
    return frame


# --- rendering ------------------------------------------------------------------------


def admitted_names(frame: Frame) -> list[str]:
    """The frame's operation names in canonical order, each once (for frame-mode deny reasons)."""
    names: list[str] = []
    for op in normalise_operations(frame.operations):
        name = op_name(op)
        if not names or names[-1] != name:
            names.append(name)
    return names


def _requirement_lines(items: list[Requirement]) -> list[str]:
    return [f"- {r.text} ({r.asked_by})" if r.asked_by is not None else f"- {r.text}" for r in items]


def render(frame: Frame) -> str:
    """The frame as instruction text for the model: lines joined by "\\n", no trailing newline."""
    lines = [
        f"Workflow {frame.workflow.id} ({frame.workflow.version}), state {frame.node.id}, "
        f"step {frame.step.index} attempt {frame.step.attempt}."
    ]
    lines += ["", "Already established:"]
    if frame.prior:
        lines += [f"- {p.text} ({p.source})" if p.source is not None else f"- {p.text}" for p in frame.prior]
    else:
        lines.append("- nothing yet.")
    lines += ["", "Must hold here:"]
    if frame.obligations:
        lines += _requirement_lines(frame.obligations)
    else:
        lines.append("- nothing is required of this step beyond its handoff.")
    if frame.reaching:
        lines += ["", "Not yet satisfied on a way out:"] + _requirement_lines(frame.reaching)
    if frame.next:
        lines += ["", "Reachable from here: " + ", ".join(n.id for n in frame.next) + "."]
    handoff = frame.handoff
    if isinstance(handoff, HandoffArtifact):
        owes = f"the artifact {handoff.name} (kind {handoff.kind})." if handoff.kind is not None else f"the artifact {handoff.name}."
    elif isinstance(handoff, HandoffStructuredAnswer):
        owes = f"a structured answer against the schema {handoff.schema}."
    else:
        owes = "nothing."
    lines += ["", "This step owes: " + owes]
    if frame.entities is not None:
        lines += ["", f"Choose exactly one of these, enumerated from {frame.entities.source}:"]
        lines += [f"- {m}" for m in frame.entities.members]
    lines += ["", "Strictly only these operations are admitted here:"]
    ops = normalise_operations(frame.operations)
    if ops:
        lines += [f"- mcp.call {op.server}/{op.tool}" if type(op) is McpCall else f"- {op_name(op)}" for op in ops]
    else:
        lines.append("- none. This step calls no tools.")
    lines += ["", f"Frame {frame.digest}."]
    return "\n".join(lines)
