"""The run's reading of its adapter's capability descriptor and class facts.

What belongs here: the few answers the run derives from the adapter's facts — which commands
it honours, which decision modes it delivers, which postures it takes, what a turn's input
looks like, which offered tools render to which operations, which vendor options are foreign
to it. No run rule lives here (those are in `core.py`, `calls.py`, `commands.py` and
`start.py`), and nothing is forwarded: the driver calls the adapter's own methods
(`adapters/base.py`) directly, as `run.adapter`; the core never calls it (its actions do).

Rules it keeps:
* A descriptor command that is not `"honoured"` is refused with the code it names,
  else UNSUPPORTED_CONTROL — for a required command at start and for a command at run
  time alike (`command_refusal`).
* The run never names a vendor: a vendor's own options are carried by its adapter and
  descriptor (`option_refusal`).
"""

from __future__ import annotations

from metaharness.adapters.base import Adapter, TurnInput, resolve_tool
from metaharness.protocol.descriptor import CapabilityDescriptor
from metaharness.protocol.spec import RunSpec

from .spec import foreign_option


class Harness:
    """One adapter's facts as the run reads them."""

    def __init__(self, adapter: Adapter, spec: RunSpec) -> None:
        self.adapter = adapter
        self.spec = spec
        self.kind: str = spec.kind
        self.descriptor: CapabilityDescriptor = adapter.descriptor()
        # This run delivers `replace`: the descriptor's word, or the adapter's own option set.
        option = adapter.replace_option
        self.delivers_replace = self.descriptor.replace == "delivered" or bool(option and getattr(spec, option))

    def command_refusal(self, name: str) -> str | None:
        """None when the adapter honours command `name`; else the refusal code it declares."""
        return self.descriptor.command_refusal(name)

    def delivers_mode(self, mode: str) -> bool:
        return self.descriptor.delivers_mode(mode)

    def reachable(self) -> bool:
        """False once the adapter's child is known to be gone or out of reach (`Child.alive`); True
        before it has one."""
        child = self.adapter.child
        return child is None or child.alive()

    def accepts_posture(self, word: str) -> bool:
        return word in self.adapter.postures

    def operations_of_tools(self, tools: list[str]) -> list[str]:
        """The operations the offered tools render to, for `session.started`."""
        names: set[str] = set()
        for tool in tools:
            try:
                resolution = resolve_tool(self.adapter.tools, tool, {}, None, self.adapter.spec.work_dir())
            except Exception:  # a resolver that needs input cannot say; skip it
                continue
            names.update(op[0] for op in resolution.operations)
        return sorted(names)  # canonical order: mcp.call sorts between file.write and search

    def turn_input(self, blocks: list[str]) -> TurnInput:
        """What begin_turn receives: the non-empty blocks as a list for an adapter that
        keeps them apart (`turn_blocks`), else one string joined with a blank line."""
        blocks = [b for b in blocks if b]
        return blocks if self.adapter.turn_blocks else "\n\n".join(blocks)

    def option_refusal(self) -> str | None:
        """An adapter option given to a run of another kind: the start refusal's sentence."""
        return foreign_option(self.spec, self.descriptor.options)
