"""A failed model request is an event (issue 23, item 1): `metaharness run oharness` against the
loopback told to fail in each way, and against a dead port and an unresolvable host. Each run writes
one MODEL_REQUEST_FAILED warning carrying the failure, fills `api_error_status` where there is a
status, prints one `metaharness:` line naming it, exits 0 by default and 1 with --fail-on-error."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from metaharness.loopback.server import LoopbackServer
from metaharness.protocol.scenario import parse_scenario

PY = sys.executable


def _dead_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def _run(tmp_path, endpoint: str, *extra: str, model: str = "anthropic:claude-sonnet-4-5"):
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test-0123456789abcdef", "OPENAI_API_KEY": "sk-test-0123456789",
           "OHARNESS_REQUEST_TIMEOUT": "3"}
    proc = subprocess.run([PY, "-m", "metaharness", "run", "oharness", "--model", model, "--model-endpoint", endpoint,
                           "--cwd", str(tmp_path), "-p", "go", *extra],
                          capture_output=True, env=env, timeout=120, stdin=subprocess.DEVNULL)
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    return proc, events


def _failures(events):
    return [e for e in events if e["event"] == "warning" and e["code"] == "MODEL_REQUEST_FAILED"]


def _served(fail: dict, turns_after: list | None = None):
    scenario = parse_scenario(json.dumps({"format": "metaharness.scenario/1",
                                          "turns": [{"text": "hello", "fail": fail}, *(turns_after or [])]}))
    return LoopbackServer(scenario, stderr=None)


def _check(proc, events, kind: str, status: int | None):
    failures = _failures(events)
    assert failures, proc.stderr.decode()
    last = failures[-1]["model_failure"]
    assert last["kind"] == kind and last["http_status"] == status and last["provider"] == "anthropic"
    ended = next(e for e in events if e["event"] == "session.ended")
    assert ended["is_error"] is True
    assert ended["api_error_status"] == (str(status) if status else None)
    lines = [line for line in proc.stderr.decode().splitlines() if "request failed" in line]
    assert len(lines) == 1 and lines[0].startswith("metaharness: the anthropic request failed"), proc.stderr.decode()
    assert proc.returncode == 0
    return last


CASES = [
    ("status 500", {"status": 500, "message": "upstream exploded"}, "http_error", 500, "upstream exploded"),
    ("401", {"status": 401}, "auth", 401, "invalid x-api-key"),
    ("403", {"status": 403, "message": "no access to this model"}, "auth", 403, "no access to this model"),
    ("429", {"status": 429, "retry_after": "0", "message": "slow down"}, "rate_limited", 429, "slow down"),
    ("529", {"status": 529}, "overloaded", 529, "Overloaded"),
    ("400", {"status": 400, "message": "bad request shape"}, "http_error", 400, "bad request shape"),
]


@pytest.mark.parametrize("name,fail,kind,status,message", CASES, ids=[c[0] for c in CASES])
def test_status_failures(tmp_path, name, fail, kind, status, message):
    with _served(fail) as server:
        proc, events = _run(tmp_path, server.url)
    last = _check(proc, events, kind, status)
    assert last["provider_message"] == message
    if status in (429, 500, 529):  # the SDK retries these once: both requests reached the loopback
        assert last["retries"] == 1 and last["last_status"] == status
        assert len(server.main_requests()) == 2
    if fail.get("retry_after"):
        assert last["retry_after"] == fail["retry_after"]


def test_a_failure_that_passes_is_retried_to_success(tmp_path):
    with _served({"status": 529, "times": 1}) as server:
        proc, events = _run(tmp_path, server.url)
    assert not _failures(events), "a retry that succeeded is not a failed request"
    ended = next(e for e in events if e["event"] == "session.ended")
    assert ended["is_error"] is False and ended["final_answer"]["text"] == "hello"
    assert [r.status for r in server.main_requests()] == [529, 200]


@pytest.mark.parametrize("kind,expected", [("cut", "stream_cut"), ("malformed", "malformed_stream"),
                                           ("hold", "timeout"), ("stall", "timeout")])
def test_stream_failures(tmp_path, kind, expected):
    with _served({"kind": kind}) as server:
        proc, events = _run(tmp_path, server.url)
    _check(proc, events, expected, None)


def test_connection_refused_and_fail_on_error(tmp_path):
    proc, events = _run(tmp_path, _dead_port(), "--fail-on-error")
    failures = _failures(events)
    assert failures and failures[-1]["model_failure"]["kind"] == "connection_refused"
    assert proc.returncode == 1
    closed = events[-1]
    assert closed["event"] == "stream.closed" and closed["reason"] == "error"


def test_unresolvable_host(tmp_path):
    proc, events = _run(tmp_path, "http://no-such-host.invalid:9")
    _check(proc, events, "dns", None)


def test_the_key_never_reaches_the_message(tmp_path):
    key = "sk-ant-test-0123456789abcdef"
    with _served({"status": 401, "message": f"invalid x-api-key {key}"}) as server:
        proc, events = _run(tmp_path, server.url)
    text = json.dumps(_failures(events)) + proc.stderr.decode()
    assert key not in text and "<masked>" in text


def test_fail_on_error_leaves_a_good_run_alone(tmp_path):
    with _served({"status": 500, "times": 1}) as server:  # retried once, then answered
        proc, events = _run(tmp_path, server.url, "--fail-on-error")
    assert proc.returncode == 0


def test_chat_provider_reports_its_wire(tmp_path):
    with _served({"status": 429, "message": "Rate limit reached for requests"}) as server:
        proc, events = _run(tmp_path, server.url + "/v1", model="chat:gpt-4o")
    failure = _failures(events)[-1]["model_failure"]
    assert failure["provider"] == "openai" and failure["kind"] == "rate_limited" and failure["http_status"] == 429
    assert failure["provider_message"] == "Rate limit reached for requests"
