"""The capability descriptor: what one adapter kind can deliver (docs/reference/wire.md).

What belongs here: the descriptor as a typed value (`CapabilityDescriptor`), the one
constructor every harness adapter uses (`harness_descriptor`), the questions the run
asks of it (`command_refusal`, `delivers_mode`), and its wire form (`to_wire`). The
content — which tools, which pin, which commands are refused — is each adapter's.

Rules kept:
* the wire form is fixed: keys in the order `adapter, versions_pinned, tiers, commands,
  decision_modes, replace, [deny_reason], [subjectless], rendering`, commands and
  rendering sorted by name, a refused command written `{"refused": CODE}`; what
  `metaharness capabilities` prints is `to_wire()` and nothing else;
* a command the descriptor does not name is refused `UNSUPPORTED_CONTROL`;
* `options` (the run options this adapter owns, e.g. Codex's replace relay) is not part
  of the wire form: it tells the run which vendor options this kind accepts.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, Struct, UnsetType

from .refusals import CommandCode

# Every command a harness adapter can honour, and every decision mode, by name.
HARNESS_COMMANDS = ("frame.set", "halt", "interrupt", "message.inject", "permission.set", "steer", "tool.decide")
MODES = ("ask", "frame", "observe", "policy")
UNSUPPORTED = CommandCode.UNSUPPORTED_CONTROL


class AdapterId(Struct, frozen=True):
    id: str
    class_: str = msgspec.field(name="class", default="harness")


class Tiers(Struct, frozen=True):
    """Whether each control tier is delivered, unverified or absent."""

    registration: str
    call: str = "delivered"
    turn: str = "delivered"
    kill: str = "delivered"


class CommandRefused(Struct, frozen=True):
    refused: str = UNSUPPORTED


class DenyReason(Struct, frozen=True):
    """Whether a deny's reason reaches the model, and what the model sees instead."""

    reaches_model: bool
    model_sees: str


class CapabilityDescriptor(Struct, frozen=True, kw_only=True):
    adapter: AdapterId
    versions_pinned: tuple[str, ...]
    tiers: Tiers
    commands: dict[str, str | CommandRefused]  # "honoured" or {"refused": CODE}
    decision_modes: dict[str, str]
    replace: str  # delivered / unverified / absent
    deny_reason: DenyReason | UnsetType = UNSET
    subjectless: tuple[str, ...] | UnsetType = UNSET  # operations this harness asks about with no subject
    rendering: dict[str, str | None]  # neutral operation → the vendor tool that performs it
    options: tuple[str, ...] = ()  # RunSpec fields this adapter owns (not on the wire)

    @property
    def kind(self) -> str:
        return self.adapter.id

    def command_refusal(self, name: str) -> str | None:
        """None when the command is honoured, else the code it is refused with."""
        status = self.commands.get(name)  # a name it does not list is refused UNSUPPORTED
        if status == "honoured":
            return None
        return status.refused if isinstance(status, CommandRefused) else UNSUPPORTED

    def delivers_mode(self, mode: str) -> bool:
        return self.decision_modes.get(mode, "absent") == "delivered"

    def to_wire(self) -> dict[str, Any]:
        """The descriptor as the ordered dict `metaharness capabilities` prints."""
        wire = msgspec.to_builtins(self)
        del wire["options"]
        return wire


def harness_descriptor(kind: str, pin: str, rendering: dict[str, str | None], *, registration: str,
                       replace: str, refused: tuple[str, ...] = (),
                       deny_reason: DenyReason | UnsetType = UNSET,
                       subjectless: tuple[str, ...] | UnsetType = UNSET,
                       options: tuple[str, ...] = ()) -> CapabilityDescriptor:
    """A harness adapter's descriptor: every decision mode delivered, every harness command
    honoured but those `refused` (UNSUPPORTED_CONTROL), calls, turns and kills delivered."""
    return CapabilityDescriptor(
        adapter=AdapterId(id=kind),
        versions_pinned=(pin,),
        tiers=Tiers(registration=registration),
        commands={name: CommandRefused() if name in refused else "honoured" for name in sorted(HARNESS_COMMANDS)},
        decision_modes={mode: "delivered" for mode in MODES},
        replace=replace,
        deny_reason=deny_reason,
        subjectless=subjectless,
        rendering=dict(sorted(rendering.items())),
        options=options,
    )


__all__ = ["HARNESS_COMMANDS", "AdapterId", "CapabilityDescriptor", "CommandRefused", "DenyReason", "Tiers",
           "harness_descriptor"]
