"""Hermetic launch of Claude Code (docs/guides/claude-and-codex.md).

Pure planning plus two small process helpers. What belongs here: the pin, the
scratch layout, the constructed environment, the argv, the binary lookup on the
child's own PATH, the `initialize` request and the check of its reply, the
memory-file scan, and the process-group sweep used by every kill.

Rules kept: the environment is built from nothing (never inherited); the real API
key never enters it in `none`/`loopback` modes; the binary is resolved on exactly
the PATH the child will get; nothing here talks to a model.
"""

from __future__ import annotations

import os
import secrets
import shutil
from dataclasses import dataclass, field
from typing import Any

from metaharness.adapters.base import StartRefusal
from metaharness.adapters.process import private_scratch, vendor_timeout_ms, whole_seconds

PINNED_VERSION = "2.1.328"
BINARY_NAME = "claude"
# The fixed placeholder of credential mode `none` (docs/guides/claude-and-codex.md); `loopback`
# uses a per-run one.
PLACEHOLDER_KEY = "sk-ant-metaharness-placeholder"
HOOK_CALLBACK_ID = "mh_pretooluse"
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"

# Launch posture words (docs/guides/claude-and-codex.md); `permission.set` takes all but `manual`.
LAUNCH_POSTURES = ("default", "acceptEdits", "auto", "bypassPermissions", "manual", "dontAsk", "plan")
SET_POSTURES = ("default", "acceptEdits", "plan", "dontAsk", "auto", "bypassPermissions")

# Every flag the adapter can emit; `doctor` checks each one is in `claude --help`.
FLAGS = (
    "-p", "--input-format", "--output-format", "--verbose", "--replay-user-messages",
    "--permission-prompts", "--setting-sources", "--strict-mcp-config",
    "--permission-mode", "--model", "--effort", "--max-budget-usd",
)
# Flags that skip hooks or permissions; never passed (docs/guides/claude-and-codex.md).
FORBIDDEN_FLAGS = (
    "--bare", "--safe-mode", "--dangerously-skip-permissions", "--allow-dangerously-skip-permissions",
    "--add-dir", "--permission-prompt-tool", "--include-hook-events", "--include-partial-messages",
    "--no-session-persistence",
)
PHONE_HOME_SWITCHES = (
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_TELEMETRY", "DISABLE_ERROR_REPORTING",
    "DISABLE_AUTOUPDATER",
)
MEMORY_FILES = ("CLAUDE.md", "CLAUDE.local.md", os.path.join(".claude", "CLAUDE.md"))


@dataclass
class Scratch:
    """One run's scratch directory (docs/guides/claude-and-codex.md)."""

    root: str

    @property
    def home(self) -> str:
        return os.path.join(self.root, "home")

    @property
    def tmp(self) -> str:
        return os.path.join(self.root, "tmp")

    @property
    def config_home(self) -> str:
        return os.path.join(self.root, "claude-home")

    @property
    def work(self) -> str:
        return os.path.join(self.root, "work")

    @property
    def transcript(self) -> str:
        return os.path.join(self.root, "transcript.jsonl")


def scratch_base() -> str:
    """Where scratch directories live: not under /tmp (docs/guides/claude-and-codex.md)."""
    return os.environ.get("METAHARNESS_SCRATCH_DIR") or os.path.join("/var/tmp", f"metaharness-{os.getuid()}")


def make_scratch(base: str | None = None) -> Scratch:
    """mkdtemp inside a base private to this user (adapters/process.py: owner, mode 0700, no
    symlink); a base that fails the check raises ScratchRefused naming it."""
    root = private_scratch(base or scratch_base(), "claude-")
    scratch = Scratch(root)
    for path in (scratch.home, scratch.tmp, scratch.config_home, scratch.work):
        os.makedirs(path, mode=0o700)
    return scratch


def child_path(vendor_dir: str | None) -> str:
    """The child's PATH: vendor dir, node's dir, the system dirs (docs/guides/claude-and-codex.md)."""
    parts: list[str] = []
    vendor_dir = vendor_dir or os.environ.get("METAHARNESS_VENDOR_DIR")
    if vendor_dir:
        parts.append(os.path.abspath(vendor_dir))
    node = shutil.which("node", path=os.environ.get("PATH", SYSTEM_PATH))
    if node:
        parts.append(os.path.dirname(node))
    parts.append(SYSTEM_PATH)
    seen: list[str] = []
    for part in ":".join(parts).split(":"):
        if part and part not in seen:
            seen.append(part)
    return ":".join(seen)


