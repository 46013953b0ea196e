"""The `qwen` adapter: Qwen Code 0.24.4 (a Gemini CLI fork) driven through `qwen --acp`.

DRAFT
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from metaharness.adapters.base import StartRefusal, Tool, path_at
from metaharness.protocol.descriptor import CapabilityDescriptor
from metaharness.protocol.harnesses import harness
from metaharness.protocol.values import ImposedRow

from . import launch
from .adapter import PLACEHOLDER_KEY, AcpAdapter, acp_descriptor, frame_of, frame_operation_names

ENTRY = harness("qwen")
PIN = ENTRY.pin
MODE = "default"
MODEL = "loopback"
TOOLS: dict[str, Tool] = {
    "run_shell_command": Tool("shell"),
    "write_file": Tool("file.write", path_at("file_path")),
    "edit": Tool("file.edit", path_at("file_path")),
    "read_file": Tool("file.read", path_at("file_path")),
    "list_directory": Tool("dir.list", path_at("path")),
    "glob": Tool("dir.list", path_at("path")),
    "grep_search": Tool("search", path_at("path")),
    "web_fetch": Tool("web.read"),
}
RENDERING: dict[str, str | None] = {
    "dir.list": "list_directory", "file.edit": "edit", "file.read": "read_file", "file.write": "write_file",
    "mcp.call": None, "search": "grep_search", "shell": "run_shell_command", "skill.load": None,
    "subagent.spawn": None, "task.todo": None, "web.read": "web_fetch",
}
FIXED_REFUSAL = "?"


def settings() -> dict[str, Any]:
    return {
        "security": {"auth": {"selectedType": "openai"}, "folderTrust": {"enabled": True}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"enableAutoUpdate": False},
        "permissions": {"ask": sorted(TOOLS)},
    }


class QwenAdapter(AcpAdapter):
    kind: ClassVar[str] = "qwen"
    binary_name = ENTRY.binary
    package = ENTRY.package
    pin = PIN
    tools = TOOLS
    fixed_refusal = FIXED_REFUSAL

    @classmethod
    def descriptor(cls) -> CapabilityDescriptor:
        return acp_descriptor(cls.kind, PIN, RENDERING, FIXED_REFUSAL)

    def vendor_argv(self, binary: str) -> list[str]:
        return [binary, "--acp", "--approval-mode", MODE]

    def vendor_env(self, scratch: launch.Scratch, base_url: str) -> dict[str, str]:
        home = scratch.home / ".qwen"
        home.mkdir(parents=True, exist_ok=True)
        (home / "settings.json").write_text(json.dumps(settings(), indent=2))
        (scratch.root / "system-settings.json").write_text(json.dumps(settings(), indent=2))
        (scratch.root / "trusted-folders.json").write_text("{}")
        return {"OPENAI_API_KEY": PLACEHOLDER_KEY, "OPENAI_BASE_URL": f"{base_url}/v1",
                "OPENAI_MODEL": self.spec.model or MODEL,
                "QWEN_CODE_SYSTEM_SETTINGS_PATH": str(scratch.root / "system-settings.json"),
                "QWEN_CODE_SYSTEM_DEFAULTS_PATH": str(scratch.root / "system-settings.json"),
                "QWEN_CODE_TRUSTED_FOLDERS_PATH": str(scratch.root / "trusted-folders.json"),
                "QWEN_TELEMETRY_ENABLED": "0", "QWEN_USAGE_STATISTICS_ENABLED": "0",
                "QWEN_CODE_NO_RELAUNCH": "1"}

    def check_session(self, result: dict) -> None:
        modes = result.get("modes") if isinstance(result.get("modes"), dict) else {}
        self.initial_mode = modes.get("currentModeId")

    def call_of(self, tool_call: dict, final: bool) -> tuple[str, Any, str | None] | None:
        return str(tool_call.get("title") or "unknown"), tool_call, None
