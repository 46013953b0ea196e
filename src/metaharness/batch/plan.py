"""The batch plan, `metaharness.batch/1`: parse, validate, expand into cells.

What belongs here: the plan's typed shape (msgspec structs, which also give the
JSON Schema of `metaharness schema batch`), loading it from TOML or JSON, every
check of the plan itself (`batch check` then makes each cell's start checks, in
preflight.py), and the expansion of a plan into its cells
(task × harness × repeat, in that order).

Rules kept:
* every refusal is a `PlanError` whose sentence names the task or harness at fault
  (by id, and by position when the id itself is what is wrong);
* relative paths in a plan resolve against the plan file's own directory, and are
  made absolute here, once, so nothing downstream depends on the current directory;
* no I/O beyond reading the plan and the files it names; nothing is written.
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

from metaharness.permissions import MODES, WORKSPACE_MODES
from metaharness.protocol.harnesses import Kind
from metaharness.protocol.refusals import RefusalName
from metaharness.protocol.spec import CREDENTIAL_MODES, DECISION_MODES, HERMETIC_MODES

BATCH_FORMAT = "metaharness.batch/1"

Ident = Annotated[str, Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$",
                            description="letters, digits, '.', '_' and '-'; it names a directory")]
Seconds = Annotated[float, Meta(gt=0)]


class Check(Struct, kw_only=True, forbid_unknown_fields=True):
    """A shell command run in the cell's workspace after its run; exit 0 is a pass."""
    command: str
    timeout_s: Seconds = 60.0


class Task(Struct, kw_only=True, forbid_unknown_fields=True):
    id: Ident
    prompt: str | None = None
    script: str | None = None  # a metaharness.scenario/1 file scripting the model
    frame: str | None = None  # a sealed metaharness.frame/1 document
    workflow: str | None = None  # a workflow file, run with `metaharness workflow run`
    policy: list[str] = msgspec.field(default_factory=list)  # policy-mode settings documents
    workspace: str | None = None  # a template directory, copied fresh for every cell
    check: Check | None = None
    timeout_s: Seconds | None = None  # wall-clock limit of one cell's run


class RunOptions(Struct, kw_only=True, forbid_unknown_fields=True):
    """The `metaharness run` options that are about a harness, each spelled as its flag."""
    model: str | None = None
    decisions: Literal[DECISION_MODES] | None = None  # type: ignore[valid-type]
    deny_only: bool | None = None
    decision_timeout_ms: Annotated[int, Meta(ge=1)] | None = None
    posture: str | None = None
    codex_replace_relay: bool | None = None
    required_commands: list[str] | None = None
    hermetic: Literal[HERMETIC_MODES] | None = None  # type: ignore[valid-type]
    strict_version: bool | None = None
    max_turns: Annotated[int, Meta(ge=1)] | None = None
    max_cost_usd: Annotated[float, Meta(gt=0)] | None = None  # each cell's own cap, kept live by its run
    credentials: Literal[CREDENTIAL_MODES] | None = None  # type: ignore[valid-type]
    model_endpoint: str | None = None
    vendor_dir: str | None = None
    policy_scopes: Literal["all", "none"] | None = None
    policy_mode: Literal[MODES] | None = None  # type: ignore[valid-type]
    policy_workspace_mode: Literal[WORKSPACE_MODES] | None = None  # type: ignore[valid-type]
    policy_ask: Literal["none", "embedder"] | None = None
    no_decision_trail: bool | None = None


RUN_OPTIONS: tuple[str, ...] = RunOptions.__struct_fields__


class Harness(RunOptions, kw_only=True, forbid_unknown_fields=True):
    """A harness kind and its run options (an option it leaves out comes from the plan's defaults)."""
    kind: Kind
    id: Ident | None = None  # defaults to the kind

    @property
    def name(self) -> str:
        return self.id or self.kind


