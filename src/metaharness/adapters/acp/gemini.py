"""The `gemini` adapter: Gemini CLI 0.61.0 driven through `gemini --acp`.

Pinning (every tool asks, nothing in the workspace can undo it):
* `--approval-mode default` on the command line (it beats a workspace's
  `defaultApprovalMode`), and the run never sends `session/set_mode`; a `current_mode_update`
  away from `default` ends the run — auto-edit skips the ask for edit tools even under the
  policy below;
* `--policy <scratch>/ask-all.toml`: one user-tier rule, every tool `ask_user` at priority
  999 — without it reads, listing, glob, grep and web search are never asked;
* `~/.gemini/settings.json` in the scratch home: API-key auth against the loopback,
  `security.disableAlwaysAllow` (no "allow for this session" option is even offered) and
  `privacy.usageStatisticsEnabled: false` (no usage telemetry), and `general.maxAttempts` when
  the caller sets METAHARNESS_GEMINI_MAX_ATTEMPTS (`PASSED_THROUGH`);
* `GEMINI_CLI_TRUST_WORKSPACE` is never set, so a workspace `.gemini/settings.json` is not
  read;
* `GEMINI_CLI_NO_RELAUNCH=1` keeps it in one process (it would start itself again with a larger
  heap, paying its start-up twice).

What Gemini CLI cannot give over ACP, and the refusals that follow (`vendor_plan`):
* the permission request carries no arguments object: the shell command is its `title`, a
  write's path its diff, a read's path its `locations`; glob and grep show only the pattern,
  so a frame whose subject rules would have to place a `dir.list` or `search` is refused;
* `invoke_agent`'s inner calls never appear: a frame admitting `subagent.spawn` is refused.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any, ClassVar

from metaharness.adapters.base import (StartRefusal, Tool, frame_has_subject_rules, frame_of,
                                      frame_operation_names, rendering_of, vendor_settings)
from metaharness.adapters.process import Scratch
from metaharness.protocol.descriptor import CapabilityDescriptor
from metaharness.protocol.harnesses import harness
from metaharness.protocol.refusals import RefusalName
from metaharness.protocol.values import ImposedRow

from .adapter import AcpAdapter
from .contract import PLACEHOLDER_KEY, acp_descriptor

PIN = harness("gemini").pin  # the registry's (protocol/harnesses.py)
MODE = "default"
ASK_ALL = '[[rule]]\ntoolName = "*"\ndecision = "ask_user"\npriority = 999\n'
# Gemini tool → neutral operation; how its subject is found (None: no subject shown)
TOOLS: dict[str, tuple[str, str | None]] = {
    "run_shell_command": ("shell", None),
    "write_file": ("file.write", "diff"),
    "replace": ("file.edit", "diff"),
    "read_file": ("file.read", "location"),
    "read_many_files": ("file.read", "location"),
    "list_directory": ("dir.list", "location"),
    "glob": ("dir.list", None),
    "grep_search": ("search", None),
    "web_fetch": ("web.read", None),
    "activate_skill": ("skill.load", None),
    "invoke_agent": ("subagent.spawn", None),
    "write_todos": ("task.todo", None),
}
POLICY_FILE_TOOLS = {"write_file": "Write", "replace": "Edit", "read_file": "Read"}
# The operations whose permission request shows no subject.
SUBJECTLESS = ("dir.list", "search")
FIXED_REFUSAL = 'Tool "<name>" was canceled by the user.'
# The caller's settings carried into the pinned settings when set (docs/guides/ci.md): how many
# attempts Gemini CLI makes at one model request (`general.maxAttempts`; its default and ceiling
# is 10, with back-off to minutes, also for a refused connection) — a CI job sets 1.
PASSED_THROUGH = {"METAHARNESS_GEMINI_MAX_ATTEMPTS": ("general", "maxAttempts")}


def settings(passed: dict[str, int] | None = None) -> dict[str, Any]:
    document: dict[str, Any] = {
        "security": {"auth": {"selectedType": "gemini-api-key"}, "disableAlwaysAllow": True},
        "privacy": {"usageStatisticsEnabled": False},
    }
    for name, value in (passed or {}).items():
        section, key = PASSED_THROUGH[name]
        document.setdefault(section, {})[key] = value
    return document


def tool_name(tool_call: dict) -> str:
    """`run_shell_command__run_shell_command_1796…_0` → `run_shell_command`."""
    call_id = str(tool_call.get("toolCallId") or "")
    name = call_id.split("__", 1)[0] if "__" in call_id else ""
    return name or str(tool_call.get("kind") or "unknown")


def shown_path(name: str, input: Any) -> str | None:
    """The path Gemini CLI shows for a call: a diff's path, else the first location."""
    entry = TOOLS.get(name)
    if entry is None or entry[1] is None or not isinstance(input, dict):
        return None
    if entry[1] == "diff":
        for block in input.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "diff" and isinstance(block.get("path"), str):
                return block["path"]
    for location in input.get("locations") or []:
        if isinstance(location, dict) and isinstance(location.get("path"), str):
            return location["path"]
    return None



