"""The cassette format on its own: what a line keeps and masks, the conversation state per wire,
the first differing part, and the replay server's choice of answer (no harness involved)."""

from __future__ import annotations

import json
import os

import httpx
import pytest

from metaharness.api import spec_to_argv
from metaharness.loopback import cassette
from metaharness.loopback.recorder import RecordingProxy
from metaharness.loopback.replayer import ReplayServer
from metaharness.run.spec import RunSpec

SECRET = "sk-test-SECRETVALUE-0123456789"


def line(target="/v1/messages", headers=None, body=None, response=b"ok", redact=()):
    raw = cassette.exchange_line(
        1, "POST", target, headers or [("content-type", "application/json")],
        json.dumps(body if body is not None else {"messages": [{"role": "user", "content": "hi"}]}).encode(),
        200, [("content-type", "text/event-stream"), ("set-cookie", f"s={SECRET}")], response,
        cassette.Redactor.of(redact))
    return raw, json.loads(raw)


def test_credentials_never_reach_a_line_wherever_they_appear():
    raw, parsed = line(target=f"/v1beta/models/m:streamGenerateContent?alt=sse&key={SECRET}",
                       headers=[("authorization", f"Bearer {SECRET}"), ("x-api-key", SECRET),
                                ("x-goog-api-key", SECRET), ("cookie", f"a={SECRET}"), ("content-type", "application/json")],
                       body={"contents": [{"parts": [{"text": f"the key is {SECRET}"}]}]},
                       response=f"data: echo {SECRET}\n\n".encode())
    assert SECRET.encode() not in raw
    assert parsed["request"]["headers"] == {"content-type": "application/json"}
    assert parsed["response"]["headers"] == {"content-type": "text/event-stream"}
    assert "key=%5Bcredential%5D" in parsed["request"]["path"] and parsed["wire"] == "gemini"
    assert parsed["request"]["body"]["contents"][0]["parts"][0]["text"] == "the key is [credential]"
    assert parsed["response"]["body"] == "data: echo [credential]\n\n"


def test_redact_masks_request_and_response_and_the_digest_is_of_the_masked_state():
    _raw, parsed = line(body={"messages": [{"role": "user", "content": "ticket ACME-1234 please"}]},
                        response=b"data: closing ACME-1234\n\n", redact=[r"ACME-\d+"])
    assert parsed["request"]["body"]["messages"][0]["content"] == "ticket [redacted] please"
    assert parsed["response"]["body"] == "data: closing [redacted]\n\n"
    assert parsed["state"] == {"part": "messages", "digest": cassette.digest(
        [{"role": "user", "content": "ticket [redacted] please"}])}


def test_conversation_state_per_wire_leaves_out_what_a_harness_mints():
    body = {"input": [{"type": "message", "id": "msg_a", "role": "user", "content": "x"},
                      {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "exec_command", "arguments": "{}"},
                      {"type": "function_call_output", "id": "fco_z", "call_id": "c1",
                       "output": "Chunk ID: 8a2b1c\nWall time: 0.0168 seconds\nhi"}],
            "prompt_cache_key": "per-session"}
    part, state = cassette.conversation_state("/v1/responses", body)
    assert part == "input"
    assert state[0] == {"type": "message", "role": "user", "content": "x"}
    assert state[1]["id"] == "fc_1", "ids the model minted are echoed back and stay in the state"
    assert state[2] == {"type": "function_call_output", "call_id": "c1",
                        "output": "Chunk ID: <id>\nWall time: <time> seconds\nhi"}
    again = json.loads(json.dumps(body).replace("msg_a", "msg_b").replace("8a2b1c", "ffff00").replace("fco_z", "fco_q"))
    assert cassette.digest(cassette.conversation_state("/v1/responses", again)[1]) == cassette.digest(state)
    assert cassette.conversation_state("/v1/messages", {"messages": [1], "system": "x"}) == ("messages", [1])
    assert cassette.conversation_state("/v1/chat/completions", {"messages": [2]}) == ("messages", [2])
    assert cassette.conversation_state("/api/hello", {"a": 1}) == ("body", {"a": 1})


GEMINI_CONTEXT = ("<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat.\n"
                  "Today's date is Wednesday, December 2, 2026 (formatted according to the user's locale).\n"
                  "My operating system is: linux\n"
                  "The project's temporary directory is: /s/scratch/gemini-8yufa29s/home/.gemini/tmp/work\n"
                  "</session_context>")
