"""The engine-backed gate in process: the permission rule “metaharness decisions on an oharness run” rows, asking through an injected
prompt (the permission rule “asking, answers, and "always allow"”), headless `unavailable` (the permission rule “nobody can answer → unavailable”), modes (the permission rule “choosing the mode”), the trail (the permission rule “the decision trail”) and the file
tools opening what was decided (the permission rule “path canonicalisation”)."""

from __future__ import annotations

import io
import json
import os

import pytest
from rich.console import Console

from metaharness.permissions import ExternalDecision
from oharness.model import ToolCall
from oharness.permission_gate import EngineGate, engine_gate_factory
from metaharness.permissions import trust_workspace
from metaharness.permissions.engine import BYPASS_NOTICE
from oharness.terminal import TerminalAsker
from oharness.tools import ToolContext, builtin_tools

SEED = {
    "allow": ["Bash(npm run test:*)", "mcp__github__get_*"],
    "ask": ["Bash(git push*)"],
    "deny": ["Bash(rm -rf *)", "write(.env*)"],
}


@pytest.fixture
def project(tmp_path, isolated_home):
    root = tmp_path / "proj"
    (root / ".oharness").mkdir(parents=True)
    (root / ".oharness" / "settings.json").write_text(json.dumps(SEED))
    (root / "build").mkdir()
    trust_workspace(str(root), str(isolated_home))
    return root


def make_gate(project, *, mode=None, asker=None, session_dir=None, trail=True, notes=None) -> EngineGate:
    factory = engine_gate_factory(asker=asker, notify=(notes.append if notes is not None else lambda text: None))
    return factory(mode=mode, cwd=str(project), session_dir=str(session_dir) if session_dir else None,
                   decision_trail=trail)


def bash(command, cid="c1", cwd=None, agent=None):
    return ToolCall(cid, "bash", {"command": command}, cwd, agent)


def trail_lines(session_dir):
    path = session_dir / "decisions.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


# -- the permission rule “metaharness decisions on an oharness run”, row by row ----------------------------------------------------------------------


async def test_metaharness_deny_is_a_deny_with_its_reason(project):
    gate = make_gate(project)
    result = await gate.check(bash("ls"), ExternalDecision("deny", decided_by="frame", reason="this step admits only file.read"))
    assert not result.allowed and result.reason == "this step admits only file.read"


async def test_abstain_leaves_oharness_alone_and_an_ask_is_unavailable(project):
    gate = make_gate(project)
    assert (await gate.check(bash("ls"), ExternalDecision("abstain", decided_by="adapter"))).allowed
    refused = await gate.check(bash("make"), ExternalDecision("abstain", decided_by="adapter"))
    assert not refused.allowed
    assert refused.reason == "`Bash(make)` needs approval (no-rule) and this run has nobody to ask; refused fail-closed"


@pytest.mark.parametrize("decider", ["frame", "observe", "policy"])
async def test_external_allow_grants_pending_but_never_skips_deny_gate_plan_or_forced_asks(project, decider):
    gate = make_gate(project)
    allow = ExternalDecision("allow", decided_by=decider)
    assert (await gate.check(bash("make"), allow)).allowed  # pending no-rule → granted
    denied = await gate.check(bash("rm -rf build"), allow)
    assert not denied.allowed and "Bash(rm -rf *)" in denied.reason and "project scope" in denied.reason
    env = await gate.check(ToolCall("w", "write", {"path": ".env", "content": "x"}, str(project), None), allow)
    assert not env.allowed and "write(.env*)" in env.reason
    push = await gate.check(bash("git push origin main"), allow)  # forced ask (ask-rule) → unavailable
    assert not push.allowed and "nobody to ask" in push.reason and "ask-rule" in push.reason
    gate_refusal = await gate.check(ToolCall("w", "write", {"path": "/etc/oharness-test", "content": "x"},
                                             str(project), None), allow)
    assert not gate_refusal.allowed and "workspaceMode workspace-write" in gate_refusal.reason
    gate.set_mode("plan")
    plan = await gate.check(ToolCall("w", "write", {"path": "a.txt", "content": "x"}, str(project), None), allow)
    assert not plan.allowed and plan.reason.startswith("plan mode refuses changes")


