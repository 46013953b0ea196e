"""Differential bypass fuzzer with real bash as the oracle (issue "deny holds", deliverable 4).

Hypothesis composes a denied action — `rm -rf build`, `git push`, a write to `.env`, a read of
`secret/key` — into random shell contexts (lists, pipelines, groups, subshells, functions,
loops, `case`, here-documents and here-strings, substitutions and expansions, wrappers, quoting,
assignments, `eval`, nested `sh -c`). Each command is decided by the engine in Bypass under deny
rules covering the action, and run by real bash in a throwaway namespace sandbox
(bash_oracle_driver.py). An engine `allow` for a command in which bash performed a denied action
is a bypass: the test fails and prints the command.

CI runs a fixed seed and count (OH_FUZZ_COUNT, default 3000). `make fuzz` runs a long session
with a fresh seed and OH_FUZZ_RECORD set: bypasses are appended to that file instead of failing,
and test_fuzz_regressions.py replays every recorded one.
"""

from __future__ import annotations

import json
import os
import shlex

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from bash_oracle import BashOracle, EngineWorld, happened

COUNT = int(os.environ.get("OH_FUZZ_COUNT", "3000"))
SEED = int(os.environ.get("OH_FUZZ_SEED", "12"))
RECORD = os.environ.get("OH_FUZZ_RECORD")

# (kind, spelling): each spelling performs its action when bash runs it plainly (the positive
# control below proves it for every one).
SPELLINGS = [
    ("rm", "rm -rf build"), ("rm", "rm -fr build"), ("rm", "rm -r -f build"), ("rm", "rm -Rf build"),
    ("rm", "rm --recursive --force build"), ("rm", "rm --recur --force build"), ("rm", "rm -rf -- build"),
    ("rm", "/bin/rm -rf build"), ("rm", "/usr/bin/rm -rf ./build"), ("rm", "'r'm -rf build"), ("rm", '"rm" -rf build'),
    ("rm", "r\\m -rf build"), ("rm", "\\rm -rf build"), ("rm", "$'\\x72m' -rf build"), ("rm", "rm -rf build/"),
    ("rm", "rm -rfv build"), ("rm", "command rm -rf build"), ("rm", "RMF=-rf; rm $RMF build"),
    ("rm", "echo build | xargs rm -rf"), ("rm", "find . -maxdepth 1 -name build -exec rm -rf {} +"),
    ("rm", "set -- -rf build; rm \"$@\""), ("rm", "a=(rm -rf build); \"${a[@]}\""),
    ("push", "git push"), ("push", "git push origin main"), ("push", "git -C . push"), ("push", "git --no-pager push -f"),
    ("push", "/usr/bin/git push"), ("push", "g\\it push"), ("push", "git 'push'"), ("push", "git -c x.y=1 push"),
    ("push", "git ${S:-push}"),
    ("env-write", "echo x > .env"), ("env-write", "echo x >> .env"), ("env-write", "printf x >| .env"),
    ("env-write", "echo x | tee .env"), ("env-write", "tee -a .env < README"), ("env-write", "cp README .env"),
    ("env-write", "cp -t src README && mv src/README .env"), ("env-write", "sed -i s/K/J/ .env"), ("env-write", "dd if=README of=.env 2>/dev/null"),
    ("env-write", "touch .env"), ("env-write", "truncate -s0 .env"), ("env-write", "mv README .env"),
    ("env-write", "echo x > ./.env"), ("env-write", "echo x > src/../.env"), ("env-write", "ln -sf .env l && echo x > l"),
    ("env-write", "chmod 600 .env"), ("env-write", "cat README > .e\"nv\""), ("env-write", "echo x 1<> .env"),
    ("secret-read", "cat secret/key"), ("secret-read", "cat < secret/key"), ("secret-read", "head -c1 secret/key"),
    ("secret-read", "grep s secret/key"), ("secret-read", "base64 secret/key"), ("secret-read", "sort secret/key"),
    ("secret-read", "cp secret/key /tmp/k"), ("secret-read", "tar cf /tmp/s.tar secret"), ("secret-read", "grep -r s3 ."),
    ("secret-read", "cat ./secret/../secret/key"), ("secret-read", "while read l; do :; done < secret/key"),
    ("secret-read", "cat secret/*"), ("secret-read", "diff secret/key README"), ("secret-read", "wc -c secret/key"),
]

