"""How metaharness launches oharness: `python -m oharness --stdio …` (docs/internals/oharness-stdio.md)."""

from __future__ import annotations

import os
import sys


def argv(spec, session_dir: str | None) -> list[str]:
    args = [sys.executable, "-m", "oharness", "--stdio", "--model", spec.model or "scripted:default"]
    if spec.script:
        args += ["--script", os.path.abspath(spec.script)]
    if spec.cwd:
        args += ["--cwd", os.path.abspath(spec.cwd)]
    if spec.posture:
        args += ["--mode", spec.posture]
    if spec.no_decision_trail:
        args.append("--no-decision-trail")
    if session_dir:
        args += ["--session-dir", session_dir]
    return args
