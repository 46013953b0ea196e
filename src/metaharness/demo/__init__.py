"""The bundled two-step demo workflow (offline, scripted model, oharness).

Step 1 ("survey") admits only reading; the model first tries to write its summary
and is refused with the frame's reason, then reads. The embedder (this module)
answers the refusal by sending `frame.set` for step 2 ("write-up"), which admits
file.write; at that boundary the model writes its result. Everything is real: a
real oharness child, the real loop, real files in a scratch workspace.
"""

from __future__ import annotations

import json
import os
import tempfile
from importlib import resources
from typing import Any, Callable

import msgspec

from metaharness.protocol import frame as frames
from metaharness.protocol.events import ToolDecided
from metaharness.protocol.values import Deny
from metaharness.run.spec import RunSpec


def _data(name: str) -> Any:
    return json.loads(resources.files(__package__).joinpath(name).read_text("utf-8"))


def step_frame(name: str) -> frames.Frame:
    return frames.seal(_data(name))


def prepare_workspace(root: str | None = None) -> str:
    """A scratch workspace with the notes the demo's model reads."""
    workspace = root or tempfile.mkdtemp(prefix="metaharness-demo-")
    os.makedirs(workspace, exist_ok=True)
    with open(os.path.join(workspace, "notes.txt"), "w", encoding="utf-8") as handle:
        handle.write("release 0.1: wire core done; run loop done; permissions next\n")
    return workspace


def demo_spec(workspace: str, scenario_path: str, events_path: str | None) -> RunSpec:
    step1 = frames.document_bytes(step_frame("step1.frame.json"))
    frame_path = os.path.join(workspace, ".metaharness-step1.frame.json")
    with open(frame_path, "wb") as handle:
        handle.write(step1)
    return RunSpec(
        kind="oharness", prompt="Survey the workspace, then write summary.md.",
        frame=frame_path, script=scenario_path, cwd=workspace, events=events_path,
        required_commands=["frame.set"],
    )


async def run_demo(workspace: str, events_path: str | None, on_line: Callable[[bytes], None]) -> int:
    """Run the demo in process; `on_line` gets every event line as written."""
    from metaharness.api import start_run

    scenario_path = os.path.join(workspace, ".metaharness-demo.scenario.json")
    with open(scenario_path, "w", encoding="utf-8") as handle:
        json.dump(_data("scenario.json"), handle)
    run = await start_run(demo_spec(workspace, scenario_path, events_path))
    step2 = msgspec.to_builtins(step_frame("step2.frame.json"))
    sent = False
    seen = 0
    async with run:
        async for _envelope, event in run:
            for line in run.lines[seen:]:
                on_line(line)
            seen = len(run.lines)
            # The embedder's policy: a refused write means step 1 is over.
            if not sent and isinstance(event, ToolDecided) and isinstance(event.decision, Deny):
                await run.set_frame(step2)
                sent = True
    for line in run.lines[seen:]:
        on_line(line)
    return run.exit_code if run.exit_code is not None else 2
