"""The credential proxy forwards only the model endpoints of its wire (issue 19): the
placeholder is readable by the agent's shell, so anything else — file deletion, batches,
organisation endpoints, odd spellings of a model path — is refused 403, never reaches the
upstream, and is reported (the adapters write a PROXY_REFUSED warning naming it)."""

from __future__ import annotations

import httpx
import pytest

from metaharness.loopback import CredentialProxy, LoopbackServer
from metaharness.loopback.proxy import FORWARDED, refused_message

REAL_KEY = "sk-real-upstream-key-0123456789"


def scenario(*turns):
    return {"format": "metaharness.scenario/1", "turns": list(turns)}


OUTSIDE = [
    ("DELETE", "/v1/files/file-abc123"),
    ("GET", "/v1/files"),
    ("POST", "/v1/messages/batches"),
    ("GET", "/v1/messages/batches/msgbatch_1"),
    ("GET", "/v1/organizations/me"),
    ("POST", "/v1/organizations/invites"),
    ("POST", "/v1/batches"),
    ("POST", "/v1/fine_tuning/jobs"),
    ("GET", "/v1/models/claude-x/../../files"),
    ("POST", "/v1/messages/"),
    ("POST", "//v1/messages"),
    ("POST", "/v1/messages%2F..%2Ffiles"),
    ("PUT", "/v1/messages"),
    ("DELETE", "/v1/responses"),
    ("POST", "/api/hello"),
]


@pytest.mark.parametrize("wire", ["anthropic", "responses"])
async def test_only_the_wires_model_endpoints_are_forwarded(tmp_path, wire):
    upstream = LoopbackServer(scenario({"text": "a"}, {"text": "b"}), workdir=str(tmp_path), expect_key=REAL_KEY,
                              stderr=None)
    await upstream.start()
    refused: list[tuple[str, str]] = []
    proxy = CredentialProxy(upstream.url, REAL_KEY, wire=wire, on_refused=lambda m, t: refused.append((m, t)))
    await proxy.start()
    other = "responses" if wire == "anthropic" else "anthropic"
    outside = OUTSIDE + sorted(FORWARDED[other] - FORWARDED[wire])
    try:
        async with httpx.AsyncClient(trust_env=False) as http:
            for method, path in outside:
                reply = await http.request(method, proxy.url + path, headers={"x-api-key": proxy.placeholder},
                                           content=b"{}")
                assert reply.status_code == 403, (method, path, reply.text)
                assert REAL_KEY not in reply.text
            model = "/v1/messages" if wire == "anthropic" else "/v1/responses"
            body = ({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
                    if wire == "anthropic" else {"model": "m", "input": "hi"})
            ok = await http.post(proxy.url + model + "?beta=true", headers={"x-api-key": proxy.placeholder}, json=body)
            assert ok.status_code == 200
    finally:
        await proxy.stop()
        await upstream.stop()
    assert [r.path for r in upstream.requests] == [model + "?beta=true"]  # nothing else reached it
    assert [m for m, _ in refused] == [m for m, _ in outside]
    assert refused[0] == ("DELETE", "/v1/files/file-abc123")
    assert proxy.forwarded == 1


def test_the_warning_names_the_request():
    assert "DELETE /v1/files/f-1" in refused_message("DELETE", "/v1/files/f-1")


def test_an_unknown_wire_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown wire"):
        CredentialProxy("http://127.0.0.1:1", REAL_KEY, wire="gopher")
