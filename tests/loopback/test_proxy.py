"""CredentialProxy: placeholder in, real key out, never leaked (the vendor rule “credential modes”)."""

from __future__ import annotations

import httpx
import pytest

from metaharness.loopback import CredentialProxy, LoopbackServer

from loopback_support import CLAUDE_TOOLS, CODEX_TOOLS, scenario, sdks

REAL_KEY = "sk-ant-api03-REALKEY-0123456789abcdefghijklmnopqrstuvwxyz"
USER = [{"role": "user", "content": "hi"}]


async def _upstream(tmp_path) -> LoopbackServer:
    upstream = LoopbackServer(scenario({"text": "through the proxy"}), workdir=str(tmp_path), expect_key=REAL_KEY,
                              log_path=str(tmp_path / "upstream.jsonl"), stderr=None)
    await upstream.start()
    return upstream


async def test_proxy_substitutes_the_key_for_both_clients(tmp_path):
    upstream = await _upstream(tmp_path)
    proxy = CredentialProxy(upstream.url, REAL_KEY)
    try:
        await proxy.start()
        assert proxy.placeholder.startswith("mh-placeholder-") and REAL_KEY not in proxy.placeholder
        anthropic, openai = sdks()
        claude = anthropic.AsyncAnthropic(base_url=proxy.url, api_key=proxy.placeholder, max_retries=0)
        async with claude.messages.stream(model="m", max_tokens=10, messages=USER, tools=CLAUDE_TOOLS) as stream:
            assert (await stream.get_final_message()).content[0].text == "through the proxy"
        codex = openai.AsyncOpenAI(base_url=proxy.url + "/v1", api_key=proxy.placeholder, max_retries=0)
        async with codex.responses.stream(model="gpt-5.5", input="hi", tools=CODEX_TOOLS) as stream:
            assert (await stream.get_final_response()).output_text == "through the proxy"
        async with httpx.AsyncClient() as http:  # Claude Code's own form: x-api-key
            reply = await http.post(proxy.url + "/v1/messages?beta=true", headers={"x-api-key": proxy.placeholder},
                                    json={"model": "m", "max_tokens": 5, "messages": USER, "tools": CLAUDE_TOOLS})
            assert reply.status_code == 200 and REAL_KEY not in reply.text
            assert reply.headers["request-id"].startswith("req_")
    finally:
        await proxy.stop()
        await upstream.stop()
    # The upstream accepted all three (it answers 401 to anything but the real key) ...
    assert [entry.status for entry in upstream.requests] == [200, 200, 200]
    assert upstream.requests[2].headers["x-api-key"] == "<expected key>"
    assert upstream.requests[2].path == "/v1/messages?beta=true"
    # ... and the placeholder never reached it.
    assert proxy.placeholder not in (tmp_path / "upstream.jsonl").read_text()
    assert proxy.forwarded == 3 and proxy.refused == 0


@pytest.mark.parametrize("headers", [
    {}, {"x-api-key": "sk-wrong"}, {"authorization": "Bearer sk-wrong"}, {"x-api-key": REAL_KEY},
    {"authorization": "Basic abc"},
])
async def test_proxy_refuses_any_other_key_without_forwarding(tmp_path, headers):
    upstream = await _upstream(tmp_path)
    proxy = CredentialProxy(upstream.url, REAL_KEY)
    try:
        await proxy.start()
        async with httpx.AsyncClient() as http:
            claude = await http.post(proxy.url + "/v1/messages", headers=headers, json={"model": "m", "messages": USER})
            codex = await http.post(proxy.url + "/v1/responses", headers=headers, json={"model": "m", "input": "hi"})
    finally:
        await proxy.stop()
        await upstream.stop()
    assert claude.status_code == 401 and claude.json()["error"]["type"] == "authentication_error"
    assert codex.status_code == 401 and codex.json()["error"]["type"] == "authentication_error"
    assert REAL_KEY not in claude.text + codex.text
    assert upstream.requests == [] and proxy.forwarded == 0 and proxy.refused == 2


async def test_proxy_mixed_headers_must_all_be_the_placeholder(tmp_path):
    upstream = await _upstream(tmp_path)
    proxy = CredentialProxy(upstream.url, REAL_KEY)
    try:
        await proxy.start()
        async with httpx.AsyncClient() as http:
            reply = await http.post(proxy.url + "/v1/messages", json={"model": "m", "messages": USER},
                                    headers={"x-api-key": proxy.placeholder, "authorization": "Bearer other"})
    finally:
        await proxy.stop()
        await upstream.stop()
    assert reply.status_code == 401 and upstream.requests == []


async def test_proxy_never_shows_the_key_in_repr_or_errors(tmp_path):
    proxy = CredentialProxy("http://127.0.0.1:9", REAL_KEY)  # nothing listens on the discard port
    await proxy.start()
    try:
        async with httpx.AsyncClient() as http:
            reply = await http.post(proxy.url + "/v1/messages", headers={"x-api-key": proxy.placeholder},
                                    json={"model": "m", "messages": USER})
    finally:
        await proxy.stop()
    assert reply.status_code == 502
    assert "could not be reached" in reply.json()["error"]["message"]
    assert REAL_KEY not in reply.text and REAL_KEY not in repr(proxy) and REAL_KEY not in str(proxy)
    # Only the one private attribute holds it.
    holders = [name for name, value in vars(proxy).items() if REAL_KEY in str(value)]
    assert holders == ["_CredentialProxy__real_key"]


def test_proxy_rejects_empty_or_equal_keys():
    with pytest.raises(ValueError):
        CredentialProxy("http://127.0.0.1:1", "")
    with pytest.raises(ValueError):
        CredentialProxy("http://127.0.0.1:1", "same", placeholder="same")


def test_proxy_in_a_thread(tmp_path):
    with LoopbackServer(scenario({"text": "t"}), workdir=str(tmp_path), expect_key=REAL_KEY, stderr=None) as upstream:
        with CredentialProxy(upstream.url, REAL_KEY) as proxy:
            anthropic, _ = sdks()
            client = anthropic.Anthropic(base_url=proxy.url, api_key=proxy.placeholder, max_retries=0)
            message = client.messages.create(model="m", max_tokens=5, messages=USER, tools=CLAUDE_TOOLS)
            assert message.content[0].text == "t"
