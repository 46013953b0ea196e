"""The decision census (protocol.md § 6.6): one count per `tool.decided` line."""

from __future__ import annotations

from metaharness.protocol.values import Abstain, Allow, DecisionCensus, Deny, Replace

_BUCKET = {Allow: "allowed", Deny: "denied", Replace: "replaced", Abstain: "abstained"}


class Census:
    def __init__(self) -> None:
        self.value = DecisionCensus()

    def count(self, decision: object, decided_by: str, seam: str) -> None:
        bucket = _BUCKET[type(decision)]
        setattr(self.value, bucket, getattr(self.value, bucket) + 1)
        self.value.by_seam[seam] = self.value.by_seam.get(seam, 0) + 1  # type: ignore[index]
        self.value.by_decider[decided_by] = self.value.by_decider.get(decided_by, 0) + 1  # type: ignore[index]

    def snapshot(self) -> DecisionCensus:
        v = self.value
        return DecisionCensus(
            allowed=v.allowed, denied=v.denied, replaced=v.replaced, abstained=v.abstained,
            by_seam=dict(v.by_seam), by_decider=dict(v.by_decider),
        )
