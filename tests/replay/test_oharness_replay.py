"""Record and replay on oharness, through `metaharness run` as a user runs it.

The upstream is a stand-in playing the Anthropic Messages API (never a real API); oharness's
anthropic provider reaches it through the recording proxy. Replays run with no key and the
stand-in stopped, so an answer can only come from the cassette.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from metaharness.loopback.cassette import conversation_state, digest
from metaharness.replay.normalise import differences
from replay.standin import AnthropicStandIn, ResponsesStandIn

KEY = "sk-ant-api03-RECORDME-0123456789abcdefghijklmnopqrstuv"
TURNS = [{"text": "looking", "calls": [("bash", {"command": "cat a.txt"})]},
         {"text": "reading", "calls": [("read", {"path": "a.txt"})]},
         {"text": "done"}]


def events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def mh_run(tmp_path: Path, *flags: str, key: str | None = None, name: str = "events.jsonl",
           out_dir: Path | None = None):
    """`metaharness run oharness` in tmp_path/work, its events written to (out_dir or tmp_path)/name."""
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    if key is not None:
        env["ANTHROPIC_API_KEY"] = key
    out = (out_dir or tmp_path) / name
    proc = subprocess.run([sys.executable, "-m", "metaharness", "run", "oharness", "--model", "anthropic:claude-test",
                           "-p", "go", "--decisions", "observe", "--cwd", str(tmp_path / "work"),
                           "--events", str(out), *flags],
                          env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    return proc, (events(out) if out.exists() else [])


def record(tmp_path: Path, *flags: str):
    """Record one run against a fresh stand-in: (the process, its events, the cassette, the stand-in)."""
    (tmp_path / "work").mkdir(exist_ok=True)
    (tmp_path / "work" / "a.txt").write_text("alpha\n")
    upstream = AnthropicStandIn(TURNS, key=KEY)
    url, stop = upstream.run_in_thread()
    cassette = tmp_path / "run.cassette.jsonl"
    try:
        proc, stream = mh_run(tmp_path, "--model-endpoint", url, "--record", str(cassette), *flags, key=KEY,
                              name="recorded.jsonl")
    finally:
        stop()
    assert proc.returncode == 0, proc.stderr
    assert upstream.seen_keys == [KEY] * 3, "the upstream got the real key on every request"
    return proc, stream, cassette, upstream


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    """One recorded run for the module (a recording is a whole run: seconds each)."""
    where = tmp_path_factory.mktemp("recording")
    _proc, stream, cassette, upstream = record(where)
    return where, cassette, stream, upstream


@pytest.fixture
def recorded(recording, tmp_path):
    """The module's recording for one test: (where it ran, this test's own copy of the cassette,
    its events, the stand-in). Replays run in the recorded working directory, their events
    written to this test's tmp_path (`replay_run`)."""
    where, cassette, stream, upstream = recording
    copy = tmp_path / cassette.name
    copy.write_bytes(cassette.read_bytes())
    return where, copy, stream, upstream


def replay_run(recorded_where: Path, cassette: Path, *flags: str, name: str):
    """Replay `cassette` in the recording's working directory; events beside the cassette."""
    return mh_run(recorded_where, "--replay", str(cassette), *flags, name=name, out_dir=cassette.parent)


def test_replay_gives_the_recorded_stream(recorded):
    tmp_path, cassette, stream, upstream = recorded
    assert [e["event"] for e in stream].count("tool.result") == 2
    recording, *lines = [json.loads(line) for line in cassette.read_text().splitlines()]
    assert recording["recording"] == {"harness": "oharness", "model": "anthropic:claude-test",
                                      "cwd": str(tmp_path / "work"),
                                      "workspace": {"a.txt": "sha256:" + hashlib.sha256(b"alpha\n").hexdigest()}}
    assert [line["exchange"] for line in lines] == [1, 2, 3]
    assert {line["format"] for line in lines} == {"metaharness.cassette/1"}
    assert {line["wire"] for line in lines} == {"anthropic-messages"}
    assert all(line["state"]["part"] == "messages" and line["state"]["digest"].startswith("sha256:") for line in lines)

    proc, replayed = replay_run(tmp_path, cassette, name="replayed.jsonl")
    assert proc.returncode == 0, proc.stderr
    assert len(upstream.requests) == 3, "the replay never reached the upstream"
    assert differences(stream, replayed) == []
    assert "REPLAY_DIVERGED" not in json.dumps(replayed)


def test_the_cassette_never_holds_the_key(recorded):
    _tmp_path, cassette, _stream, _upstream = recorded
    data = cassette.read_bytes()
    assert KEY.encode() not in data and b"RECORDME" not in data
    assert b"authorization" not in data.lower() and b"x-api-key" not in data.lower()