async def test_embedder_allow_answers_an_ask_once_but_cannot_reopen_a_deny(project, tmp_path):
    session = tmp_path / "s"
    gate = make_gate(project, session_dir=session)
    embedder = ExternalDecision("allow", decided_by="embedder")
    assert (await gate.check(bash("git push", "p1"), embedder)).allowed
    assert not (await gate.check(bash("rm -rf build", "r1"), embedder)).allowed
    assert not (await gate.check(bash("git push", "p2"), ExternalDecision("allow", decided_by="frame"))).allowed
    gate.close()
    lines = trail_lines(session)
    push = [l for l in lines if l.get("call_id") == "p1"][0]
    answer = [l for l in lines if l["kind"] == "answer" and l["id"] == push["id"]][0]
    assert push["behavior"] == "ask" and push["reason"] == "ask-rule" and push["decided_by"] == "embedder"
    assert answer["outcome"] == "allowed" and answer["by"] == "embedder" and answer["remembered"] is None
    rm = [l for l in lines if l.get("call_id") == "r1"][0]
    assert rm["behavior"] == "deny" and rm["rule"] == "Bash(rm -rf *)" and rm["scope"] == "project"


async def test_replace_is_decided_again_from_step_zero(project):
    gate = make_gate(project)
    bad = await gate.check(bash("ls"), ExternalDecision("replace", decided_by="embedder", replacement={"command": "rm -rf build"}))
    assert not bad.allowed and "Bash(rm -rf *)" in bad.reason
    good = await gate.check(bash("rm -rf build"), ExternalDecision("replace", decided_by="embedder", replacement={"command": "ls -la"}))
    assert good.allowed and good.input == {"command": "ls -la"}


# -- asking a person -------------------------------------------------------------------------


