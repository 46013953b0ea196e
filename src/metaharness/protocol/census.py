"""The decision census (docs/reference/wire.md): one count per `tool.decided` line.

Pure. The run loop counts the decisions it writes; the viewers count the lines they
read; both through this one class, so the two can never disagree on the rule.
"""

from __future__ import annotations

from typing import Any

from .values import Abstain, Allow, Decision, DecisionCensus, Deny, Replace

_BUCKET = {Allow: "allowed", Deny: "denied", Replace: "replaced", Abstain: "abstained"}


def census_dict(census: DecisionCensus) -> dict[str, Any]:
    """The census as plain JSON values in wire order, its maps key-sorted."""
    return {
        "allowed": census.allowed,
        "denied": census.denied,
        "replaced": census.replaced,
        "abstained": census.abstained,
        "by_seam": {k: census.by_seam[k] for k in sorted(census.by_seam)},
        "by_decider": {k: census.by_decider[k] for k in sorted(census.by_decider)},
    }


class Census:
    def __init__(self) -> None:
        self.value = DecisionCensus()

    def count(self, decision: Decision, decided_by: str, seam: str) -> None:
        bucket = _BUCKET[type(decision)]
        setattr(self.value, bucket, getattr(self.value, bucket) + 1)
        self.value.by_seam[seam] = self.value.by_seam.get(seam, 0) + 1  # type: ignore[index]
        self.value.by_decider[decided_by] = self.value.by_decider.get(decided_by, 0) + 1  # type: ignore[index]

    def add(self, decided: Any) -> None:
        """Count one `tool.decided` event."""
        self.count(decided.decision, decided.decided_by, decided.seam)

    def snapshot(self) -> DecisionCensus:
        v = self.value
        return DecisionCensus(allowed=v.allowed, denied=v.denied, replaced=v.replaced, abstained=v.abstained,
                              by_seam=dict(sorted(v.by_seam.items())), by_decider=dict(sorted(v.by_decider.items())))

    def as_dict(self) -> dict[str, Any]:
        return census_dict(self.value)
