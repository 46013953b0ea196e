"""What an ACP vendor module supplies: the whole contract between the ACP core (`adapter.py`)
and one agent, in one file. A vendor module subclasses `AcpAdapter` and fills in what is here.

What belongs here: the hooks and facts a vendor names (how it is launched and pinned, how a
permission request becomes a call, which mode it must stay in, what the doctor shows) and the
capability descriptor every ACP agent shares. What does not: the lifecycle, the seam, the reading.
"""

from __future__ import annotations

from typing import Any, ClassVar

from msgspec import UNSET, UnsetType

from metaharness.adapters.process import Scratch
from metaharness.protocol.descriptor import CapabilityDescriptor, DenyReason, harness_descriptor
from metaharness.protocol.values import ImposedRow

PLACEHOLDER_KEY = "metaharness-placeholder-key"  # the key every ACP agent sees


class AcpVendor:
    """The hooks and facts one ACP vendor supplies (its module's `AcpAdapter` subclass)."""

    fixed_refusal: ClassVar[str]  # the text the model sees for a refused call
    model_provider: ClassVar[str]  # the provider a failed model request names (the wire it speaks)
    hold_s: ClassVar[float] = 5.0
    takeup_s: ClassVar[float] = 60.0  # a real model may think long before the agent's next line
    # Is the `cost` the agent reports (ACP `usage_update`) a price it knows? False: written as
    # unknown (null), never as the agent's 0 (the wire reference: an unknown cost is never 0).
    prices_its_model: ClassVar[bool] = True

    def vendor_argv(self, binary: str) -> list[str]:
        raise NotImplementedError

    def vendor_env(self, scratch: Scratch, base_url: str) -> dict[str, str]:
        """Write the pinning files into the scratch home; the child's own environment keys."""
        raise NotImplementedError

    def call_of(self, tool_call: dict, final: bool) -> tuple[str, Any, str | None] | None:
        """(vendor tool name, input, cwd) of a permission request; None while the arguments
        are still to come (unless `final`)."""
        raise NotImplementedError

    def tool_name_of(self, tool_call: dict) -> str:
        """The vendor tool name of a reported call (the title, unless the vendor says otherwise)."""
        return str(tool_call.get("title") or "unknown")

    def check_session(self, result: dict) -> None:
        """Refuse (StartRefusal) a session whose mode is not the pinned one."""

    def mode_allowed(self, mode: str) -> bool:
        return mode == self.initial_mode

    def vendor_plan(self) -> None:
        """Vendor refusals before anything is spawned (the frame, the decision mode)."""

    def vendor_rows(self) -> list[ImposedRow]:
        return []

    @classmethod
    def pinning(cls, modules: Any) -> list[tuple[str, str | None]]:
        """The switches a run imposes, as `metaharness doctor` lists them, given the vendor's
        node_modules directory (a detail of None: cannot be imposed there)."""
        raise NotImplementedError



def acp_descriptor(kind: str, pin: str, rendering: dict[str, str | None], fixed_refusal: str,
                   subjectless: tuple[str, ...] | UnsetType = UNSET) -> CapabilityDescriptor:
    """The capability descriptor every ACP adapter shares: asked calls and turn-boundary text are
    delivered; steer and permission.set have no ACP carriage; no input rewrite; the model sees
    only the agent's fixed refusal text."""
    return harness_descriptor(kind, pin, rendering, registration="unverified", replace="absent",
                              refused=("permission.set", "steer"),
                              deny_reason=DenyReason(reaches_model=False, model_sees=fixed_refusal),
                              subjectless=subjectless)
