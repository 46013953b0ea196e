"""The permission engine's face: `decide(call, ctx) -> Verdict` and the values around it.

What belongs here: nothing of its own — the names a caller of the engine needs, from the modules
that define them. A newcomer reads the engine in this order:

* `calls.py`      a tool call, normalised (`Call`, `oharness_call`; vendors' tools in vendor.py)
* `context.py`    the merged rules and the session's context (`RuleSet`, `Context`, built-in rules)
* `subjects.py`   from a call to its subjects (commands, paths, hosts, names) and its principal
* `match.py`      one rule against one subject: broad (deny, ask) and strict (allow)
* `index.py`      the rule index: for one subject, only the rules that can match it
* `path_checks.py` writable roots, protected and secret paths, critical removals
* `decision.py`   the procedure, steps 0–5, the verdict, and the decisions kept per context
* `grants.py`     step 6: what grants each subject still open
* `remember.py`   what "always allow" would write, or why it is not offered
* `reasons.py`    the reason codes: one catalogue, read by every renderer
* `verdict.py`    `Verdict`, `ExternalDecision`, and `settle` (an outcome without a prompt)

Rules the engine keeps (each stated in the module that enforces it): `decide` is pure; deny
rules are evaluated over everything extracted, first, and hold in every mode; anything not
understood asks; an external allow never skips steps 0–5.
"""

from __future__ import annotations

from .calls import Call, oharness_call, replace_input
from .context import Context, RuleSet, builtin_rules, subagent_context
from .decision import decide
from .modes import BYPASS_NOTICE, MODES, WORKSPACE_MODES
from .verdict import Behavior, ExternalDecision, Settlement, SubjectResult, Verdict, settle

__all__ = [
    "Call", "Context", "Verdict", "SubjectResult", "ExternalDecision", "Settlement", "RuleSet", "Behavior",
    "decide", "settle", "oharness_call", "builtin_rules", "subagent_context", "replace_input", "MODES",
    "WORKSPACE_MODES", "BYPASS_NOTICE",
]
