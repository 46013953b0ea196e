"""The registry of harness kinds: one entry per kind, and the only list of them.

What belongs here: for each kind its name (the word on the command line and in
`session.started.adapter`), how the docs name it, where its adapter class and its doctor live
(as import paths, read only when a run or a check needs them, so this module stays on the wire's
floor), its vendor package, pin and launcher, and the credential modes it takes. Everything
else that names the kinds reads them from here: the CLI's choices (`run`, `doctor`,
`conformance`, `workflow run --harness`), the run spec, the `adapter` literal of the event
wire, a batch plan's `kind`, the troubleshooting table. The tool table and the capability
descriptor live on the adapter class the entry names (`adapter_class(kind).tools`,
`.descriptor()`). `tests/test_registry.py` fails when another list of the kinds appears in src/.

Adding a harness is one entry here plus its own adapter package.
"""

from __future__ import annotations

import importlib
from msgspec import Struct
from typing import Any, Literal


class Harness(Struct, frozen=True):
    name: str
    title: str  # as the docs name it
    adapter: str  # "module:Class", the `base.Adapter` subclass
    doctor: str | None = None  # "module" or "module:attribute" holding doctor_checks / conformance_checks
    package: str | None = None  # the vendor's npm package (None: built in)
    pin: str | None = None  # the vendor version this adapter was written and tested against
    binary: str | None = None  # the launcher the child PATH must hold
    # The --credentials modes the kind takes; "loopback" means metaharness's credential proxy
    # stands between it and the model (so it sees, and can price, the traffic).
    credentials: tuple[str, ...] = ("none",)
    provider: str | None = None  # its model's provider as OpenTelemetry's gen_ai.provider.name spells it
    # "module:function" (name, input) → (name, input): the call as the policy engine's vendor mapping
    # reads it (Claude Code's tool names and input keys), for a harness whose tools are named
    # otherwise; None: the call as it is (`adapters.policy_view`).
    policy_view: str | None = None


HARNESSES: tuple[Harness, ...] = (
    Harness("oharness", "oharness", "metaharness.adapters.oharness:OHarnessAdapter"),
    Harness("claude", "Claude Code", "metaharness.adapters.claude:ClaudeAdapter",
            doctor="metaharness.adapters.claude.doctor", package="@anthropic-ai/claude-code", pin="2.1.328",
            binary="claude", credentials=("none", "loopback", "api-key"), provider="anthropic"),
    Harness("codex", "Codex", "metaharness.adapters.codex:CodexAdapter",
            doctor="metaharness.adapters.codex.doctor", package="@openai/codex", pin="0.171.0", binary="codex",
            credentials=("none", "loopback", "api-key"), provider="openai"),
    Harness("opencode", "opencode", "metaharness.adapters.acp.opencode:OpencodeAdapter",
            doctor="metaharness.cli.acp_doctor:opencode", package="opencode-ai", pin="1.18.33", binary="opencode",
            policy_view="metaharness.adapters.acp.opencode:policy_view"),
    Harness("gemini", "Gemini CLI", "metaharness.adapters.acp.gemini:GeminiAdapter",
            doctor="metaharness.cli.acp_doctor:gemini", package="@google/gemini-cli", pin="0.61.0", binary="gemini",
            provider="gcp.gemini", policy_view="metaharness.adapters.acp.gemini:policy_view"),
    Harness("qwen", "Qwen Code", "metaharness.adapters.acp.qwen:QwenAdapter",
            doctor="metaharness.cli.acp_doctor:qwen", package="@qwen-code/qwen-code", pin="0.24.4", binary="qwen"),
)

REGISTRY: dict[str, Harness] = {entry.name: entry for entry in HARNESSES}
KINDS: tuple[str, ...] = tuple(REGISTRY)
# The kind as a type, for the wire's `adapter` field and a batch plan's `kind`.
Kind = Literal[KINDS]  # type: ignore[valid-type]


def harness(kind: str) -> Harness:
    """The entry for `kind`; KeyError for an unknown kind."""
    return REGISTRY[kind]


def load(path: str) -> Any:
    """The object an entry's "module" or "module:attribute" path names."""
    module_name, _, attribute = path.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attribute) if attribute else module


def with_doctor() -> tuple[str, ...]:
    """The kinds `metaharness doctor` and `conformance` check (the vendor harnesses)."""
    return tuple(entry.name for entry in HARNESSES if entry.doctor)


def spelled(kinds: tuple[str, ...] = KINDS, last: str = "or") -> str:
    """`oharness`, `claude` … or `gemini`: the kinds as a sentence names them."""
    quoted = [f"`{kind}`" for kind in kinds]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} {last} {quoted[-1]}"
