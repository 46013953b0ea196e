"""Record → replay → re-decide, offline, with no key, on every harness of the registry (real binaries, e2e).

Each harness runs one scenario under one frame with `--record`: the scripted loopback's traffic
is what the cassette holds. The workspace is put back as it was, and the run is replayed from the
cassette alone — no `--script`, no `--model`, no `--cwd` (the cassette says where), no key in the
environment, as if on a later day than the recording — and must write the recorded stream (apart
from times, ids and costs). Then the replayed stream is re-decided under a tighter frame, and the
one call it would now deny is named (the edit; on Qwen Code, which ends its turn at the refused
shell so the edit is never asked for, the write, under a frame admitting only the edit). Vendor runs are inside a loopback-only network namespace
when the machine allows it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from claude.support import frame_doc
from metaharness.loopback import cassette as cassettes
from metaharness.protocol.harnesses import KINDS
from metaharness.replay.normalise import differences

pytestmark = pytest.mark.timeout(1500)

REPO = Path(__file__).resolve().parents[2]
VENDOR = REPO / ".vendor" / "node_modules" / ".bin"
METAHARNESS = REPO / ".venv" / "bin" / "metaharness"
NETNS = REPO / "tests" / "fixtures" / "codex" / "netns_run.py"
E2E_ROOT = Path(os.path.expanduser("~")) / ".cache" / "metaharness" / "replay-e2e"
SCENARIO = REPO / "examples" / "same-task.scenario.json"
FRAME = REPO / "examples" / "same-task.frame.json"
# Qwen Code ends its turn at a refused call: the scenario stops after the refused shell.
ENDS_TURN_AT_DENY = {"qwen"}
KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "CODEX_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")


def netns_available() -> bool:
    try:
        return subprocess.run(["unshare", "--user", "--map-root-user", "--net", "--mount", "true"],
                              capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


NETNS_OK = netns_available()


def mh(kind: str, root: Path, name: str, *flags: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    args = [str(METAHARNESS), "run", kind, "--frame", str(FRAME), "-p", "do the task",
            "--decision-timeout-ms", "2000", *flags]
    if kind != "oharness":
        args += ["--vendor-dir", str(VENDOR)]
        if NETNS_OK:
            args = ["unshare", "--user", "--map-root-user", "--net", "--mount", "python3", str(NETNS),
                    str(root / f"{name}.dns.log"), "--", *args]
    env = {k: v for k, v in os.environ.items() if k not in KEYS}
    done = subprocess.run(args, capture_output=True, timeout=400, stdin=subprocess.DEVNULL,
                          env=dict(env, METAHARNESS_SCRATCH_DIR=str(root / "scratch")))
    (root / f"{name}.jsonl").write_bytes(done.stdout)
    return done, [json.loads(line) for line in done.stdout.splitlines()]


def seed(work: Path) -> None:
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    (work / "README.txt").write_text("the starting workspace\n")


# Every vendor writes the day's date into the conversation it sends, each in its own sentence and
# format; the cassette's requests are moved to another day before replaying: a replay
# on a later day than its recording must hold. oharness writes none.
LATER_DAY = {
    "claude": (r"Today's date is \d{4}-\d{2}-\d{2}\.", "Today's date is 2027-01-15."),
    "codex": (r"<current_date>\d{4}-\d{2}-\d{2}</current_date>", "<current_date>2027-01-15</current_date>"),
    "opencode": (r"Today's date: \w{3} \w{3} \d{2} \d{4}", "Today's date: Fri Jan 15 2027"),
    "gemini": (r"Today's date is [^\\()\"]+ \(formatted", "Today's date is Friday, January 15, 2027 (formatted"),
    "qwen": (r"Today's date is [A-Z][a-z]+, [A-Z][a-z]+ \d{1,2}, \d{4}\.", "Today's date is Friday, January 15, 2027."),
}


def as_if_recorded_another_day(path: Path, kind: str) -> None:
    """Rewrite the cassette's requests to another day's date, and their state digests with them."""
    if kind not in LATER_DAY:
        return
    pattern, later = LATER_DAY[kind]
    lines, moved = [], 0
    for line in map(json.loads, path.read_text().splitlines()):
        if "request" in line:
            body, count = re.subn(pattern, later, json.dumps(line["request"]["body"]))
            line["request"]["body"], moved = json.loads(body), moved + count
            line["state"]["digest"] = cassettes.digest(cassettes.conversation_state(line["request"]["path"],
                                                                                  line["request"]["body"])[1])
        lines.append(json.dumps(line))
    assert moved, f"{kind}'s recorded requests carry no date in its sentence any more ({pattern})"
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("kind", KINDS)
def test_record_replay_redecide_offline(kind):
    root = E2E_ROOT / f"{kind}-{uuid.uuid4().hex[:6]}"
    notes, admitted = ("hello", "file.edit") if kind in ENDS_TURN_AT_DENY else ("HELLO", "file.write")
    work, cassette = root / "work", root / "run.cassette.jsonl"
    (root / "scratch").mkdir(parents=True)
    try:
        seed(work)
        recording, recorded = mh(kind, root, "recorded", "--script", str(SCENARIO), "--cwd", str(work),
                                 "--record", str(cassette))
        assert recording.returncode == 0, recording.stderr.decode()[-2000:]
        assert any(e["event"] == "session.ended" for e in recorded), recording.stderr.decode()[-2000:]
        assert (work / "notes.txt").read_text().startswith(notes), "the recorded run wrote (and edited)"
        header, *exchanges = [json.loads(line) for line in cassette.read_text().splitlines()]
        assert header["recording"]["harness"] == kind and header["recording"]["cwd"] == str(work)
        assert list(header["recording"]["workspace"]) == ["README.txt"]
        assert exchanges and all(e["response"]["status"] == 200 for e in exchanges)

        # The run changed the workspace: a replay into it is refused up front, naming the file.
        refused, lines = mh(kind, root, "refused", "--replay", str(cassette))
        assert refused.returncode == 2 and [e["event"] for e in lines] == ["stream.closed"]
        assert b"WorkspaceDiffers" in refused.stderr and b"notes.txt was not there" in refused.stderr

        seed(work)
        as_if_recorded_another_day(cassette, kind)
        replay, replayed = mh(kind, root, "replayed", "--replay", str(cassette))
        assert replay.returncode == 0, replay.stderr.decode()[-2000:]
        assert differences(recorded, replayed) == []
        assert (work / "notes.txt").read_text().startswith(notes), "the replayed run's tools really ran"

        tighter = root / "tighter.frame.json"
        tighter.write_bytes(frame_doc([admitted]))
        redecided = subprocess.run([str(METAHARNESS), "redecide", str(root / "replayed.jsonl"), "--frame",
                                    str(tighter), "--json"], capture_output=True, text=True, timeout=120)
        assert redecided.returncode == 1, redecided.stderr
        changed = json.loads(redecided.stdout)["changed"]
        assert [(c["change"], c["old"]["verdict"], c["new"]["verdict"]) for c in changed] == [
            ("newly denied", "allow", "deny")], changed
    finally:
        shutil.rmtree(root, ignore_errors=True)
