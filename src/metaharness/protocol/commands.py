"""The seven commands of `metaharness.command/1` (the user reference: docs/reference/wire.md).

Each command is a msgspec struct tagged by `command`; `id` is part of every
command (it is echoed in the command's one `command.result`). The `frame` of a
`frame.set` is kept as the raw object here: its checks (digest, format) are the
frame module's and run after the line decoded, before the command is carried out.
"""

from __future__ import annotations

from typing import Any, Union

from msgspec import Struct

from .values import Decision

COMMAND_FORMAT = "metaharness.command/1"


class _Command(Struct, tag_field="command", kw_only=True):
    id: str


class ToolDecide(_Command, tag="tool.decide", kw_only=True):
    call_id: str
    decision: Decision


class FrameSet(_Command, tag="frame.set", kw_only=True):
    frame: dict[str, Any]


class MessageInject(_Command, tag="message.inject", kw_only=True):
    text: str


class Steer(_Command, tag="steer", kw_only=True):
    text: str


class PermissionSet(_Command, tag="permission.set", kw_only=True):
    posture: str


class Interrupt(_Command, tag="interrupt", kw_only=True):
    reason: str


class Halt(_Command, tag="halt", kw_only=True):
    reason: str


Command = Union[ToolDecide, FrameSet, MessageInject, Steer, PermissionSet, Interrupt, Halt]

COMMAND_TYPES: tuple[type, ...] = Command.__args__  # type: ignore[attr-defined]
# The seven names in canonical order.
COMMAND_NAMES: tuple[str, ...] = tuple(t.__struct_config__.tag for t in COMMAND_TYPES)
COMMAND_BY_NAME: dict[str, type] = dict(zip(COMMAND_NAMES, COMMAND_TYPES))


def command_name(command: Any) -> str:
    return type(command).__struct_config__.tag
