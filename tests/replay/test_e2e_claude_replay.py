"""Record and replay on the real Claude Code binary (e2e).

Recording: Claude Code → the per-run credential proxy (placeholder in, real key out) → the
recorder → the loopback in scripted mode, playing the Anthropic API. Replaying: Claude Code →
the replay server, no key anywhere, the loopback idle (its log must stay empty). Both inside a
loopback-only network namespace when the machine allows it.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from metaharness.protocol.frame import load_frame
from metaharness.replay import redecide as rd
from metaharness.replay.normalise import differences
from claude.support import ClaudeRun, frame_doc, scenario, shell

pytestmark = pytest.mark.timeout(240)

KEY = "sk-ant-api03-CLAUDECASSETTE-0123456789abcdefghijklmnop"
SCENARIO = scenario({"text": "writing", "calls": [shell("echo hi > out.txt")]},
                    {"text": "reading", "calls": [shell("cat out.txt")]},
                    {"text": "all done"})


async def _run(tmp_path, args, *, env=None, out_name: str):
    run = await ClaudeRun(str(tmp_path), SCENARIO, args, env=env).start()
    rc = await run.finish(timeout=120)
    run.assert_complete()
    run.assert_no_dns()
    os.rename(run.out, tmp_path / out_name)  # the next run of this directory gets a fresh loopback log
    return run, rc


@pytest.fixture
async def recorded(tmp_path):
    frame = tmp_path / "frame.json"
    frame.write_bytes(frame_doc(["shell"]))
    cassette = tmp_path / "claude.cassette.jsonl"
    run, rc = await _run(tmp_path, ["--frame", str(frame), "--credentials", "loopback", "--model-endpoint", "@URL@",
                                    "--record", str(cassette)],
                         env={"ANTHROPIC_API_KEY": KEY}, out_name="out-record")
    assert rc == 0, run.stderr.decode()[-3000:]
    upstream = [json.loads(line) for line in (tmp_path / "out-record" / "loopback.jsonl").read_text().splitlines()]
    main = [r for r in upstream if r.get("main")]
    assert len(main) == 3 and {r["headers"].get("x-api-key") for r in main} == {KEY}, "the upstream got the real key"
    return tmp_path, frame, cassette, run


async def test_claude_replay_gives_the_recorded_stream_and_no_key_is_recorded(recorded):
    tmp_path, frame, cassette, recording = recorded
    data = cassette.read_bytes()
    assert KEY.encode() not in data and b"CLAUDECASSETTE" not in data
    assert b"mh-placeholder-" not in data, "the per-run placeholder is a credential too"
    lines = [json.loads(line) for line in data.splitlines()]
    assert "recording" in lines[0]  # the first line says what the replay needs; the exchanges follow
    assert sum(1 for line in lines[1:] if line["wire"] == "anthropic-messages") >= 3
    (tmp_path / "work" / "out.txt").unlink()  # the replayed run writes it again

    replay, rc = await _run(tmp_path, ["--frame", str(frame), "--credentials", "none", "--replay", str(cassette)],
                            out_name="out-replay")
    assert rc == 0, replay.stderr.decode()[-3000:]
    assert not (tmp_path / "out-replay" / "loopback.jsonl").read_text().strip(), "the replay reached no model"
    assert (tmp_path / "work" / "out.txt").read_text() == "hi\n"
    assert [e for e in replay.events if e.get("code") == "REPLAY_DIVERGED"] == []
    assert differences(recording.events, replay.events) == []

    # The recorded stream re-decided: the run's own frame keeps every call; without shell, both are denied.
    stream = tmp_path / "recorded.events.jsonl"
    stream.write_bytes(b"".join(recording.raw_lines))
    same = rd.redecide([str(stream)], rd.FrameDecider(load_frame(str(frame))))
    assert len(same.outcomes) == 2 and same.changed() == []
    narrower_path = tmp_path / "narrower.json"
    narrower_path.write_bytes(frame_doc(["file.read"]))
    narrower = rd.redecide([str(stream)], rd.FrameDecider(load_frame(str(narrower_path))))
    assert [(o.call.name, o.change) for o in narrower.outcomes] == [("Bash", "newly denied")] * 2


async def test_claude_divergence_is_named_and_strict_stops(recorded):
    tmp_path, _frame, cassette, _recording = recorded
    denying = tmp_path / "deny.json"
    denying.write_bytes(frame_doc(["file.read"]))  # a decision goes the other way: shell is refused now
    # the workspace as the recording found it (else the replay is refused up front: WorkspaceDiffers)
    (tmp_path / "work" / "out.txt").unlink()
    replay, rc = await _run(tmp_path, ["--frame", str(denying), "--credentials", "none", "--replay", str(cassette)],
                            out_name="out-strict")
    warnings = [e for e in replay.events if e.get("code") == "REPLAY_DIVERGED"]
    # The frame's rendering opens the first user message, so the very first exchange differs there.
    assert len(warnings) == 1
    assert warnings[0]["message"].startswith("exchange 1 (POST /v1/messages)")
    assert "the first differing part is messages[0].content[" in warnings[0]["message"]
    assert rc == 1 and replay.events[-1]["reason"] != "completed"
    assert not any(e["event"] == "text" and e["text"] == "all done" for e in replay.events)
    shutil.rmtree(tmp_path / "out-strict")