class Defaults(RunOptions, kw_only=True, forbid_unknown_fields=True):
    """Run options for every harness that does not give its own, and the batch's own defaults."""
    timeout_s: Seconds | None = None  # a task's timeout_s when it gives none
    retries: Annotated[int, Meta(ge=0)] = 0  # the --retries of `batch run` when it gives none


class Plan(Struct, kw_only=True, forbid_unknown_fields=True):
    format: Literal["metaharness.batch/1"]
    tasks: Annotated[list[Task], Meta(min_length=1)]
    harnesses: Annotated[list[Harness], Meta(min_length=1)]
    repeats: Annotated[int, Meta(ge=1)] = 1
    defaults: Defaults = msgspec.field(default_factory=Defaults)


class PlanError(ValueError):
    """A plan that cannot run; the sentence names the task or harness at fault."""


@dataclass(frozen=True)
class Cell:
    task: Task
    harness: Harness
    repeat: int  # from 1

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.task.id, self.harness.name, self.repeat)

    @property
    def label(self) -> str:
        return f"{self.task.id}/{self.harness.name}/{self.repeat}"


def plan_schema() -> dict[str, Any]:
    schema = msgspec.json.schema(Plan)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": BATCH_FORMAT, **schema}


def workflows_available() -> bool:
    """Whether this installation has `metaharness workflow run` (a workflow task's cell runs it):
    whether the workflow package is installed — looked up, not imported, and not read from the
    CLI's command table (the planner sits below the CLI)."""
    import importlib.util

    try:
        return importlib.util.find_spec("metaharness.workflow") is not None
    except (ImportError, ValueError):
        return False


# --- loading ---------------------------------------------------------------------------