# Contexts: {A} is the command as is, {Q} the command quoted as one shell word.
CONTEXTS = [
    "{A}", "true && {A}", "false || {A}", "true; {A}", "ls >/dev/null; {A}", "{A} | cat", "echo | {A}",
    "{A} 2>/dev/null", "{A} && true", "( {A} )", "{{ {A}; }}", "! {A}", "time {A}", "time {{ {A}; }}",
    "time -p ( {A} )", "f() {{ {A}; }}; f", "function g {{ {A}; }}; g", "for i in 1; do {A}; done",
    "while true; do {A}; break; done", "until false; do {A}; break; done", "if true; then {A}; fi",
    "if false; then :; else {A}; fi", "case x in x) {A};; esac", "echo $({A})", "x=$({A})", ": \"$({A})\"",
    "cat <({A})", "echo > >({A})", ": ${{v:-$({A})}}", ": ${{v#$({A})}}", "a[$({A})]=1", "echo $(( $({A}) 0 ))",
    "cat <<EOF\n$({A})\nEOF", "cat <<EOF && {A}\nhi\nEOF", "cat <<'EOF' ; {A}\nhi\nEOF", "bash <<'EOF'\n{A}\nEOF",
    "bash <<EOF\n{A}\nEOF", "bash <<< {Q}", "sh -c {Q}", "bash -c {Q}", "bash -lc {Q}", "sh -ec {Q}",
    "eval {Q}", "eval -- {Q}", "timeout 5 {A}", "nice -n 1 {A}", "env {A}", "env X=1 {A}", "command {A}",
    "X=1 {A}", "LANG=C {A}", "exec {A}", "stdbuf -o0 {A}", "setsid -w {A}", "flock . {A}", "script -qc {Q} /dev/null",
    "bash -s <<< {Q}", "echo {Q} | bash", "trap {Q} EXIT", "source /dev/stdin <<< {Q}", ". <(echo {Q})",
    "echo `{A}`", "{A} &\nwait", "[[ -n $({A}) ]]", "select s in a; do {A}; break; done <<< 1",
    "{A} # comment", "set -e; {A}", "for f in $({A}); do :; done", "cd src && cd .. && {A}",
]


def compose(spelling: str, contexts: list[str]) -> str:
    text = spelling
    for c in contexts:
        if "`{A}`" in c and "`" in text:
            c = "echo $({A})"  # backquotes do not nest unescaped
        text = c.format(A=text, Q=shlex.quote(text))
    return text


@pytest.fixture(scope="module")
def oracle():
    o = BashOracle()
    yield o
    o.close()


@pytest.fixture(scope="module")
def engine():
    w = EngineWorld()
    yield w
    w.close()


@pytest.mark.parametrize("kind,spelling", SPELLINGS)
def test_positive_control_oracle_sees_each_action(oracle, kind, spelling):
    result = oracle.run(spelling)
    assert kind in happened(result), (spelling, result)


@pytest.mark.parametrize("kind,spelling", SPELLINGS)
def test_engine_denies_each_plain_action(engine, kind, spelling):
    v = engine.decide(spelling)
    assert v.behavior == "deny", v.to_json()


@pytest.mark.parametrize("command", ["ls", "cat README", "git status", "echo rm -rf", "cat .env.example 2>/dev/null"])
def test_oracle_sees_nothing_in_benign_commands(oracle, command):
    assert happened(oracle.run(command)) == set()


RAN: list[str] = []
PERFORMED: list[str] = []  # commands in which bash performed the composed action


@pytest.mark.timeout(1800)  # one test, COUNT examples: the per-test default is for single cases
@seed(SEED)
@settings(max_examples=COUNT, database=None, deadline=None, derandomize=False,
          suppress_health_check=list(HealthCheck), phases=[Phase.generate, Phase.shrink] if not RECORD else [Phase.generate])
@given(action=st.sampled_from(SPELLINGS), contexts=st.lists(st.sampled_from(CONTEXTS), max_size=3))
def test_no_bypass_against_real_bash(oracle, engine, action, contexts):
    command = compose(action[1], contexts)
    RAN.append(command)
    verdict = engine.decide(command)
    seen = happened(oracle.run(command))
    if action[0] in seen:
        PERFORMED.append(command)
    if verdict.behavior != "allow" or not seen:
        return
    if RECORD:
        with open(RECORD, "a") as f:
            f.write(json.dumps({"command": command, "happened": sorted(seen)}) + "\n")
        return
    pytest.fail(f"bypass: the engine allows {command!r} in Bypass, and bash performed {sorted(seen)}; "
                f"verdict {json.dumps(verdict.to_json())}")


def test_the_fuzzer_ran_its_count():
    # Every command was decided and run; and the contexts are not vacuous: in most of them bash
    # really performed the denied action (the rest only define it: a trap that never fires …).
    assert len(RAN) >= COUNT, len(RAN)
    assert len(PERFORMED) >= len(RAN) * 0.6, (len(PERFORMED), len(RAN))
