"""Harness adapters. Each kind lives in its own package with the same parts behind a
face (`__init__.py`, re-exports only): launch (spawn the child hermetically), translate
(vendor records → events), seam (present calls, deliver decisions) and adapter (the
`base.Adapter` subclass: lifecycle, controls, its tool table and its descriptor). The
ACP harnesses share the `acp` package, one vendor module each."""

from __future__ import annotations

import importlib

KINDS: dict[str, str] = {
    "oharness": "metaharness.adapters.oharness:OHarnessAdapter",
    "claude": "metaharness.adapters.claude:ClaudeAdapter",
    "codex": "metaharness.adapters.codex:CodexAdapter",
    "opencode": "metaharness.adapters.acp.opencode:OpencodeAdapter",
    "gemini": "metaharness.adapters.acp.gemini:GeminiAdapter",
}


def adapter_class(kind: str):
    """The adapter class for `kind`; KeyError for an unknown kind."""
    module_name, attr = KINDS[kind].split(":")
    return getattr(importlib.import_module(module_name), attr)
