"""`RunSpec` — the one options struct of a run (docs/reference/cli.md#metaharness-run).

Every `metaharness run` flag is a field here, spelled one-to-one: the field is the
flag without its dashes, `-` written `_`; a repeatable flag is a list field named
in the plural (`--require-command` ↔ `required_commands`, `--policy` ↔
`policy_files`). `tests/run/test_spec_flags.py` fails when the CLI and this struct
drift apart. The library builds a RunSpec directly; the CLI only parses into one.

The run's core fields name no vendor. A field that belongs to one adapter kind sits
under "adapter options", marked with its owner in the field's metadata; that adapter's
descriptor lists it in `options` and reads it itself. The run only refuses such an
option on a run of another kind (`foreign_option`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from metaharness.protocol.harnesses import KINDS, harness

DECISION_MODES = ("frame", "ask", "observe", "policy")
HERMETIC_MODES = ("off", "on", "strict")
CREDENTIAL_MODES = ("none", "loopback", "api-key")

# Flags whose list field is not simply the flag name (repeatable flags).
REPEATABLE = {"require-command": "required_commands", "policy": "policy_files", "redact": "redact_patterns"}
# Boolean flags that default to on, and the flag that turns each off.
NEGATED = {"replay_strict": "--replay-lenient"}


@dataclass
class RunSpec:
    kind: str
    prompt: str | None = None
    frame: str | None = None  # path of a sealed frame document
    decisions: str = "frame"
    deny_only: bool = False
    decision_timeout_ms: int = 55000
    keep_open: bool = False
    posture: str | None = None
    required_commands: list[str] = field(default_factory=list)
    retain_dir: str | None = None
    hermetic: str = "off"
    strict_version: bool = False
    model: str | None = None
    max_turns: int | None = None
    fail_on_error: bool = False  # exit 1 when the terminal record says the session failed
    max_cost_usd: float | None = None  # priced by metaharness from the traffic it sees (docs/guides/spend.md)
    prices: str | None = None  # a metaharness.prices/1 file laid over the shipped price table
    script: str | None = None  # a metaharness.scenario/1 file
    cwd: str | None = None
    events: str | None = None  # also tee events to this file
    # credentials and endpoints
    credentials: str = "none"
    model_endpoint: str | None = None
    vendor_dir: str | None = None  # directory holding the vendor binaries, first on the child PATH
    # policy mode
    policy_files: list[str] = field(default_factory=list)
    policy_scopes: str = "all"
    policy_mode: str | None = None
    policy_workspace_mode: str | None = None
    policy_ask: str = "none"
    no_decision_trail: bool = False
    # record and replay of the model traffic (a metaharness.cassette/1 file)
    record: str | None = None
    replay: str | None = None
    replay_strict: bool = True
    redact_patterns: list[str] = field(default_factory=list)
    # live OpenTelemetry export: an OTLP/HTTP traces URL, or "default" (the OTEL_* variables' endpoint)
    otel: str | None = None
    # adapter options: each read only by the adapter named in its metadata
    codex_replace_relay: bool = field(default=False, metadata={"adapter": "codex"})

    # Library-only (no flag): a frame given as a value rather than a file, and the run id.
    library_frame: Any = field(default=None, metadata={"library_only": True})
    run_id: str | None = field(default=None, metadata={"library_only": True})


def foreign_option(spec: RunSpec, owned: tuple[str, ...]) -> str | None:
    """The refusal sentence for an adapter option set on a run whose adapter does not own it
    (`owned`: the fields its descriptor lists), or None."""
    for option in fields(spec):
        owner = option.metadata.get("adapter")
        if owner is not None and option.name not in owned and getattr(spec, option.name) != option.default:
            return f"--{option.name.replace('_', '-')} is a {owner} option and this run is {spec.kind}"
    return None


def cost_unseen(spec: RunSpec) -> str | None:
    """Why metaharness cannot price this run's model traffic (so cannot keep --max-cost-usd), or None.
    It sees oharness's usage in-process, the scripted loopback's answers, the credential proxy's, and
    the recorder's."""
    if spec.replay:
        return "--max-cost-usd is not kept on a replayed run: its answers come from the cassette and cost nothing"
    if spec.record:
        return None  # the recorder sees every request and answer (or oharness, or the credential proxy, in front of it)
    if spec.kind == "oharness" or spec.script:
        return None
    proxied = "loopback" in harness(spec.kind).credentials  # the credential proxy sees its traffic
    if spec.credentials == "loopback" and proxied:
        return None
    how = {"none": f"--model-endpoint {spec.model_endpoint}" if spec.model_endpoint else "its own login",
           "api-key": "--credentials api-key"}.get(spec.credentials, f"--credentials {spec.credentials}")
    fix = "--credentials loopback or --script" if proxied else "--script"
    return (f"--max-cost-usd cannot be kept on {spec.kind} with {how}: the harness talks to its model directly "
            f"and metaharness does not see that traffic to price it; use {fix}")
