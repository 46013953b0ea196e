"""The reason catalogue (permissions/reasons.py) is the one list of reason codes.

Every code the engine gives — a verdict's reason or a subject's — is catalogued, and every
catalogued code is given by some call unless it is marked reserved; the codes the engine's
modules spell out are all catalogued; the precedence derived from the catalogue is the
specification's; and the two renderers (the prompt's ask words, the model's refusal words) speak
each code's own words from the table.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

from metaharness.permissions import Context, ExternalDecision, RuleSet, decide, oharness_call, reasons
from metaharness.permissions import decision, grants
from metaharness.permissions.reasons import CATALOGUE, FORCED_ORDER, GRANT_ORDER, ask_words, reason_of, refusal_words

# (call, mode, workspace mode, external decision, the code it must give)
CASES = [
    ("Bash(" + "x" * 100_001 + ")", "bypass", None, None, "too-large"),
    ("Bash(rm -rf build)", "manual", None, None, "deny-rule"),
    ("Write(/etc/hosts)", "manual", None, None, "workspace-gate"),
    ("Bash(npm run test)", "manual", "read-only", None, "workspace-gate"),
    ("Write(src/a.py)", "plan", None, None, "plan-mode"),
    ("Bash(make)", "manual", None, ExternalDecision("deny", decided_by="embedder", reason="no"), "hook-deny"),
    ("Bash(frobnicate --all)", "bypass", None, None, "bypass"),
    ("Bash(git push origin main)", "manual", None, None, "ask-rule"),
    ("Bash({r,}m -rf build)", "manual", None, None, "maybe-deny"),
    ("Bash({r,}m -rf build)", "bypass", None, None, "maybe-deny"),
    ("Write(.git/config)", "manual", None, None, "protected-path"),
    ("Read(keys/id_rsa)", "manual", None, None, "secret-path"),
    ("Bash(find . -delete)", "manual", None, None, "critical-removal"),
    ("Bash(make)", "manual", None, ExternalDecision("allow", decided_by="policy"), "hook-allow"),
    ("Bash(npm run test)", "manual", None, None, "allow-rule"),
    ("Bash(cargo test)", "auto", None, None, "auto-routine"),
    ("Write(src/new.py)", "accept-edits", None, None, "edit-grant"),
    ("Bash(ls -la src)", "manual", None, None, "read-only"),
    ("TodoWrite", "plan", None, None, "inert"),
    ("Bash(sudo apt-get install jq)", "auto", None, None, "auto-risky"),
    ("Bash(frobnicate --all)", "auto", None, None, "auto-unknown"),
    ("Bash(make)", "manual", None, None, "no-rule"),
    ("Bash(git checkout feature)", "manual", None, None, "deny-only"),
]
# Calls that no `Tool(argument)` spelling reaches: an input the engine cannot read.
UNREADABLE = [("manual", "opaque", "ask"), ("bypass", "opaque", "deny")]
# With the built-in deny rules in force a write of unknown target may match `Write(/.oharness)`
# and asks as `maybe-deny` first; `dynamic-write` shows in a context without them.
DYNAMIC_WRITE = "echo x > $F"


def _codes(verdict) -> set[str]:
    return {verdict.reason.split(":", 1)[0]} | {subject.reason.split(":", 1)[0] for subject in verdict.subjects}


def _verdicts(world):
    for text, mode, workspace_mode, external, code in CASES:
        yield text, code, world.decide(text, world.ctx(mode=mode, ws=workspace_mode), external)
    for mode, code, _ in UNREADABLE:
        yield "read {}", code, decide(oharness_call("read", {}, world.root), world.ctx(mode=mode))
    bare = Context(rules=RuleSet(), project_root=world.root, home=world.home, mode="manual")
    yield DYNAMIC_WRITE, "dynamic-write", decide(oharness_call("bash", {"command": DYNAMIC_WRITE}, world.root), bare)


def test_every_code_given_is_catalogued_and_every_catalogued_code_is_given(world):
    given: set[str] = set()
    for text, code, verdict in _verdicts(world):
        codes = _codes(verdict)
        assert code in codes, (text, verdict.to_json())
        assert codes <= set(CATALOGUE), (text, codes - set(CATALOGUE))
        assert verdict.behavior in CATALOGUE[verdict.reason.split(":", 1)[0]].behaviors, (text, verdict.reason)
        given |= codes
    reserved = {code for code, reason in CATALOGUE.items() if reason.reserved}
    assert reserved == {"hook-ask", "hook-error"}  # settings-file hooks are not in this version
    assert given == set(CATALOGUE) - reserved


def _spelled_codes() -> set[str]:
    """Every reason code the deciding modules spell: a subject's `mark(result, CODE, rule)`, a
    verdict's `verdict_of(behavior, CODE, …)`, a grant `(CODE, rule)`, a forced ask
    `forced.append((CODE, …))`, and `reason = CODE` (an f-string: its family)."""
    found: set[str] = set()

    def literal(node) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.JoinedStr) and isinstance(node.values[0], ast.Constant):
            return node.values[0].value.split(":", 1)[0]
        if isinstance(node, ast.IfExp):
            return literal(node.body)  # and orelse, below
        return None

    def add(node) -> None:
        if isinstance(node, ast.IfExp):
            add(node.body)
            add(node.orelse)
            return
        code = literal(node)
        if code is not None:
            found.add(code)

    for module in (decision, grants):
        # The source beside the module: a compiled module (setup.py) is a C extension, which
        # `inspect` cannot read; the build keeps the .py it was made from next to it.
        source = pathlib.Path(module.__file__).with_name(module.__name__.rsplit(".", 1)[-1] + ".py").read_text()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
                if name in ("mark", "verdict_of") and len(node.args) >= 2:
                    add(node.args[1])
                if name == "append" and node.args and isinstance(node.args[0], ast.Tuple):
                    add(node.args[0].elts[0])
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                target, value = node.targets[0].id, node.value
                if target == "grant" and isinstance(value, ast.Tuple):
                    add(value.elts[0])
                if target == "grant" and isinstance(value, ast.IfExp):
                    for branch in (value.body, value.orelse):
                        if isinstance(branch, ast.Tuple):
                            add(branch.elts[0])
                if target == "reason":
                    add(value)
    return found


def test_every_code_the_engine_spells_is_catalogued():
    spelled = _spelled_codes() - {decision._POSSIBLE_ASK}
    assert len(spelled) >= 20, spelled  # the walk finds the codes (it cannot pass by finding none)
    assert spelled <= set(CATALOGUE), spelled - set(CATALOGUE)


def test_precedence_is_the_specifications():
    assert FORCED_ORDER == ("ask-rule", "maybe-deny", "protected-path", "secret-path", "critical-removal",
                            "dynamic-write", "opaque")
    assert GRANT_ORDER == ("allow-rule", "auto-routine", "edit-grant", "read-only", "inert")
    assert [code for code, reason in CATALOGUE.items() if reason.step is not None and reason.step <= 4] == [
        "too-large", "deny-rule", "workspace-gate", "plan-mode", "hook-deny"]
    assert CATALOGUE["maybe-deny"].rank < reasons.POSSIBLE_ASK_RANK < CATALOGUE["protected-path"].rank
    assert reason_of("auto-risky:sudo") is CATALOGUE["auto-risky"] and reason_of("no-such-code") is None


def test_renderers_speak_each_codes_own_words(world):
    """A code with ask words is shown in them, a code with refusal words is refused in them; a
    forced ask says why it cannot be remembered."""
    for text, code, verdict in _verdicts(world):
        entry = CATALOGUE[code]
        for subject in verdict.subjects:
            if subject.reason.split(":", 1)[0] == code and entry.ask_words is not None:
                words = ask_words(subject)
                fixed = entry.ask_words.split("{")[0] or entry.ask_words.split("}")[-1]
                assert fixed in words and "{" not in words.replace(subject.label, ""), (text, words)
        if verdict.behavior == "deny" and verdict.reason == code:
            words = refusal_words(verdict)
            assert not words.startswith("denied ("), (text, words)
            assert "None" not in words, (text, words)
        if verdict.behavior == "ask":
            assert refusal_words(verdict).endswith("and this run has nobody to ask; refused fail-closed")
            if verdict.reason in FORCED_ORDER:
                assert verdict.remember_why_not == CATALOGUE[verdict.reason].not_remembered


@pytest.mark.parametrize("code", [code for code, reason in CATALOGUE.items() if reason.refusal_words])
def test_refusal_codes_are_deny_codes(code):
    assert "deny" in CATALOGUE[code].behaviors and CATALOGUE[code].decided_by is not None
