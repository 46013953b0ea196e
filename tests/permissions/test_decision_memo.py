"""The memoised analysis and the per-command answers kept on it (subjects.analysis_of,
index.strongest_match, grants) and the kept decision (decision.decide) decide exactly what a
decision from nothing decides: a property test over the property suite's calls, modes and extra
rules, and the filesystem facts a decision read (a symlink, a directory's entries) are read again
on the next decision, like a change to the context's mode and rules."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings, strategies as st
from examples import examples

from metaharness.permissions import Context, RuleSet, decide, notation_call, parse_rule
from metaharness.permissions.engine import MODES, builtin_rules
from metaharness.permissions.subjects import analysis_of
from test_properties import DENY_POOL, _ctx, _decide, _prep, calls

SETTINGS = settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck))


def _fresh(world, call, mode, ws, rules=None):
    """A decision from nothing: no analysis kept, a new context (so new rule indexes)."""
    analysis_of.cache_clear()
    return _decide(world, call, _ctx(world, mode, ws, rules)).to_json()


@SETTINGS
@given(call=calls, others=st.lists(calls, max_size=4), extra=st.sampled_from(DENY_POOL),
       behavior=st.sampled_from(["deny", "ask", "allow"]), mode=st.sampled_from(MODES),
       ws=st.sampled_from(["read-only", "workspace-write", "full-access"]))
def test_a_memoised_decision_is_the_decision_from_nothing(world_session, call, others, extra, behavior, mode, ws):
    _prep(world_session)
    expected = _fresh(world_session, call, mode, ws)
    ctx = _ctx(world_session, mode, ws)
    for other in [call, *others, call]:  # warm the memo with this call and others, in one context
        _decide(world_session, other, ctx)
    assert _decide(world_session, call, ctx).to_json() == expected
    # One more rule in the same context (its lists grow, the indexes are rebuilt): still the same
    # decision as one from nothing under the grown rules.
    if behavior == "allow" and extra in ("*", "mcp__*"):
        behavior = "ask"  # a tool-part glob is refused in an allow rule
    ctx.rules.add(parse_rule(extra, behavior, "local"))
    grown = _fresh(world_session, call, mode, ws, ctx.rules)
    assert _decide(world_session, call, ctx).to_json() == grown


def test_a_symlink_made_between_two_decisions_of_the_same_rm_is_seen(tmp_path):
    root, home = tmp_path / "proj", tmp_path / "home"
    root.mkdir()
    home.mkdir()
    ctx = Context(rules=RuleSet(), project_root=str(root), home=str(home), mode="bypass")
    for rule in builtin_rules(str(root), str(home)):
        ctx.rules.add(rule)
    call = notation_call("Bash(rm -rf h)", str(root))
    assert decide(call, ctx).behavior == "allow"  # nothing called h yet
    os.symlink(home, root / "h")
    again = decide(notation_call("Bash(rm -rf h)", str(root)), ctx)
    assert (again.behavior, again.reason) == ("deny", "deny-rule"), again.to_json()


def test_a_file_made_between_two_decisions_of_the_same_copy_is_seen(tmp_path):
    """A recursive copy writes every entry of its source tree; the analysis that walked the tree
    read the disk, so it is not kept: a second decision of the same command walks it anew."""
    root, home = tmp_path / "proj", tmp_path / "home"
    root.mkdir()
    home.mkdir()
    (root / "src").mkdir()
    (root / "out").mkdir()
    ctx = Context(rules=RuleSet(), project_root=str(root), home=str(home), mode="bypass")
    ctx.rules.add(parse_rule("Write(out/src/.env)", "deny", "local"))
    analysis_of.cache_clear()
    call = "Bash(cp -r src out)"
    assert decide(notation_call(call, str(root)), ctx).behavior == "allow"  # src holds no .env yet
    (root / "src" / ".env").write_text("x")  # now the same copy lands on out/src/.env
    again = decide(notation_call(call, str(root)), ctx)
    assert (again.behavior, again.reason) == ("deny", "deny-rule"), again.to_json()


# -- the kept decision (decision.decide): handed out again only while nothing it read changed ------------


def _bare(tmp_path, mode="bypass", *rules):
    root, home = tmp_path / "proj", tmp_path / "home"
    root.mkdir()
    home.mkdir()
    ctx = Context(rules=RuleSet(), project_root=str(root), home=str(home), mode=mode)
    for text, behavior in rules:
        ctx.rules.add(parse_rule(text, behavior, "local"))
    return root, ctx


def test_a_symlink_made_between_two_decisions_of_the_same_read_is_seen(tmp_path):
    root, ctx = _bare(tmp_path, "bypass", ("Read(/.env)", "deny"))
    (root / ".env").write_text("x")
    for text in ("Bash(cat link)", "Read(link)"):
        if (root / "link").is_symlink():
            (root / "link").unlink()
        assert decide(notation_call(text, str(root)), ctx).behavior == "allow"  # link names nothing yet
        assert decide(notation_call(text, str(root)), ctx).behavior == "allow"  # ... and is kept so
        os.symlink(root / ".env", root / "link")
        again = decide(notation_call(text, str(root)), ctx)
        assert (again.behavior, again.reason) == ("deny", "deny-rule"), (text, again.to_json())


def test_a_file_made_under_a_recursive_read_between_two_decisions_is_seen(tmp_path):
    """A recursive reader's walk for a denied entry read the disk: that decision is not kept."""
    root, ctx = _bare(tmp_path, "bypass", ("Read(/data/secret.txt)", "deny"))
    (root / "data").mkdir()
    call = "Bash(grep -r x data)"
    assert decide(notation_call(call, str(root)), ctx).behavior == "allow"
    (root / "data" / "secret.txt").write_text("x")
    again = decide(notation_call(call, str(root)), ctx)
    assert (again.behavior, again.reason) == ("deny", "maybe-deny"), again.to_json()


