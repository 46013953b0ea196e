"""Hermetic launch of `codex app-server` (docs/guides/claude-and-codex.md).

What belongs here: the run options the launch reads (`CodexOptions`), the scratch layout, the
constructed child environment, the loopback-safe `config.toml`, the argv, the sandbox word / policy chosen from frame
and posture, and the hermetic attestation of the launch. The scratch base, the child's PATH, binary resolution and the process-tree
kill are the shared kit's (adapters/process/).

Rules kept:
* the environment is built, never inherited: only the keys of the loopback-safe config (plus the
  caller's key variable in `api-key` mode) reach the child;
* the binary is resolved on exactly the child's PATH;
* the provider's retries are off and its stream idle timeout is set (`PROVIDER_SETTINGS`); the
  caller may set the timeout (`PASSED_THROUGH`), nothing else;
* the real key never lands in the child's environment, argv or scratch files in
  `none` and `loopback` modes;
* the scratch directory is neither under /tmp nor inside the working directory (the kit's
  scratch base: never /tmp, where workspace-write lets sandboxed commands write anywhere).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass

# LaunchError, child_path and default_vendor_dir are the kit's; the adapter and the doctor reach them here.
from metaharness.adapters.process import LaunchError, Scratch, child_path, default_vendor_dir, passed_through  # noqa: F401
from metaharness.adapters.process import make_scratch as new_scratch_root
from metaharness.adapters.process import resolve_binary as resolve_on_path
from metaharness.protocol.harnesses import harness
from metaharness.protocol.spec import RunSpec
from metaharness.adapters.vendor import pin_row
from metaharness.protocol.values import HermeticAttestation, ImposedRow


@dataclass(frozen=True)
class CodexOptions:
    """The run options only this adapter reads (its descriptor lists their RunSpec fields)."""

    replace_relay: bool = False  # --codex-replace-relay: deliver replace for shell calls through a hook relay

    @classmethod
    def of(cls, spec: RunSpec) -> CodexOptions:
        return cls(replace_relay=bool(spec.codex_replace_relay))

PIN = harness("codex").pin  # the registry's (protocol/harnesses.py)
PACKAGE = harness("codex").package
MODEL = "gpt-5.5"
PROVIDER_ID = "loopback"  # arbitrary, must not collide with a built-in provider id
KEY_VARIABLE = "LOOPBACK_API_KEY"
PLACEHOLDER_KEY = "metaharness-placeholder-key"
# The caller's settings carried into the loopback provider's config when set (docs/guides/ci.md):
# how long Codex waits on a response stream that has gone quiet before it fails the request
# (`stream_idle_timeout_ms`; metaharness's own default below, Codex's is five minutes). It does
# not cover a request held before its response headers: Codex has no timeout for that.
PASSED_THROUGH = {"METAHARNESS_CODEX_IDLE_TIMEOUT_MS": "stream_idle_timeout_ms"}
PROVIDER_SETTINGS = {"request_max_retries": 0, "stream_max_retries": 0, "stream_idle_timeout_ms": 20000}
SANDBOX_WORDS = ("read-only", "workspace-write", "danger-full-access")
WRITING_OPS = frozenset({"file.write", "file.edit", "shell"})
# Mount-point stubs the sandbox leaves after a killed command.
SANDBOX_STUBS = (".agents", ".aws", ".codex", ".git")


CODEX_HOME = "codex-home"  # below the scratch root: CODEX_HOME, holding only config.toml


def make_scratch(cwd: str | None) -> Scratch:
    """A fresh scratch root in the kit's scratch base with Codex's home (and, with no `cwd`, a
    `work` directory), never inside `cwd` (ScratchInsideCwd otherwise)."""
    return new_scratch_root("codex", cwd=cwd, dirs=(CODEX_HOME,) if cwd is not None else (CODEX_HOME, "work"))


def resolve_binary(path: str) -> str:
    """The codex launcher on the child's PATH (LaunchError, naming the pin, when it or node is absent)."""
    return resolve_on_path("codex", path, package=PACKAGE, pin=PIN)