GEMINI = "/v1beta/models/m:streamGenerateContent?alt=sse"


def state_of(text, path=GEMINI):
    """The state's digest of a one-turn conversation whose user turn is `text`, on `path`'s wire."""
    turn = {"role": "user", "parts": [{"text": text}]} if cassette.wire_of(path) == "gemini" else {
        "role": "user", "content": text}
    part = {"gemini": "contents", "openai-responses": "input"}.get(cassette.wire_of(path), "messages")
    return cassette.digest(cassette.conversation_state(path, {part: [turn]})[1])


def test_gemini_session_context_is_one_state_on_another_day_and_another_scratch():
    same = state_of(GEMINI_CONTEXT)
    assert state_of(GEMINI_CONTEXT.replace("Wednesday, December 2, 2026", "Donnerstag, 3. Dezember 2026")
                    .replace("gemini-8yufa29s", "gemini-q_3k0zzz")) == same
    # Everything else in the context is conversation: another wording, system or project is another state.
    lines = GEMINI_CONTEXT.splitlines()
    for index, other in ((1, "This is the Gemini CLI, again."), (3, "My operating system is: darwin"),
                         (4, "The project's temporary directory is: /s/scratch/gemini-8yufa29s/home/.gemini/tmp/repo")):
        assert state_of("\n".join(lines[:index] + [other] + lines[index + 1:])) != same, other
    # A scratch name only as a path component.
    assert state_of("see opencode-terminal docs") != state_of("see opencode-whatever1 docs")
    assert state_of("/x/opencode-terminal/y") == state_of("/x/opencode-whatever/y")


# Each vendor's sentence with the day's date, on the wire it speaks, as recorded (2026-12-02).
VENDOR_DATES = [
    ("/v1/messages", "Today's date is 2026-12-02.", "Today's date is 2027-01-15."),
    ("/v1/responses", "<current_date>2026-12-02</current_date>", "<current_date>2027-01-15</current_date>"),
    ("/v1/chat/completions", "Today's date: Wed Dec 02 2026", "Today's date: Fri Jan 15 2027"),
    (GEMINI, "Today's date is Wednesday, December 2, 2026 (formatted according to the user's locale).",
     "Today's date is Friday, January 15, 2027 (formatted according to the user's locale)."),
    # Qwen Code: its startup context, and the reminder it adds when the day changes within a session
    ("/v1/chat/completions", "Today's date is Wednesday, December 2, 2026.", "Today's date is Friday, January 15, 2027."),
    ("/v1/chat/completions", "The current date is: Wednesday, December 2, 2026.",
     "The current date is: Friday, January 15, 2027."),
]


@pytest.mark.parametrize("path, recorded, later", VENDOR_DATES)
def test_the_days_date_in_a_vendors_own_sentence_is_no_part_of_the_state(path, recorded, later):
    text = "<env>\n  Platform: linux\n  {}\n</env>\nthe deadline is 2026-12-02, Wed Dec 02 2026".format
    assert state_of(text(recorded), path) == state_of(text(later), path)
    # Any other date is conversation, and so is the date of another sentence.
    for other in (text(recorded).replace("deadline is 2026", "deadline is 2027"), text(recorded)[:-4] + "2027"):
        assert state_of(text(recorded), path) != state_of(other, path)
    assert state_of("on 2026-12-02.", path) != state_of("on 2026-12-03.", path)


def test_first_difference_names_the_path_and_masks_match_any_text():
    recorded = [{"role": "user", "content": [{"type": "tool_result", "content": "alpha [redacted] omega"}]}]
    same = [{"role": "user", "content": [{"type": "tool_result", "content": "alpha sk-123 omega"}]}]
    other = [{"role": "user", "content": [{"type": "tool_result", "content": "beta"}]}]
    assert cassette.first_difference(recorded, same, "messages") is None
    assert cassette.first_difference(recorded, other, "messages") == "messages[0].content[0].content"
    assert cassette.first_difference(recorded, recorded + [{}], "messages") == "messages[1]"
    assert cassette.first_difference({"a": 1}, {"a": 1, "b": 2}, "body") == "body.b"
    assert cassette.first_difference(1, True, "x") == "x", "a bool is not the number 1"


