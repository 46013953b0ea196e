"""The seam between the run and an adapter is typed end to end.

`RunSpec` lives on the protocol floor (protocol/spec.py), below the adapters, so an adapter can
name it; the decision, frame and command types were already there. Every function of ours under
the run and the adapters that takes a spec, a decision, a frame, a command-queue item or the run
context names its type: a parameter of one of those names annotated `Any` (or not annotated)
fails here.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = REPO / "src" / "metaharness"
SEAM_SIDES = ("run", "adapters")
SEAM_NAMES = {"spec", "decision", "embedder_decision", "frame", "new_frame", "item", "ctx", "termination"}


def untyped(source: str) -> list[tuple[int, str]]:
    """(line, "function(parameter)") for each seam parameter typed `Any` or not at all."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args
            for arg in arguments.posonlyargs + arguments.args + arguments.kwonlyargs:
                if arg.arg in SEAM_NAMES and (arg.annotation is None or ast.unparse(arg.annotation) == "Any"):
                    found.append((node.lineno, f"{node.name}({arg.arg})"))
    return found


def test_the_seam_takes_no_untyped_spec_decision_frame_or_item():
    found = [f"{path.relative_to(REPO)}:{line}: {what}"
             for side in SEAM_SIDES for path in sorted((PACKAGE / side).rglob("*.py"))
             for line, what in untyped(path.read_text())]
    assert found == [], "name the type (metaharness.protocol.spec.RunSpec, values.Decision, frame.Frame, ...):\n" \
        + "\n".join(found)


@pytest.mark.parametrize("source, expected", [
    ("def deliver(self, call_id: str, decision: Any, decided_by: str) -> None: ...", [(1, "deliver(decision)")]),
    ("def __init__(self, spec) -> None: ...", [(1, "__init__(spec)")]),
    ("async def start(self, ctx: Any) -> None: ...", [(1, "start(ctx)")]),
    ("def deliver(self, call_id: str, decision: Decision, decided_by: str) -> None: ...", []),
    ("def take(core, item: CommandLine) -> bool: ...", []),
])
def test_the_check_reads_the_annotations(source, expected):
    assert untyped(source) == expected


def test_the_adapter_contract_names_the_spec_type():
    from metaharness.adapters.base import Adapter
    from metaharness.protocol.spec import RunSpec
    from metaharness.run.spec import RunSpec as documented

    assert documented is RunSpec  # the documented path re-exports the one struct
    assert Adapter.__init__.__annotations__["spec"] == "RunSpec"
