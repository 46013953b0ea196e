"""The wire-core CLI verbs and their exit codes (the wire rule “exit codes of the other commands”): frame seal|verify|render, check, schema."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from metaharness.cli.main import cli
from metaharness.protocol import EventWriter
from metaharness.protocol.events import Text
from metaharness.protocol.values import Exited

DIGEST = "43a6f845a21f3475569323950a9d276bfed3df11979adc3edf18878da6963a12"


def run(*args, input=None):
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


@pytest.fixture
def golden_path(tmp_path, golden_bytes):
    p = tmp_path / "frame.json"
    p.write_bytes(golden_bytes)
    return p


def test_frame_verify(golden_path, golden_bytes, tmp_path):
    r = run("frame", "verify", str(golden_path))
    assert r.exit_code == 0 and r.stdout.strip() == DIGEST
    bad = tmp_path / "bad.json"
    bad.write_bytes(golden_bytes.replace(b'"index": 2', b'"index": 3'))
    r = run("frame", "verify", str(bad))
    assert r.exit_code == 2 and r.stdout == ""
    assert "FrameInvalid" in r.stderr and "computed 306141e6b3b4a74f4b50b85d60e5e0f27d1105579f76455efcfbe82a9ae40926" in r.stderr
    r = run("frame", "verify", str(tmp_path / "nope.json"))
    assert r.exit_code == 2 and "FrameUnreadable" in r.stderr
    assert "Traceback" not in r.stderr
    assert run("frame", "verify").exit_code == 2  # usage error


def test_frame_render(golden_path, golden_text):
    r = run("frame", "render", str(golden_path))
    assert r.exit_code == 0 and r.stdout_bytes == golden_text.encode()


def test_frame_seal(golden_obj, golden_bytes, tmp_path):
    unsealed = tmp_path / "in.json"
    unsealed.write_text(json.dumps({k: v for k, v in golden_obj.items() if k not in ("digest", "format")}))
    r = run("frame", "seal", str(unsealed))
    assert r.exit_code == 0 and r.stdout_bytes == golden_bytes
    out = tmp_path / "out.json"
    assert run("frame", "seal", str(unsealed), "-o", str(out)).exit_code == 0
    assert out.read_bytes() == golden_bytes
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(dict(golden_obj, step=dict(golden_obj["step"], index=3))))
    r = run("frame", "seal", str(edited))
    assert r.exit_code == 2 and "the stated digest" in r.stderr and r.stdout == ""
    junk = tmp_path / "junk.json"
    junk.write_text("{")
    assert run("frame", "seal", str(junk)).exit_code == 2
    assert run("frame", "seal", "-", input=golden_bytes).stdout_bytes == golden_bytes


def stream(tmp_path, close=True, name="events.jsonl"):
    out: list[bytes] = []
    w = EventWriter(out.append, "oharness-9")
    w.write(Text(text="hi"))
    if close:
        w.close("completed", Exited(code=0))
    p = tmp_path / name
    p.write_bytes(b"".join(out))
    return p


def test_check_exit_codes(tmp_path):
    p = stream(tmp_path)
    r = run("check", str(p))
    assert r.exit_code == 0 and "complete" in r.stdout
    r = run("check", str(stream(tmp_path, close=False, name="cut.jsonl")))
    assert r.exit_code == 3 and "truncated" in r.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"format":"metaharness.event/1","seq":1,"run":"r","event":"text"}\n')
    r = run("check", str(bad))
    assert r.exit_code == 1 and "line 1" in r.stderr and "missing field `text`" in r.stderr
    r = run("check", str(tmp_path / "missing.jsonl"))
    assert r.exit_code == 2
    assert run("check").exit_code == 2
    r = run("check", "-", input=p.read_bytes())
    assert r.exit_code == 0


@pytest.mark.parametrize("name, title", [("event", "metaharness.event/1"), ("command", "metaharness.command/1"), ("frame", "metaharness.frame/1")])
def test_schema(name, title):
    r = run("schema", name)
    assert r.exit_code == 0
    schema = json.loads(r.stdout)
    assert schema["title"] == title and "$defs" in schema
    if name == "event":
        text = schema["$defs"]["Text"]
        assert list(text["properties"])[:5] == ["format", "seq", "run", "at", "event"]
        assert {"format", "seq", "run", "event", "text"} <= set(text["required"])
        assert len(schema["anyOf"]) == 20
    if name == "command":
        assert list(schema["$defs"]["ToolDecide"]["properties"])[:2] == ["format", "command"]
    if name == "frame":
        assert "digest" in schema["$defs"]["Frame"]["required"]


def test_schema_unknown_name():
    assert run("schema", "scenario").exit_code == 2


def test_console_script_end_to_end(golden_path):
    proc = subprocess.run([sys.executable, "-m", "metaharness", "frame", "verify", str(golden_path)], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == DIGEST


def test_import_is_pure():
    code = ("import sys, time; t=time.perf_counter(); import metaharness.protocol; "
            "print(sorted(m for m in sys.modules if m in ('asyncio','subprocess') or (m.startswith('metaharness.') and not m.startswith('metaharness.protocol'))))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"
