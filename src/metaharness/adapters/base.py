"""The adapter interface: the whole contract between the run and a harness.

An adapter knows one vendor: how to launch it, how to read its records, how to
present a call and deliver a decision, and how to carry each control. It knows
nothing of seq, census, deadlines, frames or command results — those are the run's
(`metaharness.run`: its core and its driver, which call the methods here and nothing else),
the only place they exist.

Flow: the run calls `plan()` (refusals before anything is spawned), then
`start(ctx)` (spawn, vendor capability check, start reading the child), then
`begin_turn(text, frame)` for each turn (the frame when a new one takes effect with it;
rendering it for the vendor is the adapter's). While it runs the adapter reports through `ctx`
(a `RunContext`): `session_started`, `turn_started`, `emit` (any other event),
`present` (a call that needs a decision), `turn_ended`, `session_ended`. The run
answers a presented call by calling `deliver(call_id, decision, decided_by)`, and carries
each control (steer, permission.set, interrupt) as one `control(command)`. When it is done
with turns it calls `finish()` (graceful) or `halt()` (stop now), then waits for the child's
termination (`adapter.child.wait()`).

The contract, all of it (`Adapter` below) — nine methods and the facts they read:
* facts, as class data and a class method: `kind`, `tools`, `controls` (control type → its
  handler), `postures` and `default_posture`, `turn_blocks`, `replace_hint`, `replace_option`,
  `descriptor()`; and one live fact, `turn_coming`;
* the run's calls: `plan`, `start`, `begin_turn`, `deliver`, `control`, `abandoning` (an
  interrupt's or a stop's denies come next), `finish`, `halt`.
What is not a method, and where it lives:
* what a call does: `resolve_tool(adapter.tools, …)`, a plain function of the tool table;
* how the policy engine reads a call: `adapters.policy_view(kind)`, the registry entry's;
* whether a run delivers `replace` at all: a per-run fact the run reads once (`run/harness.py`:
  the descriptor's word, or the adapter's `replace_option` set on the spec);
* the child's life — spawn, reading, halt, kill, wait, the services and files of the run, what
  `--retain-dir` keeps, clean-up — `adapters/process/lifecycle.py`'s `Child`, held as
  `self.child`; the run and the adapter ask it directly (`adapter.child.stderr_tail()`,
  `.retain(dir)`, `.cleanup()`, `.scratch`, and `.alive()`: whether it can still be reached),
  nothing here forwards it. An adapter tells the child, as values, once: the JSON-RPC channel it
  speaks over (`child.channel`, which `alive` asks too), its own end of the session
  (`child.ending`, run by `Child.wait` once the child was reaped: Codex's and ACP's `exited`),
  how that end is read (`child.dies_with_its_output`: ACP's died-agent rule) and what
  `--retain-dir` keeps (`child.keep`). The run waits for the child's end as `Child.wait`;
* which replacement a call can carry: values on the call the adapter presents
  (`PresentedCall.can_replace`, `.replace_only`), read by the run before anything reaches the
  adapter.

Every hook the run may call is declared here with its default; the run probes for
nothing. Options that belong to one vendor are RunSpec fields the adapter's descriptor
lists in `options`; the run reads none of them.
"""

from __future__ import annotations

import abc
import json
from msgspec import Struct, field
import os
from typing import Any, Awaitable, Callable, ClassVar, Iterable, Literal, Mapping, Protocol, Union

from metaharness.adapters.process.child import LaunchError, passed_through, vendor_timeout_ms  # noqa: F401  (the run's)
from metaharness.adapters.process.lifecycle import Child
from metaharness.protocol.descriptor import CapabilityDescriptor
from metaharness.protocol.events import Event, SessionEnded, SessionStarted
from metaharness.protocol.frame import OPERATION_TYPES, Frame
from metaharness.protocol.refusals import CommandCode, RefusalName
from metaharness.protocol.spec import RunSpec
from metaharness.protocol.subjects import file_subject
from metaharness.protocol.commands import Interrupt, PermissionSet, Steer
from metaharness.protocol.values import Decision

# The neutral operations, as the frame's vocabulary names them.
OPERATION_NAMES: tuple[str, ...] = tuple(t.__struct_config__.tag for t in OPERATION_TYPES)

# An operation as the canonical sort key of docs/reference/frame.md: (op, server, tool),
# server and tool "" except for mcp.call.
OpKey = tuple[str, str, str]


class StartRefusal(Exception):
    """The run cannot start; `name` is the refusal's name (e.g. `VendorCapability`),
    `sentence` the one-line reason printed as `metaharness: <sentence>`."""

    def __init__(self, name: str, sentence: str) -> None:
        super().__init__(sentence)
        self.name = name
        self.sentence = sentence