def config_toml(base_url: str | None, *, model: str | None = None, passed: dict[str, int] | None = None) -> str:
    """The loopback-safe config (docs/guides/claude-and-codex.md). `base_url` None: the default
    OpenAI provider (api-key mode) with the same phone-home switches off. `passed`: the caller's
    settings (`PASSED_THROUGH`) laid over the provider's."""
    lines = [f'model = "{_toml_escape(model or MODEL)}"']
    if base_url is not None:
        lines.append(f'model_provider = "{PROVIDER_ID}"')
    lines += [
        "check_for_update_on_startup = false",
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[features]",
        "plugins = false",
    ]
    if base_url is not None:
        lines += [
            "",
            f"[model_providers.{PROVIDER_ID}]",
            f'name = "{PROVIDER_ID}"',
            f'base_url = "{_toml_escape(base_url)}"',
            'wire_api = "responses"',
            f'env_key = "{KEY_VARIABLE}"',
        ]
        settings = {**PROVIDER_SETTINGS, **{PASSED_THROUGH[name]: value for name, value in (passed or {}).items()}}
        lines += [f"{key} = {value}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


def _toml_escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def provider_base_url(endpoint: str) -> str:
    """`URL` → `URL/v1` (docs/guides/claude-and-codex.md); an endpoint already ending in /v1 is kept."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith("/v1") else endpoint + "/v1"


def child_env(scratch: Scratch, path: str, key_variable: str, key_value: str) -> dict[str, str]:
    return {
        "PATH": path,
        "HOME": str(scratch.home),
        "CODEX_HOME": str(scratch / CODEX_HOME),
        "TMPDIR": str(scratch.tmp),
        "LANG": "C.UTF-8",
        key_variable: key_value,
    }


def argv(binary: str) -> list[str]:
    """`codex app-server`, with PR_SET_PDEATHSIG=SIGKILL through setpriv when present."""
    setpriv = shutil.which("setpriv")
    if setpriv:
        return [setpriv, "--pdeathsig", "KILL", "--", binary, "app-server"]
    return [binary, "app-server"]


# --- sandbox from frame and posture --------------------------------------


def sandbox_word(frame_ops: set[str] | None, posture: str) -> str:
    """The SandboxMode word. With a frame in force: read-only when it admits no writing
    operation, else workspace-write — the posture still wins where it is stricter."""
    if frame_ops is None:
        return posture
    framed = "workspace-write" if frame_ops & WRITING_OPS else "read-only"
    return min(framed, posture, key=SANDBOX_WORDS.index)


def sandbox_policy(frame_ops: set[str] | None, posture: str) -> dict:
    """The tagged SandboxPolicy object sent on every turn/start."""
    word = sandbox_word(frame_ops, posture)
    if word == "read-only":
        return {"type": "readOnly", "networkAccess": False}
    if word == "danger-full-access":
        return {"type": "dangerFullAccess"}
    return {
        "type": "workspaceWrite",
        "writableRoots": [],
        "networkAccess": False,
        "excludeTmpdirEnvVar": False,
        # Only a frame-derived sandbox shuts /tmp; a bare posture keeps Codex's default.
        "excludeSlashTmp": frame_ops is not None,
    }


def existing_stubs(work: str) -> set[str]:
    return {name for name in SANDBOX_STUBS if os.path.lexists(os.path.join(work, name))}


def remove_new_stubs(work: str, before: set[str]) -> None:
    for name in SANDBOX_STUBS:
        if name in before:
            continue
        path = os.path.join(work, name)
        try:
            if os.path.isdir(path) and not os.path.islink(path) and not os.listdir(path):
                os.rmdir(path)
            elif os.path.isfile(path) and os.path.getsize(path) == 0:
                os.unlink(path)  # a file-shaped bind-mount target
        except OSError:
            pass


def attestation(spec: RunSpec, version: str | None, *, base_url: str | None, key_variable: str | None, work: str | None,
                relay: bool) -> HermeticAttestation:
    """metaharness's own claim about the launch (docs/reference/wire.md), for the `cliVersion` the
    thread reports; the loop fills mode/decisions/deny_only and clears the rows under --hermetic off."""
    imposed = [
        ImposedRow(row="h1a", how="CODEX_HOME is a per-run directory holding only config.toml; features.plugins = false"),
        ImposedRow(row="h3", how="constructed environment: PATH HOME CODEX_HOME TMPDIR LANG and the provider key variable"),
        ImposedRow(row="h4", how=f"credentials {spec.credentials}: the child sees "
                                 + ("the caller's key" if spec.credentials == "api-key" else "a placeholder key")),
        ImposedRow(row="h5", how="no MCP servers are configured in the per-run config.toml"),
        ImposedRow(row="h6", how=f"provider base_url {base_url or 'default'}, env_key {key_variable}"),
        ImposedRow(row="h7", how=f"cwd {work}"),
        ImposedRow(row="h8", how=(
            "one PreToolUse command hook, the replace relay to a 0600 socket in the scratch directory; "
            "hook trust bypassed for this thread only" if relay else "CODEX_DISABLE_HOOKS unset; no hooks declared")),
    ]
    on_pin, unavailable = pin_row("codex", version, PIN, f"thread.cliVersion {version}")
    return HermeticAttestation(imposed=imposed + on_pin, unavailable=unavailable)


def key_variable(spec: RunSpec, key_name: str | None) -> str:
    """The variable the child reads its key from: the provider's env_key (`KEY_VARIABLE`), but under
    credentials `api-key` with no endpoint the caller's own variable, which the default provider reads."""
    return key_name if spec.credentials == "api-key" and not spec.model_endpoint and key_name else KEY_VARIABLE


def thread_start(work: str, sandbox: str, model: str | None, relay: bool) -> dict:
    """`thread/start`'s parameters: approval policy `untrusted` for the whole run."""
    params: dict = {"cwd": work, "approvalPolicy": "untrusted", "sandbox": sandbox}
    if model:
        params["model"] = model
    if relay:
        params["config"] = {"bypass_hook_trust": True}  # hooks run only when trusted; taken per thread
    return params


def keep_rollout(thread_path: str | None, scratch: Scratch) -> str | None:
    """Copy the thread's rollout into the scratch (the file stays where Codex wrote it); its copy's path."""
    if not thread_path or not os.path.isfile(thread_path):
        return None
    kept = str(scratch.root / os.path.basename(thread_path))
    try:
        shutil.copy2(thread_path, kept)
    except OSError:
        return None
    return kept


def write_seam_timings(scratch: Scratch, timings: list[tuple[str, int, int]]) -> None:
    """The seam's own share per call (request read → answer written), for bench/bench_codex.py."""
    if not timings:
        return
    with open(scratch.root / "seam-timings.jsonl", "w") as handle:
        for call_id, received, answered in timings:
            handle.write(json.dumps({"call_id": call_id, "seam_ms": (answered - received) / 1e6}) + "\n")
