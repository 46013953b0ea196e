"""The OHarness permission engine (docs/reference/permissions.md): pure decision logic, no UI.

Public API — small and typed; everything else is internal:

* `load_settings(cwd, …) -> Settings`      scopes, merge, trust, load errors (settings.py)
* `Settings.context(mode=…, …) -> Context` the engine's input for a session
* `decide(call, ctx, external=None) -> Verdict`   the decision procedure (decision.py; engine.py is the face)
* `settle(verdict, can_ask=…, external=…) -> Settlement | None`   outcome without a prompt
* `oharness_call(tool, input, cwd)`, `vendor_call(tool, input, cwd)`, `notation_call(text, cwd)` → Call
* `policy_decision(verdict, …)`, `policy_answer(verdict, answer, ctx, …)`, `reason_text(verdict)` (policy.py)
* `always_allow(ctx, verdict, scope)` — "always allow": write + add in memory (persist.py)
* `TrailWriter(path, enabled=…)` — `record(verdict, settlement=…)`, `answer(id, …)`, `close()` (trail.py)
* `MODES`, `WORKSPACE_MODES` — the one list of each, least permissive first (modes.py)
* `canonical(p, cwd)`, `open_decided(canon, flags)` — what file tools must use (paths.py, opened.py)
"""

from importlib import import_module
from typing import Any

from .modes import MODES, WORKSPACE_MODES

# The rest of the public names, by the module that defines them. They are imported when first
# read (module `__getattr__`), so that reading the mode lists — the CLI builds its options from
# them at start-up — does not load the engine.
_HOME = {
    "engine": ("Call", "Context", "ExternalDecision", "RuleSet", "Settlement", "SubjectResult", "Verdict",
               "builtin_rules", "decide", "oharness_call", "replace_input", "settle", "subagent_context"),
    "paths": ("canonical",),
    "opened": ("PathChanged", "open_decided"),
    "persist": ("PersistError", "always_allow", "remember_rule"),
    "policy": ("PolicyDecision", "policy_answer", "policy_decision", "policy_object", "reason_text"),
    "rules": ("Rule", "RuleError", "parse_rule"),
    "settings": ("LoadIssue", "Settings", "load_settings", "revoke_trust", "trust_workspace"),
    "trail": ("TrailWriter",),
    "vendor": ("NotationError", "notation_call", "vendor_call"),
}
_MODULE_OF = {name: module for module, names in _HOME.items() for name in names}

__all__ = ["MODES", "WORKSPACE_MODES", *_MODULE_OF]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_MODULE_OF))
