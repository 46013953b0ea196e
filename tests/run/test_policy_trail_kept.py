"""Policy mode leaves nothing behind unless asked: the trail is kept only in --retain-dir, and named."""

from __future__ import annotations

import json
import tempfile

from metaharness.run.spec import RunSpec

from .fake import Call, Turn, drive


def spec(tmp_path, **kw) -> RunSpec:
    return RunSpec(kind="oharness", prompt="go", decisions="policy", cwd=str(tmp_path / "work"),
                   policy_scopes="none", policy_mode="bypass", **kw)


async def test_without_retain_dir_no_trail_and_no_temporary_directory(tmp_path, monkeypatch):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    (tmp_path / "work").mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    events, code, _, _, stderr = await drive(spec(tmp_path), turns=[Turn([Call("bash", {"command": "echo hi"})])])
    assert code == 0 and [e["decided_by"] for e in events if e["event"] == "tool.decided"] == ["policy"]
    assert list(scratch.iterdir()) == []
    assert list((tmp_path / "work").iterdir()) == []
    assert not any("decision trail" in line for line in stderr)


async def test_with_retain_dir_the_trail_is_kept_and_its_path_said(tmp_path):
    (tmp_path / "work").mkdir()
    record = tmp_path / "record"
    events, code, _, _, stderr = await drive(spec(tmp_path, retain_dir=str(record)),
                                             turns=[Turn([Call("bash", {"command": "echo hi"})])])
    trail = record / "decisions.jsonl"
    assert code == 0 and [json.loads(line)["kind"] for line in trail.read_text().splitlines()] == ["decision", "answer"]
    assert f"metaharness: the policy decision trail is in {trail}" in stderr
