"""Replays every bypass the bash-oracle fuzzer recorded (`make fuzz` appends to
data/fuzz_bypasses.jsonl): each must now be denied in Bypass under the fuzzer's deny rules, and
real bash must still perform the recorded action in it (so an entry stays a real attack)."""

from __future__ import annotations

import json
import os

import pytest

from bash_oracle import happened

FILE = os.path.join(os.path.dirname(__file__), "data", "fuzz_bypasses.jsonl")


def _entries() -> list[dict]:
    with open(FILE) as f:
        return [json.loads(line) for line in f if line.strip()]


ENTRIES = _entries()


def test_the_file_has_entries():
    assert ENTRIES


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["command"][:60] for e in ENTRIES])
def test_recorded_bypass_is_denied(engine, oracle, entry):
    assert set(entry["happened"]) <= happened(oracle.run(entry["command"])), entry
    v = engine.decide(entry["command"])
    assert v.behavior == "deny", v.to_json()