def recorded_otherwise(cassette: Path) -> None:
    """Make the recording say the first tool result was other text than the harness will see
    (the workspace is unchanged, so only the conversation diverges)."""
    lines = [json.loads(line) for line in cassette.read_text().splitlines()]
    exchange = next(line for line in lines if line.get("exchange") == 2)
    exchange["request"]["body"]["messages"][2]["content"][0]["content"] = "beta\n"
    exchange["state"]["digest"] = digest(conversation_state(exchange["request"]["path"], exchange["request"]["body"])[1])
    cassette.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_a_divergent_tool_result_is_named_and_strict_stops(recorded):
    tmp_path, cassette, stream, _upstream = recorded
    recorded_otherwise(cassette)
    proc, replayed = replay_run(tmp_path, cassette, name="strict.jsonl")
    warnings = [e for e in replayed if e["event"] == "warning" and e["code"] == "REPLAY_DIVERGED"]
    assert len(warnings) == 1, replayed
    assert "exchange 2 (POST /v1/messages)" in warnings[0]["message"]
    assert "messages[2].content[0].content" in warnings[0]["message"]
    names = [e["event"] for e in replayed]
    assert names[-1] == "stream.closed" and replayed[-1]["reason"] != "completed"
    assert "session.ended" not in names or not any(e.get("text") == "done" for e in replayed)
    assert proc.returncode == 1
    # Nothing after the divergence was answered from the cassette.
    assert not any(e["event"] == "text" and e["text"] in ("reading", "done") for e in replayed)


def test_lenient_replay_warns_and_goes_on(recorded):
    tmp_path, cassette, stream, _upstream = recorded
    recorded_otherwise(cassette)
    proc, replayed = replay_run(tmp_path, cassette, "--replay-lenient", name="lenient.jsonl")
    assert proc.returncode == 1, "a replay that diverged is a verdict against the run, lenient or not"
    warnings = [e["message"] for e in replayed if e["event"] == "warning" and e["code"] == "REPLAY_DIVERGED"]
    assert [m.split(" (")[0] for m in warnings] == ["exchange 2"]  # exchange 3 repeats the live history
    assert [e["text"] for e in replayed if e["event"] == "text"] == ["looking", "reading", "done"]
    assert replayed[-1]["reason"] == "completed"


def test_redact_masks_both_directions_and_still_replays(tmp_path):
    _proc, _stream, cassette, _upstream = record(tmp_path, "--redact", "alph[a-z]", "--redact", "look(ing)?")
    data = cassette.read_text()
    assert "alpha" not in data, "the tool result in the request is masked"
    assert "looking" not in data, "the model's text in the response is masked"
    assert "[redacted]" in data
    proc, replayed = mh_run(tmp_path, "--replay", str(cassette), name="replayed.jsonl")
    assert proc.returncode == 0, proc.stderr
    assert not any(e["event"] == "warning" for e in replayed), "a masked span matches the live text"
    assert [e["text"] for e in replayed if e["event"] == "text"] == ["[redacted]", "reading", "done"]


@pytest.mark.parametrize("flags, needle", [
    (["--record", "c.jsonl", "--replay", "c.jsonl"], "CassetteConflict: a run either records"),
    (["--replay", "c.jsonl", "--credentials", "api-key"], "CassetteConflict: --replay answers the model"),
    (["--replay", "c.jsonl", "--redact", "x"], "CassetteConflict: --redact masks what --record writes"),
    (["--replay", "missing.jsonl"], "CassetteInvalid: the cassette missing.jsonl cannot be read"),
    (["--record", "c.jsonl", "--redact", "("], "RedactInvalid"),
    (["--record", "no/such/dir/c.jsonl", "--model-endpoint", "http://127.0.0.1:9"], "CassetteUnwritable"),
])
def test_refusals_are_named_before_anything_starts(tmp_path, flags, needle):
    (tmp_path / "work").mkdir()
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    proc = subprocess.run([sys.executable, "-m", "metaharness", "run", "oharness", "--model", "anthropic:m", "-p", "go",
                           *flags], cwd=tmp_path, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=60)
    assert proc.returncode == 2
    assert needle in proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [line["event"] for line in lines] == ["stream.closed"] and lines[0]["reason"] == "error"


def test_a_bad_cassette_line_is_named(tmp_path):
    cassette = tmp_path / "c.jsonl"
    cassette.write_text('{"format":"metaharness.cassette/1","exchange":1}\n')
    proc = subprocess.run([sys.executable, "-m", "metaharness", "run", "oharness", "--model", "anthropic:m", "-p", "go",
                           "--replay", str(cassette)], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=60)
    assert proc.returncode == 2 and f"{cassette}:1 is not a metaharness.cassette/1 exchange" in proc.stderr


