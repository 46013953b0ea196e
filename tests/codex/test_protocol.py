"""The opening of a Codex session and the end of its translation, by plain calls (codex/protocol.py,
codex/translate.py)."""

from __future__ import annotations

import pytest

from metaharness.adapters.base import StartRefusal
from metaharness.adapters.codex import protocol
from metaharness.adapters.codex.translate import Translator

from codex_helpers import FakeContext


def test_initialize_asks_for_no_optional_capability():
    params = protocol.initialize_params()
    assert params["clientInfo"]["name"] == "metaharness"
    assert params["capabilities"] == {"experimentalApi": False, "requestAttestation": False}


def test_a_thread_opened_untrusted_names_its_id_rollout_and_version():
    thread = protocol.opened({"approvalPolicy": "untrusted",
                              "thread": {"id": "th-1", "path": "/r.jsonl", "cliVersion": "0.171.0"}})
    assert thread == protocol.Thread("th-1", "/r.jsonl", "0.171.0")


@pytest.mark.parametrize("answer", [{"approvalPolicy": "on-request", "thread": {"id": "t"}}, {}, None, []])
def test_a_thread_not_opened_untrusted_refuses_the_start_by_name(answer):
    with pytest.raises(StartRefusal) as refused:
        protocol.opened(answer)
    assert refused.value.name == "VendorCapability"
    assert "not \"untrusted\"" in refused.value.sentence


def test_the_session_ends_once_with_what_was_held_written_first():
    ctx = FakeContext("/work")
    translator = Translator(ctx)
    translator.last_turn = {"id": "turn-1", "status": "completed"}
    translator.warn("vendor_warning", "held before the thread opened")
    assert ctx.of("warning") == []
    ended = translator.end()
    assert ended is not None and ended.subtype == "completed"
    assert len(ctx.of("warning")) == 1  # the held line written at the end
    assert translator.end() is None


def test_a_refused_start_writes_nothing_held_and_no_end():
    ctx = FakeContext("/work")
    translator = Translator(ctx)
    translator.last_turn = {"id": "turn-1", "status": "completed"}
    translator.warn("vendor_warning", "held")
    translator.refused()
    assert translator.end() is None and ctx.of("warning") == []
