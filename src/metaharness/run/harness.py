"""The run's side of the adapter contract: every call the run makes into its adapter,
and every read of the adapter's capability descriptor, one method each.

What belongs here: nothing but forwarding and looking up. No run rule lives here —
the rules (when to deliver, what to refuse, in which order) are in `core.py`,
`calls.py`, `commands.py` and `start.py`, and they reach the harness only through
this class. So a change of the adapter contract (how a decision travels back, how a
frame is handed over, which hooks exist) is a change of this one file.

Rules it keeps:
* A descriptor command that is not `"honoured"` is refused with the code it names,
  else UNSUPPORTED_CONTROL — for a required command at start and for a command at run
  time alike (`command_refusal`).
* The run never names a vendor: a vendor's own options are carried by its adapter and
  descriptor (`replace_delivered`, `option_refusal`).
"""

from __future__ import annotations

from typing import Any

from metaharness.adapters.base import Adapter, PresentedCall, Resolution, RunContext, TurnInput
from metaharness.protocol.descriptor import CapabilityDescriptor
from metaharness.protocol.frame import Frame
from metaharness.protocol.spec import RunSpec
from metaharness.protocol.values import Decision

from .spec import foreign_option


class Harness:
    """One adapter as the run sees it."""

    def __init__(self, adapter: Adapter, spec: RunSpec) -> None:
        self.adapter = adapter
        self.spec = spec
        self.kind: str = spec.kind
        self.descriptor: CapabilityDescriptor = adapter.descriptor()

    # --- the descriptor and the class facts -----------------------------------------
    def command_refusal(self, name: str) -> str | None:
        """None when the adapter honours command `name`; else the refusal code it declares."""
        return self.descriptor.command_refusal(name)

    def delivers_mode(self, mode: str) -> bool:
        return self.descriptor.delivers_mode(mode)

    def accepts_posture(self, word: str) -> bool:
        return word in self.adapter.postures

    @property
    def postures(self) -> tuple[str, ...]:
        return self.adapter.postures

    @property
    def replace_hint(self) -> str | None:
        return self.adapter.replace_hint

    # --- one call ---------------------------------------------------------------------
    def resolve(self, name: str, input: Any, cwd: str | None) -> Resolution:
        return self.adapter.resolve(name, input, cwd)

    def operations_of_tools(self, tools: list[str]) -> list[str]:
        """The operations the offered tools render to, for `session.started`."""
        names: set[str] = set()
        for tool in tools:
            try:
                resolution = self.adapter.resolve(tool, {}, None)
            except Exception:  # a resolver that needs input cannot say; skip it
                continue
            names.update(op[0] for op in resolution.operations)
        return sorted(names)  # canonical order: mcp.call sorts between file.write and search

    def vendor_timeout_ms(self, deadline_ms: int) -> int:
        return self.adapter.vendor_timeout_ms(deadline_ms)

    def deliver(self, call: PresentedCall, decision: Decision, decided_by: str) -> None:
        """Hand one decision to the child, once per presentation of the call (synchronous;
        raises when the child went away)."""
        self.adapter.deliver(call.call_id, decision, decided_by)

    def refuse_replacement(self, call_id: str, new_input: Any) -> str | None:
        """Why the adapter cannot carry this replacement input to the pending call, or None."""
        return self.adapter.refuse_replacement(call_id, new_input)

    # --- turns --------------------------------------------------------------------------
    def turn_input(self, blocks: list[str]) -> TurnInput:
        """What begin_turn receives: the non-empty blocks as a list for an adapter that
        keeps them apart (`turn_blocks`), else one string joined with a blank line."""
        blocks = [b for b in blocks if b]
        return blocks if self.adapter.turn_blocks else "\n\n".join(blocks)

    def turn_coming(self) -> bool:
        return self.adapter.turn_coming()

    def stderr_tail(self) -> str:
        return self.adapter.stderr_tail()

    # --- the lifecycle (the coroutines are the adapter's own; the driver awaits them) --------
    def plan(self) -> None:
        self.adapter.plan()

    def start(self, ctx: RunContext):
        return self.adapter.start(ctx)

    def begin_turn(self, turn_input: TurnInput):
        return self.adapter.begin_turn(turn_input)

    def set_frame(self, frame: Frame):
        """The frame in force changed at a boundary."""
        return self.adapter.set_frame(frame)

    def steer(self, text: str):
        return self.adapter.steer(text)

    def set_posture(self, word: str):
        return self.adapter.set_posture(word)

    def interrupting(self) -> None:
        self.adapter.interrupting()

    def stopping(self) -> None:
        self.adapter.stopping()

    def interrupt(self):
        return self.adapter.interrupt()

    def alive(self) -> bool:
        return self.adapter.alive()

    def finish(self):
        return self.adapter.finish()

    def halt(self):
        return self.adapter.halt()

    def wait(self):
        return self.adapter.wait()

    def retain(self, directory: str) -> list[str]:
        return self.adapter.retain(directory)

    def cleanup(self) -> None:
        self.adapter.cleanup()

    # --- vendor options: the adapter's own, named by its descriptor -------------------------
    def replace_delivered(self) -> bool:
        return self.adapter.replace_delivered()

    def option_refusal(self) -> str | None:
        """An adapter option given to a run of another kind: the start refusal's sentence."""
        return foreign_option(self.spec, self.descriptor.options)
