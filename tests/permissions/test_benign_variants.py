"""No new false refusals (issue "deny holds", deliverable 5): a few hundred benign commands — reads
and routine commands in lists, pipelines, groups, substitutions, here-documents and transparent
wrappers — stay allowed under deny rules (R, plus `Read(.env)`, `Read(~/.ssh/**)` and `Bash(git
push*)` as deny) in Manual and Bypass, and routine ones in Auto; `npm run test:unit` stays
allowed under a matching allow rule."""

from __future__ import annotations

import pytest

from permissions_rules import R

RULES = {"allow": R["allow"] + ["Bash(npm run test:unit)", "Bash(make test)"],
         "deny": R["deny"] + ["Read(.env)", "Read(~/.ssh/**)", "Bash(git push*)"]}

READS = [
    "ls", "ls -la src", "cat src/a.py", "head -n 3 src/a.py", "tail -n 2 src/a.py", "wc -l src/a.py", "grep -n x src/a.py",
    "grep -rn x src", "git status", "git log --oneline -5", "git diff", "git diff --stat", "git show HEAD", "git branch -a",
    "find src -name '*.py'", "echo hello", "printf '%s\\n' a b", "pwd", "stat src/a.py", "du -sh src", "sort src/a.py",
    "uniq src/a.py", "cut -c1-3 src/a.py", "tr a b < src/a.py", "basename src/a.py", "dirname src/a.py", "date", "id",
    "whoami", "uname -a", "which git", "type ls", "diff src/a.py src/a.py", "file src/a.py", "jq . package.json",
    "tree src", "true", "test -f src/a.py", "[ -d src ]", "realpath src", "echo 'rm is a program'",
    "git log --grep='git push'", "grep -r TODO src", "cat src/a.py | wc -l",
]
CONTEXTS = [
    "{C}", "{C} && ls", "ls; {C}", "{C} | head -n 1", "( {C} )", "{{ {C}; }}", "time {C}", "time -p {C}",
    "LANG=C {C}", "timeout 5 {C}", "nice -n 5 {C}", "command {C}",
    "{C} 2>/dev/null", "cat <<'EOF'\nhello\nEOF\n{C}", "cat <<< hi && {C}",
    # a body whose first line starts with a backslash (the grammar reads it as words; bash as text)
    "cat <<EOF\n\\hello $HOME\nEOF\n{C}", "cat <<'EOF'\n\\x '$(rm -rf build)'\nEOF\n{C}",
]


def _cases():
    out = []
    for ci, c in enumerate(CONTEXTS):
        for ri, r in enumerate(READS):
            if ci > 3 and (ri + ci) % 2:
                continue  # every read in the first contexts, half of them in the rest
            out.append(c.format(C=r))
    return out


CASES = _cases()


def test_there_are_a_few_hundred():
    assert len(CASES) >= 300, len(CASES)


@pytest.fixture(scope="module")
def ctxs(world_session):
    import os
    os.environ["HOME"] = world_session.home
    with open(os.path.join(world_session.root, "package.json"), "w") as f:
        f.write("{}\n")
    s = world_session.setup(project=RULES)
    return {m: world_session.ctx(s, mode=m) for m in ("manual", "bypass", "auto")}


@pytest.mark.parametrize("command", CASES)
def test_benign_read_stays_allowed(world_session, ctxs, command):
    for mode in ("manual", "bypass", "auto"):
        v = world_session.decide(f"Bash({command})", ctxs[mode])
        assert v.behavior == "allow", (mode, command, v.to_json())


# `git add .` is not here: with `.env` in the tree and `Read(.env)` denied it copies .env into the
# object store, a possible read (maybe-deny) — tests/permissions/test_git_reads.py.
ROUTINE = ["npm test", "npm run build", "cargo test", "pytest -q", "make", "git add src", "git commit -m 'rm -rf stuff'",
           "git fetch", "git checkout feature", "git switch main", "mkdir -p src/util", "touch src/new.py",
           "cp src/a.py src/b.py", "npm run test:unit", "go test ./...", "cargo build",
           "timeout 60 npm test", "LANG=C make test", "npm test && npm run lint"]


@pytest.mark.parametrize("command", ROUTINE)
def test_routine_stays_allowed_in_auto_and_bypass(world_session, ctxs, command):
    for mode in ("auto", "bypass"):
        v = world_session.decide(f"Bash({command})", ctxs[mode])
        assert v.behavior == "allow", (mode, command, v.to_json())


@pytest.mark.parametrize("command", ["npm run test:unit", "make test", "npm run test", "npm run test -- --watch"])
def test_allow_rules_still_allow_in_manual(world_session, ctxs, command):
    v = world_session.decide(f"Bash({command})", ctxs["manual"])
    assert (v.behavior, v.reason) == ("allow", "allow-rule"), v.to_json()
