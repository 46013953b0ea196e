"""Record and replay on the real Codex binary (e2e).

Recording: Codex → the per-run credential proxy (placeholder in, real key out) → the recorder →
the loopback in scripted mode, playing the OpenAI Responses API (started beside metaharness,
inside the loopback-only namespace when the machine allows it). Replaying: Codex → the replay
server, no key, no upstream at all.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codex"))

from e2e_support import CODEX, E2E_ROOT, METAHARNESS, NETNS, NETNS_OK, VENDOR, CodexRun, frame, scenario, shell  # noqa: E402

from metaharness.protocol.frame import load_frame  # noqa: E402
from metaharness.replay import redecide as rd  # noqa: E402
from metaharness.replay.normalise import differences  # noqa: E402

pytestmark = pytest.mark.timeout(240)

UPSTREAM_RUN = Path(__file__).resolve().parents[1] / "fixtures" / "codex" / "upstream_run.py"
KEY = "sk-proj-CODEXCASSETTE-" + "R8q" * 16


class RecordingCodexRun(CodexRun):
    """`metaharness run codex` beside a loopback playing the upstream; `@URL@` becomes its URL."""

    def __init__(self, case_dir: Path, scenario_path: Path, args: list[str], *, env: dict[str, str]) -> None:
        self.case_dir = case_dir
        self.dns_log = case_dir / "dns.log"
        self.upstream_log = case_dir / "upstream.jsonl"
        command = [sys.executable, str(UPSTREAM_RUN), str(scenario_path), str(self.upstream_log),
                   str(case_dir / "work"), "--", str(METAHARNESS), "run", "codex", "--vendor-dir", str(VENDOR), *args]
        self.namespaced = NETNS_OK
        if self.namespaced:
            command = ["unshare", "--user", "--map-root-user", "--net", "--mount",
                       sys.executable, str(NETNS), str(self.dns_log), "--", *command]
        import os

        child_env = dict(os.environ, METAHARNESS_SCRATCH_DIR=str(case_dir / "scratch"), **env)
        self.stderr_path = case_dir / "stderr-record.txt"
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=open(self.stderr_path, "wb"), cwd=str(case_dir), env=child_env)
        self.events, self.raw = [], []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.started = time.monotonic()


@pytest.fixture
def recorded(request):
    if not CODEX.exists():
        pytest.fail(f"the pinned codex binary is missing at {CODEX}; run `make vendor`")
    case = E2E_ROOT / f"{request.node.name[:40]}-{uuid.uuid4().hex[:6]}"
    (case / "work").mkdir(parents=True)
    s = scenario(case / "s.json", [{"text": "writing", "calls": [shell("echo hi > out.txt")]},
                                   {"text": "reading", "calls": [shell("cat out.txt")]},
                                   {"text": "all done"}])
    f = frame(case / "frame.json", ["shell"])
    cassette = case / "codex.cassette.jsonl"
    run = RecordingCodexRun(case, s, ["-p", "go", "--cwd", str(case / "work"), "--frame", str(f),
                                      "--credentials", "loopback", "--model-endpoint", "@URL@",
                                      "--record", str(cassette)], env={"OPENAI_API_KEY": KEY})
    assert run.finish(timeout=120) == 0, run.stderr()[-2000:]
    run.assert_complete()
    upstream = [json.loads(line) for line in run.upstream_log.read_text().splitlines() if line.strip()]
    main = [r for r in upstream if r["main"]]
    assert len(main) == 3 and all(r["headers"]["authorization"] == f"Bearer {KEY}" for r in main)
    yield case, f, cassette, run
    shutil.rmtree(case, ignore_errors=True)


def _replay(case: Path, frame_path: Path, cassette: Path, *extra: str) -> CodexRun:
    (case / "work" / "out.txt").unlink(missing_ok=True)
    run = CodexRun(case, ["-p", "go", "--cwd", str(case / "work"), "--frame", str(frame_path),
                          "--replay", str(cassette), *extra])
    run.finish(timeout=120)
    run.assert_complete()
    return run


def test_codex_replay_gives_the_recorded_stream_and_no_key_is_recorded(recorded):
    case, f, cassette, recording = recorded
    data = cassette.read_bytes()
    assert KEY.encode() not in data and b"CODEXCASSETTE" not in data and b"mh-placeholder-" not in data
    lines = [json.loads(line) for line in data.splitlines()]
    assert "recording" in lines[0]  # the first line says what the replay needs; the exchanges follow
    assert {line["wire"] for line in lines[1:]} >= {"openai-responses"}
    replay = _replay(case, f, cassette)
    assert replay.proc.returncode == 0, replay.stderr()[-2000:]
    assert (case / "work" / "out.txt").read_text() == "hi\n"
    assert [e for e in replay.events if e.get("code") == "REPLAY_DIVERGED"] == []
    assert differences(recording.events, replay.events) == []

    # The recorded stream re-decided: the run's own frame keeps every call; without shell, both are denied.
    stream = case / "recorded.events.jsonl"
    stream.write_bytes(b"".join(recording.raw))
    same = rd.redecide([str(stream)], rd.FrameDecider(load_frame(str(f))))
    assert len(same.outcomes) == 2 and same.changed() == []
    narrower = rd.redecide([str(stream)], rd.FrameDecider(load_frame(str(frame(case / "none.json", ["file.read"])))))
    assert [(o.call.name, o.change) for o in narrower.outcomes] == [("Bash", "newly denied")] * 2


def test_codex_divergence_strict_stops_lenient_goes_on(recorded):
    case, _f, cassette, _recording = recorded
    other = frame(case / "other.json", ["shell", "file.read"])  # a different frame reaches the model
    strict = _replay(case, other, cassette)
    warnings = [e["message"] for e in strict.events if e.get("code") == "REPLAY_DIVERGED"]
    assert len(warnings) == 1 and warnings[0].startswith("exchange 1 (POST /v1/responses)")
    assert "the first differing part is input[" in warnings[0]
    assert strict.proc.returncode == 1 and strict.events[-1]["reason"] != "completed"
    assert not (case / "work" / "out.txt").exists(), "nothing after the divergence was answered"

    lenient = _replay(case, other, cassette, "--replay-lenient")
    assert lenient.proc.returncode == 1
    assert len([e for e in lenient.events if e.get("code") == "REPLAY_DIVERGED"]) >= 3
    assert (case / "work" / "out.txt").read_text() == "hi\n", "the recorded answers were served all the same"
    assert any(e["event"] == "session.ended" for e in lenient.events)
