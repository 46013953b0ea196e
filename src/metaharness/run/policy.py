"""The `policy` decision mode: OHarness permission rules at metaharness's per-call seam
(docs/guides/policy.md).

What belongs here: reading the settings once at run start (refusing bad ones by
name), mapping a vendor call to the engine's call, turning a verdict into a
metaharness decision (via the engine's own table) and writing the decision
trail. The loop calls it; the engine stays pure.
"""

from __future__ import annotations

import os
from typing import Any

from metaharness.permissions import (
    ExternalDecision,
    Settlement,
    TrailWriter,
    decide,
    load_settings,
    policy_answer,
    policy_decision,
    vendor_call,
)
from metaharness.permissions.calls import oharness_call
from metaharness.protocol.spec import RunSpec
from metaharness.protocol.values import Abstain, Allow, Decision, Deny, PolicyAsk, Replace


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
        from metaharness.adapters import policy_view

        self._view = policy_view(spec.kind)
        self.ctx = settings.context(can_ask=spec.policy_ask == "embedder")
        # The trail is kept only where the user asked for a record (--retain-dir): nothing is
        # left in a temporary directory nobody was told about. The events carry every decision.
        enabled = bool(spec.retain_dir) and settings.trail_enabled and not spec.no_decision_trail
        self.trail_path = os.path.join(spec.retain_dir, "decisions.jsonl") if enabled else None
        if enabled:
            os.makedirs(spec.retain_dir, exist_ok=True)
        self.trail = TrailWriter(self.trail_path, enabled=enabled)

    def verdict(self, name: str, input: Any, cwd: str):
        # oharness presents its own tool names; vendors their own (an adapter may translate them).
        if self.kind == "oharness":
            return decide(oharness_call(name, input, cwd), self.ctx)
        return decide(vendor_call(*self._view(name, input), cwd), self.ctx)

    def decision(self, verdict, frame_deny_reason: str | None):
        return policy_decision(verdict, policy_ask=self.spec.policy_ask, deny_only=self.spec.deny_only,
                               frame_deny_reason=frame_deny_reason)

    def answer(self, verdict, decision: Decision | None):
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
    def wire_policy(ruling) -> PolicyAsk:
        asked = ruling.policy
        return PolicyAsk(reason=asked["reason"], rule=asked["rule"], scope=asked["scope"], principal=asked["principal"])

    @staticmethod
    def as_decision(ruling, embedder_decision: Decision | None = None) -> Decision:
        if ruling.decision == "deny":
            return Deny(reason=ruling.reason or "denied by policy")
        if ruling.decision == "abstain":
            return Abstain()
        if isinstance(embedder_decision, Replace):
            return embedder_decision  # re-decided by the engine from step 0 and allowed
        return Allow()

    def record(self, call_id: str, ruling) -> None:
        if ruling.verdict is None or ruling.outcome is None:
            return
        self.trail.record(ruling.verdict, settlement=Settlement(ruling.outcome, ruling.by or "engine"), call_id=call_id,
                          decided_by=ruling.decided_by)

    def close(self) -> str | None:
        """Flush the trail; returns its path when one was kept, for the run to name."""
        self.trail.close(2.0)
        return self.trail_path