def vendor_settings(names: Iterable[str]) -> dict[str, int]:
    """The caller's settings (`names`, from metaharness's environment) a vendor carries into its
    pinned configuration; the start refused `VendorSettingInvalid`, naming the first that is not a
    whole number of at least 1."""
    try:
        return passed_through(tuple(names), dict(os.environ))
    except LaunchError as exc:
        raise StartRefusal(RefusalName.VendorSettingInvalid, str(exc)) from None


class ControlRefused(Exception):
    """A control the adapter cannot honour right now; becomes a refused command.result."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


class Resolution(Struct):
    """What a call does, in the neutral vocabulary (docs/reference/frame.md).

    `operations` empty means the tool renders to no operation (UNCOVERED_TOOL).
    `subjects` pairs each normalised subject (`file:src/a.py`) with the operations
    the call performs on it; most calls perform all their operations on every
    subject, a Codex `apply_patch` only its entry's operations.
    """

    operations: list[OpKey]
    subjects: list[tuple[str, list[OpKey]]] = field(default_factory=list)


# Why the run abandons the calls waiting (`Adapter.abandoning`).
Abandonment = Literal["interrupt", "stop"]

# The controls the run carries to the child, each as one `Adapter.control(command)`.
Control = Union[Steer, PermissionSet, Interrupt]
# What an adapter with no row in `controls` for a control's type cannot do (its refusal's words).
CANNOT: dict[type, str] = {Steer: "steer a running turn", PermissionSet: "change its posture",
                           Interrupt: "interrupt a turn"}

# What `Adapter.begin_turn` receives: the turn's text, or its blocks for an adapter that sets
# `turn_blocks`.
TurnInput = Union[str, list[str]]

# A tool's subject finder: the path a call acts on, read from its input (None: no subject).
SubjectPath = Callable[[Any], "str | None"]


class Tool(Struct, frozen=True):
    """One row of an adapter's tool table: the vendor tool's operation and where its subject is.

    `subject` reads the path from the call's input; `resolve` replaces the whole row's rule for a
    tool that performs different operations per entry (Codex's `apply_patch`)."""

    op: str = ""
    subject: SubjectPath | None = None
    resolve: Callable[[Any, "str | None", str], Resolution] | None = None
    renders: tuple[str, ...] = ()  # a `resolve` row: the operations it is the rendering of


def rendering_of(table: Mapping[str, Tool], unrendered: tuple[str, ...] = ()) -> dict[str, str | None]:
    """The descriptor's rendering, the inverse of a tool table: each neutral operation's tool is
    the first row that performs it (`op`, or a `resolve` row's `renders`); None for an operation
    no row performs, or one the adapter cannot render (`unrendered`: its calls would not reach the
    seam, or the tool is not offered to the model)."""
    first: dict[str, str] = {}
    for name, tool in table.items():
        for op in (tool.op,) if tool.op else tool.renders:
            first.setdefault(op, name)
    return {op: None if op in unrendered else first.get(op) for op in OPERATION_NAMES}


def path_at(key: str, default: str | None = None, *, when_absent_only: bool = False) -> SubjectPath:
    """The subject at `input[key]` when it is a non-empty string, else `default` (with
    `when_absent_only`: `default` only when the key is missing, no subject for an unusable value)."""

    def subject(input: Any) -> str | None:
        if not isinstance(input, dict):
            return None
        if when_absent_only:
            value = input.get(key, default)
            return value if isinstance(value, str) and value else None
        value = input.get(key)
        return value if isinstance(value, str) and value else default

    return subject


def mcp_resolution(name: str) -> Resolution | None:
    """`mcp__<server>__<tool>` resolves by name to that mcp.call on every harness (the
    descriptor keeps `null` for it); None for any other name, `[]` for a malformed one."""
    if not name.startswith("mcp__"):
        return None
    server, sep, tool = name[len("mcp__"):].partition("__")
    return Resolution(operations=[("mcp.call", server, tool)] if sep and server and tool else [])


def resolve_tool(table: Mapping[str, Tool], name: str, input: Any, cwd: str | None, run_cwd: str) -> Resolution:
    """A call's neutral operations and normalised subjects, from its adapter's tool table (`run_cwd`:
    the run's directory, `RunSpec.work_dir()`): an `mcp__` name by name, a tool the table does not
    know to no operation (UNCOVERED_TOOL). A plain function of the table, not an adapter method."""
    by_name = mcp_resolution(name)
    if by_name is not None:
        return by_name
    tool = table.get(name)
    if tool is None:
        return Resolution(operations=[])
    if tool.resolve is not None:
        return tool.resolve(input, cwd, run_cwd)
    key: OpKey = (tool.op, "", "")
    path = tool.subject(input) if tool.subject is not None else None
    return Resolution(operations=[key], subjects=[(file_subject(path, cwd, run_cwd), [key])] if path else [])


class ReplaceOnly(Struct, frozen=True):
    """The only replacement a presented call can carry: an input of exactly `keys`, each a
    non-empty text; any other is refused with `reason` before it reaches the adapter (Codex's
    relay carries a Bash call's `{"command": …}` and nothing else)."""

    keys: frozenset[str]
    reason: str

    def refusal(self, new_input: Any) -> str | None:
        fits = isinstance(new_input, dict) and set(new_input) == self.keys and all(
            isinstance(value, str) and value.strip() for value in new_input.values())
        return None if fits else self.reason


class PresentedCall(Struct):
    """A call the harness is blocked on, waiting for one decision."""

    call_id: str
    name: str  # the vendor's tool name
    input: Any  # pass-through, exactly as the vendor gave it
    seam: str  # Seam word: how the decision travels back (`Adapter.deliver`)
    cwd: str | None = None  # the call's own working directory, when the vendor said
    at: str | None = None  # vendor timestamp of the record
    can_replace: bool = True  # False where this call cannot carry an updated input
    replace_only: ReplaceOnly | None = None  # the one shape of replacement it carries (None: any)


class RunContext(Protocol):
    """What the loop offers an adapter. Every method is synchronous: the loop writes
    the lines at once, so the order the adapter reports is the order on the wire."""

    run_cwd: str

    def session_started(self, event: SessionStarted, *, at: str | None = None) -> None: ...
    def turn_started(self, *, at: str | None = None) -> None: ...
    def turn_ended(self, stop_reason: str | None, *, at: str | None = None) -> None: ...
    def emit(self, event: Event, *, at: str | None = None) -> None: ...
    def present(self, call: PresentedCall) -> None: ...
    def record_call(self, call_id: str, name: str, input: Any, *, at: str | None = None) -> None: ...
    def session_ended(self, event: SessionEnded, *, at: str | None = None) -> None: ...
    def warn(self, code: str, message: str) -> None: ...
    def opaque(self, raw_line: bytes, *, vendor_type: str | None, vendor_subtype: str | None,
               source_line: int | None) -> None: ...


class Adapter(abc.ABC):
    kind: ClassVar[str]
    # Posture words this adapter accepts for --posture and permission.set.
    postures: ClassVar[tuple[str, ...]] = ()
    default_posture: ClassVar[str | None] = None
    # True: begin_turn receives the turn's text blocks as a list ([frame rendering,
    # injects…, prompt], empty ones left out) instead of one string joined with "\n\n".
    turn_blocks: ClassVar[bool] = False
    # What a user can do when a run requires replace and this adapter cannot deliver it.
    replace_hint: ClassVar[str | None] = None
    # The adapter's own option (a RunSpec field its descriptor lists in `options`) that makes a run
    # deliver `replace` when the descriptor does not say "delivered" (Codex's `codex_replace_relay`).
    replace_option: ClassVar[str | None] = None
    # Vendor tool name → its operation and subject (`resolve_tool`); `mcp__` names resolve by name.
    tools: ClassVar[Mapping[str, Tool]] = {}
    # Control type → its handler, `(adapter, command) → applies_at` (`control`); a type with no row
    # is refused by name. A table per vendor, not a method per control.
    controls: ClassVar[Mapping[type, Callable[[Any, Any], Awaitable[str | None]]]] = {}
    # True while the harness will start another turn by itself, with no boundary command (Claude
    # Code: a steer written after the turn's last tool result becomes the next turn); the run then
    # waits for that turn instead of winding up. A live fact, read at each turn's end: a plain
    # attribute here, a property where the adapter reads it off its protocol's state.
    turn_coming: bool = False

    def __init__(self, spec: RunSpec) -> None:
        self.spec = spec
        self.child: Child | None = None  # from `start` on

    # --- static facts -------------------------------------------------------------
    @classmethod
    @abc.abstractmethod
    def descriptor(cls) -> CapabilityDescriptor:
        """The capability descriptor of this kind (docs/reference/wire.md)."""

    # --- lifecycle ----------------------------------------------------------------
    def plan(self) -> None:
        """Launch-planning refusals (see "Refused starts" in docs/reference/wire.md); raise StartRefusal.
        Runs before anything is spawned."""

    @abc.abstractmethod
    async def start(self, ctx: RunContext) -> None:
        """Spawn the child and begin reading it. Vendor capability checks
        raise StartRefusal before any user line is written."""

    @abc.abstractmethod
    async def begin_turn(self, text: TurnInput, frame: Frame | None = None) -> None:
        """Deliver the user message that starts the next turn. `text` already holds
        any frame rendering and injected messages, ahead of the prompt (a list of
        those blocks when the adapter sets `turn_blocks`). `frame`: the frame in force from
        this turn on (a sealed `Frame`) when a new one took effect at this boundary, else None;
        an adapter that shows it to its harness does so before the turn's input (oharness
        writes it to its system prompt, Codex sets its sandbox from it)."""

    @abc.abstractmethod
    def deliver(self, call_id: str, decision: Decision, decided_by: str) -> None:
        """Write the decision for a presented call to the child; synchronous. Called once
        for every presentation of the call (a call presented twice hears it twice); an
        adapter ignores a decision for a call it already answered."""

    async def control(self, command: Control) -> str | None:
        """Carry a control to the child: the row of `controls` for its type (the handler's answer
        is the command's `applies_at`, None: at once); a type with no row is refused
        UNSUPPORTED_CONTROL by name. Not overridden: an adapter fills in `controls`."""
        handler = self.controls.get(type(command))
        if handler is None:
            raise ControlRefused(CommandCode.UNSUPPORTED_CONTROL, f"the {self.kind} adapter cannot {CANNOT[type(command)]}")
        return await handler(self, command)

    def abandoning(self, cause: Abandonment) -> None:
        """The calls waiting are about to be abandoned: the decisions delivered next are the
        abandonment denies of an `"interrupt"` (the spend cap's too), which the interrupt's
        `control` follows, or of a `"stop"` (halt, SIGINT/SIGTERM; only mid-turn), which `halt()`
        follows. An adapter whose harness could hand a deny to the model before it reads the
        interrupt or the stop carries both as one message, or sends the interrupt first."""

    @abc.abstractmethod
    async def finish(self) -> None:
        """No more turns: let the child end gracefully (e.g. close its stdin)."""

    @abc.abstractmethod
    async def halt(self) -> None:
        """Stop the child now (interrupt, close stdin, kill the process group)."""


# --- the launch frame, as the adapters that set their vendor's sandbox from it read it ---------


def frame_of(spec: RunSpec) -> dict | None:
    """The launch frame as a plain dict (a library frame or the --frame file), or None."""
    frame = spec.library_frame
    if frame is None and spec.frame:
        try:
            with open(spec.frame, "rb") as handle:
                frame = json.load(handle)
        except (OSError, ValueError):
            return None  # the loop refuses an unreadable frame first
    if frame is None:
        return None
    if not isinstance(frame, dict):
        import msgspec

        frame = msgspec.to_builtins(frame)
    return frame if isinstance(frame, dict) else None


def frame_operation_names(frame: Frame | dict | None) -> set[str]:
    """The operation names a frame (a sealed `Frame` or its plain dict) admits."""
    if frame is not None and not isinstance(frame, dict):
        import msgspec

        frame = msgspec.to_builtins(frame)
    names: set[str] = set()
    for op in (frame or {}).get("operations") or []:
        if isinstance(op, dict) and isinstance(op.get("op"), str):
            names.add(op["op"])
    return names


def frame_has_subject_rules(frame: dict | None) -> bool:
    subjects = (frame or {}).get("subjects")
    return isinstance(subjects, dict) and bool(subjects.get("rules"))


def own_version() -> str:
    """metaharness's own version, as a harness's client info names it ("0" when not installed)."""
    try:
        from importlib.metadata import version

        return version("metaharness")
    except Exception:
        return "0"


def load_script(path: str):
    """The run's `--script` scenario, or a StartRefusal naming the turn (docs/scenarios.md)."""
    from metaharness.protocol.scenario import ScenarioError, load_scenario

    try:
        return load_scenario(path)
    except ScenarioError as exc:
        raise StartRefusal(RefusalName.ScenarioInvalid, str(exc)) from None


def plan_loopback_script(spec: RunSpec):
    """For a vendor harness: the scenario its per-run loopback will serve, checked before
    anything is spawned, and the credential flags it cannot be combined with."""
    scenario = load_script(spec.script)
    if spec.credentials != "none" or spec.model_endpoint:
        raise StartRefusal(RefusalName.CredentialConflict, "--script serves the model from a local loopback; "
                                                 "it takes neither --model-endpoint nor credentials other than none")
    return scenario

