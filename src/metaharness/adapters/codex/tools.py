"""Codex's tool table: what each call resolves to in the neutral vocabulary (docs/reference/frame.md).

What belongs here: the table and `apply_patch`'s per-entry resolution (an approval's `changes`, or
the patch text a relay hook shows). No I/O.
"""

from __future__ import annotations

from typing import Any

from metaharness.adapters.base import OpKey, Resolution, Tool, rendering_of
from metaharness.protocol.subjects import file_subject

from .relay import patch_changes

FILE_WRITE: OpKey = ("file.write", "", "")
FILE_EDIT: OpKey = ("file.edit", "", "")


def apply_patch_resolution(changes: Any, call_cwd: str | None, run_cwd: str) -> Resolution:
    """apply_patch resolves per file entry (docs/reference/wire.md): add → file.write,
    update → file.edit, delete → file.write, move → file.write of destination and source."""
    subjects: list[tuple[str, list[OpKey]]] = []
    ops: list[OpKey] = []
    for change in changes if isinstance(changes, list) else []:
        if not isinstance(change, dict) or not isinstance(change.get("path"), str):
            return Resolution(operations=[])  # an entry we cannot read: nothing resolves
        kind = change.get("kind") if isinstance(change.get("kind"), dict) else {}
        kind_type = kind.get("type")
        move_path = kind.get("move_path")
        if kind_type == "update" and isinstance(move_path, str):
            entry = [(file_subject(move_path, call_cwd, run_cwd), [FILE_WRITE]),
                     (file_subject(change["path"], call_cwd, run_cwd), [FILE_WRITE])]
        elif kind_type == "update":
            entry = [(file_subject(change["path"], call_cwd, run_cwd), [FILE_EDIT])]
        elif kind_type in ("add", "delete"):
            entry = [(file_subject(change["path"], call_cwd, run_cwd), [FILE_WRITE])]
        else:
            return Resolution(operations=[])
        for subject, subject_ops in entry:
            subjects.append((subject, subject_ops))
            for op in subject_ops:
                if op not in ops:
                    ops.append(op)
    return Resolution(operations=sorted(ops), subjects=subjects)


def patch_resolution(input: Any, call_cwd: str | None, run_cwd: str) -> Resolution:
    """An apply_patch call: its `changes` (an approval), or the patch text a relay hook shows."""
    changes = input.get("changes") if isinstance(input, dict) else None
    if changes is None and isinstance(input, dict):
        changes = patch_changes(input.get("command"))  # a relay presentation: the patch text
    return apply_patch_resolution(changes, call_cwd, run_cwd)


TOOLS: dict[str, Tool] = {"Bash": Tool("shell"),
                          "apply_patch": Tool(resolve=patch_resolution, renders=("file.edit", "file.write"))}
RENDERING = rendering_of(TOOLS)