def test_a_bad_cassette_is_named_by_file_and_line(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text(line()[0].decode() + '{"format": "something/1"}\n')
    with pytest.raises(cassette.CassetteError, match=r"c\.jsonl:2 is not a metaharness\.cassette/1 exchange"):
        cassette.read_cassette(str(path))


def _exchange(number, content, answer):
    raw, _ = line(body={"messages": [{"role": "user", "content": content}]}, response=answer.encode())
    obj = json.loads(raw)
    obj["exchange"] = number
    return json.dumps(obj)


async def test_the_replay_server_answers_by_route_and_state_in_order(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join([_exchange(2, "side", "B"), _exchange(1, "main", "A"), _exchange(3, "side", "C")]) + "\n")
    server = ReplayServer(cassette.read_cassette(str(path)), strict=False)
    messages = []
    server.on_divergence = messages.append
    async with server:
        async with httpx.AsyncClient(base_url=server.url, trust_env=False) as client:
            ask = lambda content: client.post("/v1/messages", json={"messages": [{"role": "user", "content": content}]})
            assert (await ask("side")).text == "B", "the first unanswered exchange with this state"
            assert (await ask("main")).text == "A"
            assert (await ask("side")).text == "C"
            assert messages == []
            assert (await ask("side")).status_code == 409
    assert server.served == [2, 1, 3]
    assert messages == ["the harness's request 4 (POST /v1/messages) has no recorded exchange left on that route; "
                        "the cassette holds 3 exchanges"]


async def test_the_recorder_answers_502_when_the_upstream_is_gone_and_records_it(tmp_path):
    path = tmp_path / "c.jsonl"
    proxy = RecordingProxy("http://127.0.0.1:9", str(path))
    async with proxy:
        async with httpx.AsyncClient(base_url=proxy.url, trust_env=False) as client:
            reply = await client.post("/v1/messages", json={"messages": []}, headers={"x-api-key": SECRET})
    assert reply.status_code == 502 and "could not be reached" in reply.text
    [recorded] = cassette.read_cassette(str(path))
    assert recorded.status == 502 and SECRET.encode() not in path.read_bytes()


def test_the_cassette_flags_round_trip_through_the_command_line():
    from metaharness.cli.run import run as run_command

    spec = RunSpec(kind="claude", prompt="p", replay="c.jsonl", replay_strict=False)
    argv = spec_to_argv(spec)
    assert "--replay-lenient" in argv and "--replay-strict" not in argv
    parsed = run_command.make_context("run", argv[1:]).params
    assert RunSpec(**{k: list(v) if isinstance(v, tuple) else v for k, v in parsed.items()}) == spec
    recording = RunSpec(kind="codex", prompt="p", record="c.jsonl", redact_patterns=["a+", "b"])
    assert spec_to_argv(recording)[-4:] == ["--redact", "a+", "--redact", "b"]


# --- the recording line and the workspace manifest ----------------------------------------------


def test_the_manifest_names_files_and_links_and_leaves_git_out(tmp_path):
    import hashlib

    from metaharness.loopback.cassette import workspace_manifest

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("print(1)\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "index").write_text("changes on every git status")
    os.symlink("src/a.py", tmp_path / "link")
    assert workspace_manifest(str(tmp_path)) == {
        "link": "link:src/a.py", "src/a.py": "sha256:" + hashlib.sha256(b"print(1)\n").hexdigest()}


def test_the_first_workspace_difference_is_named_in_path_order():
    from metaharness.loopback.cassette import first_workspace_difference

    recorded = {"a": "sha256:1", "b": "sha256:2", "c": "sha256:3"}
    assert first_workspace_difference(recorded, dict(recorded)) is None
    assert first_workspace_difference(recorded, {"a": "sha256:1", "c": "sha256:9"}) == (
        "b", "is missing (the recording started with it)")
    assert first_workspace_difference(recorded, {**recorded, "b": "sha256:9", "0": "x"}) == (
        "0", "was not there when the recording started")
    assert first_workspace_difference(recorded, {**recorded, "c": "sha256:9"}) == (
        "c", "has other contents than when the recording started")


def test_the_recording_line_reads_back_and_exchanges_skip_it(tmp_path):
    from metaharness.loopback.cassette import Recording, read_cassette, read_recording

    recording = Recording(harness="codex", model=None, cwd="/w", workspace={"a": "sha256:1"})
    path = tmp_path / "c.jsonl"
    path.write_bytes(recording.line())
    assert read_recording(str(path)) == recording and read_cassette(str(path)) == []
    path.write_text('{"format":"metaharness.cassette/1","recording":{"cwd":"/w"}}\n')
    with pytest.raises(cassette.CassetteError, match=r"c.jsonl:1 is not a metaharness.cassette/1 recording line"):
        read_recording(str(path))
