"""What a new user meets on a first `metaharness run oharness`: where it works, and why it will not start."""

from __future__ import annotations

import json
import os
import subprocess
import sys

PY = sys.executable


def run(args, cwd, env=None, timeout=60):
    return subprocess.run([PY, "-m", "metaharness", "run", "oharness", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env=env)


def write_scenario(directory) -> str:
    path = directory / "s.json"
    path.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": [
        {"calls": [{"op": "file.write", "input": {"path": "out.txt", "content": "hi"}}]}, {"text": "done"}]}))
    return str(path)


def test_without_cwd_the_run_works_here_and_says_so(tmp_path):
    here = tmp_path / "here"
    here.mkdir()
    script = write_scenario(tmp_path)
    proc = run(["--script", script, "--decisions", "observe", "-p", "go"], cwd=here)
    assert proc.returncode == 0, proc.stderr
    assert f"metaharness: oharness works in {here} (the current directory; --cwd DIR picks another)" in proc.stderr
    assert (here / "out.txt").read_text() == "hi"
    started = json.loads(proc.stdout.splitlines()[0])
    assert started["event"] == "session.started" and started["cwd"] == str(here)


def test_with_cwd_there_is_no_note(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    proc = run(["--script", write_scenario(tmp_path), "--decisions", "observe", "--cwd", str(work), "-p", "go"],
               cwd=tmp_path)
    assert proc.returncode == 0 and "works in" not in proc.stderr
    assert (work / "out.txt").exists() and not (tmp_path / "out.txt").exists()


def test_a_prompt_without_script_or_model_is_refused_by_name(tmp_path):
    proc = run(["-p", "hello"], cwd=tmp_path)
    assert proc.returncode == 2
    assert "metaharness: NoModel: no model chosen: give --model PROVIDER:MODEL" in proc.stderr
    assert "--script FILE" in proc.stderr
    assert [json.loads(line)["event"] for line in proc.stdout.splitlines()] == ["stream.closed"]


def test_a_real_model_without_its_key_says_one_sentence_on_stderr(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    for model, variable in (("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"), ("openai:gpt-5", "OPENAI_API_KEY")):
        proc = run(["--model", model, "-p", "hello"], cwd=tmp_path, env=env)
        assert proc.returncode == 2, proc.stderr
        provider = model.split(":")[0]
        assert f"metaharness: NoApiKey: the {provider} provider needs {variable} in the environment" in proc.stderr
        assert "session.started" not in proc.stdout
