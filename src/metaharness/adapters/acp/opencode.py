"""The `opencode` adapter: opencode 1.18.33 driven through `opencode acp`.

Pinning (every tool asks, nothing in the workspace can undo it):
* the global `opencode.json` in the scratch XDG config home holds the loopback provider
  (`@ai-sdk/openai-compatible`, bundled; its `timeout` option when the caller sets
  METAHARNESS_OPENCODE_TIMEOUT_MS, `PASSED_THROUGH`) and `"permission": {"*": "ask", "task": "deny"}`,
  and `OPENCODE_PERMISSION` carries the same rules (merged last, over any other source);
* `OPENCODE_DISABLE_PROJECT_CONFIG=1`: a workspace `opencode.json` is never read — it could
  otherwise allow a tool outright;
* phone-home off: `OPENCODE_DISABLE_MODELS_FETCH=1` (models.dev), `autoupdate:false`,
  `share:"disabled"`, and `@opencode-ai/plugin` already present in the config directory (linked
  from the pinned install), so opencode starts no background npm install;
* `experimental.continue_loop_on_deny: true`: a refused call returns opencode's fixed text to
  the model and the turn goes on, as on the other harnesses (by default one refusal ends it).

The arguments of a call arrive in a `tool_call_update` (`rawInput`), before or after the
permission request: the request is held until they are there (`call_of`).
Subagents (`task`) are denied by the pinning: their own calls would not be asked over ACP.

opencode's own control server: `opencode acp` serves opencode's whole HTTP API on a loopback
port (its ACP side is a client of it), and that API answers permission requests
(`POST /permission/<id>/reply`), runs shells (`/pty`) and rewrites the config — a way around
the seam for any process that can authenticate. So:
* a per-run `OPENCODE_SERVER_PASSWORD` (without it the server answers anyone on the machine);
* the guard plugin (`GUARD_PLUGIN`, in the global config directory, loaded when the session
  opens): opencode becomes non-dumpable (its /proc environ, memory and fds are closed to the
  agent's processes) and every process it starts from then on, shells and helpers alike, goes
  without the password; a run whose opencode did not record the guard is refused (`_check_guard`).
What stays open (the README says so): an agent with root's capabilities (a root child where
the machine has no user namespaces; elsewhere the child has none, root or not) reads the
password from /proc/<opencode pid>/environ. The git calls of opencode's project detection,
before the session opens, still carry it; they end before any agent code runs.
tests/acp/test_e2e_acp_state_holds.py attacks the server; test_e2e_opencode_helpers.py wraps
the helpers.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
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

PIN = harness("opencode").pin  # the registry's (protocol/harnesses.py)
PERMISSION = {"*": "ask", "task": "deny"}
PROVIDER = "metaharness"
MODEL = "loopback"
# opencode tool → neutral operation, and the input key naming its subject (None: no subject)
# The tool table: a path key names the subject; glob and grep without one search opencode's cwd.
TOOLS: dict[str, Tool] = {
    "bash": Tool("shell"),
    "write": Tool("file.write", path_at("filePath")),
    "edit": Tool("file.edit", path_at("filePath")),
    "read": Tool("file.read", path_at("filePath")),
    "glob": Tool("dir.list", path_at("path", ".")),
    "grep": Tool("search", path_at("path", ".")),
    "webfetch": Tool("web.read"),
    "todowrite": Tool("task.todo"),
    "skill": Tool("skill.load"),
    "task": Tool("subagent.spawn"),
}
RENDERING = rendering_of(TOOLS, unrendered=("subagent.spawn",))  # task stays denied
# opencode tool → (the policy engine's tool name, input key renames): the engine reads Claude Code's words.
POLICY_VIEW: dict[str, tuple[str, dict[str, str]]] = {
    "bash": ("Bash", {"command": "command"}),
    "write": ("Write", {"filePath": "file_path", "content": "content"}),
    "edit": ("Edit", {"filePath": "file_path", "oldString": "old_string", "newString": "new_string"}),
    "read": ("Read", {"filePath": "file_path"}),
    "glob": ("Glob", {"pattern": "pattern", "path": "path"}),
    "grep": ("Grep", {"pattern": "pattern", "path": "path"}),
    "webfetch": ("WebFetch", {"url": "url"}),
    "task": ("Task", {"subagent_type": "subagent_type", "prompt": "prompt"}),
    "skill": ("Skill", {"name": "skill"}),
    "todowrite": ("TodoWrite", {"todos": "todos"}),
}


def policy_view(name: str, input: Any) -> tuple[str, Any]:
    """The registry's `policy_view` for opencode: its tool and input keys as `POLICY_VIEW` renames them."""
    view = POLICY_VIEW.get(name)
    if view is None or not isinstance(input, dict):
        return name, input
    rule_tool, keys = view
    return rule_tool, {**{theirs: input[ours] for ours, theirs in keys.items() if ours in input},
                       **({"cwd": input["cwd"]} if isinstance(input.get("cwd"), str) else {})}