def test_a_mode_changed_in_the_context_between_two_decisions_is_seen(tmp_path):
    root, ctx = _bare(tmp_path, "bypass")
    call = "Bash(touch src/x)"
    assert decide(notation_call(call, str(root)), ctx).behavior == "allow"
    ctx.mode = "plan"
    again = decide(notation_call(call, str(root)), ctx)
    assert (again.behavior, again.reason) == ("deny", "plan-mode"), again.to_json()


def test_a_rule_added_to_the_context_between_two_decisions_is_seen(tmp_path):
    root, ctx = _bare(tmp_path, "bypass")
    call = "Bash(git push origin main)"
    assert decide(notation_call(call, str(root)), ctx).behavior == "allow"
    ctx.rules.add(parse_rule("Bash(git push*)", "deny", "local"))
    assert decide(notation_call(call, str(root)), ctx).reason == "deny-rule"


def test_a_kept_decision_is_handed_out_as_a_new_value(tmp_path):
    root, ctx = _bare(tmp_path, "manual", ("Bash(git push*)", "ask"))
    first = decide(notation_call("Bash(git status && git push)", str(root)), ctx)
    expected = first.to_json()
    first.replaced = True
    first.subjects.append(first.subjects[0])
    first.opaque_why.append("changed by a caller")
    call = notation_call("Bash(git status && git push)", str(root))
    again = decide(call, ctx)
    assert again.to_json() == expected and not again.replaced and not again.opaque_why
    assert again.call is call


def test_an_input_field_a_parameter_rule_reads_is_part_of_the_call(tmp_path):
    from metaharness.permissions import oharness_call

    root, ctx = _bare(tmp_path, "bypass", ("mcp__db__query(sql:*DROP*)", "deny"))
    for sql, behavior in (("select 1", "allow"), ("DROP TABLE users", "deny"), ("select 1", "allow"),
                          ("DROP TABLE users", "deny")):
        verdict = decide(oharness_call("mcp__db__query", {"sql": sql}, str(root)), ctx)
        assert verdict.behavior == behavior, (sql, verdict.to_json())


def test_the_key_holds_what_a_verdict_reads_of_the_input_and_no_more(tmp_path):
    from metaharness.permissions import oharness_call
    from metaharness.permissions.decision import KEPT_INPUT_LIMIT, _call_key

    root, ctx = _bare(tmp_path, "bypass", ("*(timeout:1*)", "deny"))

    def key(tool, fields):
        return _call_key(oharness_call(tool, fields, str(root)), ctx, None)

    assert key("bash", {"command": "ls", "timeout": 1}) != key("bash", {"command": "ls", "timeout": True})
    assert key("bash", {"command": "ls", "timeout": 1}) != key("bash", {"command": "ls", "timeout": "1"})
    assert key("bash", {"command": "ls", "description": "a"}) == key("bash", {"command": "ls", "description": "b"})
    assert key("bash", {"command": "ls", "timeout": [1]}) is None  # not hashable: not kept
    content = "x" * (KEPT_INPUT_LIMIT + 1)
    assert key("write", {"path": "a", "content": content}) == key("write", {"path": "a", "content": "y"})
    assert key("bash", {"command": "echo " + content}) is None  # too large to keep


def test_the_kept_decisions_are_bounded(tmp_path, monkeypatch):
    from metaharness.permissions import decision

    monkeypatch.setattr(decision, "DECISION_MEMO_SIZE", 2)
    root, ctx = _bare(tmp_path, "bypass")
    for text in ("Bash(ls a)", "Bash(ls b)", "Bash(ls c)"):
        decide(notation_call(text, str(root)), ctx)
    assert list(ctx._cache[decision._MEMO]) == [decision._call_key(notation_call(text, str(root)), ctx, None)
                                                for text in ("Bash(ls b)", "Bash(ls c)")]


def test_a_witness_sees_every_read_of_the_decision_and_of_one_inside_it(tmp_path):
    from metaharness.permissions.paths import Witness, canonical, unwitnessed_read

    with Witness() as outer:
        with Witness() as inner:
            canonical("a", str(tmp_path))
        assert inner.still_holds() and outer.still_holds() and outer.replayable
        os.symlink("/etc", tmp_path / "a")  # `a` now resolves elsewhere
        assert not outer.still_holds()
        with Witness():
            unwitnessed_read()
    assert ("a", str(tmp_path), None) in outer.reads and not outer.replayable
    canonical("b", str(tmp_path))  # no witness: nothing recorded
    assert ("b", str(tmp_path), None) not in outer.reads
