"""The `policy` decision mode: OHarness permission rules at metaharness's per-call seam
(permissions.md § 17).

What belongs here: reading the settings once at run start (refusing bad ones by
name), mapping a vendor call to the engine's call (§ 17.4), turning a verdict into a
metaharness decision (via the engine's own § 17.2 table) and writing the decision
trail (§ 17.3). The loop calls it; the engine stays pure.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from oharness.permissions import (
    ExternalDecision,
    Settlement,
    TrailWriter,
    decide,
    load_settings,
    policy_answer,
    policy_decision,
    vendor_call,
)
from oharness.permissions.engine import oharness_call

from metaharness.protocol.values import Abstain, Allow, Deny, PolicyAsk, Replace

from .spec import RunSpec


class PolicyDecider:
    def __init__(self, spec: RunSpec, run_cwd: str) -> None:
        settings = load_settings(
            run_cwd,
            cli_mode=spec.policy_mode,
            cli_workspace_mode=spec.policy_workspace_mode,
            policy_files=tuple(spec.policy_files),
            scopes=spec.policy_scopes == "all",
            no_trail=spec.no_decision_trail,
        )
        if settings.errors:
            raise ValueError("the policy settings cannot be used: " + "; ".join(str(e) for e in settings.errors))
        if settings.bypass_refused:
            raise ValueError(settings.bypass_refused)
        self.spec = spec
        self.kind = spec.kind
        from metaharness.adapters import adapter_class

        self._view = adapter_class(spec.kind).policy_view
        self.ctx = settings.context(can_ask=spec.policy_ask == "embedder")
        directory = spec.retain_dir or tempfile.mkdtemp(prefix="metaharness-policy-")
        self.trail_path = os.path.join(directory, "decisions.jsonl")
        enabled = settings.trail_enabled and not spec.no_decision_trail
        if enabled:
            os.makedirs(directory, exist_ok=True)
        self.trail = TrailWriter(self.trail_path, enabled=enabled)

    def verdict(self, name: str, input: Any, cwd: str):
        # oharness presents its own tool names (§ 7.1); vendors their own (§ 17.4).
        if self.kind == "oharness":
            return decide(oharness_call(name, input, cwd), self.ctx)
        return decide(vendor_call(*self._view(name, input), cwd), self.ctx)

    def decision(self, verdict, frame_deny_reason: str | None):
        return policy_decision(verdict, policy_ask=self.spec.policy_ask, deny_only=self.spec.deny_only,
                               frame_deny_reason=frame_deny_reason)

    def answer(self, verdict, decision: Any):
        """The embedder's answer to a forwarded ask; None when the deadline expired."""
        if decision is None:
            return policy_answer(verdict, None, self.ctx, deny_only=self.spec.deny_only)
        external = ExternalDecision(
            decision=type(decision).__struct_config__.tag,
            decided_by="embedder",
            reason=getattr(decision, "reason", None),
            replacement=getattr(decision, "input", None) if isinstance(decision, Replace) else None,
        )
        return policy_answer(verdict, external, self.ctx, deny_only=self.spec.deny_only)

    @staticmethod
    def wire_policy(pd) -> PolicyAsk:
        p = pd.policy
        return PolicyAsk(reason=p["reason"], rule=p["rule"], scope=p["scope"], principal=p["principal"])

    @staticmethod
    def as_decision(pd, embedder_decision: Any = None):
        if pd.decision == "deny":
            return Deny(reason=pd.reason or "denied by policy")
        if pd.decision == "abstain":
            return Abstain()
        if isinstance(embedder_decision, Replace):
            return embedder_decision  # re-decided by the engine from step 0 and allowed
        return Allow()

    def record(self, call_id: str, pd) -> None:
        if pd.verdict is None or pd.outcome is None:
            return
        self.trail.record(pd.verdict, settlement=Settlement(pd.outcome, pd.by or "engine"), call_id=call_id,
                          decided_by=pd.decided_by)

    def close(self) -> None:
        self.trail.close(2.0)
