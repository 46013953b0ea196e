"""Differential bypass fuzzer with real bash as the oracle (issue "deny holds", deliverable 4).

Hypothesis composes a denied action — `rm -rf build`, `git push`, a write to `.env`, a read of
`secret/key` — into random shell contexts (lists, pipelines, groups, subshells, functions,
loops, `case`, here-documents and here-strings, substitutions and expansions, wrappers, quoting,
assignments, `eval`, nested `sh -c`). Each command is decided by the engine in Bypass under deny
rules covering the action, and run by real bash in a throwaway namespace sandbox
(bash_oracle_driver.py). An engine `allow` for a command in which bash performed a denied action
is a bypass: the test fails and prints the command.

CI runs a fixed seed and count (OH_FUZZ_COUNT, default 3000; the family generator below a sixth of
it, OH_FUZZ_FAMILY_COUNT; the benign generator OH_FUZZ_BENIGN, default 400). `make fuzz` runs a long session
with a fresh seed and OH_FUZZ_RECORD set: bypasses are appended to that file instead of failing,
and test_fuzz_regressions.py replays every recorded one.

The family (issue "deny holds wherever the shell can reach"): a second generator composes the
denied actions into each class — the other shells' `-c`, stdin and here-document forms (run by the
real shells, `make shells`), base-directory options (`tar -C`, `env -C`), directory destinations
(`cp`/`mv`/`install`/`ln`/`rsync` into `.`), and substitutions or pipes around programs whose operands are
data (`echo`, `which`, `grep -e`). A shell that is not installed is left out of the generator and
its oracle case is skipped (failed under METAHARNESS_REQUIRE_VENDOR=1).

The benign generator: several hundred commands that must stay allowed (data operands naming denied
words, copies into allowed directories, base directories that are allowed, POSIX shells running
benign strings), each run by the oracle to prove no denied action happened. An engine refusal of one
is a false refusal; the rate is printed beside the bypass count and must stay under 1 %.
Non-POSIX shells (fish, tcsh) are opaque by design (their strings are `maybe` against every deny
pattern), and so is a shell reading its script from a pipe (`… | sh`), so neither is in the
must-stay-allowed set.
"""

from __future__ import annotations

import json
import os
import random
import shlex

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from bash_oracle import APPLETS, SHELLS, TOOLS, happened, missing_shell

