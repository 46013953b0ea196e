"""The permission test cases 155–170: `--decisions policy` at the wire, with vendor tool names.

The fixture is the permission test cases': a trusted project `…/w/proj` whose project settings are R, HOME `…/home/u`.
Calls are presented by a fake harness of the named kind, exactly as the real adapters present them.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import pytest

from metaharness.adapters.base import Tool
from metaharness.run.spec import RunSpec
from metaharness.permissions import trust_workspace

from .conftest import make_frame
from .fake import Call, FakeAdapter, Turn, cmd, drive

R = {
    "allow": ["Bash(npm run test:*)", "mcp__github__get_*"],
    "ask": ["Bash(git push*)"],
    "deny": ["Bash(rm -rf *)", "write(.env*)"],
}
VENDOR_OPS = {"Bash": "shell", "Read": "file.read", "Write": "file.write", "Edit": "file.edit",
              "shell": "shell", "apply_patch": "file.edit"}


@pytest.fixture
def proj(monkeypatch):
    base = tempfile.mkdtemp(prefix="mh-policy-", dir="/var/tmp")  # outside /tmp, which is always writable
    root, home = os.path.join(base, "w", "proj"), os.path.join(base, "home", "u")
    for d in (os.path.join(root, "src"), os.path.join(root, "build"), os.path.join(root, ".git"), home):
        os.makedirs(d)
    open(os.path.join(root, ".env"), "w").close()
    open(os.path.join(root, "src", "a.py"), "w").close()
    os.makedirs(os.path.join(root, ".oharness"))
    with open(os.path.join(root, ".oharness", "settings.json"), "w") as f:
        json.dump(R, f)
    monkeypatch.setenv("HOME", home)
    trust_workspace(root, home)
    yield root
    shutil.rmtree(base, ignore_errors=True)
    shutil.rmtree(base, ignore_errors=True)


class VendorFake(FakeAdapter):
    tools = {name: Tool(op) for name, op in VENDOR_OPS.items()}  # an operation each, no subject


def spec(root, kind="claude", **kw) -> RunSpec:
    return RunSpec(kind=kind, prompt="go", decisions="policy", cwd=root, retain_dir=os.path.join(root, "..", "rec"),
                   **kw)


async def one(root, name, input, *, kind="claude", on_event=None, **kw):
    s = spec(root, kind, **kw)
    events, code, adapter, *_ = await drive(s, VendorFake(s, [Turn([Call(name, input, seam="hook")])]),
                                            on_event=on_event)
    decided = [e for e in events if e["event"] == "tool.decided"]
    return decided[0] if decided else None, events


async def test_155_compound_command_denied_naming_rule_and_scope(proj):
    d, _ = await one(proj, "Bash", {"command": "git status && rm -rf build"})
    assert d["decision"]["decision"] == "deny" and d["decided_by"] == "policy"
    settings = os.path.join(os.path.realpath(proj), ".oharness", "settings.json")
    assert d["decision"]["reason"].startswith(f"denied by deny rule `Bash(rm -rf *)` (project scope, {settings})")


@pytest.mark.parametrize("kind,name,input", [
    ("codex", "Bash", {"command": "rm -rf build"}),                                  # 156
    ("codex", "shell", {"command": ["bash", "-lc", "rm -rf build"]}),               # 157
    ("codex", "apply_patch", {"command": "*** Begin Patch\n*** Update File: .env\n@@\n-a\n+b\n*** End Patch"}),  # 158
    ("claude", "Edit", {"file_path": "{root}/.env.production", "old_string": "a", "new_string": "b"}),  # 159
])
async def test_156_to_159_denied(proj, kind, name, input):
    input = json.loads(json.dumps(input).replace("{root}", proj))
    d, _ = await one(proj, name, input, kind=kind)
    assert d["decision"]["decision"] == "deny" and d["decision"]["reason"].strip()


async def test_160_read_allowed_and_abstained_under_deny_only(proj):
    read = {"file_path": os.path.join(proj, "src", "a.py")}
    assert (await one(proj, "Read", read))[0]["decision"] == {"decision": "allow"}
    assert (await one(proj, "Read", read, deny_only=True))[0]["decision"] == {"decision": "abstain"}


async def test_161_unavailable_with_trail(proj):
    d, _ = await one(proj, "Bash", {"command": "make"}, policy_mode="manual")
    assert d["decision"]["decision"] == "deny" and "nobody to ask" in d["decision"]["reason"]
    trail = [json.loads(l) for l in open(os.path.join(proj, "..", "rec", "decisions.jsonl"))]
    assert trail[-1]["kind"] == "answer" and trail[-1]["outcome"] == "unavailable"


@pytest.mark.parametrize("answer,expected,decider", [
    ({"decision": "allow"}, "allow", "embedder"),
    ({"decision": "abstain"}, "deny", "embedder"),
    (None, "deny", "deadline"),
])
async def test_162_forwarded_ask(proj, answer, expected, decider):
    def embedder(run, event):
        if event["event"] == "tool.requested" and answer is not None:
            run.feed_line(cmd("tool.decide", id="d", call_id=event["call_id"], decision=answer))

    d, events = await one(proj, "Bash", {"command": "make"}, policy_mode="manual", policy_ask="embedder",
                          decision_timeout_ms=100, on_event=embedder)
    requested = [e for e in events if e["event"] == "tool.requested"][0]
    assert requested["decision_required"] is True and requested["policy"]["behavior"] == "ask"
    assert d["decision"]["decision"] == expected and d["decided_by"] == decider
    if decider == "deadline":
        trail = [json.loads(l) for l in open(os.path.join(proj, "..", "rec", "decisions.jsonl"))]
        assert trail[-1]["outcome"] == "denied" and trail[-1]["by"] == "deadline"


async def test_163_denied_call_is_never_forwarded(proj):
    def embedder(run, event):
        if event["event"] == "tool.decided":
            run.feed_line(cmd("tool.decide", id="late", call_id=event["call_id"], decision={"decision": "allow"}))

    d, events = await one(proj, "Bash", {"command": "rm -rf build"}, policy_ask="embedder", on_event=embedder)
    assert [e for e in events if e["event"] == "tool.requested"][0]["decision_required"] is False
    late = [e for e in events if e["event"] == "command.result"][0]
    assert late["outcome"]["refused"]["code"] == "TOO_LATE"


async def test_164_replacement_must_be_allowed_on_its_own(proj):
    def embedder(run, event):
        if event["event"] == "tool.requested":
            run.feed_line(cmd("tool.decide", id="r", call_id=event["call_id"],
                              decision={"decision": "replace", "input": {"command": "rm -rf build"}}))

    d, _ = await one(proj, "Bash", {"command": "make"}, policy_mode="manual", policy_ask="embedder",
                     on_event=embedder)
    assert d["decision"]["decision"] == "deny"


async def test_165_unknown_vendor_tool(proj):
    assert (await one(proj, "Frobnicate", {}, policy_mode="manual"))[0]["decision"]["decision"] == "deny"
    assert (await one(proj, "Frobnicate", {}, policy_mode="bypass"))[0]["decision"] == {"decision": "allow"}


async def test_166_webfetch_domain_deny(proj):
    with open(os.path.join(proj, ".oharness", "settings.json"), "w") as f:
        json.dump({**R, "deny": R["deny"] + ["WebFetch(domain:evil.example)"]}, f)
    d, _ = await one(proj, "WebFetch", {"url": "https://evil.example/"})
    assert d["decision"]["decision"] == "deny"


async def test_167_mcp_names(proj):
    assert (await one(proj, "mcp__github__get_issue", {}))[0]["decision"] == {"decision": "allow"}
    d, _ = await one(proj, "mcp__github__create_issue", {}, policy_mode="manual")
    assert d["decision"]["decision"] == "deny" and "nobody to ask" in d["decision"]["reason"]


async def test_168_policy_then_frame(proj, tmp_path):
    from metaharness.protocol import frame as frames

    path = tmp_path / "f.json"
    path.write_bytes(frames.document_bytes(frames.seal(make_frame([{"op": "file.read"}]))))
    s = spec(proj, frame=str(path))
    calls = [Call("Bash", {"command": "rm -rf build"}), Call("Bash", {"command": "ls"}),
             Call("Read", {"file_path": os.path.join(proj, "src", "a.py")})]
    events, *_ = await drive(s, VendorFake(s, [Turn(calls)]))
    decided = [(e["decision"]["decision"], e["decided_by"]) for e in events if e["event"] == "tool.decided"]
    assert decided == [("deny", "policy"), ("deny", "frame"), ("allow", "policy")]


async def test_168_bypass_refused_where_disabled(proj):
    with open(os.path.join(proj, ".oharness", "settings.local.json"), "w") as f:
        json.dump({"permissions": {"disableBypassMode": True}}, f)
    s = spec(proj, policy_mode="bypass")
    events, code, _, _, stderr = await drive(s, VendorFake(s, [Turn([])]))
    assert code == 2 and [e["event"] for e in events] == ["stream.closed"]


async def test_169_unparsable_patch_is_unavailable(proj):
    d, _ = await one(proj, "apply_patch", {"command": "not a patch"}, kind="codex", policy_mode="manual")
    assert d["decision"]["decision"] == "deny" and "nobody to ask" in d["decision"]["reason"]


@pytest.mark.parametrize("name,input,expected", [
    ("Bash", {"command": "git push"}, "abstain"),
    ("Bash", {"command": "make"}, "abstain"),
    ("Bash", {"command": "rm -rf build"}, "deny"),
    ("Bash", {"command": 'eval "$X"'}, "deny"),
    ("Write", {"file_path": "{root}/.oharness/settings.json", "content": "{}"}, "deny"),
])
async def test_170_boundary_only_setup(proj, name, input, expected):
    input = json.loads(json.dumps(input).replace("{root}", proj))
    d, _ = await one(proj, name, input, policy_mode="bypass", deny_only=True)
    assert d["decision"]["decision"] == expected
    if input.get("command") == 'eval "$X"':
        assert "cannot be read fully" in d["decision"]["reason"]
