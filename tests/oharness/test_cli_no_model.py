"""`oharness -p` with nothing choosing a model is refused by name, never answered by the scripted default."""

from __future__ import annotations

import json
import subprocess
import sys


def oharness(*args, cwd):
    return subprocess.run([sys.executable, "-m", "oharness", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


def test_prompt_without_model_or_script_is_refused(tmp_path):
    proc = oharness("-p", "hello", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("oharness: no model chosen: give --model PROVIDER:MODEL")
    assert "(scenario complete)" not in proc.stdout


def test_a_script_alone_still_chooses_the_scripted_model(tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": [{"text": "hi there"}]}))
    proc = oharness("-p", "hello", "--script", str(script), "--session-dir", str(tmp_path / "session"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "hi there" in proc.stdout