FIXED_REFUSAL = "The user rejected permission to use this specific tool call."
# The caller's settings carried into the loopback provider's options when set (docs/guides/ci.md):
# how long opencode waits for one model request (`timeout`, in ms; its default is five minutes).
PASSED_THROUGH = {"METAHARNESS_OPENCODE_TIMEOUT_MS": "timeout"}
# A plugin in the global config directory (read once, at start): it makes the opencode process
# non-dumpable, so a process of the same user (the agent's shell) cannot read its environment
# or memory through /proc or ptrace, and keeps OPENCODE_SERVER_PASSWORD, the password of
# opencode's own loopback HTTP API, out of every process opencode starts: its shells get an
# empty one (`shell.env`), and every spawn through node's child_process or Bun.spawn (git,
# ripgrep, pgrep, formatters, language servers) gets its environment without it — a helper
# is dumpable again once it execs, so the agent could read its /proc/<pid>/environ while it
# runs. It records PR_GET_DUMPABLE and whether the spawns are covered, for the adapter to check.
GUARD_PLUGIN = """import { dlopen, FFIType } from "bun:ffi";
import childProcess from "node:child_process";
const I = FFIType.i32, U = FFIType.u64;
const KEY = "OPENCODE_SERVER_PASSWORD";
// OPENCODE_SERVER_PASSWORD stays in process.env: opencode's server reads it on every request
// (without it the server answers anyone), so only the children's copies go without it.
const withoutPassword = (options) => {
  const env = { ...(options?.env ?? process.env) };
  delete env[KEY];
  return { ...options, env };
};
const guardSpawns = () => {
  for (const name of ["spawn", "spawnSync"]) {  // exec, execFile, fork and the Sync forms go through these
    const spawn = childProcess[name];
    childProcess[name] = function (file, args, options) {
      return Array.isArray(args) ? spawn.call(this, file, args, withoutPassword(options))
                                 : spawn.call(this, file, withoutPassword(args));
    };
  }
  for (const name of ["spawn", "spawnSync"]) {  // Bun.spawn(argv, options) or Bun.spawn({ cmd, ...options })
    const spawn = Bun[name];
    Bun[name] = function (argv, options) {
      return Array.isArray(argv) ? spawn.call(this, argv, withoutPassword(options))
                                 : spawn.call(this, withoutPassword(argv));
    };
  }
  const probe = childProcess.spawnSync("/usr/bin/env", []);  // what a helper inherits now
  return probe.status === 0 && !String(probe.stdout).split("\\n").some((line) => line.startsWith(`${KEY}=`));
};
export const MetaharnessGuard = async () => {
  const libc = dlopen("libc.so.6", { prctl: { args: [I, U, U, U, U], returns: I } });
  libc.symbols.prctl(4, 0, 0, 0, 0);  // PR_SET_DUMPABLE 0
  const dumpable = libc.symbols.prctl(3, 0, 0, 0, 0);  // PR_GET_DUMPABLE
  const spawns = guardSpawns();
  await Bun.write(process.env.METAHARNESS_GUARD_FILE, JSON.stringify({ dumpable, spawns, pid: process.pid }));
  return { "shell.env": async (_input, output) => { output.env[KEY] = ""; } };
};
"""


def config(base_url: str, model: str, passed: dict[str, int] | None = None) -> dict[str, Any]:
    options: dict[str, Any] = {"baseURL": f"{base_url}/v1", "apiKey": PLACEHOLDER_KEY}
    options.update({PASSED_THROUGH[name]: value for name, value in (passed or {}).items()})
    return {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "model": f"{PROVIDER}/{model}",
        "small_model": f"{PROVIDER}/{model}",
        "provider": {PROVIDER: {
            "npm": "@ai-sdk/openai-compatible", "name": "metaharness loopback",
            "options": options,
            "models": {model: {"name": model, "tool_call": True, "limit": {"context": 100000, "output": 8000}}},
        }},
        "permission": dict(PERMISSION),
        "experimental": {"continue_loop_on_deny": True},
    }


