"""`RunSpec` — the one options struct of a run (docs/reference/cli.md#metaharness-run).

It sits on the protocol floor, below the adapters, so the seam between the run and an adapter
is typed end to end (`Adapter.__init__(spec: RunSpec)`); `metaharness.run.spec` re-exports it
under the path the library documentation names, with the run's rules about a spec.

Every `metaharness run` flag is a field here, spelled one-to-one: the field is the
flag without its dashes, `-` written `_`; a repeatable flag is a list field named
in the plural (`--require-command` ↔ `required_commands`, `--policy` ↔
`policy_files`). `tests/run/test_spec_flags.py` fails when the CLI and this struct
drift apart. The library builds a RunSpec directly; the CLI only parses into one.

The run's core fields name no vendor. A field that belongs to one adapter kind sits
under "adapter options", marked with its owner in the field's metadata; that adapter's
descriptor lists it in `options` and reads it itself. The run only refuses such an
option on a run of another kind (`metaharness.run.spec.foreign_option`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Union

from .frame import Frame
from .harnesses import KINDS

__all__ = ["CREDENTIAL_MODES", "DECISION_MODES", "HERMETIC_MODES", "KINDS", "NEGATED", "REPEATABLE", "LibraryFrame",
           "RunSpec"]

DECISION_MODES = ("frame", "ask", "observe", "policy")
HERMETIC_MODES = ("off", "on", "strict")
CREDENTIAL_MODES = ("none", "loopback", "api-key")

# Flags whose list field is not simply the flag name (repeatable flags).
REPEATABLE = {"require-command": "required_commands", "policy": "policy_files", "redact": "redact_patterns"}
# Boolean flags that default to on, and the flag that turns each off.
NEGATED = {"replay_strict": "--replay-lenient"}

# A frame given as a value: sealed, or a plain document the run seals at launch.
LibraryFrame = Union[Frame, Mapping[str, Any]]


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
    library_frame: LibraryFrame | None = field(default=None, metadata={"library_only": True})
    run_id: str | None = field(default=None, metadata={"library_only": True})

    def work_dir(self) -> str:
        """The directory the run works in, absolute — one rule for every harness: `--cwd`, else the
        current directory."""
        return os.path.abspath(self.cwd or os.getcwd())
