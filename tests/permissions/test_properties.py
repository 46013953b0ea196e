"""Hypothesis properties (the permission test cases): adding a deny rule never makes a verdict more
permissive; a compound command is never more permissive than its most restrictive part; modes
are monotone (case 47); remembering an approval never widens past the approved call."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings, strategies as st
from examples import examples

from permissions_rules import R
from metaharness.permissions import Context, RuleSet, decide, notation_call, parse_rule
from metaharness.permissions.engine import MODES

RANK = {"deny": 0, "ask": 1, "allow": 2}
SETTINGS = settings(max_examples=examples(150), deadline=None, suppress_health_check=list(HealthCheck))

SIMPLE = [
    "ls", "ls -la src", "git status", "git diff", "git push", "git push origin main", "npm test", "npm run test",
    "npm run lint", "cargo test", "make", "make clean", "rm build/x.o", "rm -rf build", "rm -rf .oharness",
    "mkdir -p src/util", "touch src/n.py", "cp build/app /tmp/app", "mv src/a.py src/b.py", "cat .env",
    "cat src/a.py", "echo hi", "echo hi > notes.txt", "echo x > .env", "echo x > /etc/hosts", "sudo ls",
    "kubectl get pods", "python -c 'print(1)'", "frobnicate --all", "curl https://x.example", "grep -r KEY src",
    "find . -name '*.py'", "find . -delete", "chmod -R 777 src", "tee out.txt", "git commit -m x", "pytest -q",
    "echo $HOME", "$CMD -rf build", "eval \"$X\"", "xargs rm", "env FOO=1 make", "timeout 5 make",
    "bash -c 'npm test'", "sh -c 'rm -rf build'", "cat ~/.ssh/id_rsa", "git -C /tmp push", "echo hi >> ~/.bashrc",
]
OPS = [" && ", " || ", "; ", " | "]
OTHER = ["Write(src/a.py)", "Write(.env)", "Write(/etc/hosts)", "Write(/tmp/x)", "Write(.git/config)",
         "Read(src/a.py)", "Read(~/.aws/credentials)", "Read(.env)", "WebFetch(https://docs.python.org/)",
         "WebFetch(ftp://x)", "mcp__github__get_issue", "mcp__github__create_issue", "mcp__slack__post",
         "Agent(reviewer)", "Frobnicate", "WebSearch(x)", "todo_write"]
DENY_POOL = ["Bash(make *)", "Bash(git *)", "Bash(npm *)", "Read(src/**)", "Write(src)", "Bash(echo *)",
             "Bash", "WebFetch", "mcp__github", "*", "Write(/tmp/**)", "Bash(cat *)", "Read(//etc/**)",
             "Bash(ls)", "mcp__*", "Agent", "Bash(rm *)", "Bash(*)", "Write(notes.txt)"]

commands = st.lists(st.sampled_from(SIMPLE), min_size=1, max_size=3).flatmap(
    lambda parts: st.lists(st.sampled_from(OPS), min_size=len(parts) - 1, max_size=len(parts) - 1).map(
        lambda ops: parts[0] + "".join(o + p for o, p in zip(ops, parts[1:]))))
calls = st.one_of(commands.map(lambda c: f"Bash({c})"), st.sampled_from(OTHER))


def _ctx(world, mode="manual", ws="workspace-write", rules=None) -> Context:
    s = world.load()
    base = s.context(mode=mode, workspace_mode=ws)
    if rules is not None:
        base.rules = rules
    return base


def _decide(world, text, ctx):
    return decide(notation_call(world.sub(text), world.root), ctx)


def _prep(world):
    os.environ["HOME"] = world.home
    world.setup(project={**R, "allow": R["allow"] + ["Bash(echo *)", "Write(/src/**)", "Bash(npm test)"]})


@SETTINGS
@given(call=calls, deny=st.sampled_from(DENY_POOL), mode=st.sampled_from(MODES),
       ws=st.sampled_from(["read-only", "workspace-write", "full-access"]))
def test_adding_a_deny_rule_never_widens(world_session, call, deny, mode, ws):
    _prep(world_session)
    ctx = _ctx(world_session, mode, ws)
    before = _decide(world_session, call, ctx)
    more = ctx.rules.copy_with(parse_rule(deny, "deny", "local"))
    after = _decide(world_session, call, _ctx(world_session, mode, ws, more))
    assert RANK[after.behavior] <= RANK[before.behavior], (call, deny, mode, before.to_json(), after.to_json())


@SETTINGS
@given(a=st.sampled_from(SIMPLE), b=st.sampled_from(SIMPLE), op=st.sampled_from(OPS), mode=st.sampled_from(MODES))
def test_compound_never_more_permissive_than_its_parts(world_session, a, b, op, mode):
    _prep(world_session)
    ctx = _ctx(world_session, mode)
    va, vb = _decide(world_session, f"Bash({a})", ctx), _decide(world_session, f"Bash({b})", ctx)
    vab = _decide(world_session, f"Bash({a}{op}{b})", ctx)
    assert RANK[vab.behavior] <= min(RANK[va.behavior], RANK[vb.behavior]), (a, op, b, mode, vab.to_json())


@SETTINGS
@given(call=calls, ws=st.sampled_from(["read-only", "workspace-write", "full-access"]))
def test_mode_monotonicity_case_47(world_session, call, ws):
    _prep(world_session)
    verdicts = {m: _decide(world_session, call, _ctx(world_session, m, ws)) for m in MODES}
    order = ["plan", "manual", "accept-edits", "auto", "bypass"]
    allowed = [verdicts[m].behavior == "allow" for m in order]
    # once allowed without asking in a mode, allowed in every more permissive mode
    for i in range(len(order) - 1):
        assert not allowed[i] or allowed[i + 1], (call, ws, {m: verdicts[m].to_json() for m in order})
    hard = {m: (verdicts[m].reason if verdicts[m].reason in ("deny-rule", "workspace-gate", "too-large") else None)
            for m in order}
    assert len(set(hard.values())) == 1, (call, ws, hard)


@SETTINGS
@given(first=commands, second=commands, mode=st.sampled_from(["manual", "accept-edits", "auto"]))
def test_remembering_never_widens(world_session, first, second, mode):
    _prep(world_session)
    ctx = _ctx(world_session, mode)
    v1 = _decide(world_session, f"Bash({first})", ctx)
    if v1.behavior != "ask" or not v1.remember:
        return
    rule = parse_rule(v1.remember["local"], "allow", "local")
    if rule.shell is not None:
        assert rule.shell.exact  # never a wildcard
    else:
        import re
        assert not re.search(r"(?<!\\)[*?\[]", rule.path)
    wider = _ctx(world_session, mode, rules=ctx.rules.copy_with(rule))
    assert _decide(world_session, f"Bash({first})", wider).behavior in ("allow", "ask")
    for other in (second, first + " --extra", first.replace(" ", "  x ", 1)):
        before = _decide(world_session, f"Bash({other})", ctx)
        after = _decide(world_session, f"Bash({other})", wider)
        if after.behavior == "allow" and before.behavior != "allow":
            remembered = v1.remember["local"]
            granted = [s for s in after.subjects if s.rule == remembered]
            approved = [(s.kind, s.words, s.path) for s in v1.subjects]
            assert all((s.kind, s.words, s.path) in approved for s in granted), (first, other, remembered, after.to_json())


shell_text = st.text(alphabet=st.sampled_from(list("abrmf -;|&()$`'\"\\\n\r{}<>*?[]~=#!.,/0123456789xyz\t")), max_size=60)


@settings(max_examples=examples(400), deadline=None, suppress_health_check=list(HealthCheck))
@given(text=shell_text, mode=st.sampled_from(MODES))
def test_any_text_decides_without_error(world_session, text, mode):
    _prep(world_session)
    v = decide(notation_call("Bash(x)", world_session.root).__class__(
        "bash", "Bash", {"command": text}, command=text, cwd=world_session.root), _ctx(world_session, mode))
    assert v.behavior in ("allow", "ask", "deny")
    if "rm -rf build" in text.replace("\\\n", "") and v.behavior == "allow":
        # only possible when the words are not a command (quoted, commented out, a heredoc body …)
        assert mode != "bypass" or any(q in text for q in ("'", '"', "#", "<<", "\\"))
