"""The bundled demo: a two-step workflow file run through the workflow host (offline).

`demo.workflow.toml` has a survey step that admits only reading and a write-up step
that must produce `summary.md`; `scenario.json` scripts the model. In the survey the
model first tries to write its summary and is refused with the frame's reason, then
reads; the host checks the step, mints the write-up frame and sets it at the
boundary, where the model writes its result and the host checks the artifact.
Everything is real: a real oharness child, the real loop, the real workflow host,
real files in a scratch workspace.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from importlib import resources
from typing import Callable


def prepare(workspace: str | None = None, out: str | None = None) -> tuple[str, str]:
    """(workspace, out): a workspace holding the notes the model reads, and a new run directory."""
    root = None
    if workspace is None or out is None:
        root = tempfile.mkdtemp(prefix="metaharness-demo-")
    workspace = workspace or os.path.join(root, "work")
    out = out or os.path.join(root, "run")
    os.makedirs(workspace, exist_ok=True)
    with open(os.path.join(workspace, "notes.txt"), "w", encoding="utf-8") as handle:
        handle.write("release 0.1: wire core done; run loop done; permissions next\n")
    return workspace, out


async def run_demo(workspace: str, out: str, on_line: Callable[[bytes], None]):
    """Run the demo workflow on oharness; `on_line` gets every event line as written."""
    from metaharness.protocol.spec import RunSpec
    from metaharness.workflow import run_workflow

    package = resources.files(__package__)
    with resources.as_file(package / "demo.workflow.toml") as workflow, \
            resources.as_file(package / "scenario.json") as scenario:
        script = os.path.join(out + ".scenario.json")
        shutil.copyfile(scenario, script)  # the run reads it while the package file may be temporary
        try:
            return await run_workflow(str(workflow), harness="oharness", out=out,
                                      task="Summarise the release status in summary.md.",
                                      spec=RunSpec(kind="oharness", script=script, cwd=workspace), on_line=on_line)
        finally:
            os.unlink(script)
