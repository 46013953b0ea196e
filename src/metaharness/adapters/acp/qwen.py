"""The `qwen` adapter: Qwen Code (a Gemini CLI fork) driven through `qwen --acp`, its model the
loopback's (or `--model-endpoint`'s) OpenAI Chat Completions wire.

Its vendor facts (package, pin, launcher) are its registry entry's (protocol/harnesses.py).

Pinning (every tool asks, nothing in the workspace can undo it):
* `--approval-mode default` on the command line, and the run never sends `session/set_mode`;
  a `current_mode_update` away from `default` ends the run;
* the settings (`SETTINGS`) are written as the *system* settings file
  (`QWEN_CODE_SYSTEM_SETTINGS_PATH`, which overrides user and workspace settings) and as the
  scratch home's `~/.qwen/settings.json`, with the system defaults file pointed at it too (no
  machine-wide file is read): `permissions.ask` names every tool (reads, listing and search
  included — `default` mode alone asks only for edits and shells), `permissions.deny` removes
  the subagent tool, `security.folderTrust.enabled` with an empty trusted-folders file
  (`QWEN_CODE_TRUSTED_FOLDERS_PATH`) makes every workspace untrusted, so a workspace
  `.qwen/settings.json` is never read;
* phone-home off: `privacy.usageStatisticsEnabled: false` and `QWEN_USAGE_STATISTICS_ENABLED=0`
  (usage statistics), `telemetry.enabled: false` and `QWEN_TELEMETRY_ENABLED=0`,
  `general.enableAutoUpdate: false`; `QWEN_CODE_NO_RELAUNCH=1` keeps it in one process;
* the model: `--auth-type openai` with `OPENAI_BASE_URL` (the endpoint's `/v1`),
  `OPENAI_API_KEY` a placeholder, `OPENAI_MODEL` the `--model` (else `loopback`); its retries
  (`model.generationConfig.maxRetries`: its client's, 3 by default, and its own rate-limit
  back-off, 10 from a minute) and its request timeout (`…timeout`, 120 s) stay its own unless
  the caller sets METAHARNESS_QWEN_MAX_RETRIES or METAHARNESS_QWEN_TIMEOUT_MS (`PASSED_THROUGH`).

What Qwen Code does over ACP, and what follows:
* a permission request carries the tool's name (`_meta.toolName`) and its whole arguments
  object (`rawInput`): the call is presented with both, and its subject is the path argument;
* a rejected call ends the turn (`stopAfterPermissionCancel`): the model sees the fixed text
  `Tool "<name>" was canceled by the user.` in its history at the next prompt, and the turn
  ends without it answering;
* subagent calls (`agent`) are removed by the pinning: a frame admitting `subagent.spawn` is
  refused; its web fetch, todo and directory-listing tools are deferred (offered only through
  its `tool_search` bridge), so `web.read` and `task.todo` have no rendering.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from metaharness.adapters.base import (StartRefusal, Tool, frame_of, frame_operation_names,
                                      path_at, rendering_of, vendor_settings)
from metaharness.adapters.process import Scratch
from metaharness.protocol.descriptor import CapabilityDescriptor
from metaharness.protocol.harnesses import harness
from metaharness.protocol.refusals import RefusalName
from metaharness.protocol.values import ImposedRow

from . import launch
from .adapter import AcpAdapter
from .contract import PLACEHOLDER_KEY, acp_descriptor

ENTRY = harness("qwen")
MODE = "default"
MODEL = "loopback"
# Qwen Code tool → neutral operation and where its subject is (the tool table).
TOOLS: dict[str, Tool] = {
    "run_shell_command": Tool("shell"),
    "write_file": Tool("file.write", path_at("file_path")),
    "edit": Tool("file.edit", path_at("file_path")),
    "read_file": Tool("file.read", path_at("file_path")),
    "glob": Tool("dir.list", path_at("path")),
    "list_directory": Tool("dir.list", path_at("path")),
    "grep_search": Tool("search", path_at("path")),
    "skill": Tool("skill.load"),
}
# The operations with no rendering: no subagent (denied by the pinning), and the deferred tools.
UNRENDERED = ("mcp.call", "subagent.spawn", "task.todo", "web.read")
RENDERING = rendering_of(TOOLS, unrendered=UNRENDERED)
FIXED_REFUSAL = 'Tool "<name>" was canceled by the user.'
SETTINGS: dict[str, Any] = {
    "security": {"auth": {"selectedType": "openai"}, "folderTrust": {"enabled": True}},
    "permissions": {"ask": sorted(TOOLS), "deny": ["Agent"]},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"enableAutoUpdate": False},
}
# The caller's settings carried into model.generationConfig (launch.passed_through).
PASSED_THROUGH = {"METAHARNESS_QWEN_MAX_RETRIES": "maxRetries", "METAHARNESS_QWEN_TIMEOUT_MS": "timeout"}


def settings(passed: dict[str, int] | None = None) -> dict[str, Any]:
    """The pinned settings, with the caller's passed-through values as the model's generation config."""
    config = {PASSED_THROUGH[name]: value for name, value in (passed or {}).items()}
    return {**SETTINGS, "model": {"generationConfig": config}} if config else SETTINGS


def tool_name(tool_call: dict) -> str:
    meta = tool_call.get("_meta") if isinstance(tool_call.get("_meta"), dict) else {}
    return str(meta.get("toolName") or tool_call.get("title") or "unknown")


class QwenAdapter(AcpAdapter):
    kind: ClassVar[str] = ENTRY.name
    model_provider = "openai"  # its OpenAI-compatible endpoint (Chat Completions)
    tools = TOOLS
    fixed_refusal = FIXED_REFUSAL

    @classmethod
    def descriptor(cls) -> CapabilityDescriptor:
        return acp_descriptor(cls.kind, ENTRY.pin, RENDERING, FIXED_REFUSAL)

    @classmethod
    def pinning(cls, modules: Any) -> list[tuple[str, str | None]]:
        """The switches a run imposes, as the doctor shows them."""
        return [
            ("asking", f"--approval-mode {MODE}; system settings permissions.ask {', '.join(sorted(TOOLS))}; "
                       "the Agent tool denied; folder trust on, no folder trusted (no workspace settings)"),
            ("phone-home", "usage statistics, telemetry and auto-update off (settings and environment)"),
        ]

    def vendor_plan(self) -> None:
        self.passed = vendor_settings(PASSED_THROUGH)
        if "subagent.spawn" in frame_operation_names(frame_of(self.spec)):
            raise StartRefusal(RefusalName.SubagentUnavailable, (
                "the frame admits subagent.spawn, and Qwen Code's subagent calls are not asked over ACP, so they "
                "could not be decided; its agent tool stays denied"))

    def vendor_argv(self, binary: str) -> list[str]:
        return [binary, "--acp", "--approval-mode", MODE, "--auth-type", "openai"]

    def vendor_env(self, scratch: Scratch, base_url: str) -> dict[str, str]:
        home = scratch.home / ".qwen"
        home.mkdir(parents=True, exist_ok=True)
        text = json.dumps(settings(getattr(self, "passed", None)), indent=2)
        (home / "settings.json").write_text(text)
        (scratch.root / "qwen-system-settings.json").write_text(text)
        (scratch.root / "qwen-trusted-folders.json").write_text("{}")
        return {
            "OPENAI_API_KEY": PLACEHOLDER_KEY, "OPENAI_BASE_URL": f"{base_url}/v1",
            "OPENAI_MODEL": self.spec.model or MODEL,
            "QWEN_CODE_SYSTEM_SETTINGS_PATH": str(scratch.root / "qwen-system-settings.json"),
            "QWEN_CODE_SYSTEM_DEFAULTS_PATH": str(scratch.root / "qwen-system-settings.json"),
            "QWEN_CODE_TRUSTED_FOLDERS_PATH": str(scratch.root / "qwen-trusted-folders.json"),
            "QWEN_TELEMETRY_ENABLED": "0", "QWEN_USAGE_STATISTICS_ENABLED": "0", "QWEN_CODE_NO_RELAUNCH": "1",
        }

    def vendor_rows(self) -> list[ImposedRow]:
        return [
            ImposedRow(row="h2", how="folder trust on with no trusted folder: no workspace .qwen/settings.json "
                                     "is read; system settings from the scratch directory"),
            ImposedRow(row="h8", how=f"--approval-mode {MODE} and permissions.ask naming every tool; "
                                     "the Agent tool denied"),
        ]

    def check_session(self, result: dict) -> None:
        modes = result.get("modes") if isinstance(result.get("modes"), dict) else {}
        mode = modes.get("currentModeId")
        if mode != MODE:
            raise StartRefusal(RefusalName.VendorCapability, f"qwen opened its session in mode {mode!r}, not {MODE!r}; "
                                                   "only the default mode asks about every call")
        self.initial_mode = MODE

    def tool_name_of(self, tool_call: dict) -> str:
        return tool_name(tool_call)

    def call_of(self, tool_call: dict, final: bool) -> tuple[str, Any, str | None] | None:
        raw = tool_call.get("rawInput")
        return tool_name(tool_call), raw if isinstance(raw, dict) else {}, None
