"""The price table and the meter: the shipped table parses and covers the harnesses' models,
a user file overrides it, usage prices to dollars, and the meter refuses once the cap is spent —
on the loopback, the credential proxy and the recorder."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from metaharness.loopback import pricing
from metaharness.loopback.pricing import Meter, PricesError, load_prices, parse_prices, shipped_prices
from metaharness.loopback.server import LoopbackServer
from metaharness.loopback.usage import answer_usage
from metaharness.protocol.scenario import parse_scenario

USER_FILE = 'format = "metaharness.prices/1"\ntaken = "2030-01-01"\n[models."claude-sonnet-4-5"]\ninput = 1.0\noutput = 2.0\n'


def test_the_shipped_table_is_dated_and_covers_the_harnesses_models():
    table = shipped_prices()
    assert table.taken == "2025-11-24"
    for model in ("claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5", "gpt-5", "gpt-5-mini", "gpt-5-codex",
                  "gemini-2.5-pro", "gemini-2.5-flash", "claude-loopback", "gpt-loopback", "chat-loopback",
                  "gemini-loopback", "loopback", "default"):
        assert table.lookup(model) is not None, model


def test_usage_prices_per_million_tokens_by_column():
    price = shipped_prices().lookup("claude-sonnet-4-5")
    usage = {"input_tokens": 1_000_000, "output_tokens": 1_000_000, "cache_read_input_tokens": 1_000_000,
             "cache_creation_input_tokens": 1_000_000}
    assert price.cost(usage) == pytest.approx(3.0 + 15.0 + 0.30 + 3.75)
    assert price.cost({"input_tokens": 10, "output_tokens": None}) == pytest.approx(3e-5)


def test_a_dated_id_is_priced_by_its_longest_row_and_an_unknown_model_has_no_price():
    table = shipped_prices()
    assert table.lookup("claude-sonnet-4-5-20250929").model == "claude-sonnet-4-5"
    assert table.lookup("claude-sonnet-4-20250514").model == "claude-sonnet-4"
    assert table.lookup("models/gemini-2.5-flash-lite").model == "gemini-2.5-flash-lite"
    assert table.lookup("gpt-5-mini-2025-08-07").model == "gpt-5-mini"
    assert table.lookup("gpt-5.9") is None  # "gpt-5" then "." is another model, not a dated gpt-5
    assert table.cost("no-such-model", {"input_tokens": 5}) is None


def test_a_user_file_overrides_rows_and_the_date(tmp_path):
    path = tmp_path / "prices.toml"
    path.write_text(USER_FILE)
    table = load_prices(str(path))
    assert table.taken == "2030-01-01" and table.lookup("claude-sonnet-4-5").input == 1.0
    assert table.lookup("gpt-5").input == 1.25  # rows the file does not name are kept
    assert load_prices(None, environ={pricing.PRICES_ENV: str(path)}).taken == "2030-01-01"
    assert table.lookup("gemini-9") is None
    path.write_text(USER_FILE + '[models."*"]\ninput = 7.0\noutput = 8.0\n')
    assert load_prices(str(path)).lookup("gemini-9").input == 7.0  # only a row the user wrote prices every model


@pytest.mark.parametrize("text, says", [
    ("not toml [", "is not TOML"),
    ('format = "x"\ntaken = "d"', "needs format"),
    ('format = "metaharness.prices/1"', "needs `taken`"),
    ('format = "metaharness.prices/1"\ntaken = "d"\n[models.m]\ninput = -1\noutput = 1', "needs input"),
    ('format = "metaharness.prices/1"\ntaken = "d"\n[models.m]\ninput = 1', "needs output"),
])
def test_a_bad_price_file_is_refused_naming_what_is_wrong(text, says):
    with pytest.raises(PricesError, match=says):
        parse_prices(text, "f.toml")


def test_an_unreadable_price_file_is_refused(tmp_path):
    with pytest.raises(PricesError, match="could not be read"):
        load_prices(str(tmp_path / "missing.toml"))


def test_the_meter_refuses_once_the_cap_is_spent_and_on_an_unpriced_model():
    seen = []
    meter = Meter(shipped_prices(), 0.5, on_charge=seen.append)
    assert meter.charge("claude-sonnet-4-5", {"input_tokens": 100_000}).cost_usd == pytest.approx(0.3)
    assert meter.refusal() is None
    meter.charge("claude-sonnet-4-5", {"input_tokens": 100_000})
    assert "--max-cost-usd 0.5 is spent ($0.6000 over 2 model responses" in meter.refusal()
    unpriced = Meter(shipped_prices(), 10.0)
    unpriced.charge("mystery", {"input_tokens": 1})
    assert unpriced.reached and "'mystery' not in the price table" in unpriced.refusal()
    assert Meter(shipped_prices(), None).refusal() is None and len(seen) == 2


def test_disagreement_has_a_stated_tolerance():
    assert not pricing.disagrees(1.0, 1.04) and pricing.disagrees(1.0, 1.2)
    assert not pricing.disagrees(0.00001, 0.00005)  # under the absolute floor


@pytest.mark.parametrize("metered, reported, flagged", [
    (1.0, 1.05, False),      # 5% of the larger figure is the bound: exactly at it is agreement
    (1.0, 1.06, True),       # past it
    (1.06, 1.0, True),       # the rule is symmetric
    (0.0, 0.0001, False),    # a difference of $0.0001 or less never counts, however large relatively
    (0.0, 0.00011, True),    # over the floor, and 100% of the larger figure
    (0.002, 0.0021, False),  # $0.0001 apart: under the floor, though 4.8% apart
    (0.0, 0.0, False),
])
def test_the_tolerance_rule_at_its_bounds(metered, reported, flagged):
    assert pricing.TOLERANCE_RELATIVE == 0.05 and pricing.TOLERANCE_ABSOLUTE_USD == 0.0001  # as docs/guides/spend.md says
    assert pricing.disagrees(metered, reported) is flagged


def test_answer_usage_reads_streamed_and_whole_answers():
    sse = (b'event: message_start\ndata: {"type":"message_start","message":{"model":"claude-x","usage":'
           b'{"input_tokens":7,"output_tokens":1,"cache_read_input_tokens":3}}}\n\n'
           b'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":9}}\n\n')
    assert answer_usage("/v1/messages", sse) == ("claude-x", {"input_tokens": 7, "output_tokens": 9,
                                                              "cache_read_input_tokens": 3})
    whole = json.dumps({"model": "gpt-5", "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 4},
                                                   "output_tokens": 2}}).encode()
    assert answer_usage("/v1/responses", whole) == ("gpt-5", {"input_tokens": 6, "output_tokens": 2,
                                                             "cache_read_input_tokens": 4})
    assert answer_usage("/v1/models", b"{}") is None
    chat = (b'data: {"model":"gpt-x","choices":[{"delta":{"content":"hi"}}]}\n\n'
            b'data: {"model":"gpt-x","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,'
            b'"prompt_tokens_details":{"cached_tokens":2}}}\n\ndata: [DONE]\n\n')
    assert answer_usage("/api/v1/chat/completions", chat) == ("gpt-x", {"input_tokens": 10, "output_tokens": 3,
                                                                       "cache_read_input_tokens": 2})
    gemini = json.dumps({"candidates": [], "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 4,
                                                            "thoughtsTokenCount": 6, "cachedContentTokenCount": 5}})
    # the model is named by the path when the answer leaves out modelVersion; thinking is billed as output
    assert answer_usage("/v1beta/models/gemini-2.5-pro:streamGenerateContent", f"data: {gemini}\n\n".encode()) == (
        "gemini-2.5-pro", {"input_tokens": 15, "output_tokens": 10, "cache_read_input_tokens": 5})


SCENARIO = parse_scenario(json.dumps({"format": "metaharness.scenario/1", "turns": [
    {"text": "a", "usage": {"input_tokens": 100000, "output_tokens": 1000}},
    {"text": "b", "usage": {"input_tokens": 100000, "output_tokens": 1000}},
    {"text": "c"}]}))
TOOLS = [{"name": "Bash", "description": "", "input_schema": {"type": "object"}}]


async def converse(url: str, streams: list[bool]) -> tuple[list[int], list[str]]:
    """One Messages request per entry of `streams` (streamed or not), each carrying the conversation
    so far; the statuses and bodies of the answers."""
    statuses, bodies = [], []
    async with httpx.AsyncClient(trust_env=False) as client:
        history = [{"role": "user", "content": "go"}]
        for stream in streams:
            reply = await client.post(f"{url}/v1/messages", json={
                "model": "claude-sonnet-4-5", "stream": stream, "tools": TOOLS, "messages": history})
            statuses.append(reply.status_code)
            bodies.append(reply.text)
            history = history + [{"role": "assistant", "content": "x"}, {"role": "user", "content": "go"}]
    return statuses, bodies



@pytest.mark.parametrize("stream", [False, True])
def test_the_loopback_reports_the_turns_usage_charges_it_and_refuses_past_the_cap(stream):
    async def main():
        meter = Meter(shipped_prices(), 0.5)
        server = LoopbackServer(SCENARIO, stderr=None, meter=meter)
        url = await server.start()
        try:
            statuses, bodies = await converse(url, [stream] * 3)
        finally:
            await server.stop()
        return meter, statuses, bodies

    meter, statuses, bodies = asyncio.run(main())
    assert statuses == [200, 200, 403]
    assert "100000" in bodies[0] and "budget --max-cost-usd 0.5 is spent" in bodies[2]
    assert meter.spent_usd == pytest.approx(2 * (0.3 + 0.015)) and meter.responses == 2


def test_the_credential_proxy_prices_what_it_forwards_and_stops_forwarding_past_the_cap():
    from metaharness.loopback.proxy import CredentialProxy

    async def main():
        upstream = LoopbackServer(SCENARIO, stderr=None)
        meter = Meter(shipped_prices(), 0.5)
        upstream_url = await upstream.start()
        proxy = CredentialProxy(upstream_url, "real-key", placeholder="ph", wire="anthropic", meter=meter)
        url = await proxy.start()
        statuses = []
        try:
            async with httpx.AsyncClient(trust_env=False) as client:
                history = [{"role": "user", "content": "go"}]
                for stream in (True, False, True):
                    reply = await client.post(f"{url}/v1/messages", headers={"x-api-key": "ph"}, json={
                        "model": "claude-sonnet-4-5", "stream": stream, "tools": TOOLS, "messages": history})
                    statuses.append(reply.status_code)
                    history = history + [{"role": "assistant", "content": "x"}, {"role": "user", "content": "go"}]
        finally:
            await proxy.stop()
            await upstream.stop()
        return meter, statuses, len(upstream.main_requests())

    meter, statuses, upstream_seen = asyncio.run(main())
    assert statuses == [200, 200, 403] and upstream_seen == 2  # the third never reached the upstream
    assert meter.spent_usd == pytest.approx(2 * (0.3 + 0.015))


def test_the_recorder_prices_what_it_records_and_refuses_past_the_cap(tmp_path):
    from metaharness.loopback.recorder import RecordingProxy

    async def main():
        upstream = LoopbackServer(SCENARIO, stderr=None)  # unmetered: the recorder in front of it prices
        upstream_url = await upstream.start()
        recorder = RecordingProxy(upstream_url, str(tmp_path / "run.cassette.jsonl"))
        recorder.meter = meter = Meter(shipped_prices(), 0.5)
        url = await recorder.start()
        try:
            statuses, bodies = await converse(url, [True, False, True])
        finally:
            await recorder.stop()
            await upstream.stop()
        return meter, statuses, bodies, len(upstream.main_requests())

    meter, statuses, bodies, upstream_seen = asyncio.run(main())
    assert statuses == [200, 200, 403] and upstream_seen == 2  # the third never reached the upstream
    assert "budget --max-cost-usd 0.5 is spent" in bodies[2]
    assert meter.spent_usd == pytest.approx(2 * (0.3 + 0.015)) and meter.responses == 2
    lines = [json.loads(line) for line in (tmp_path / "run.cassette.jsonl").read_text().splitlines()]
    assert [line["response"]["status"] for line in lines if "exchange" in line] == [200, 200, 403]  # as the harness saw it


# One request per wire, offering a tool (a main request, so the turn's `fail` applies).
WIRES = {
    "messages": ("/v1/messages", {"model": "claude-sonnet-4-5", "tools": TOOLS}),
    "responses": ("/v1/responses", {"model": "gpt-5", "input": "go",
                                    "tools": [{"type": "function", "name": "shell", "parameters": {}}]}),
    "chat": ("/v1/chat/completions", {"model": "gpt-5", "tools": [{"type": "function", "function": {
        "name": "bash", "parameters": {}}}]}),
}


@pytest.mark.parametrize("fail", [{"status": 500}, {"status": 429, "retry_after": "0"}, {"kind": "cut"},
                                  {"kind": "malformed"}], ids=["500", "429", "cut", "malformed"])
# the credential proxy fronts the Messages and Responses wires (Claude Code, Codex) only
@pytest.mark.parametrize("metered_at,wire", [("loopback", w) for w in WIRES] + [("proxy", "messages"),
                                                                              ("proxy", "responses")])
def test_a_failed_request_costs_nothing_and_its_retry_that_is_answered_is_priced_once(wire, fail, metered_at):
    """The meter is told of answered responses only: a request the loopback fails (an error status,
    a stream cut after its first event, a malformed stream) spends nothing, where the loopback
    prices its own answers and where the credential proxy in front of it prices what it passed on."""
    from metaharness.loopback.proxy import CredentialProxy

    path, body = WIRES[wire]
    failing = parse_scenario(json.dumps({"format": "metaharness.scenario/1", "turns": [
        {"text": "hi", "usage": {"input_tokens": 100000, "output_tokens": 1000}, "fail": {**fail, "times": 2}}]}))

    async def main():
        meter = Meter(shipped_prices())
        server = LoopbackServer(failing, stderr=None, meter=meter if metered_at == "loopback" else None)
        url = await server.start()
        proxy = None
        if metered_at == "proxy":
            proxy = CredentialProxy(url, "real-key", placeholder="ph", wire="any", meter=meter)
            url = await proxy.start()
        statuses = []
        try:
            async with httpx.AsyncClient(trust_env=False) as client:
                for _ in range(3):  # two failed, then the answer
                    try:
                        reply = await client.post(url + path, headers={"x-api-key": "ph", "authorization": "Bearer ph"},
                                                  json={**body, "stream": True, "messages": [{"role": "user", "content": "go"}]})
                        statuses.append(reply.status_code)
                    except httpx.HTTPError:
                        statuses.append("cut")
                    await asyncio.sleep(0.05)
        finally:
            if proxy is not None:
                await proxy.stop()
            await server.stop()
        return meter, statuses

    meter, statuses = asyncio.run(main())
    assert statuses[-1] == 200, statuses
    one = shipped_prices().cost(body["model"], {"input_tokens": 100000, "output_tokens": 1000})
    assert meter.responses == 1 and meter.spent_usd == pytest.approx(one), (statuses, meter.spent_usd)
