"""The memoised analysis and the per-command answers kept on it (subjects.analysis_of,
index.strongest_match, grants) decide exactly what a decision from nothing decides: a property
test over the property suite's calls, modes and extra rules, and the filesystem facts an answer
read (a built-in rm rule resolving a symlink) are read again on the next decision."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings, strategies as st

from metaharness.permissions import Context, RuleSet, decide, notation_call, parse_rule
from metaharness.permissions.engine import MODES, builtin_rules
from metaharness.permissions.subjects import analysis_of
from test_properties import DENY_POOL, _ctx, _decide, _prep, calls

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


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