def _parse(path: str, data: bytes) -> Any:
    if path.endswith(".toml"):
        try:
            return tomllib.loads(data.decode("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise PlanError(f"the plan {path} is not valid TOML: {exc}") from None
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PlanError(f"the plan {path} is not valid JSON: {exc}") from None


def _where(kind: str, index: int, raw: Any) -> str:
    ident = raw.get("id") if isinstance(raw, dict) else None
    if kind == "harness" and ident is None and isinstance(raw, dict):
        ident = raw.get("kind")
    return f"{kind} {ident!r} (#{index + 1})" if isinstance(ident, str) else f"{kind} #{index + 1}"


def _convert(raw: Any, cls: type, where: str) -> Any:
    try:
        return msgspec.convert(raw, cls)
    except msgspec.ValidationError as exc:
        raise PlanError(f"{where}: {exc}") from None


def load_plan(path: str) -> Plan:
    """Read, parse and validate a plan file; paths in it come back absolute."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise PlanError(f"the plan {path} could not be read: {exc.strerror or exc}") from None
    return parse_plan(_parse(path, data), base=os.path.dirname(os.path.abspath(path)))


def parse_plan(raw: Any, *, base: str) -> Plan:
    """Validate a plan given as a dict (relative paths resolve against `base`)."""
    if not isinstance(raw, dict):
        raise PlanError("a plan is a table (TOML) or an object (JSON) at the top level")
    if raw.get("format") != BATCH_FORMAT:
        raise PlanError(f"the plan's format must be {BATCH_FORMAT!r}, not {raw.get('format')!r}")
    for key in ("tasks", "harnesses"):
        if not isinstance(raw.get(key), list) or not raw[key]:
            raise PlanError(f"the plan needs a non-empty list of {key}")
    tasks = [_convert(t, Task, _where("task", i, t)) for i, t in enumerate(raw["tasks"])]
    harnesses = [_convert(h, Harness, _where("harness", i, h)) for i, h in enumerate(raw["harnesses"])]
    # The top-level keys are checked with one task and one harness (already checked above,
    # each under its own name), then the full lists are put in.
    rest = {k: v for k, v in raw.items() if k not in ("tasks", "harnesses")}
    plan = _convert({**rest, "tasks": raw["tasks"][:1], "harnesses": raw["harnesses"][:1]}, Plan, "the plan")
    plan.tasks = [_resolve_task(t, base) for t in tasks]
    plan.defaults = msgspec.structs.replace(plan.defaults, vendor_dir=_abs(base, plan.defaults.vendor_dir))
    plan.harnesses = [_with_defaults(_resolve_harness(h, base), plan.defaults) for h in harnesses]
    _check_unique([t.id for t in plan.tasks], "task")
    _check_unique([h.name for h in plan.harnesses], "harness")
    for task in plan.tasks:
        _check_task(task)
    return plan


def _check_unique(names: list[str], kind: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            hint = " (give each harness of the same kind its own id)" if kind == "harness" else ""
            raise PlanError(f"{kind} {name!r} appears twice; ids must be unique{hint}")
        seen.add(name)


def _abs(base: str, path: str | None) -> str | None:
    return None if path is None else os.path.normpath(os.path.join(base, os.path.expanduser(path)))


def _resolve_task(task: Task, base: str) -> Task:
    return msgspec.structs.replace(
        task, script=_abs(base, task.script), frame=_abs(base, task.frame), workflow=_abs(base, task.workflow),
        workspace=_abs(base, task.workspace), policy=[_abs(base, p) for p in task.policy])


def _resolve_harness(harness: Harness, base: str) -> Harness:
    return msgspec.structs.replace(harness, vendor_dir=_abs(base, harness.vendor_dir))


def _with_defaults(harness: Harness, defaults: Defaults) -> Harness:
    inherited = {name: getattr(defaults, name) for name in RUN_OPTIONS
                 if getattr(harness, name) is None and getattr(defaults, name) is not None}
    return msgspec.structs.replace(harness, **inherited)


def _check_task(task: Task) -> None:
    where = f"task {task.id!r}"
    if task.workflow is not None:
        if task.frame is not None:
            raise PlanError(f"{where} gives both a frame and a workflow; a workflow brings its own frames")
        if not workflows_available():
            raise PlanError(f"{RefusalName.WorkflowUnavailable}: {where} names a workflow, and this installation of "
                            "metaharness has no `metaharness workflow run` to run it")
    elif not task.prompt:
        raise PlanError(f"{where} has no prompt")
    for label, path in (("script", task.script), ("frame", task.frame), ("workflow", task.workflow),
                        *(("policy", p) for p in task.policy)):
        if path is not None and not os.path.isfile(path):
            raise PlanError(f"{where}: its {label} file {path} does not exist")
    if task.workspace is not None and not os.path.isdir(task.workspace):
        raise PlanError(f"{where}: its workspace template {task.workspace} is not a directory")
    if task.script is not None:
        from metaharness.protocol.scenario import ScenarioError, load_scenario

        try:
            load_scenario(task.script)
        except ScenarioError as exc:
            raise PlanError(f"{where}: {exc}") from None
    if task.frame is not None:
        from metaharness.protocol.frame import FrameRefusal, load_frame

        try:
            load_frame(task.frame)
        except FrameRefusal as exc:
            raise PlanError(f"{where}: {exc.sentence(task.frame)}") from None


def cells(plan: Plan) -> list[Cell]:
    return [Cell(task, harness, repeat) for task in plan.tasks for harness in plan.harnesses
            for repeat in range(1, plan.repeats + 1)]


def plan_files(plan: Plan) -> list[str]:
    """Every file and directory the plan names (what must travel to a remote worker)."""
    found: list[str] = []
    for task in plan.tasks:
        for path in (task.script, task.frame, task.workflow, task.workspace, *task.policy):
            if path is not None and path not in found:
                found.append(path)
    return found


def plan_fingerprint(plan: Plan) -> bytes:
    """The plan's canonical bytes, kept in DIR so a resume can tell it is the same batch."""
    return msgspec.json.encode(plan, order="deterministic")

