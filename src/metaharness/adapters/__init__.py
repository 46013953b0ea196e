"""Harness adapters. Each kind lives in its own package with the same parts behind a
face (`__init__.py`, re-exports only): launch (spawn the child hermetically), translate
(vendor records → events), seam (present calls, deliver decisions) and adapter (the
`base.Adapter` subclass: lifecycle, controls, its tool table and its descriptor). The
ACP harnesses share the `acp` package, one vendor module each."""

from __future__ import annotations

from typing import Any, Callable

from metaharness.protocol.harnesses import REGISTRY, load

# kind → "module:Class", read from the registry of harness kinds (protocol/harnesses.py).
KINDS: dict[str, str] = {kind: entry.adapter for kind, entry in REGISTRY.items()}


def adapter_class(kind: str):
    """The adapter class for `kind`; KeyError for an unknown kind."""
    return load(REGISTRY[kind].adapter)


def _as_it_is(name: str, input: Any) -> tuple[str, Any]:
    return name, input


def policy_view(kind: str) -> Callable[[str, Any], tuple[str, Any]]:
    """How the policy engine's vendor mapping (Claude Code's tool names and input keys) reads a call
    of `kind`: the registry entry's `policy_view`, else the call as it is. It changes nothing of
    what `tool.requested` shows."""
    path = REGISTRY[kind].policy_view
    return load(path) if path else _as_it_is