# The tool table: the subject is the path Gemini CLI shows for the call. invoke_agent's inner
# calls never reach the seam and write_todos is not rendered: neither is a rendering.
TABLE = {name: Tool(op, partial(shown_path, name)) for name, (op, _) in TOOLS.items()}
RENDERING = rendering_of(TABLE, unrendered=("subagent.spawn", "task.todo"))

def policy_view(name: str, input: Any) -> tuple[str, Any]:
    """The registry's `policy_view` for Gemini CLI, which shows no arguments object: the engine gets
    what the request shows. A shell call's command is its title; a file call's path its diff or
    location. glob and grep show no directory, so they keep their own names and the engine, knowing
    no rule for them, asks (and without `--policy-ask embedder` an ask is a refusal)."""
    if not isinstance(input, dict):
        return name, input
    if name == "run_shell_command" and isinstance(input.get("title"), str):
        return "Bash", {"command": input["title"]}
    rule_tool = POLICY_FILE_TOOLS.get(name)
    path = shown_path(name, input)
    if rule_tool is not None and path is not None:
        return rule_tool, {"file_path": path}
    return name, input


class GeminiAdapter(AcpAdapter):
    kind: ClassVar[str] = "gemini"
    model_provider = "gemini"
    tools = TABLE
    fixed_refusal = FIXED_REFUSAL

    @classmethod
    def descriptor(cls) -> CapabilityDescriptor:
        return acp_descriptor(cls.kind, PIN, RENDERING, FIXED_REFUSAL, subjectless=tuple(SUBJECTLESS))

    @classmethod
    def pinning(cls, modules: Any) -> list[tuple[str, str | None]]:
        """The switches a run imposes, as the doctor shows them."""
        return [
            ("asking", "--approval-mode default, --policy ask-all.toml (every tool ask_user), "
                       "security.disableAlwaysAllow, GEMINI_CLI_TRUST_WORKSPACE unset"),
            ("phone-home", "privacy.usageStatisticsEnabled false (no usage telemetry)"),
        ]

    def vendor_plan(self) -> None:
        self.passed = vendor_settings(PASSED_THROUGH)
        frame = frame_of(self.spec)
        ops = frame_operation_names(frame)
        if "subagent.spawn" in ops:
            raise StartRefusal(RefusalName.SubagentUnavailable, (
                "the frame admits subagent.spawn, and Gemini CLI's subagent calls never reach the permission "
                "seam, so they could not be decided"))
        needs = sorted(op for op in SUBJECTLESS if op in ops)
        if needs and frame_has_subject_rules(frame):
            raise StartRefusal(RefusalName.SubjectUnavailable, (
                f"the frame scopes subjects and admits {', '.join(needs)}, and Gemini CLI shows only the pattern of "
                "a glob or grep call, not where it searches, so the scope could not be applied; admit them without "
                "subject rules or leave them out"))

    def vendor_argv(self, binary: str) -> list[str]:
        assert self.child is not None and self.child.scratch is not None
        return [binary, "--acp", "--approval-mode", MODE, "--policy", str(self.child.scratch.root / "ask-all.toml")]

    def vendor_env(self, scratch: Scratch, base_url: str) -> dict[str, str]:
        gemini_home = scratch.home / ".gemini"
        gemini_home.mkdir(parents=True, exist_ok=True)
        (gemini_home / "settings.json").write_text(json.dumps(settings(getattr(self, "passed", None)), indent=2))
        (scratch.root / "ask-all.toml").write_text(ASK_ALL)
        # GEMINI_CLI_NO_RELAUNCH: left to itself, Gemini CLI starts a second node with a larger heap
        # and runs there (its start-up paid twice, a second process between the run and the agent).
        env = {"GEMINI_API_KEY": PLACEHOLDER_KEY, "GOOGLE_GEMINI_BASE_URL": base_url, "GEMINI_CLI_NO_RELAUNCH": "1"}
        if self.spec.model:
            env["GEMINI_MODEL"] = self.spec.model
        return env

    def vendor_rows(self) -> list[ImposedRow]:
        return [
            ImposedRow(row="h2", how="GEMINI_CLI_TRUST_WORKSPACE unset: no workspace .gemini/settings.json is read"),
            ImposedRow(row="h8", how="--approval-mode default and --policy ask-all.toml (every tool ask_user, "
                                     "priority 999); always-allow disabled; no hooks run in ACP mode"),
        ]

    def check_session(self, result: dict) -> None:
        modes = result.get("modes") if isinstance(result.get("modes"), dict) else {}
        mode = modes.get("currentModeId")
        if mode != MODE:
            raise StartRefusal(RefusalName.VendorCapability, f"gemini opened its session in mode {mode!r}, not {MODE!r}; "
                                                   "only the default mode asks about every call")
        self.initial_mode = MODE

    def tool_name_of(self, tool_call: dict) -> str:
        return tool_name(tool_call)

    def call_of(self, tool_call: dict, final: bool) -> tuple[str, Any, str | None] | None:
        shown = {key: tool_call[key] for key in ("title", "kind", "content", "locations") if key in tool_call}
        return tool_name(tool_call), shown, None