COUNT = int(os.environ.get("OH_FUZZ_COUNT", "3000"))
FAMILY_COUNT = int(os.environ.get("OH_FUZZ_FAMILY_COUNT", str(max(COUNT // 6, 1))))
REQUIRE = os.environ.get("METAHARNESS_REQUIRE_VENDOR") == "1"
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
BYPASSES: list[str] = []  # every bypass either generator met (recorded under OH_FUZZ_RECORD, else a failure)
PERFORMED: list[str] = []  # commands in which bash performed the composed action


@pytest.mark.timeout(1800)  # one test, COUNT examples: the per-test default is for single cases
@seed(SEED)
@settings(max_examples=COUNT, database=None, deadline=None, derandomize=False,
          suppress_health_check=list(HealthCheck), phases=[Phase.generate, Phase.shrink] if not RECORD else [Phase.generate])
@given(action=st.sampled_from(SPELLINGS), contexts=st.lists(st.sampled_from(CONTEXTS), max_size=3))
def test_no_bypass_against_real_bash(oracle, engine, action, contexts):
    judge(oracle, engine, action, compose(action[1], contexts), RAN, PERFORMED)


def judge(oracle, engine, action, command: str, ran: list[str], performed: list[str]) -> None:
    """Decide `command`, run it in the oracle, and fail on a bypass: allowed, and a denied action
    happened (with OH_FUZZ_RECORD set, the bypass is written down instead)."""
    ran.append(command)
    verdict = engine.decide(command)
    seen = happened(oracle.run(command))
    if action[0] in seen:
        performed.append(command)
    if verdict.behavior != "allow" or not seen:
        return
    BYPASSES.append(command)
    if RECORD:
        with open(RECORD, "a") as f:
            f.write(json.dumps({"command": command, "happened": sorted(seen)}) + "\n")
        return
    pytest.fail(f"bypass: the engine allows {command!r} in Bypass, and the oracle saw {sorted(seen)}; "
                f"verdict {json.dumps(verdict.to_json())}")


def test_the_fuzzer_ran_its_count():
    # Every command was decided and run; and the contexts are not vacuous: in most of them bash
    # really performed the denied action (the rest only define it: a trap that never fires …).
    assert len(RAN) >= COUNT, len(RAN)
    assert len(PERFORMED) >= len(RAN) * 0.6, (len(PERFORMED), len(RAN))


# --- the family: each class of issue 24 -----------------------------------------------------------

# Spellings of the classes that do not wrap another command: base-directory options (b),
# directory destinations (c; `../other/.env` is a sibling of the project), applets no recorder
# shadows. Each performs its action under bash (the positive control proves it).
CLASS_SPELLINGS = [
    ("secret-read", "tar -C secret -cf /tmp/s.tar key"), ("secret-read", "tar -cf /tmp/s.tar -C secret key"),
    ("secret-read", "tar --directory=secret -cf /tmp/s.tar key"), ("secret-read", "tar -cf /tmp/s.tar --directory secret key"),
    ("secret-read", "tar -C src -cf /tmp/s.tar ../secret/key"), ("secret-read", "env -C secret cat key"),
    ("secret-read", "env --chdir=src cat ../secret/key"), ("secret-read", "env -C secret head -c1 key"),
    ("env-write", "env -C src touch ../.env"), ("env-write", "env -C src cp ../README ../.env"),
    ("env-write", "cp ../other/.env ."), ("env-write", "cp ../other/.env ./"), ("env-write", "cp -f ../other/.env src/.."),
    ("env-write", "mv ../other/.env ."), ("env-write", "install ../other/.env ."), ("env-write", "install -m 644 ../other/.env ."),
    ("env-write", "ln -sf ../other/.env ."), ("env-write", "cp -t . ../other/.env"), ("env-write", "cp -r ../other/. ."),
    ("env-write", "cp -a ../other/. ./"), ("env-write", "cp ../other/.env src/a.txt ."), ("env-write", "mv -t . ../other/.env"),
    ("rm", "busybox rm -rf build"), ("secret-read", "busybox cat secret/key"), ("env-write", "busybox cp ../other/.env ."),
    ("rm", "toybox rm -rf build"), ("secret-read", "toybox cat secret/key"), ("env-write", "busybox sh -c 'echo x > .env'"),
    # rsync skips a file whose size and time match (the template's two .env files do): -I/-c copy it
    ("env-write", "rsync -I ../other/.env ."), ("env-write", "rsync -aI ../other/ ."), ("env-write", "rsync -rc ../other/. ./"),
    ("env-write", "rsync -I ../other/.env README src/.."), ("secret-read", "rsync -a secret /tmp/s"),
    ("secret-read", "rsync -r secret/ /tmp/s"),
    # programs that run an option's value, or a script's own command (`sed`'s e, r and w)
    ("rm", "tar -cf /tmp/x.tar --checkpoint=1 --checkpoint-action=exec='rm -rf build' README"),
    ("rm", "tar -cf /tmp/x.tar -I 'sh -c \"rm -rf build; gzip\"' README"),
    ("rm", "rsync -e 'sh -c \"rm -rf build\"' x:y /tmp"), ("rm", "ssh -o ProxyCommand='rm -rf build' x"),
    ("rm", "ssh -oProxyCommand='rm -rf build' x"), ("rm", "zip -q /tmp/z.zip README -T -TT 'sh -c \"rm -rf build\"'"),
    ("rm", "vim -es -c '!rm -rf build' -c q"), ("rm", "vim -es '+!rm -rf build' +q"),
    ("rm", "gdb -batch -ex 'shell rm -rf build'"), ("rm", "split --filter='rm -rf build' README"),
    ("rm", "sed -n '1e rm -rf build' README"), ("rm", "sed 's/.*/rm -rf build/e' README"),
    ("env-write", "sed -n 'w .env' README"), ("secret-read", "sed '1r secret/key' README"),
    ("env-write", "perl -pi -e 's/K/J/' .env"), ("env-write", "shuf -o .env README"),
    ("env-write", "find . -maxdepth 1 -name README -fprint .env"),
    # readers beyond the first table, a script file, a file URL, /proc's links to the command's own directory
    ("secret-read", "tac secret/key"), ("secret-read", "rev secret/key"), ("secret-read", "gzip -c secret/key"),
    ("secret-read", "openssl enc -base64 -in secret/key"), ("secret-read", "xargs -a secret/key echo"),
    ("secret-read", "bash secret/key"), ("secret-read", "curl -s file://$PWD/secret/key"),
    ("secret-read", "cat /proc/self/cwd/secret/key"), ("secret-read", "cat /proc/self/root/proc/self/cwd/secret/key"),
    ("env-write", "echo x > /proc/thread-self/cwd/.env"), ("env-write", "gzip .env"),
    ("push", "hash -p /usr/bin/git g; g push"), ("env-write", "python3 -c 'import sys; open(sys.argv[1], \"w\")' .env"),
]


def _needs(text: str) -> str | None:
    """The shell or applet program a spelling or context needs, if any."""
    for name, program, _ in SHELLS:
        if text.startswith(name + " ") or f" {name} " in text or text.endswith("| " + name):
            return program
    return next((a for a in APPLETS + TOOLS if text.startswith(a + " ")), None)


# Class a: a string run by another shell; {A} is the command, {Q} the command as one word.
POSIX_FORMS = ["{S} -c {Q}", "{S} -ec {Q}", "{S} -s <<< {Q}", "{S} <<'EOF'\n{A}\nEOF", "echo {Q} | {S}", "{S} -x -c -- {Q}"]
FOREIGN_FORMS = ["{S} -c {Q}", "echo {Q} | {S}"]
SHELL_CONTEXTS = [f.replace("{S}", name) for name, _, posix in SHELLS for f in (POSIX_FORMS if posix else FOREIGN_FORMS)]
SHELL_CONTEXTS += ["flock . -c {Q}", "env -C src sh -c 'cd .. && '{Q}"]
# Class d: substitutions and pipes around programs whose operands are data.
DATA_CONTEXTS = [
    "printf '%s\\n' \"$({A})\"", "which $({A}) >/dev/null", "type x $({A})", "command -v $({A})",
    "printf '%s\\n' {Q} | sh", "echo {Q} | bash", "echo {Q} && {A}", "grep -e x $({A}) README",
    "git log --grep {Q}; {A}", "echo `{A}`",
]
FAMILY_SPELLINGS = [s for s in SPELLINGS + CLASS_SPELLINGS if not _needs(s[1]) or not missing_shell(_needs(s[1]))]
FAMILY_CONTEXTS = [c for c in SHELL_CONTEXTS + DATA_CONTEXTS if not _needs(c) or not missing_shell(_needs(c))]
MISSING = sorted({p for _, p, _ in SHELLS if missing_shell(p)} | {a for a in APPLETS + TOOLS if missing_shell(a)})
FAMILY_RAN: list[str] = []
BYPASSES: list[str] = []  # every bypass either generator met (recorded under OH_FUZZ_RECORD, else a failure)
FAMILY_PERFORMED: list[str] = []


@pytest.mark.parametrize("program", sorted({p for _, p, _ in SHELLS} | set(APPLETS + TOOLS)))
def test_each_shell_of_the_family_is_installed(program):
    if missing_shell(program):
        if REQUIRE:
            pytest.fail(f"{program} is not installed; `make shells` installs the oracle's shells from Debian")
        pytest.skip(f"{program} is not installed: its oracle cases are skipped (make shells)")


@pytest.mark.parametrize("name,program,posix", SHELLS, ids=[s[0] for s in SHELLS])
def test_positive_control_each_shell_runs_the_action(oracle, engine, name, program, posix):
    if missing_shell(program):
        (pytest.fail if REQUIRE else pytest.skip)(f"{program} is not installed (make shells)")
    # every form is denied; the shell really performs the action in its `-c` and piped-stdin forms
    # (not every shell takes every form: posh has no `-s`)
    for kind, spelling in [("rm", "rm -rf build"), ("secret-read", "cat secret/key"), ("push", "git push")]:
        for form in POSIX_FORMS if posix else FOREIGN_FORMS:
            command = form.replace("{S}", name).format(A=spelling, Q=shlex.quote(spelling))
            if form in ("{S} -c {Q}", "echo {Q} | {S}"):
                assert kind in happened(oracle.run(command)), command
            assert engine.decide(command).behavior == "deny", command


@pytest.mark.parametrize("kind,spelling", CLASS_SPELLINGS)
def test_positive_control_each_class_spelling(oracle, engine, kind, spelling):
    if _needs(spelling) and missing_shell(_needs(spelling)):
        (pytest.fail if REQUIRE else pytest.skip)(f"{_needs(spelling)} is not installed (make shells)")
    assert kind in happened(oracle.run(spelling)), spelling
    assert engine.decide(spelling).behavior == "deny", engine.decide(spelling).to_json()


@pytest.mark.timeout(1800)
@seed(SEED)
@settings(max_examples=FAMILY_COUNT, database=None, deadline=None, derandomize=False,
          suppress_health_check=list(HealthCheck), phases=[Phase.generate, Phase.shrink] if not RECORD else [Phase.generate])
@given(action=st.sampled_from(FAMILY_SPELLINGS), inner=st.lists(st.sampled_from(CONTEXTS), max_size=1),
       outer=st.lists(st.sampled_from(FAMILY_CONTEXTS), min_size=1, max_size=2))
def test_no_bypass_across_the_family(oracle, engine, action, inner, outer):
    if REQUIRE:
        assert not MISSING, f"not installed: {MISSING} (make shells)"
    judge(oracle, engine, action, compose(action[1], inner + outer), FAMILY_RAN, FAMILY_PERFORMED)


# --- the benign generator ---------------------------------------------------------------------------

BENIGN_SIZE = int(os.environ.get("OH_FUZZ_BENIGN", "400"))
_WORDS = ["rm -rf build", "git push", "cat secret/key", "echo x > .env", "rm", "git push origin main", ".env",
          "secret/key", "tee .env", "cp ../other/.env .", "tar -C secret -cf /tmp/s.tar key", "curl x | sh"]
_PROGRAMS = ["rm", "git", "cat", "tee", "tar", "cp", "sh"]
_DATA = ["echo {Q}", "echo {W}", "printf '%s\\n' {Q}", "printf %s {Q} >/dev/null", "grep -e {Q} README",
         "grep -c -- {Q} src/a.txt", "grep -F {Q} README src/a.txt", "git log --grep={Q}", "git log -S {Q} --oneline"]
_LOOKUP = ["which {P}", "type {P}", "command -v {P}", "command -V {P}", "which {P} {P2}"]
_FILES = [
    "cp README src", "cp README src/", "cp -t src README", "cp -r src /tmp/s", "cp README src/a.txt /tmp",
    "mv src/a.txt src/b.txt", "install -m 644 README src", "install README /tmp", "ln -s ../README src/r",
    "ln -sf README src/", "cp -a src/. /tmp/t", "mv -t src README", "cat README src/a.txt", "cp src/a.txt .",
    "tar -C src -cf /tmp/x.tar a.txt", "tar -cf /tmp/x.tar -C src .", "tar --directory=src -cf /tmp/x.tar a.txt",
    "env -C src cat a.txt", "env --chdir=src ls", "tar -C build -cf /tmp/o.tar o.txt", "env -C build cat o.txt",
    "rsync README src", "rsync -a src/ /tmp/r", "rsync -r src /tmp/r", "rsync -a README src/a.txt /tmp/r/",
    "tar -czf /tmp/x.tgz --checkpoint=10 src", "zip -qr /tmp/z.zip src", "sed -n '/a/p' README", "sed 's/a/b/g' README",
    "sed -e 1d -e '$d' src/a.txt", "perl -pe 's/a/b/' README", "shuf -o /tmp/s README", "find . -name '*.txt' -fprint /tmp/f",
    "tac README", "gzip -c README > /tmp/r.gz", "sha512sum src/a.txt", "cat /proc/self/cwd/README", "xargs -a README echo",
]
_STRINGS = ["echo hi", "cat README", "ls src", "echo rm -rf build", "printf %s git push", "cat src/a.txt | wc -l",
            "cp README src/", "which rm", "test -f .env && echo yes"]
_WRAP = ["{A}", "true && {A}", "( {A} )", "{A} | cat", "{A} >/dev/null", "{{ {A}; }}", "if true; then {A}; fi",
         "for i in 1; do {A}; done", "{A} 2>/dev/null", "x=$({A})"]


def benign_commands(n: int, rng_seed: int) -> list[str]:
    """Each class's table in every wrapping, shuffled with a fixed seed: an equal share of n from
    each class (data operands, look-ups, file commands, POSIX shells), so none crowds out another."""
    q = shlex.quote
    shells = [name for name, program, posix in SHELLS if posix and not missing_shell(program)]
    # a shell reading its script from a pipe is opaque (`maybe` against every deny rule), so not here
    forms = [f for f in POSIX_FORMS if "| {S}" not in f]
    classes = [
        [t.format(Q=q(w), W=w if not set(w) & set("|>&;") else q(w)) for t in _DATA for w in _WORDS],
        [t.format(P=p, P2=p2) for t in _LOOKUP for p in _PROGRAMS for p2 in _PROGRAMS[:2]],
        _FILES,
        [f.replace("{S}", name).format(A=s, Q=q(s)) for name in shells for f in forms for s in _STRINGS],
    ]
    rng = random.Random(rng_seed)
    chosen: list[str] = []
    for core in classes:
        every = sorted({w.format(A=c) for c in core for w in _WRAP})
        rng.shuffle(every)
        chosen += every[: n // len(classes)]
    return chosen


@pytest.fixture(scope="module")
def benign(oracle, engine):
    """(commands, refused): each command run by the oracle (none may perform a denied action) and
    decided by the engine; `refused` holds the ones the engine did not allow."""
    commands = benign_commands(BENIGN_SIZE, SEED)
    refused = []
    for command in commands:
        seen = happened(oracle.run(command))
        assert not seen, f"the benign generator is wrong: the oracle saw {sorted(seen)} in {command!r}"
        verdict = engine.decide(command)
        if verdict.behavior != "allow":
            refused.append((command, verdict.behavior, verdict.reason))
    return commands, refused


def test_benign_commands_stay_allowed(benign):
    commands, refused = benign
    assert len(commands) >= min(BENIGN_SIZE - 3, 300), len(commands)
    rate = len(refused) / len(commands)
    assert rate < 0.01, f"false refusals {len(refused)}/{len(commands)} ({rate:.2%}): {refused[:20]}"


def test_the_family_fuzzer_ran_its_count(benign, capsys):
    commands, refused = benign
    assert len(FAMILY_RAN) >= FAMILY_COUNT, len(FAMILY_RAN)
    assert len(FAMILY_PERFORMED) >= len(FAMILY_RAN) * 0.5, (len(FAMILY_PERFORMED), len(FAMILY_RAN))
    with capsys.disabled():
        print(f"\nfuzz: {len(RAN)} + {len(FAMILY_RAN)} (family) commands, {len(BYPASSES)} bypass(es); "
              f"benign: {len(refused)}/{len(commands)} refused, false-refusal rate {len(refused) / len(commands):.2%}"
              + (f"; skipped (not installed): {', '.join(MISSING)}" if MISSING else ""))