class Answers:
    """An injected prompt function: answers in order, and records what was shown."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.asked = []

    def __call__(self, text, choices, default):
        self.asked.append((text, choices, default))
        return self.answers.pop(0)


def asker_with(*answers):
    out = io.StringIO()
    prompt = Answers(*answers)
    return TerminalAsker(Console(file=out, width=200, highlight=False), prompt), prompt, out


async def test_allow_once_runs_the_call_and_writes_nothing(project, tmp_path):
    asker, prompt, out = asker_with("1")
    session = tmp_path / "s"
    gate = make_gate(project, asker=asker, session_dir=session)
    assert (await gate.check(bash("make"), None)).allowed
    assert not (project / ".oharness" / "settings.local.json").exists()
    shown = out.getvalue()
    assert "Bash(make)" in shown and "no-rule" in shown and "mode manual" in shown
    assert "always allow Bash(make) in this checkout" in shown
    assert prompt.asked[0][1] == ["1", "2", "3", "4", "5"] and prompt.asked[0][2] == "2"
    gate.close()
    decision, answer = trail_lines(session)
    assert decision["kind"] == "decision" and decision["behavior"] == "ask" and answer["id"] == decision["id"]
    assert answer["outcome"] == "allowed" and answer["by"] == "user" and answer["remembered"] is None


@pytest.mark.parametrize(("choice", "scope"), [("2", "local"), ("3", "project"), ("4", "user")])
async def test_always_allow_writes_the_most_specific_rule_to_the_chosen_scope(project, isolated_home, tmp_path,
                                                                             choice, scope):
    asker, prompt, _ = asker_with(choice)
    session = tmp_path / "s"
    gate = make_gate(project, asker=asker, session_dir=session)
    assert (await gate.check(bash("npm test"), None)).allowed
    files = {"local": project / ".oharness" / "settings.local.json",
             "project": project / ".oharness" / "settings.json", "user": isolated_home / ".oharness" / "settings.json"}
    written = json.loads(files[scope].read_text())
    allow = written["permissions"]["allow"] if "permissions" in written else written["allow"]
    assert "Bash(npm test)" in allow and not any(r in allow for r in ("Bash(*)", "Bash(npm *)", "Bash(npm test*)"))
    # The rule holds at once, in memory: the same call passes without a question; a wider one still asks.
    assert (await gate.check(bash("npm test", "c2"), None)).allowed and len(prompt.asked) == 1
    prompt.answers.append("5"), prompt.answers.append("")
    assert not (await gate.check(bash("npm test --coverage", "c3"), None)).allowed
    gate.close()
    answers = [l for l in trail_lines(session) if l["kind"] == "answer"]
    assert answers[0]["remembered"] == "Bash(npm test)"
    if scope == "project":  # writing a project rule keeps the workspace trusted (the permission rule “workspace trust”)
        from metaharness.permissions import load_settings

        assert load_settings(str(project), home=str(isolated_home)).trusted


async def test_deny_with_a_note_reaches_the_model_and_the_trail(project, tmp_path):
    asker, _, _ = asker_with("5", "use the Makefile target instead")
    session = tmp_path / "s"
    gate = make_gate(project, asker=asker, session_dir=session)
    result = await gate.check(bash("make"), None)
    assert not result.allowed and "denied by the user" in result.reason and "Makefile target" in result.reason
    gate.close()
    answer = trail_lines(session)[1]
    assert answer["outcome"] == "denied" and answer["by"] == "user" and answer["note"] == "use the Makefile target instead"


async def test_the_question_names_the_rule_and_offers_no_always_for_a_forced_ask(project):
    asker, prompt, out = asker_with("1")
    gate = make_gate(project, asker=asker)
    assert (await gate.check(bash("git push origin main"), None)).allowed
    shown = out.getvalue()
    assert "ask-rule" in shown and "Bash(git push*)" in shown and "project" in shown
    assert "always allow: not offered" in shown and prompt.asked[0][1] == ["1", "2"]


async def test_interrupt_at_the_prompt_is_a_deny(project, tmp_path):
    def interrupted(question):
        raise KeyboardInterrupt

    session = tmp_path / "s"
    gate = make_gate(project, asker=interrupted, session_dir=session)
    assert not (await gate.check(bash("make"), None)).allowed
    gate.close()
    assert trail_lines(session)[1]["note"] == "interrupted"


async def test_nothing_asks_for_a_deny_or_a_plain_read(project):
    def never(question):
        raise AssertionError("asked")

    gate = make_gate(project, asker=never)
    assert not (await gate.check(bash("rm -rf build"), None)).allowed
    assert (await gate.check(bash("git status"), None)).allowed


# -- headless --------------------------------------------------------------------------------


async def test_headless_ask_is_unavailable_and_recorded(project, tmp_path):
    session = tmp_path / "s"
    gate = make_gate(project, session_dir=session)
    refused = await gate.check(bash("git push"), None)
    assert not refused.allowed and "nobody to ask" in refused.reason
    gate.close()
    decision, answer = trail_lines(session)
    assert decision["principal"] == "Bash(git push)" and decision["behavior"] == "ask"
    assert answer["outcome"] == "unavailable" and answer["by"] == "none"


# -- modes -----------------------------------------------------------------------------------


def test_mode_precedence_command_line_local_project_user(project, isolated_home):
    (isolated_home / ".oharness").mkdir(exist_ok=True)
    (isolated_home / ".oharness" / "settings.json").write_text(json.dumps({"permissions": {"defaultMode": "auto"}}))
    assert make_gate(project).mode == "auto"  # user
    (project / ".oharness" / "settings.json").write_text(json.dumps({**SEED, "defaultMode": "plan"}))
    assert make_gate(project).mode == "plan"  # project beats user
    (project / ".oharness" / "settings.local.json").write_text(json.dumps({"permissions": {"defaultMode": "accept-edits"}}))
    assert make_gate(project).mode == "accept-edits"  # local beats project
    assert make_gate(project, mode="manual").mode == "manual"  # the command line beats everything


def test_project_auto_and_bypass_are_ignored_with_a_warning(project):
    (project / ".oharness" / "settings.json").write_text(json.dumps({**SEED, "defaultMode": "bypass"}))
    notes = []
    assert make_gate(project, notes=notes).mode == "manual"
    assert any("defaultMode 'bypass' is not accepted from project scope" in n for n in notes)


def test_disable_bypass_refuses_an_explicit_bypass_naming_the_file(project):
    (project / ".oharness" / "settings.json").write_text(json.dumps({**SEED, "disableBypassMode": True}))
    with pytest.raises(ValueError, match=r"disableBypassMode in .*\.oharness/settings\.json"):
        make_gate(project, mode="bypass")
    gate = make_gate(project)
    with pytest.raises(ValueError, match="disableBypassMode"):
        gate.set_mode("bypass")
    assert gate.mode == "manual"


def test_settings_errors_refuse_the_start_naming_file_and_rule(project):
    (project / ".oharness" / "settings.json").write_text(json.dumps({"deny": ["Bash(rm -rf *"]}))
    with pytest.raises(ValueError, match=r"settings\.json: deny rule 'Bash\(rm -rf \*'"):
        make_gate(project)
    (project / ".oharness" / "settings.json").write_text(json.dumps({"hooks": {}}))
    with pytest.raises(ValueError, match=r"settings\.json: has a 'hooks' key"):
        make_gate(project)


async def test_set_mode_applies_from_the_next_call_and_bypass_prints_the_notice(project):
    notes = []
    gate = make_gate(project, notes=notes)
    write = ToolCall("w", "write", {"path": "a.txt", "content": "x"}, str(project), None)
    assert not (await gate.check(write, None)).allowed
    gate.set_mode("accept-edits")
    assert (await gate.check(write, None)).allowed
    assert not (await gate.check(bash("make"), None)).allowed
    gate.set_mode("bypass")
    assert BYPASS_NOTICE in notes
    assert (await gate.check(bash("make"), None)).allowed
    assert not (await gate.check(bash("rm -rf build"), None)).allowed  # deny holds in bypass
    with pytest.raises(ValueError, match="unknown permission mode"):
        gate.set_mode("yolo")


def test_starting_in_bypass_prints_the_notice(project):
    notes = []
    make_gate(project, mode="bypass", notes=notes)
    assert notes[-1] == BYPASS_NOTICE and notes.count(BYPASS_NOTICE) == 1


# -- the trail -------------------------------------------------------------------------------


async def test_trail_pairs_every_decision_and_can_be_turned_off(project, tmp_path):
    session = tmp_path / "s"
    gate = make_gate(project, session_dir=session)
    for n, command in enumerate(["ls", "rm -rf build", "make"]):
        await gate.check(bash(command, f"c{n}"), None)
    gate.close()
    lines = trail_lines(session)
    assert [l["kind"] for l in lines] == ["decision", "answer"] * 3
    for decision, answer in zip(lines[::2], lines[1::2]):
        assert decision["id"] == answer["id"] and decision["id"].startswith("dec_")
    assert [a["outcome"] for a in lines[1::2]] == ["allowed", "denied", "unavailable"]
    assert oct(os.stat(session / "decisions.jsonl").st_mode & 0o777) == "0o600"

    off = tmp_path / "off"
    gate = make_gate(project, session_dir=off, trail=False)
    await gate.check(bash("ls"), None)
    gate.close()
    assert not (off / "decisions.jsonl").exists()


async def test_a_trail_that_cannot_be_written_changes_no_verdict(project, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    gate = make_gate(project, session_dir=blocker / "sub")  # a directory under a file: every write fails
    assert (await gate.check(bash("ls"), None)).allowed
    assert not (await gate.check(bash("rm -rf build"), None)).allowed
    gate.close()


# -- tools honour the engine -----------------------------------------------------------------


async def test_grep_skips_what_a_read_deny_rule_covers(project):
    (project / ".oharness" / "settings.json").write_text(json.dumps({"deny": ["Read(.env)"]}))
    (project / ".env").write_text("KEY=secret\n")
    (project / "a.txt").write_text("KEY=public\n")
    gate = make_gate(project)
    ctx = ToolContext(cwd=str(project))
    tools = builtin_tools()
    gate.attach(ctx, tools)
    grep = next(t for t in tools if t.name == "grep")
    assert (await gate.check(ToolCall("g", "grep", {"pattern": "KEY", "path": "."}, str(project), None), None)).allowed
    out = await grep.call({"pattern": "KEY", "path": "."}, ctx)
    assert "public" in out.content and "secret" not in out.content and "skipped" in out.content


async def test_a_file_swapped_for_a_symlink_after_the_decision_is_not_written(project, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    target = project / "a.txt"
    target.write_text("old")
    gate = make_gate(project, mode="accept-edits")
    ctx = ToolContext(cwd=str(project))
    tools = builtin_tools()
    gate.attach(ctx, tools)
    write = next(t for t in tools if t.name == "write")
    call = ToolCall("w", "write", {"path": "a.txt", "content": "new"}, str(project), None)
    assert (await gate.check(call, None)).allowed
    target.unlink()
    target.symlink_to(outside)  # the swap, between the decision and the use
    out = await write.call({"path": "a.txt", "content": "new"}, ctx)
    assert out.is_error and "changed between the decision and its use" in out.content
    assert outside.read_text() == "keep"


# -- the interactive front end, with the prompt answered by the test ----------------------------


async def test_interactive_print_session_asks_and_remembers(project, tmp_path):
    from oharness.cli import _run_prompt

    script = tmp_path / "s.json"
    script.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": [
        {"calls": [{"op": "shell", "input": {"command": "touch made.txt"}},
                   {"op": "shell", "input": {"command": "touch made.txt"}},
                   {"op": "shell", "input": {"command": "touch other.txt"}}]},
        {"text": "done"},
    ]}))
    out = io.StringIO()
    prompt = Answers("2", "5", "no thanks")  # always allow (local) the first; deny the third
    code = await _run_prompt("go", "scripted:default", str(script), str(project), None,
                             session_dir=str(tmp_path / "session"), ask=prompt,
                             console=Console(file=out, width=200, highlight=False))
    assert code == 0
    assert (project / "made.txt").exists() and not (project / "other.txt").exists()
    local = json.loads((project / ".oharness" / "settings.local.json").read_text())
    assert local["permissions"]["allow"] == ["Bash(touch made.txt)"]
    assert len([a for a in prompt.asked if a[0] == "choose"]) == 2  # the second call needed no question
    assert "denied by the user: no thanks" in out.getvalue()
    lines = trail_lines(tmp_path / "session")
    assert [l["kind"] for l in lines] == ["decision", "answer"] * 3
    assert [l.get("remembered") for l in lines[1::2]] == ["Bash(touch made.txt)", None, None]


@pytest.mark.parametrize("answer", ["y", "n"])
async def test_interactive_first_start_offers_trust_and_only_yes_grants_it(tmp_path, isolated_home, answer):
    from oharness.cli import _run_prompt
    from metaharness.permissions import load_settings

    root = tmp_path / "cloned"
    (root / ".oharness").mkdir(parents=True)
    (root / ".oharness" / "settings.json").write_text(json.dumps({"allow": ["Bash(touch made.txt)"]}))
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": [
        {"calls": [{"op": "shell", "input": {"command": "touch made.txt"}}]}, {"text": "done"}]}))
    out = io.StringIO()
    prompt = Answers(answer, "5", "")  # the trust question; then, if the call asks, deny it (option 5)
    code = await _run_prompt("go", "scripted:default", str(script), str(root), None,
                             session_dir=str(tmp_path / "session"), ask=prompt,
                             console=Console(file=out, width=200, highlight=False))
    assert code == 0
    assert prompt.asked[0][0] == "trust this workspace?"
    assert "allow Bash(touch made.txt)" in out.getvalue()  # what trust would turn on is shown
    trusted = load_settings(str(root), home=str(isolated_home)).trusted
    assert trusted == (answer == "y") and (root / "made.txt").exists() == (answer == "y")
    assert len(prompt.asked) == (1 if answer == "y" else 3)  # trusted: the allow rule answers the call


async def test_no_trust_question_when_trust_would_turn_nothing_on(project, tmp_path):
    from oharness.cli import _run_prompt

    (project / ".oharness" / "settings.json").write_text(json.dumps({"deny": ["Bash(rm -rf *)"]}))
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": [{"text": "hi"}]}))
    prompt = Answers()
    code = await _run_prompt("go", "scripted:default", str(script), str(project), None,
                             session_dir=str(tmp_path / "session"), ask=prompt,
                             console=Console(file=io.StringIO(), width=200, highlight=False))
    assert code == 0 and prompt.asked == []


async def test_an_engine_failure_refuses_the_call(monkeypatch, tmp_path):
    """A seam that fails must fail closed: an exception inside decide() is a refusal, not a crash or a run."""
    import oharness.permission_gate as pg
    from oharness.model import ToolCall
    from oharness.session import default_gate

    gate = default_gate(mode="bypass", cwd=str(tmp_path), session_dir=None, decision_trail=False)

    def broken(*args, **kwargs):
        raise RuntimeError("tree-sitter is missing")

    monkeypatch.setattr(pg, "decide", broken)
    result = await gate.check(ToolCall(id="c1", name="bash", input={"command": "ls"}), None)
    assert result.allowed is False and "refused fail-closed" in result.reason


@pytest.mark.parametrize("replacement", [None, "rm -rf build", ["rm", "-rf", "build"]])
async def test_a_replacement_that_is_not_an_object_is_never_the_original_call(project, replacement):
    """The engine decides the replacement, never the call it replaced: one that is not an
    object names no command, and the tool is handed it as delivered (and refuses it)."""
    gate = make_gate(project, mode="bypassPermissions")
    result = await gate.check(bash("ls"), ExternalDecision("replace", decided_by="embedder", replacement=replacement))
    assert not result.allowed and result.input == replacement
    assert result.reason.startswith("`Bash()` needs approval (opaque)"), result.reason
