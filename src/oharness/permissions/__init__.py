"""The OHarness permission engine (docs/reference/permissions.md): pure decision logic, no UI.

Public API — small and typed; everything else is internal:

* `load_settings(cwd, …) -> Settings`      scopes, merge, trust, load errors (settings.py)
* `Settings.context(mode=…, …) -> Context` the engine's input for a session
* `decide(call, ctx, external=None) -> Verdict`   the decision procedure (engine.py)
* `settle(verdict, can_ask=…, external=…) -> Settlement | None`   outcome without a prompt
* `oharness_call(tool, input, cwd)`, `vendor_call(tool, input, cwd)`, `notation_call(text, cwd)` → Call
* `policy_decision(verdict, …)`, `policy_answer(verdict, answer, ctx, …)`, `reason_text(verdict)` (policy.py)
* `always_allow(ctx, verdict, scope)` — "always allow": write + add in memory (persist.py)
* `TrailWriter(path, enabled=…)` — `record(verdict, settlement=…)`, `answer(id, …)`, `close()` (trail.py)
* `canonical(p, cwd)`, `open_decided(canon, flags)` — what file tools must use (paths.py)
"""

from .engine import (
    MODES, WORKSPACE_MODES, Call, Context, ExternalDecision, RuleSet, Settlement, SubjectResult, Verdict,
    builtin_rules, decide, oharness_call, replace_input, settle, subagent_context,
)
from .paths import canonical
from .paths import PathChanged, open_decided
from .persist import PersistError, always_allow, remember_rule
from .policy import PolicyDecision, policy_answer, policy_decision, policy_object, reason_text
from .rules import Rule, RuleError, parse_rule
from .settings import LoadIssue, Settings, load_settings, revoke_trust, trust_workspace
from .trail import TrailWriter
from .vendor import NotationError, notation_call, vendor_call

__all__ = [
    "MODES", "WORKSPACE_MODES", "Call", "Context", "ExternalDecision", "RuleSet", "Settlement", "SubjectResult",
    "Verdict", "builtin_rules", "decide", "oharness_call", "settle", "canonical", "PersistError", "remember_rule",
    "PolicyDecision", "policy_answer", "policy_decision", "reason_text", "Rule", "RuleError", "parse_rule",
    "LoadIssue", "Settings", "load_settings", "revoke_trust", "trust_workspace", "TrailWriter",
    "NotationError", "notation_call", "vendor_call", "replace_input", "subagent_context", "PathChanged",
    "open_decided", "always_allow", "policy_object",
]
