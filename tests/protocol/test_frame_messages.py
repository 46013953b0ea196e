"""Frame errors a user reads: the file is named, and sealing reports every gap at once."""

from __future__ import annotations

import json
import subprocess
import sys

from click.testing import CliRunner

from metaharness.cli.main import cli
from metaharness.protocol.frame import FrameRefusal, missing_fields, seal


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_a_missing_frame_file_is_named_by_verify_and_seal(tmp_path):
    missing = tmp_path / "nope.frame.json"
    for verb, words in (("verify", "the frame document"), ("render", "the frame document"),
                        ("seal", "the frame object")):
        r = run("frame", verb, str(missing))
        assert r.exit_code == 2
        assert f"FrameUnreadable: {words} {missing} could not be read: No such file or directory" in r.stderr


def test_a_missing_frame_file_is_named_by_run(tmp_path):
    missing = tmp_path / "nope.frame.json"
    r = subprocess.run([sys.executable, "-m", "metaharness.cli.main", "run", "oharness", "--frame", str(missing),
                        "--model", "scripted:default", "-p", "go"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert f"FrameUnreadable: the frame document {missing} could not be read" in r.stderr


def test_seal_reports_every_missing_field_at_once_worded_for_sealing(tmp_path, golden_obj):
    partial = {"workflow": {"id": "w"}, "node": {}, "step": {"workflow": "w"}, "prior": [{"source": None}],
               "handoff": {"handoff": "artifact"}}
    path = tmp_path / "partial.json"
    path.write_text(json.dumps(partial))
    r = run("frame", "seal", str(path))
    assert r.exit_code == 2 and r.stdout == ""
    assert "not a sealed" not in r.stderr
    assert (f"FrameInvalid: the frame object {path} cannot be sealed: missing fields `workflow.version`, "
            "`node.id`, `step.state`, `step.index`, `step.attempt`, `prior[0].text`, `obligations`, `reaching`, "
            "`next`, `handoff.name`, `operations`") in r.stderr


def test_missing_fields_follows_the_tag_of_a_union_and_is_empty_for_a_whole_frame(golden_obj):
    assert missing_fields(golden_obj) == []
    assert missing_fields(dict(golden_obj, operations=[{"op": "mcp.call"}, {"op": "shell"}])) == [
        "operations[0].server", "operations[0].tool"]
    unsealed = {k: v for k, v in golden_obj.items() if k not in ("digest", "format")}
    assert seal(unsealed).digest == golden_obj["digest"]


def test_one_missing_field_is_singular():
    try:
        seal({"workflow": {"id": "w", "version": "1"}, "node": {"id": "n"},
              "step": {"workflow": "w", "state": "n", "index": 1, "attempt": 1}, "prior": [], "obligations": [],
              "reaching": [], "next": [], "handoff": {"handoff": "none"}})
    except FrameRefusal as refusal:
        assert refusal.detail == "missing field `operations`"
    else:
        raise AssertionError("an incomplete frame was sealed")
