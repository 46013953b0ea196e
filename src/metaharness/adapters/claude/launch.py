"""Hermetic launch of Claude Code (docs/guides/claude-and-codex.md).

Pure planning. What belongs here: the pin, the scratch layout, the constructed
environment, the argv, the `initialize` request and the check of its reply, the
memory-file scan and the launch plan's own refusals (`check_posture`, `check_memory`), and the hermetic attestation of the launch. The scratch base, the child's PATH, binary resolution, the
process-tree kill and the timeout formula are the shared kit's (adapters/process/).

Rules kept: the environment is built from nothing (never inherited); the real API
key never enters it in `none`/`loopback` modes; the binary is resolved on exactly
the PATH the child will get; nothing here talks to a model.
"""

from __future__ import annotations

import os
import secrets
from typing import Any

from metaharness.adapters.base import StartRefusal
# child_path, parse_version and scratch_base are the kit's; the adapter and the doctor reach them here.
from metaharness.adapters.process import BinaryMissing, Scratch, child_path, parse_version  # noqa: F401
from metaharness.adapters.process import make_scratch as new_scratch_root
from metaharness.adapters.process import resolve_binary as resolve_on_path, scratch_base, vendor_timeout_ms, whole_seconds  # noqa: F401
from metaharness.protocol.harnesses import harness
from metaharness.protocol.refusals import RefusalName
from metaharness.protocol.spec import RunSpec
from metaharness.protocol.values import HermeticAttestation, ImposedRow, UnavailableRow

PINNED_VERSION = harness("claude").pin  # the registry's (protocol/harnesses.py)
BINARY_NAME = "claude"
# The fixed placeholder of credential mode `none` (docs/guides/claude-and-codex.md); `loopback`
# uses a per-run one.
PLACEHOLDER_KEY = "sk-ant-metaharness-placeholder"
HOOK_CALLBACK_ID = "mh_pretooluse"
PACKAGE = harness("claude").package

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
# The caller's settings copied into the child's environment when set: how often Claude Code
# retries a failed model request (its default is 10, with back-off to minutes) — a CI job sets 0 —
# and how long it waits for one (API_TIMEOUT_MS; its default is ten minutes).
PASSED_THROUGH = ("CLAUDE_CODE_MAX_RETRIES", "API_TIMEOUT_MS")
MEMORY_FILES = ("CLAUDE.md", "CLAUDE.local.md", os.path.join(".claude", "CLAUDE.md"))


CONFIG_HOME = "claude-home"  # below the scratch root: CLAUDE_CONFIG_DIR, empty but for Claude's own writes


def make_scratch(base: str | None = None) -> Scratch:
    """A fresh scratch root (adapters/process/scratch.py; in `base` when given) with Claude's config
    home and a `work` directory (the doctor's cwd); a base that fails the check raises ScratchRefused."""
    return new_scratch_root("claude", base=base, dirs=(CONFIG_HOME, "work"), runtime=True)


def resolve_binary(path: str) -> str:
    """The claude binary on the child's PATH; StartRefusal VendorMissing, naming the pin, if absent."""
    try:
        return resolve_on_path(BINARY_NAME, path, package=PACKAGE, pin=PINNED_VERSION, needs_node=False)
    except BinaryMissing as exc:
        raise StartRefusal(RefusalName.VendorMissing, str(exc)) from None


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
            RefusalName.VendorCapability,
            f"{who} refused the initialize request ({error or 'no success reply'}); its per-call seam cannot be registered",
        )
    for capability in ("hooks_applied", "hook_on_failure_supported"):
        if inner.get(capability) is not True:
            raise StartRefusal(
                RefusalName.VendorCapability,
                f"{who} did not confirm {capability}; its per-call seam would fail open",
            )
    return inner


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
        "HOME": str(scratch.home),
        "CLAUDE_CONFIG_DIR": str(scratch / CONFIG_HOME),
        "TMPDIR": str(scratch.tmp),
        "XDG_RUNTIME_DIR": str(scratch.runtime),  # its inbox socket: in /tmp, shared, when TMPDIR is too deep
        "LANG": "C.UTF-8",
    }
    if base_url is not None:
        env["ANTHROPIC_BASE_URL"] = base_url.rstrip("/")
    env["ANTHROPIC_API_KEY"] = api_key
    for switch in PHONE_HOME_SWITCHES:
        env[switch] = "1"
    for name in PASSED_THROUGH:
        if os.environ.get(name):
            env[name] = os.environ[name]
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