def test_scripted_oharness_has_nothing_to_record(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "metaharness", "run", "oharness", "-p", "go", "--record",
                           str(tmp_path / "c.jsonl")], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=60)
    assert proc.returncode == 2 and "makes no HTTP requests" in proc.stderr
    assert not (tmp_path / "c.jsonl").exists()
    (tmp_path / "c.jsonl").write_text("")
    replay = subprocess.run([sys.executable, "-m", "metaharness", "run", "oharness", "-p", "go", "--replay",
                             str(tmp_path / "c.jsonl")], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                            timeout=60)
    assert replay.returncode == 2 and "nothing to record or replay" in replay.stderr


async def test_a_run_loop_given_the_cassette_flags_directly_refuses_them():
    from metaharness.run.loop import Run
    from metaharness.run.spec import RunSpec

    lines, stderr = [], []
    code = await Run(RunSpec(kind="oharness", prompt="go", replay="c.jsonl"), lines.append,
                     stderr=stderr.append).execute()
    assert code == 2 and any("CassetteUnhosted" in line for line in stderr)
    assert [json.loads(line)["event"] for line in lines] == ["stream.closed"]


async def test_the_library_replays_in_process_as_the_command_line_does(recorded, monkeypatch):
    """One `metaharness.api.start_run` for plain, recorded and replayed runs: `replay` is an option
    of the spec, and the model and working directory come from the cassette."""
    from metaharness.api import RunRefused, start_run
    from metaharness.run.spec import RunSpec

    tmp_path, cassette, stream, _upstream = recorded
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    handle = await start_run(RunSpec(kind="oharness", prompt="go", decisions="observe", replay=str(cassette)))
    async with handle:
        async for _envelope, _event in handle:
            pass
    assert handle.exit_code == 0, handle.stderr
    assert differences(stream, [json.loads(line) for line in handle.lines]) == []

    with pytest.raises(RunRefused) as refused:
        await start_run(RunSpec(kind="oharness", prompt="go", replay=str(cassette), credentials="api-key"))
    assert refused.value.name == "CassetteConflict" and refused.value.sentence.startswith("--replay answers")
    assert [json.loads(line)["event"] for line in refused.value.lines] == ["stream.closed"]


async def test_the_library_refuses_a_missing_cassette_by_name(tmp_path):
    from metaharness.api import RunRefused, start_run
    from metaharness.run.spec import RunSpec

    with pytest.raises(RunRefused) as refused:
        await start_run(RunSpec(kind="oharness", model="anthropic:claude-test", prompt="go", cwd=str(tmp_path),
                                replay=str(tmp_path / "c.jsonl")))
    assert refused.value.name == "CassetteInvalid" and "cannot be read" in refused.value.sentence


def test_exchanges_never_requested_are_named_on_stderr(recorded):
    tmp_path, cassette, stream, _upstream = recorded
    lines = cassette.read_text().splitlines()
    extra = json.loads(lines[-1])
    extra["exchange"] = 4
    cassette.write_text("\n".join([*lines, json.dumps(extra)]) + "\n")
    proc, replayed = replay_run(tmp_path, cassette, name="replayed.jsonl")
    assert proc.returncode == 0 and differences(stream, replayed) == []
    assert "the replay ended with 1 recorded exchanges never requested (the first is exchange 4)" in proc.stderr


def test_an_openai_model_records_and_replays_too(tmp_path):
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "a.txt").write_text("alpha\n")
    key = "sk-proj-OPENAIRECORD-" + "x1" * 20
    upstream = ResponsesStandIn(TURNS, key=key)
    url, stop = upstream.run_in_thread()
    cassette = tmp_path / "c.jsonl"
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    argv = [sys.executable, "-m", "metaharness", "run", "oharness", "--model", "openai:gpt-test", "-p", "go",
            "--decisions", "observe", "--cwd", str(tmp_path / "work")]
    try:
        recording = subprocess.run([*argv, "--model-endpoint", url, "--record", str(cassette)],
                                   env={**env, "OPENAI_API_KEY": key}, capture_output=True, text=True,
                                   stdin=subprocess.DEVNULL, timeout=120)
    finally:
        stop()
    assert recording.returncode == 0, recording.stderr
    assert upstream.seen_keys == [key] * 3
    assert key.encode() not in cassette.read_bytes()
    assert {json.loads(line).get("wire") for line in cassette.read_text().splitlines()[1:]} == {"openai-responses"}
    replay = subprocess.run([*argv, "--replay", str(cassette)], env=env, capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=120)
    assert replay.returncode == 0, replay.stderr
    recorded = [json.loads(line) for line in recording.stdout.splitlines()]
    replayed = [json.loads(line) for line in replay.stdout.splitlines()]
    assert [e["event"] for e in recorded].count("tool.result") == 2
    assert differences(recorded, replayed) == []
