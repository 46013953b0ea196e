"""The permission test cases for the CLI (cases 171-176) and `permissions trust`, through click's CliRunner on the group itself."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner

from permissions_rules import R
from oharness.cli_permissions import permissions


def run(world, *args):
    return CliRunner().invoke(permissions, [*args, "--cwd", world.root], catch_exceptions=False)


def snapshot(world):
    out = {}
    for d in (os.path.join(world.root, ".oharness"), os.path.join(world.home, ".oharness")):
        for dirpath, _, files in os.walk(d):
            for f in files:
                p = os.path.join(dirpath, f)
                out[p] = (os.stat(p).st_mtime_ns, open(p, "rb").read())
    return out


def test_171_explain_compound_deny(world):
    r = run(world, "explain", "Bash(git status && rm -rf build)")
    assert r.exit_code == 4
    assert "verdict:   deny" in r.output
    assert "Bash(rm -rf *)" in r.output and "project" in r.output
    assert os.path.join(world.root, ".oharness", "settings.json") in r.output
    lines = [l for l in r.output.splitlines() if l.strip().startswith(("1 ", "2 "))]
    assert "git status" in lines[0] and "allow" in lines[0] and "read-only" in lines[0]
    assert "rm -rf build" in lines[1] and "deny" in lines[1]


def test_171_json(world):
    r = run(world, "explain", "Bash(git status && rm -rf build)", "--json")
    data = json.loads(r.output)
    assert r.exit_code == 4
    assert data["verdict"] == "deny" and data["rule"] == "Bash(rm -rf *)" and data["scope"] == "project"
    assert data["reason"] == "deny-rule"
    assert [s["words"] for s in data["subjects"] if s["kind"] == "cmd"] == [["git", "status"], ["rm", "-rf", "build"]]


def test_172_ask_rule(world):
    r = run(world, "explain", "Bash(git push)", "--mode", "manual")
    assert r.exit_code == 3
    assert "reason:    ask-rule" in r.output
    assert "if nobody can answer: unavailable → refused" in r.output
    assert "always allow: not offered (explicit ask rule)" in r.output
    r = run(world, "explain", "Bash(git push)", "--mode", "bypass")
    assert r.exit_code == 0 and "reason:    bypass" in r.output


def test_173_gate(world):
    r = run(world, "explain", "Write(/etc/hosts)", "--workspace-mode", "workspace-write")
    assert r.exit_code == 4 and "workspace-gate" in r.output
    r = run(world, "explain", "Write(/etc/hosts)", "--workspace-mode", "full-access")
    assert r.exit_code == 3


def test_174_usage_error(world):
    r = run(world, "explain", "Bash(npm test")
    assert r.exit_code == 2
    assert "Traceback" not in r.output
    r = run(world, "explain", "Bash(ls)", "--mode", "turbo")
    assert r.exit_code == 2


def test_175_remember_preview_writes_nothing(world):
    before = snapshot(world)
    r = run(world, "explain", "Bash(npm test)")
    assert r.exit_code == 3
    assert "always allow would write: Bash(npm test) → .oharness/settings.local.json" in r.output
    assert snapshot(world) == before
    assert not os.path.exists(os.path.join(world.root, ".oharness", "settings.local.json"))
    assert not os.path.exists(os.path.join(world.root, "decisions.jsonl"))


def test_176_list_untrusted_and_invalid(world):
    world.setup(project={**R, "allow": ["Bash(make)"]}, trusted=False)
    r = run(world, "list")
    assert r.exit_code == 0, r.output
    assert any("Bash(make)" in l and "ignored (workspace not trusted)" in l for l in r.output.splitlines())
    world.setup(project={"deny": ["Bash(rm -rf *"]})
    r = run(world, "list")
    assert r.exit_code == 1
    assert "Bash(rm -rf *" in r.output and "error:" in r.output


def test_list_shows_builtins_in_order(world):
    r = run(world, "list")
    lines = [l.split() for l in r.output.splitlines() if l.startswith(("deny", "ask", "allow"))]
    assert lines[0][:3] == ["deny", "Write(/.oharness)", "builtin"]
    assert lines[1][:3] == ["deny", "Write(~/.oharness)", "builtin"]
    assert lines[2][:4] == ["deny", "Bash(rm", "-r", "/)"]
    assert lines[3][:4] == ["deny", "Bash(rm", "-f", "/)"]
    builtin_paths = [l[3].rstrip(")") for l in lines if l[-1] == "builtin" and l[1] == "Bash(rm"]
    assert world.home in builtin_paths and world.root in builtin_paths
    assert [l[0] for l in lines] == sorted([l[0] for l in lines], key=["deny", "ask", "allow"].index)


def test_17_invalid_deny_refuses_and_list_exits_1(world):
    world.setup(project={"deny": ["Bash(rm -rf *"]})
    s = world.load()
    assert not s.ok
    err = s.errors[0]
    assert err.file.endswith(".oharness/settings.json") and err.list == "deny" and err.rule == "Bash(rm -rf *"
    r = run(world, "explain", "Bash(ls)")
    assert r.exit_code == 1 and "Bash(rm -rf *" in r.output


def test_76_hooks_refused(world):
    for scope in ("project", "user", "local"):
        world.clear_settings()
        world.write_settings(scope, {"hooks": {"PreToolUse": []}, "deny": ["Bash(rm -rf *)"]})
        s = world.load()
        assert not s.ok and "hooks" in str(s.errors[0]) and s.errors[0].file == world.path(scope)
        r = run(world, "list")
        assert r.exit_code == 1 and "hooks" in r.output


def test_trust_and_revoke(world):
    world.setup(project={**R, "allow": ["Bash(make)"]}, trusted=False)
    assert not world.load().trusted
    r = CliRunner().invoke(permissions, ["trust", "--cwd", world.root], input="y\n")
    assert r.exit_code == 0 and "Bash(make)" in r.output
    assert world.load().trusted
    r = run(world, "trust", "--revoke")
    assert r.exit_code == 0
    assert not world.load().trusted
    r = CliRunner().invoke(permissions, ["trust", "--cwd", world.root], input="n\n")
    assert r.exit_code == 1 and not world.load().trusted
