"""Claude Code's tool table: what each call resolves to in the neutral vocabulary
(docs/reference/frame.md), and the descriptor's rendering derived from it. No I/O.
"""

from __future__ import annotations

from metaharness.adapters.base import Tool, path_at, rendering_of

FILE_PATH = path_at("file_path")
# Agent and Task both spawn a subagent.
TOOLS: dict[str, Tool] = {
    "Read": Tool("file.read", FILE_PATH), "Write": Tool("file.write", FILE_PATH), "Edit": Tool("file.edit", FILE_PATH),
    "Bash": Tool("shell"), "Skill": Tool("skill.load"), "Agent": Tool("subagent.spawn"), "Task": Tool("subagent.spawn"),
}
RENDERING = rendering_of(TOOLS)
