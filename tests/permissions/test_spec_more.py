"""The permission test cases that need more than one decision: settings, scopes, trust,
persistence, subagents, the trail, policy mode, oharness under metaharness."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import threading
import time

import pytest

from permissions_rules import R
from metaharness.permissions import (
    ExternalDecision, TrailWriter, decide, load_settings, notation_call, parse_rule, policy_answer,
    policy_decision, remember_rule, settle, vendor_call,
)
from metaharness.permissions.engine import subagent_context
from metaharness.permissions.paths import PathChanged, canonical, open_decided
from metaharness.permissions.persist import PersistError


def test_10_ask_beats_narrower_allow(world):
    s = world.setup(local={"allow": ["Bash(git push origin main)"]})
    v = world.decide("Bash(git push origin main)", world.ctx(s))
    assert (v.behavior, v.reason) == ("ask", "ask-rule")


def test_16_mcp_glob_allow_is_invalid(world):
    s = world.setup(user={"allow": ["mcp__*"]})
    assert s.ok and any("mcp__*" in str(w) for w in s.warnings)
    v = world.decide("mcp__slack__post_message", world.ctx(s))
    assert (v.behavior, v.reason) == ("ask", "no-rule")


def test_18_compound_allow_rule_is_invalid(world):
    s = world.setup(project={"allow": ["Bash(npm test && npm run lint)"]})
    assert s.ok and any("npm test && npm run lint" in str(w) for w in s.warnings)
    assert world.decide("Bash(npm test)", world.ctx(s)).reason == "no-rule"


def test_21_param_spec(world):
    s = world.setup(project={"deny": ["mcp__github__create_issue(repo:acme/*)"]})
    ctx = world.ctx(s)
    v = world.decide("mcp__github__create_issue", ctx) if False else decide(
        notation_call("mcp__github__create_issue", world.root, '{"repo":"acme/site"}'), ctx)
    assert (v.behavior, v.reason) == ("deny", "deny-rule")
    v = decide(notation_call("mcp__github__create_issue", world.root, '{"repo":"other/x"}'), ctx)
    assert (v.behavior, v.reason) == ("ask", "no-rule")


def test_27_plan_mcp_read_only_hint(world):
    ctx = world.ctx(mode="plan")
    v = decide(notation_call("mcp__github__get_issue", world.root, '{"readOnlyHint": true}'), ctx)
    assert (v.behavior, v.reason) == ("allow", "allow-rule")
    v = decide(notation_call("mcp__github__get_issue", world.root), ctx)
    assert (v.behavior, v.reason) == ("deny", "plan-mode")


def test_48_headless_trail(world, tmp_path):
    ctx = world.ctx(can_ask=False)
    v = world.decide("Bash(make)", ctx)
    assert (v.behavior, v.reason) == ("ask", "no-rule")
    st = settle(v, can_ask=False)
    assert (st.outcome, st.by) == ("unavailable", "none")
    trail = TrailWriter(str(tmp_path / "decisions.jsonl"))
    trail.record(v, settlement=st)
    trail.close()
    d, a = [json.loads(l) for l in (tmp_path / "decisions.jsonl").read_text().splitlines()]
    assert d["kind"] == "decision" and d["behavior"] == "ask" and d["principal"] == "Bash(make)"
    assert a == {**a, "kind": "answer", "id": d["id"], "outcome": "unavailable", "remembered": None, "by": "none"}


def test_49_disable_bypass(world):
    world.setup(project={**R, "disableBypassMode": True})
    s = world.load(cli_mode="bypass")
    assert s.bypass_refused and world.path("project") in s.bypass_refused


def test_50_51_default_mode_sources(world):
    world.setup(project={**R, "defaultMode": "bypass"})
    s = world.load()
    assert s.mode == "manual" and any("bypass" in str(w) for w in s.warnings)
    world.setup(local={"defaultMode": "auto"})
    assert world.load().mode == "auto"
    world.setup(project={**R, "defaultMode": "auto"})
    assert world.load().mode == "manual"


def test_54_untrusted_project(world):
    s = world.setup(project={**R, "allow": ["Bash(make)"]}, trusted=False)
    ctx = world.ctx(s)
    assert world.decide("Bash(make)", ctx).reason == "no-rule"
    assert world.decide("Bash(rm -rf x)", ctx).behavior == "deny"
    assert not ctx.trusted and world.decide("Bash(git status)", ctx).reason == "no-rule"  # git not read-only untrusted


def test_55_no_reload_and_trust_invalidated(world):
    s = world.setup()
    ctx = world.ctx(s)
    world.write_settings("project", {"allow": ["Bash(*)"], "deny": []})
    assert world.decide("Bash(curl https://x.example)", ctx).reason == "no-rule"
    assert world.decide("Bash(rm -rf build)", ctx).reason == "deny-rule"
    s2 = world.load()
    assert not s2.trusted
    assert world.decide("Bash(curl https://x.example)", world.ctx(s2)).reason == "no-rule"


def test_56_remember_npm_test(world, tmp_path):
    ctx = world.ctx()
    v = world.decide("Bash(npm test)", ctx)
    assert v.behavior == "ask" and v.remember["local"] == "Bash(npm test)"
    remember_rule(world.path("local"), v.remember["local"], scope="local", project_root=world.root, home=world.home)
    data = json.loads(open(world.path("local")).read())
    assert data["permissions"]["allow"] == ["Bash(npm test)"]
    trail = TrailWriter(str(tmp_path / "d.jsonl"))
    did = trail.record(v)
    trail.answer(did, "allowed", "user", remembered=v.remember["local"])
    trail.close()
    d, a = [json.loads(l) for l in (tmp_path / "d.jsonl").read_text().splitlines()]
    assert (d["tool"], d["behavior"], d["principal"]) == ("bash", "ask", "Bash(npm test)")
    assert (a["id"], a["outcome"], a["remembered"]) == (d["id"], "allowed", "Bash(npm test)")
    ctx2 = world.ctx()
    assert world.decide("Bash(npm test)", ctx2).behavior == "allow"
    assert world.decide("Bash(npm test --coverage)", ctx2).behavior == "ask"
    assert world.decide("Bash(npm install)", ctx2).behavior == "ask"
    # the git info/exclude keeps the local file out of git
    r = subprocess.run(["git", "check-ignore", "-q", ".oharness/settings.local.json"], cwd=world.root)
    assert r.returncode == 0


def test_57_remember_mcp_tool(world):
    v = world.decide("mcp__github__create_issue", world.ctx())
    assert v.remember["local"] == "mcp__github__create_issue"
    remember_rule(world.path("local"), v.remember["local"], scope="local", project_root=world.root, home=world.home)
    ctx = world.ctx()
    assert world.decide("mcp__github__create_issue", ctx).behavior == "allow"
    assert world.decide("mcp__github__delete_repo", ctx).behavior == "ask"
    assert world.decide("mcp__slack__post_message", ctx).behavior == "ask"


def test_58_remember_escapes_globs(world):
    v = world.decide("Write(src/[id].tsx)", world.ctx())
    assert v.remember["local"] == "Write(/src/\\[id\\].tsx)"
    remember_rule(world.path("local"), v.remember["local"], scope="local", project_root=world.root, home=world.home)
    ctx = world.ctx()
    assert world.decide("Write(src/[id].tsx)", ctx).behavior == "allow"
    assert world.decide("Write(src/i.tsx)", ctx).behavior == "ask"


def test_59_60_remember_offers(world):
    ctx = world.ctx()
    v = world.decide("Bash(git status && npm test)", ctx)
    assert (v.behavior, v.reason, v.remember["local"]) == ("ask", "no-rule", "Bash(npm test)")
    v = world.decide("Bash(npm test && npm run lint)", ctx)
    assert v.behavior == "ask" and v.remember is None


def test_61_quoted_star_stays_literal(world):
    v = world.decide("Bash(./scripts/gen.sh '*.py')", world.ctx())
    assert v.remember["local"] == "Bash(./scripts/gen.sh '*.py')"
    remember_rule(world.path("local"), v.remember["local"], scope="local", project_root=world.root, home=world.home)
    ctx = world.ctx()
    assert world.decide("Bash(./scripts/gen.sh '*.py')", ctx).behavior == "allow"
    assert world.decide("Bash(./scripts/gen.sh other.py)", ctx).behavior == "ask"


def test_63_tracked_local_file_is_project_scope(world):
    world.setup(trusted=False)
    world.write_settings("local", {"allow": ["Bash(*)"]})
    subprocess.run(["git", "add", "-f", ".oharness/settings.local.json"], cwd=world.root, check=True)
    try:
        s = world.load()
        assert world.decide("Bash(make)", world.ctx(s)).reason == "no-rule"
        listed = [r for r in s.listed if r.text == "Bash(*)"]
        assert listed and listed[0].scope == "project" and listed[0].status == "ignored (workspace not trusted)"
    finally:
        subprocess.run(["git", "rm", "-q", "--cached", ".oharness/settings.local.json"], cwd=world.root, check=True)


def _remember_worker(path, rule, root, home):
    remember_rule(path, rule, scope="local", project_root=root, home=home)


def test_64_concurrent_remember(world):
    world.write_settings("local", {"permissions": {"defaultMode": "manual", "allow": []}, "zeta": 1})
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_remember_worker, args=(world.path("local"), f"Bash(task {i})", world.root, world.home))
             for i in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(20)
    data = json.loads(open(world.path("local")).read())
    assert sorted(data["permissions"]["allow"]) == sorted(f"Bash(task {i})" for i in range(6))
    assert data["zeta"] == 1 and list(data) == ["permissions", "zeta"]


def test_64b_unparsable_target_is_not_written(world):
    world.write_settings("local", "{not json")
    with pytest.raises(PersistError):
        remember_rule(world.path("local"), "Bash(npm test)", scope="local", project_root=world.root, home=world.home)
    assert open(world.path("local")).read() == "{not json"


def test_65_local_syntax_error_refuses(world):
    world.setup()
    world.write_settings("local", '{"allow": ["Bash(ls)",]}')
    s = world.load()
    assert not s.ok
    assert s.errors[0].file == world.path("local") and "line 1 column" in s.errors[0].message


def test_74_grep_tool_engine_part(world):
    s = world.setup(project={"deny": ["Read(.env)"]})
    v = decide(notation_call("Grep(.)", world.root), world.ctx(s))
    assert (v.behavior, v.reason) == ("allow", "read-only")
    # Vendor Grep cannot be made to skip denied paths: it is a recursive reader (the permission rule “vendor tool mapping”).
    v = decide(vendor_call("Grep", {"pattern": "KEY", "path": "."}, world.root), world.ctx(s))
    assert (v.behavior, v.reason) == ("ask", "maybe-deny")


def test_81_subagent(world):
    parent = world.ctx()
    child = subagent_context(parent, child_mode="bypass", child_allow=[parse_rule("Bash(*)", "allow")])
    assert child.mode == "manual"
    assert world.decide("Bash(rm -rf build)", child).behavior == "deny"
    assert world.decide("Bash(make)", child).reason == "no-rule"
    # intersection: the parent's allow still needs the child's allow too
    narrow = subagent_context(parent, child_allow=[parse_rule("Bash(ls)", "allow")])
    assert world.decide("Bash(npm run test)", narrow).reason == "no-rule"
    assert world.decide("Bash(npm run test)", parent).reason == "allow-rule"


def test_82_87_trail_pairs(world, tmp_path):
    ctx = world.ctx()
    path = tmp_path / "s" / "decisions.jsonl"
    trail = TrailWriter(str(path))
    trail.record(world.decide("Bash(ls)", ctx))
    trail.record(world.decide("Bash(rm -rf build)", ctx), call_id="toolu_1")
    trail.record(world.decide("Bash(make)", ctx))  # an ask left unanswered: the process "stopped"
    trail.close()
    lines = [json.loads(l) for l in path.read_text().splitlines()]
    assert [l["kind"] for l in lines] == ["decision", "answer", "decision", "answer", "decision"]
    assert lines[0]["behavior"] == "allow" and lines[1]["outcome"] == "allowed" and lines[1]["remembered"] is None
    d = lines[2]
    assert (d["behavior"], d["principal"], d["reason"], d["rule"], d["scope"]) == (
        "deny", "Bash(rm -rf build)", "deny-rule", "Bash(rm -rf *)", "project")
    assert lines[3]["outcome"] == "denied" and lines[3]["by"] == "rule"
    assert lines[4]["principal"] == "Bash(make)"
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"


def test_83_trail_never_blocks(world, caplog):
    release = threading.Event()
    calls = []

    def blocking_write(fd, data):
        calls.append(data)
        release.wait(5)
        raise OSError(13, "Permission denied")

    clock = [0.0]
    trail = TrailWriter("/nonexistent-dir-for-trail/decisions.jsonl", write=blocking_write, clock=lambda: clock[0])
    ctx = world.ctx()
    v1 = world.decide("Bash(rm -rf build)", ctx)
    for _ in range(5):
        trail.record(v1)  # returns while the writer is blocked
    assert not release.is_set()
    v2 = world.decide("Bash(rm -rf build)", ctx)
    assert (v2.behavior, v2.reason) == (v1.behavior, v1.reason)
    release.set()
    trail.close()
    warnings = [r for r in caplog.records if "decision trail" in r.getMessage()]
    assert len(warnings) == 1


def test_85_trail_switch(world):
    world.setup(user={"permissions": {"decisionTrail": False}})
    assert world.load().trail_enabled is False
    world.setup(project={**R, "decisionTrail": False})
    s = world.load()
    assert s.trail_enabled is True and any("decisionTrail" in str(w) for w in s.warnings)
    assert world.load(no_trail=True).trail_enabled is False


def test_86_no_upload_path():
    import metaharness.permissions as p
    src = "".join(open(os.path.join(os.path.dirname(p.__file__), f)).read()
                  for f in os.listdir(os.path.dirname(p.__file__)) if f.endswith(".py"))
    for needle in ("import httpx", "urllib.request", "import requests", "import socket", "shutil.copy"):
        assert needle not in src


def test_152_file_changed_between_decision_and_open(world):
    c = canonical("src/a.py", world.root)
    os.replace(os.path.join(world.root, "src", "a.py"), os.path.join(world.root, "src", "a.py.bak"))
    os.symlink(os.path.join(world.root, ".env"), os.path.join(world.root, "src", "a.py"))
    before = open(os.path.join(world.root, ".env")).read()
    try:
        with pytest.raises((PathChanged, OSError)):
            open_decided(c, os.O_WRONLY | os.O_TRUNC)
        assert open(os.path.join(world.root, ".env")).read() == before
    finally:
        os.unlink(os.path.join(world.root, "src", "a.py"))
        os.replace(os.path.join(world.root, "src", "a.py.bak"), os.path.join(world.root, "src", "a.py"))


# I. Policy decision mode (the engine side; the wire is metaharness's).

def _pol(world, tool, inp, *, mode="manual", policy_ask="none", deny_only=False, frame=None, s=None):
    ctx = (s and world.ctx(s, mode=mode)) or world.ctx(mode=mode, can_ask=policy_ask == "embedder")
    v = decide(vendor_call(tool, world_sub(world, inp), world.root), ctx)
    return v, policy_decision(v, policy_ask=policy_ask, deny_only=deny_only, frame_deny_reason=frame), ctx


def world_sub(world, inp):
    return json.loads(world.sub(json.dumps(inp)))


def test_155_to_160(world):
    v, d, _ = _pol(world, "Bash", {"command": "git status && rm -rf build"})
    assert d.decision == "deny" and d.decided_by == "policy"
    assert d.reason.startswith(f"denied by deny rule `Bash(rm -rf *)` (project scope, {world.path('project')})")
    assert "`rm -rf build` in this call matches it" in d.reason
    assert _pol(world, "Bash", {"command": "rm -rf build"})[1].decision == "deny"
    assert _pol(world, "shell", {"command": ["bash", "-lc", "rm -rf build"]})[1].decision == "deny"
    patch = "*** Begin Patch\n*** Update File: .env\n@@\n-a\n+b\n*** End Patch"
    v, d, _ = _pol(world, "apply_patch", {"command": patch})
    assert d.decision == "deny" and v.rule == "write(.env*)"
    assert _pol(world, "Edit", {"file_path": "/w/proj/.env.production"})[1].decision == "deny"
    assert _pol(world, "Read", {"file_path": "/w/proj/src/a.py"})[1].decision == "allow"
    assert _pol(world, "Read", {"file_path": "/w/proj/src/a.py"}, deny_only=True)[1].decision == "abstain"


def test_161_164_ask_paths(world):
    v, d, ctx = _pol(world, "Bash", {"command": "make"})
    assert d.decision == "deny" and d.outcome == "unavailable"
    assert d.reason == "`Bash(make)` needs approval (no-rule) and this run has nobody to ask; refused fail-closed"
    v, d, ctx = _pol(world, "Bash", {"command": "make"}, policy_ask="embedder")
    assert d.decision == "forward"
    assert list(d.policy) == ["behavior", "reason", "rule", "scope", "principal"]
    assert policy_answer(v, ExternalDecision("allow"), ctx).decided_by == "embedder"
    assert policy_answer(v, ExternalDecision("abstain"), ctx).decision == "deny"
    late = policy_answer(v, None, ctx)
    assert (late.decision, late.decided_by, late.outcome, late.by) == ("deny", "deadline", "denied", "deadline")
    rep = policy_answer(v, ExternalDecision("replace", replacement={"command": "rm -rf build"}), ctx)
    assert rep.decision == "deny"
    # 163: a denied call is never forwarded
    v, d, _ = _pol(world, "Bash", {"command": "rm -rf build"}, policy_ask="embedder")
    assert d.decision == "deny" and d.policy is None


def test_165_to_170(world):
    assert _pol(world, "Frobnicate", {})[1].decision == "deny"
    assert _pol(world, "Frobnicate", {}, mode="bypass")[1].decision == "allow"
    s = world.setup(project={**R, "deny": R["deny"] + ["WebFetch(domain:evil.example)"]})
    assert _pol(world, "WebFetch", {"url": "https://evil.example/"}, s=s)[1].decision == "deny"
    world.setup()
    assert _pol(world, "mcp__github__get_issue", {})[1].decision == "allow"
    assert _pol(world, "mcp__github__create_issue", {})[1].outcome == "unavailable"
    # 168: with a frame admitting only file reads
    assert _pol(world, "Bash", {"command": "rm -rf build"}, frame="frame: not a file read")[1].decided_by == "policy"
    assert _pol(world, "Bash", {"command": "ls"}, frame="frame: not a file read")[1].decided_by == "frame"
    # 169: an unparsable patch
    v, d, _ = _pol(world, "apply_patch", {"command": "garbage"})
    assert (v.behavior, v.reason, d.decision) == ("ask", "opaque", "deny")
    # 170: the boundary-only setup
    for cmd, want in (("git push", "abstain"), ("make", "abstain"), ("rm -rf build", "deny")):
        assert _pol(world, "Bash", {"command": cmd}, mode="bypass", deny_only=True)[1].decision == want, cmd
    v, d, _ = _pol(world, "Bash", {"command": 'eval "$X"'}, mode="bypass", deny_only=True)
    assert d.decision == "deny" and "cannot be read fully" in d.reason and "refused in bypass mode" in d.reason
    assert _pol(world, "Write", {"file_path": "/w/proj/.oharness/settings.json"}, mode="bypass", deny_only=True)[1].decision == "deny"


def test_177_178_under_metaharness(world):
    ctx = world.ctx(can_ask=False)
    observe = ExternalDecision("allow", decided_by="observe")
    v = world.decide("Bash(rm -rf build)", ctx, observe)
    assert (v.behavior, v.reason) == ("deny", "deny-rule")
    v = world.decide("Bash(git push)", ctx, observe)
    assert (v.behavior, v.reason) == ("ask", "ask-rule")
    assert settle(v, can_ask=False, external=observe).outcome == "unavailable"
    emb = ExternalDecision("allow", decided_by="embedder")
    v = world.decide("Bash(git push)", ctx, emb)
    st = settle(v, can_ask=False, external=emb)
    assert (st.outcome, st.by) == ("allowed", "embedder")
    v = world.decide("Bash(rm -rf build)", ctx, emb)
    assert (v.behavior, v.reason) == ("deny", "deny-rule")
    # an external allow grants pending subjects only
    v = world.decide("Bash(make)", ctx, ExternalDecision("allow", decided_by="frame"))
    assert (v.behavior, v.reason) == ("allow", "hook-allow")
    v = world.decide("Bash(make)", ctx, ExternalDecision("deny", decided_by="frame", reason="no"))
    assert (v.behavior, v.reason) == ("deny", "hook-deny")


def test_always_allow_in_memory_and_on_disk(world):
    from metaharness.permissions import always_allow
    ctx = world.ctx()
    v = world.decide("Bash(npm test)", ctx)
    assert always_allow(ctx, v, "project") == "Bash(npm test)"
    assert world.decide("Bash(npm test)", ctx).behavior == "allow"  # in memory at once
    s = world.load()
    assert s.trusted  # writing project scope updated the trust hash in the same lock
    assert world.decide("Bash(npm test)", world.ctx(s)).reason == "allow-rule"


def test_policy_file_with_hooks_refused(world, tmp_path):
    f = tmp_path / "policy.json"
    f.write_text('{"hooks": {}, "deny": ["Bash(rm -rf *)"]}')
    s = load_settings(world.root, home=world.home, policy_files=[str(f)], scopes=False)
    assert not s.ok and "hooks" in str(s.errors[0])
    f.write_text('{"deny": ["Bash(make *)"]}')
    s = load_settings(world.root, home=world.home, policy_files=[str(f)], scopes=False)
    assert s.ok and [r.scope for r in s.rules.deny][-1] == "file"
    assert decide(vendor_call("Bash", {"command": "make all"}, world.root), s.context()).scope == "file"
