"""`metaharness_agent` refuses a configuration it cannot run, by name, when it is built."""

from __future__ import annotations

import pytest

from metaharness.inspect import MetaharnessAgentError, _refused, metaharness_agent


@pytest.mark.parametrize("arguments, name", [
    ({"harness": "aider"}, "InspectHarnessUnknown"),
    ({"harness": "oharness", "decisions": "ask"}, "InspectAskMode"),
    ({"harness": "oharness", "decisions": "vote"}, "InspectDecisionsUnknown"),
])
def test_a_wrong_configuration_is_refused_by_name(arguments, name):
    with pytest.raises(MetaharnessAgentError) as refused:
        metaharness_agent(**arguments)
    assert refused.value.name == name


def test_the_runs_own_refusal_is_named_and_anything_else_is_inspect_run_refused():
    named = _refused("metaharness: oharness works in /w\nmetaharness: NoModel: no model chosen\n")
    assert (named.name, named.sentence) == ("NoModel", "no model chosen")
    other = _refused("sh: 1: metaharness: not found\n")
    assert (other.name, other.sentence) == ("InspectRunRefused", "sh: 1: metaharness: not found")