class OpencodeAdapter(AcpAdapter):
    kind: ClassVar[str] = "opencode"
    model_provider = "openai"
    fixed_refusal = FIXED_REFUSAL
    tools = TOOLS
    # opencode prices a model from its config or models.dev; the provider metaharness defines has
    # no prices and models.dev is off, so the cost it reports is $0 whatever was spent (measured:
    # $0 beside a metered $0.0002 for one answer and its title request) — not a figure to compare.
    prices_its_model = False

    @classmethod
    def descriptor(cls) -> CapabilityDescriptor:
        return acp_descriptor(cls.kind, PIN, RENDERING, FIXED_REFUSAL)

    @classmethod
    def pinning(cls, modules: Path) -> list[tuple[str, str | None]]:
        """The switches a run imposes, as the doctor shows them (None: cannot be imposed here)."""
        plugin = modules / "@opencode-ai" / "plugin" / "package.json"
        return [
            ("asking", f"permission {json.dumps(PERMISSION)} in the global config and OPENCODE_PERMISSION; "
                       "OPENCODE_DISABLE_PROJECT_CONFIG=1"),
            ("phone-home", "OPENCODE_DISABLE_MODELS_FETCH=1, autoupdate false, share disabled"),
            ("plugin package", f"@opencode-ai/plugin {json.loads(plugin.read_text()).get('version')} pre-installed "
                               "(no background npm install)" if plugin.is_file() else None),
        ]

    def vendor_plan(self) -> None:
        self.passed = vendor_settings(PASSED_THROUGH)
        frame = frame_of(self.spec)
        if "subagent.spawn" in frame_operation_names(frame):
            raise StartRefusal(RefusalName.SubagentUnavailable, (
                "the frame admits subagent.spawn, and opencode does not forward a subagent's own permission "
                "requests, so its calls could not be decided; opencode's task tool stays denied"))

    def vendor_argv(self, binary: str) -> list[str]:
        return [binary, "acp"]

    def vendor_env(self, scratch: Scratch, base_url: str) -> dict[str, str]:
        home = scratch / launch.CONFIG / "opencode"
        home.mkdir(parents=True, exist_ok=True)
        (home / "opencode.json").write_text(json.dumps(config(base_url, self.spec.model or MODEL, getattr(self, "passed", None)), indent=2))
        self._link_plugin_package(home)
        (home / "plugin").mkdir(exist_ok=True)
        (home / "plugin" / "metaharness-guard.js").write_text(GUARD_PLUGIN)
        return {
            "METAHARNESS_GUARD_FILE": str(scratch.root / "guard.json"),
            "OPENCODE_PERMISSION": json.dumps(PERMISSION),
            "OPENCODE_DISABLE_PROJECT_CONFIG": "1",
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            # `opencode acp` serves its whole HTTP API (permission replies, config, shells) on a
            # loopback port; without a password any local process could answer its permission
            # requests. The agent itself inherits this environment: see the module docstring.
            "OPENCODE_SERVER_PASSWORD": secrets.token_urlsafe(24),
        }

    def _link_plugin_package(self, home: Path) -> None:
        """The config directory as opencode leaves it after its own dependency install: it installs
        only when `node_modules` is missing or `package-lock.json` lacks a declared dependency."""
        modules = Path(self.child_path.split(":")[0]).parent  # <vendor>/node_modules/.bin → node_modules
        if not (modules / "@opencode-ai" / "plugin").is_dir():
            return  # opencode will try (and, offline, fail) its background install; doctor says so
        dependencies = {"@opencode-ai/plugin": PIN}
        (home / "package.json").write_text(json.dumps({"dependencies": dependencies}))
        (home / "package-lock.json").write_text(json.dumps(
            {"lockfileVersion": 3, "requires": True, "packages": {"": {"dependencies": dependencies}}}))
        os.symlink(modules, home / "node_modules")

    def vendor_rows(self) -> list[ImposedRow]:
        return [
            ImposedRow(row="h2", how="OPENCODE_DISABLE_PROJECT_CONFIG=1: no workspace opencode.json is read"),
            ImposedRow(row="h8", how=f"permission {json.dumps(PERMISSION)} in the global config and OPENCODE_PERMISSION"),
        ]

    def check_session(self, result: dict) -> None:
        """opencode names its mode (the agent, `build`) in `configOptions`; older builds in `modes`.
        The guard plugin has run by now (opencode loads plugins when it opens the session's
        directory): a run whose opencode is still dumpable is refused before any model request."""
        self._check_guard()
        modes = result.get("modes") if isinstance(result.get("modes"), dict) else {}
        mode = modes.get("currentModeId")
        for option in result.get("configOptions") or []:
            if isinstance(option, dict) and option.get("id") == "mode":
                mode = option.get("currentValue")
        self.initial_mode = mode if isinstance(mode, str) else None

    def _check_guard(self) -> None:
        assert self.child is not None and self.child.scratch is not None
        try:
            guard = json.loads((self.child.scratch.root / "guard.json").read_text())
        except (OSError, ValueError):
            guard = None
        if not isinstance(guard, dict) or guard.get("dumpable") != 0 or guard.get("spawns") is not True:
            raise StartRefusal(RefusalName.VendorCapability, (
                "opencode did not load metaharness's guard plugin (which makes it non-dumpable and keeps the password "
                "of its loopback HTTP API out of every process it starts), so the agent could answer its own "
                f"permission requests; refusing the run (guard: {guard!r})"))

    def mode_allowed(self, mode: str) -> bool:
        return self.initial_mode is None or mode == self.initial_mode

    def call_of(self, tool_call: dict, final: bool) -> tuple[str, Any, str | None] | None:
        assert self.translator is not None
        known = self.translator.calls.get(str(tool_call.get("toolCallId")))
        name = (known.title if known and known.title else None) or str(tool_call.get("title") or "unknown")
        if known is not None and known.raw_input is not None:
            return name, known.raw_input, known.cwd
        if not final:
            return None
        raw = tool_call.get("rawInput")
        return name, raw if isinstance(raw, dict) else {}, known.cwd if known else None
