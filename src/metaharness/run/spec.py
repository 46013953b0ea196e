"""The run's rules about a `RunSpec`: an adapter option on a run of another kind, a budget it
cannot keep. The struct itself lives on the protocol floor (`metaharness.protocol.spec`), below
the adapters; it is re-exported here under the path the library documentation names.
"""

from __future__ import annotations

from dataclasses import fields

from metaharness.protocol.harnesses import harness
from metaharness.protocol.spec import RunSpec

__all__ = ["RunSpec", "cost_unseen", "foreign_option"]


def foreign_option(spec: RunSpec, owned: tuple[str, ...]) -> str | None:
    """The refusal sentence for an adapter option set on a run whose adapter does not own it
    (`owned`: the fields its descriptor lists), or None."""
    for option in fields(spec):
        owner = option.metadata.get("adapter")
        if owner is not None and option.name not in owned and getattr(spec, option.name) != option.default:
            return f"--{option.name.replace('_', '-')} is a {owner} option and this run is {spec.kind}"
    return None


def cost_unseen(spec: RunSpec) -> str | None:
    """Why metaharness cannot price this run's model traffic (so cannot keep --max-cost-usd), or None.
    It sees oharness's usage in-process, the scripted loopback's answers, the credential proxy's, and
    the recorder's."""
    if spec.replay:
        return "--max-cost-usd is not kept on a replayed run: its answers come from the cassette and cost nothing"
    if spec.record:
        return None  # the recorder sees every request and answer (or oharness, or the credential proxy, in front of it)
    if spec.kind == "oharness" or spec.script:
        return None
    proxied = "loopback" in harness(spec.kind).credentials  # the credential proxy sees its traffic
    if spec.credentials == "loopback" and proxied:
        return None
    how = {"none": f"--model-endpoint {spec.model_endpoint}" if spec.model_endpoint else "its own login",
           "api-key": "--credentials api-key"}.get(spec.credentials, f"--credentials {spec.credentials}")
    fix = "--credentials loopback or --script" if proxied else "--script"
    return (f"--max-cost-usd cannot be kept on {spec.kind} with {how}: the harness talks to its model directly "
            f"and metaharness does not see that traffic to price it; use {fix}")
