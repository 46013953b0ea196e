"""`metaharness conformance opencode|gemini`: recorded ACP wire replayed through the translator
and the seam reproduces the live run's events and answers, and a tampered recording does not."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from metaharness.cli.acp_doctor import FIXTURES, conformance_checks

from acp_support import METAHARNESS, VENDOR

KINDS = ("opencode", "gemini")


@pytest.mark.parametrize("kind", KINDS)
def test_recorded_wire_replays_to_the_live_events_and_answers(kind):
    checks = list(conformance_checks(kind, None))
    assert checks and all(ok for _, ok, _ in checks), checks
    done = subprocess.run([str(METAHARNESS), "conformance", kind], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.count("ok ") == len(checks), done.stdout


@pytest.mark.parametrize("kind", KINDS)
def test_a_tampered_recording_fails_the_replay(kind, tmp_path):
    for path in (FIXTURES / kind).iterdir():
        shutil.copy(path, tmp_path / path.name)
    sent = tmp_path / "read-shell-write.sent.jsonl"
    lines = [json.loads(line) for line in sent.read_text().splitlines()]
    for line in lines:  # the live run "allowed" the shell call the frame denied
        outcome = (line.get("result") or {}).get("outcome") if isinstance(line.get("result"), dict) else None
        if outcome and outcome.get("optionId") in ("reject", "cancel"):
            outcome["optionId"] = {"reject": "once", "cancel": "proceed_once"}[outcome["optionId"]]
    sent.write_text("".join(json.dumps(line) + "\n" for line in lines))
    events = tmp_path / "read-shell-write.events.jsonl"
    events.write_text(events.read_text().replace("Now the shell.", "Now the shell!"))
    checks = {name.split(": ")[1]: ok for name, ok, _ in conformance_checks(kind, str(tmp_path))}
    assert checks == {"events": False, "answers": False}


@pytest.mark.parametrize("kind", KINDS)
def test_doctor_on_the_pinned_binary(kind):
    done = subprocess.run([str(METAHARNESS), "doctor", kind, "--vendor-dir", str(VENDOR)], capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok   acp handshake" in done.stdout and "phone-home" in done.stdout