def check_posture(posture: str | None) -> None:
    """The launch plan's first refusal: a posture Claude cannot launch in (`PostureUnknown`)."""
    if posture not in LAUNCH_POSTURES:
        raise StartRefusal(RefusalName.PostureUnknown, f"claude does not accept the posture {posture!r}")


def check_memory(spec: RunSpec) -> None:
    """The launch plan's last refusal: under `--hermetic strict`, a memory file above the working
    directory (`MemoryFileAbove`)."""
    memory = memory_files_above(spec.work_dir())
    if memory and spec.hermetic == "strict":
        raise StartRefusal(RefusalName.MemoryFileAbove, f"a memory file above the working directory would reach the "
                                                        f"model: {memory[0]}")


def credential_how(spec: RunSpec, url: str | None) -> str:
    """How the child reaches its model, as the attestation's row h6 says it (`url`: where it is pointed)."""
    if spec.script:
        return f"scripted loopback model at {url}, per-run placeholder key"
    if spec.credentials == "none":
        return f"endpoint {spec.model_endpoint}, placeholder key"
    if spec.credentials == "loopback":
        return f"per-run proxy on {url} holds the key; the child has a per-run placeholder"
    return "ANTHROPIC_API_KEY from the caller"


def attestation(spec: RunSpec, cwd: str, url: str | None) -> HermeticAttestation:
    """metaharness's own claim about this launch (docs/reference/wire.md), its child pointed at `url`."""
    imposed = [
        ImposedRow(row="h1a", how="CLAUDE_CONFIG_DIR is an empty per-run directory; no plugins"),
        ImposedRow(row="h1b", how="an empty config home leaves the default output style"),
        ImposedRow(row="h2", how='--setting-sources ""'),
        ImposedRow(row="h3", how="constructed environment: PATH HOME CLAUDE_CONFIG_DIR TMPDIR XDG_RUNTIME_DIR LANG "
                                 "ANTHROPIC_BASE_URL ANTHROPIC_API_KEY and the four phone-home switches "
                                 "(CLAUDE_CODE_MAX_RETRIES and API_TIMEOUT_MS when the caller sets them)"),
        ImposedRow(row="h5", how="--strict-mcp-config with no --mcp-config"),
        ImposedRow(row="h6", how=credential_how(spec, url)),
        ImposedRow(row="h7", how=f"cwd {cwd}"),
        ImposedRow(row="h8", how="no --bare or --safe-mode; CLAUDE_CODE_SIMPLE unset"),
    ]
    if spec.credentials != "api-key":
        imposed.insert(4, ImposedRow(row="h4", how="the child holds a placeholder, never a real key"))
    unavailable = []
    if spec.strict_version:
        imposed.append(ImposedRow(row="h9", how=f"--version checked against {PINNED_VERSION}"))
    else:
        unavailable.append(UnavailableRow(row="h9", why="checked only in the initialize reply (VERSION_OFF_PIN "
                                                        "warns); pass --strict-version to refuse"))
    unavailable.append(UnavailableRow(row="h10", why="the claude adapter copies no governing documents"))
    memory = memory_files_above(cwd)
    if memory:
        unavailable.append(UnavailableRow(row="h11", why=f"memory file above the working directory: {memory[0]}"))
    else:
        imposed.append(ImposedRow(row="h11", how=f"no memory file above {cwd}"))
    if spec.credentials == "api-key":
        unavailable.append(UnavailableRow(row="h4", why="credentials api-key: the child holds the caller's key"))
    return HermeticAttestation(
        mode=spec.hermetic, decisions=spec.decisions, imposed=imposed, unavailable=unavailable,
        ambient_inputs=["Claude Code's environment block (working directory, platform, date, git status) "
                        "in the first user message"],
        deny_only=spec.deny_only,
    )