def resolve_binary(path: str) -> str | None:
    return shutil.which(BINARY_NAME, path=path)


def hook_timeout_s(deadline_ms: int) -> int:
    """The hook `timeout` in seconds for decision budget D (docs/guides/claude-and-codex.md)."""
    return whole_seconds(vendor_timeout_ms(deadline_ms))


def initialize_request(request_id: str, timeout_s: int) -> dict[str, Any]:
    return {
        "type": "control_request",
        "request_id": request_id,
        "request": {
            "subtype": "initialize",
            "hooks": {
                "PreToolUse": [
                    {"matcher": None, "hookCallbackIds": [HOOK_CALLBACK_ID], "timeout": timeout_s,
                     "onFailure": "block"}
                ]
            },
        },
    }


def check_initialize_reply(response: dict[str, Any]) -> dict[str, Any]:
    """The `response` object of the reply's `control_response`; StartRefusal unless it
    confirms the fail-closed per-call seam (docs/guides/claude-and-codex.md)."""
    version = None
    inner = response.get("response") if isinstance(response, dict) else None
    if isinstance(inner, dict):
        version = inner.get("claude_code_version")
    who = f"claude {version}" if isinstance(version, str) else "claude"
    if not isinstance(response, dict) or response.get("subtype") != "success" or not isinstance(inner, dict):
        error = response.get("error") if isinstance(response, dict) else None
        raise StartRefusal(
            "VendorCapability",
            f"{who} refused the initialize request ({error or 'no success reply'}); its per-call seam cannot be registered",
        )
    for capability in ("hooks_applied", "hook_on_failure_supported"):
        if inner.get(capability) is not True:
            raise StartRefusal(
                "VendorCapability",
                f"{who} did not confirm {capability}; its per-call seam would fail open",
            )
    return inner


def parse_version(text: str) -> str | None:
    """The first whitespace-separated token that starts with a digit (docs/guides/claude-and-codex.md)."""
    for token in text.split():
        if token[:1].isdigit():
            return token
    return None


@dataclass
class LaunchPlan:
    argv: list[str]
    env: dict[str, str]
    cwd: str
    scratch: Scratch
    placeholder: str | None  # the key the child sees in none/loopback modes
    imposed: list[tuple[str, str]] = field(default_factory=list)  # hermetic rows (row, how)


def build_env(
    scratch: Scratch,
    path: str,
    *,
    base_url: str | None,
    api_key: str,
    bypass_as_root: bool = False,
) -> dict[str, str]:
    env = {
        "PATH": path,
        "HOME": scratch.home,
        "CLAUDE_CONFIG_DIR": scratch.config_home,
        "TMPDIR": scratch.tmp,
        "LANG": "C.UTF-8",
    }
    if base_url is not None:
        env["ANTHROPIC_BASE_URL"] = base_url.rstrip("/")
    env["ANTHROPIC_API_KEY"] = api_key
    for switch in PHONE_HOME_SWITCHES:
        env[switch] = "1"
    if bypass_as_root:
        # As root Claude refuses bypassPermissions without it (docs/guides/claude-and-codex.md).
        env["IS_SANDBOX"] = "1"
    return env


def build_argv(
    binary: str,
    *,
    posture: str | None,
    model: str | None,
    effort: str | None = None,
    max_budget_usd: str | None = None,
) -> list[str]:
    argv = [
        binary, "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
        "--replay-user-messages", "--permission-prompts", "none", "--setting-sources", "",
        "--strict-mcp-config",
    ]
    if posture and posture != "default":
        argv += ["--permission-mode", posture]
    if model:
        argv += ["--model", model]
    if effort:
        argv += ["--effort", effort]
    if max_budget_usd:
        argv += ["--max-budget-usd", max_budget_usd]
    return argv


def per_run_placeholder() -> str:
    return "sk-ant-metaharness-run-" + secrets.token_hex(12)


def memory_files_above(cwd: str) -> list[str]:
    """Memory files Claude could read from directories above `cwd` (hermetic row h11)."""
    found: list[str] = []
    current = os.path.dirname(os.path.abspath(cwd))
    while True:
        for name in MEMORY_FILES:
            candidate = os.path.join(current, name)
            if os.path.isfile(candidate):
                found.append(candidate)
        parent = os.path.dirname(current)
        if parent == current:
            return found
        current = parent
