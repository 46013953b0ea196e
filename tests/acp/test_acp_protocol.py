"""One ACP session's rules by plain calls (adapters/acp/protocol.py): no agent, no event loop."""

from __future__ import annotations

import pytest

from metaharness.adapters.acp import protocol
from metaharness.adapters.acp.protocol import Session
from metaharness.adapters.base import StartRefusal


def test_initialize_advertises_no_client_capability():
    params = protocol.initialize_params()
    assert params["protocolVersion"] == protocol.PROTOCOL_VERSION
    assert params["clientCapabilities"] == {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}
    assert params["clientInfo"]["name"] == "metaharness"


def test_a_session_is_opened_by_its_id():
    assert protocol.opened({"sessionId": "s-1", "modes": {}}, "gemini") == "s-1"


@pytest.mark.parametrize("answer", [{}, {"sessionId": 7}, None, ["s-1"]])
def test_an_answer_without_a_session_id_refuses_the_start_by_name(answer):
    with pytest.raises(StartRefusal) as refused:
        protocol.opened(answer, "gemini")
    assert refused.value.name == "VendorCapability"
    assert refused.value.sentence == "gemini answered session/new without a session id"


@pytest.mark.parametrize("running,status,settled", [
    (False, None, True), (False, "pending", True), (True, None, False), (True, "in_progress", False),
    (True, "completed", True), (True, "failed", True),
])
def test_a_call_is_settled_when_no_turn_runs_or_the_agent_reported_it_done(running, status, settled):
    assert protocol.settled(running, status) is settled


def test_the_cancel_names_the_session_once_it_opened():
    session = Session()
    assert session.cancel() is None
    session.id = "s-1"
    assert session.cancel() == {"sessionId": "s-1"}


@pytest.mark.parametrize("running,completed,error", [
    (True, 0, "the run was stopped before its turn ended"),
    (True, 3, "the run was stopped before its turn ended"),
    (False, 0, "the run was stopped before its first turn"),
    (False, 1, None),  # a stop at a boundary after a turn is a clean end
])
def test_what_a_stop_says_about_the_sessions_end(running, completed, error):
    session = Session()
    session.stopped(running, completed)
    assert session.end_error == error


def test_a_mode_change_named_first_stands_through_a_stop():
    session = Session()
    sentence = session.mode_changed("opencode", "build", "plan")
    assert sentence == "opencode switched to mode 'build'; the pinned mode is 'plan'"
    session.stopped(True, 0)
    assert session.end_error == sentence


def test_the_sessions_end_is_written_once_and_never_after_a_death_or_a_refused_start():
    session = Session()
    assert session.ending() is True and session.ending() is False
    died = Session()
    died.died = True
    assert died.ending() is False
    refused = Session()
    refused.ended = True
    assert refused.ending() is False
