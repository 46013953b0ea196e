"""oharness sessions governed by the permission engine, end to end as subprocesses:
`oharness -p` honouring the seed's rules after `oharness permissions trust`, start-up
refusals, and `--stdio` (set_mode mid-session, the trail beside the transcript)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest

TIMEOUT = 20


class Child:
    """An `oharness --stdio` child driven over its stdin/stdout (as metaharness drives it)."""

    def __init__(self, process):
        self.p = process
        self.records = []

    @classmethod
    async def start(cls, tmp_path, turns, *extra):
        script = tmp_path / "scenario.json"
        script.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": turns}))
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "oharness", "--stdio", "--script", str(script), "--cwd", str(tmp_path), *extra,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        return cls(process)

    def send(self, **record):
        self.p.stdin.write((json.dumps(record) + "\n").encode())

    async def until(self, kind):
        while True:
            line = await asyncio.wait_for(self.p.stdout.readline(), TIMEOUT)
            assert line, "the child closed stdout early: " + (await self.p.stderr.read()).decode()
            record = json.loads(line)
            self.records.append(record)
            if record["type"] == kind:
                return record

    async def finish(self):
        self.p.stdin.close()
        out, _ = await asyncio.wait_for(self.p.communicate(), TIMEOUT)
        self.records += [json.loads(line) for line in out.decode().splitlines()]
        return self.p.returncode

SEED = {
    "allow": ["Bash(npm run test:*)", "mcp__github__get_*"],
    "ask": ["Bash(git push*)"],
    "deny": ["Bash(rm -rf *)", "write(.env*)"],
}


def oharness(*args, cwd, stdin=subprocess.DEVNULL, env=None):
    return subprocess.run([sys.executable, "-m", "oharness", *args], cwd=cwd, capture_output=True, text=True,
                          stdin=stdin, timeout=60, env={**os.environ, "CI": "", **(env or {})})


def scenario(path, turns):
    path.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": turns}))
    return str(path)


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "proj"
    (root / ".oharness").mkdir(parents=True)
    (root / ".oharness" / "settings.json").write_text(json.dumps(SEED, indent=2))
    (root / "build").mkdir()
    (root / "build" / "keep.txt").write_text("kept")
    (root / "package.json").write_text(json.dumps({"name": "p", "scripts": {"test": "echo unit-tests-ran"}}))
    return root


def shell(command):
    return {"op": "shell", "input": {"command": command}}


def test_a_print_session_honours_the_seed_rules_after_trust(project, tmp_path, isolated_home):
    trusted = oharness("permissions", "trust", "--yes", cwd=project)
    assert trusted.returncode == 0, trusted.stderr
    script = scenario(tmp_path / "s.json", [
        {"calls": [
            shell("printf 'test:unit' > allowed.txt"),  # a redirect write: manual, headless → unavailable
            shell("rm -rf build"),  # deny rule
            shell("git push origin main"),  # ask rule → nobody to ask → refused
            {"op": "file.write", "input": {"path": ".env.local", "content": "K=1"}},  # write(.env*) deny
            shell("ls build"),  # read-only
        ]},
        {"text": "done"},
    ])
    session_dir = tmp_path / "session"
    run = oharness("-p", "go", "--script", script, "--cwd", str(project), "--session-dir", str(session_dir), cwd=project)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert (project / "build" / "keep.txt").exists() and not (project / ".env.local").exists()
    assert not (project / "allowed.txt").exists()
    assert "denied by deny rule `Bash(rm -rf *)` (project scope" in out
    assert "denied by deny rule `write(.env*)`" in out
    assert "`Bash(git push origin main)` needs approval (ask-rule)" in out
    assert "keep.txt" in out
    lines = [json.loads(l) for l in (session_dir / "decisions.jsonl").read_text().splitlines()]
    decisions = [l for l in lines if l["kind"] == "decision"]
    answers = {l["id"]: l for l in lines if l["kind"] == "answer"}
    assert len(decisions) == 5 and all(d["id"] in answers for d in decisions)
    by_principal = {d["principal"]: answers[d["id"]]["outcome"] for d in decisions}
    assert by_principal["Bash(rm -rf build)"] == "denied"
    assert by_principal["Bash(git push origin main)"] == "unavailable"
    assert by_principal["Bash(ls build)"] == "allowed"


def test_the_allow_rule_takes_effect_only_once_the_workspace_is_trusted(project, tmp_path):
    # `Bash(npm run test:*)` is `npm run test` followed by any words (the permission rule “compiling a pattern”): `npm run test`.
    script = scenario(tmp_path / "s.json", [{"calls": [shell("npm run test")]}, {"text": "done"}])
    untrusted = oharness("-p", "go", "--script", script, "--cwd", str(project), cwd=project)
    assert "needs approval (no-rule)" in untrusted.stdout and "unit-tests-ran" not in untrusted.stdout
    assert oharness("permissions", "trust", "--yes", cwd=project).returncode == 0
    trusted = oharness("-p", "go", "--script", script, "--cwd", str(project), cwd=project)
    if "npm" in trusted.stdout and "command not found" in trusted.stdout:
        pytest.skip("npm is not installed here")  # the call was allowed; the program is missing
    assert "unit-tests-ran" in trusted.stdout


def test_a_standalone_trail_lives_in_the_sessions_own_directory(project, tmp_path, isolated_home):
    script = scenario(tmp_path / "s.json", [{"calls": [shell("ls")]}, {"text": "done"}])
    run = oharness("-p", "go", "--script", script, "--cwd", str(project), cwd=project)
    assert run.returncode == 0, run.stderr
    sessions = list((isolated_home / ".oharness" / "sessions").iterdir())
    assert len(sessions) == 1 and (sessions[0] / "decisions.jsonl").exists()
    assert str(sessions[0] / "decisions.jsonl") in run.stdout.replace("\n", "")
    oharness("-p", "go", "--script", script, "--cwd", str(project), "--no-decision-trail", cwd=project)
    assert len(list((isolated_home / ".oharness" / "sessions").iterdir())) == 1


def test_disable_bypass_refuses_to_start_with_exit_2_naming_the_file(project):
    (project / ".oharness" / "settings.json").write_text(json.dumps({**SEED, "disableBypassMode": True}))
    run = oharness("-p", "go", "--model", "scripted:default", "--mode", "bypass", "--cwd", str(project), cwd=project)
    assert run.returncode == 2
    assert "disableBypassMode" in run.stderr and str(project / ".oharness" / "settings.json") in run.stderr


def test_invalid_rules_and_hooks_refuse_to_start(project):
    (project / ".oharness" / "settings.json").write_text(json.dumps({"deny": ["Bash(rm -rf *"]}))
    run = oharness("-p", "go", "--model", "scripted:default", "--cwd", str(project), cwd=project)
    assert run.returncode == 2 and "settings.json: deny rule 'Bash(rm -rf *'" in run.stderr
    assert "Traceback" not in run.stderr
    (project / ".oharness" / "settings.local.json").write_text(json.dumps({"hooks": {"PreToolUse": []}}))
    run = oharness("-p", "go", "--model", "scripted:default", "--cwd", str(project), cwd=project)
    assert run.returncode == 2 and "hooks" in run.stderr


def test_bypass_prints_the_notice_and_default_mode_comes_from_settings(project, isolated_home, tmp_path):
    script = scenario(tmp_path / "s.json", [{"text": "hi"}])
    run = oharness("-p", "go", "--mode", "bypass", "--script", script, "--cwd", str(project), cwd=project)
    assert run.returncode == 0 and "Bypass: every call runs unless a deny rule" in run.stderr
    (project / ".oharness" / "settings.local.json").write_text(json.dumps({"permissions": {"defaultMode": "plan"}}))
    run = oharness("-p", "go", "--script", script, "--cwd", str(project), cwd=project)
    assert "mode plan" in run.stdout


# -- under metaharness: --stdio ----------------------------------------------------------------


async def test_stdio_set_mode_mid_session_and_the_trail_beside_the_transcript(tmp_path):
    session = tmp_path / "session"
    child = await Child.start(tmp_path, [
        {"calls": [{"op": "file.write", "input": {"path": "one.txt", "content": "1"}}]},
        {"calls": [{"op": "file.write", "input": {"path": "two.txt", "content": "2"}}]},
        {"text": "done"},
    ], "--session-dir", str(session))
    init = await child.until("init")
    assert init["permission_mode"] == "manual"
    child.send(type="user", text="go")
    call = await child.until("tool_call")
    child.send(type="decision", call_id=call["call_id"], decision={"decision": "abstain"}, decided_by="adapter")
    first = await child.until("tool_result")
    assert first["is_error"] and "nobody to ask" in first["content"]
    child.send(type="set_mode", mode="accept-edits")
    call = await child.until("tool_call")
    child.send(type="decision", call_id=call["call_id"], decision={"decision": "abstain"}, decided_by="adapter")
    second = await child.until("tool_result")
    assert not second["is_error"]
    await child.until("turn_end")
    assert await child.finish() == 0
    assert not (tmp_path / "one.txt").exists() and (tmp_path / "two.txt").read_text() == "2"
    lines = [json.loads(l) for l in (session / "decisions.jsonl").read_text().splitlines()]
    assert [(l["kind"], l.get("outcome")) for l in lines] == [
        ("decision", None), ("answer", "unavailable"), ("decision", None), ("answer", "allowed")]
    assert lines[0]["id"] == lines[1]["id"] and lines[2]["id"] == lines[3]["id"]
    assert lines[2]["mode"] == "accept-edits" and lines[3]["by"] == "mode"
    assert (session / "transcript.jsonl").exists()


async def test_stdio_frame_allow_runs_a_write_and_bypass_set_mode_is_refused_when_disabled(tmp_path):
    (tmp_path / ".oharness").mkdir()
    (tmp_path / ".oharness" / "settings.json").write_text(json.dumps({"disableBypassMode": True}))
    child = await Child.start(tmp_path, [
        {"calls": [{"op": "file.write", "input": {"path": "a.txt", "content": "x"}}]}, {"text": "done"},
    ], "--no-decision-trail", "--session-dir", str(tmp_path / "session"))
    await child.until("init")
    child.send(type="set_mode", mode="bypass")
    assert "disableBypassMode" in (await child.until("error"))["message"]
    child.send(type="user", text="go")
    call = await child.until("tool_call")
    child.send(type="decision", call_id=call["call_id"], decision={"decision": "allow"}, decided_by="frame")
    assert not (await child.until("tool_result"))["is_error"]
    assert await child.finish() == 0
    assert (tmp_path / "a.txt").read_text() == "x"
    assert not (tmp_path / "session" / "decisions.jsonl").exists()


async def test_stdio_start_refusal_for_bypass_is_an_error_record(tmp_path):
    (tmp_path / ".oharness").mkdir()
    (tmp_path / ".oharness" / "settings.json").write_text(json.dumps({"disableBypassMode": True}))
    child = await Child.start(tmp_path, [{"text": "hi"}], "--mode", "bypass")
    assert await child.finish() == 2
    assert child.records[0]["type"] == "error" and "disableBypassMode" in child.records[0]["message"]


def test_under_metaharness_observe_oharness_rules_still_hold(project, tmp_path):
    """permissions.md case 177: metaharness records `allow` (observe), oharness's engine refuses."""
    assert oharness("permissions", "trust", "--yes", cwd=project).returncode == 0
    script = scenario(tmp_path / "s.json", [
        {"calls": [shell("rm -rf build"), shell("git push"), shell("ls build")]}, {"text": "done"},
    ])
    run = subprocess.run(
        [sys.executable, "-m", "metaharness", "run", "oharness", "--decisions", "observe", "--script", script,
         "--cwd", str(project), "-p", "go"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )
    events = [json.loads(line) for line in run.stdout.splitlines() if line.strip()]
    decided = [e for e in events if e["event"] == "tool.decided"]
    assert [e["decision"]["decision"] for e in decided] == ["allow"] * 3
    assert all(e["decided_by"] == "observe" for e in decided)
    results = [e for e in events if e["event"] == "tool.result"]
    assert results[0]["is_error"] and "Bash(rm -rf *)" in results[0]["content"]
    assert results[1]["is_error"] and "ask-rule" in results[1]["content"] and "nobody to ask" in results[1]["content"]
    assert not results[2]["is_error"] and "keep.txt" in results[2]["content"]
    assert (project / "build" / "keep.txt").exists()


def test_bash_carries_its_working_directory_and_the_next_call_is_decided_there(project, tmp_path, isolated_home):
    # the permission rule “what the bash tool must do to match the analysis”: only the working directory survives a bash call, and the next analysis uses it:
    # `echo x > secret.txt` after `cd sub` writes sub/secret.txt, which the deny rule covers.
    (project / ".oharness" / "settings.json").write_text(json.dumps({"deny": ["write(sub/secret*)"]}))
    script = scenario(tmp_path / "s.json", [
        {"calls": [shell("mkdir sub && cd sub"), shell("pwd"), shell("echo x > secret.txt"),
                   shell("cd .. && echo x > secret.txt")]},
        {"text": "done"},
    ])
    session_dir = tmp_path / "session"
    run = oharness("-p", "go", "--mode", "bypass", "--script", script, "--cwd", str(project),
                   "--session-dir", str(session_dir), cwd=project)
    assert run.returncode == 0, run.stderr
    assert f"[working directory now {project / 'sub'}]" in run.stdout.replace("\n", "")
    assert not (project / "sub" / "secret.txt").exists()
    assert (project / "secret.txt").read_text() == "x\n"  # back in the root: not covered
    lines = [json.loads(l) for l in (session_dir / "decisions.jsonl").read_text().splitlines()]
    answers = {l["id"]: l["outcome"] for l in lines if l["kind"] == "answer"}
    outcome = {d["principal"]: answers[d["id"]] for d in lines if d["kind"] == "decision"}
    assert outcome["Bash(echo x > secret.txt)"] == "denied"
    assert outcome["Bash(cd .. && echo x > secret.txt)"] == "allowed"
    denied = next(d for d in lines if d.get("principal") == "Bash(echo x > secret.txt)")
    assert {"kind": "write", "path": str(project / "sub" / "secret.txt")}.items() <= denied["subjects"][1].items()
