"""Issue 24 item 2: interpreter code given inline or on stdin gets the shell's over-match.

`python -c`, `python - <<EOF`, `node -e`, `perl -e`, `ruby -e`, `php -r` and awk programs are
scanned (shell/interpreters.py, data/interpreters.toml): a literal command of code that can run
one is analysed as shell for deny/ask, a literal path under a Read/Write deny rule is `maybe`,
code that is not static makes the program unknown. Benign code stays allowed.

The last part runs each denied case in the real interpreter inside the bash oracle's namespace
sandbox (bash_oracle.py): the action the engine denies is one the code really performs.
"""

from __future__ import annotations

import os
import shutil

import pytest

from metaharness.permissions.shell import analyse
from metaharness.permissions.shell.interpreters import literals, scan

from test_deny_classes import _check_denied, ctxs  # noqa: F401  (the fixture)


# The tokenizer ---------------------------------------------------------------------------------
@pytest.mark.parametrize("family,code,expected", [
    ("python", "os.system('rm -rf x')  # 'not this'", ["rm -rf x"]),
    ("python", 'print(r"a\\n", "b\\tc", """tri"ple""")', ["a\\n", "b\tc", 'tri"ple']),
    ("python", "f'{x}' + b'\\x41'", ["{x}", "A"]),
    ("js", 'exec(`rm ${d}`) // "c"\n/* "d" */ x("e\\"f")', ["rm ${d}", 'e"f']),
    ("perl", "qx{rm -rf x}; q(a(b)c); 'lit\\n'", ["rm -rf x", "a(b)c", "lit\\n"]),
    ("ruby", "%x(rm -rf x); %w[a b]; \"q\"", ["rm -rf x", "a", "b", "q"]),
    ("php", "shell_exec('ls'); # 'no'\n`id`", ["ls", "id"]),
    ("awk", 'BEGIN { system("rm -rf x") } # "no"', ["rm -rf x"]),
])
def test_literals_per_family(family, code, expected):
    assert [lit.text for lit in literals(code, family)] == expected


def test_scan_joins_adjacent_literals_and_gates_commands_on_a_run_marker():
    got = scan('subprocess.run(["rm", "-rf", "dist"])', "python")
    assert "rm -rf dist" in got.commands and not got.writes
    assert scan('print("rm -rf dist")', "python").commands == []  # nothing runs it
    assert scan('print(`rm -rf dist`)', "perl").commands == ["rm -rf dist"]  # a backquote runs
    assert scan('open("out", "w").write("x")', "python").writes


# The engine, under test_deny_classes.DENY: Bash(rm -rf *), write(.env*), Read(.env), git push ---
DENIED = [
    "python3 -c 'import os; os.system(\"rm -rf build\")'",
    "python3 -c 'import subprocess; subprocess.run([\"rm\", \"-rf\", \"build\"])'",
    "python3 -Ic 'import os; os.popen(\"rm -rf build\")'",
    "python -c \"__import__('os').system('rm -rf build')\"",
    "python3.11 -c 'import os; os.system(\"git push\")'",
    "python3 - <<EOF\nimport os\nos.system('rm -rf build')\nEOF",
    "python3 <<'EOF'\nimport subprocess\nsubprocess.call('rm -rf build', shell=True)\nEOF",
    "python3 <<< 'import os; os.system(\"rm -rf build\")'",
    "python3 -c 'open(\".env\").read()'",
    "python3 -c 'open(\".env\", \"w\").write(\"X=1\")'",
    "python3 -c \"$CODE\"", "echo 'import os' | python3", "python3 /dev/stdin < x.py",
    "python3 \"$S\" <<< 'import os'", "python3 $OPTS x.py",
    "node -e 'require(\"child_process\").execSync(\"rm -rf build\")'",
    "node -e 'require(\"child_process\").execFileSync(\"rm\", [\"-rf\", \"build\"])'",
    "node --eval='require(\"child_process\").spawnSync(\"git\", [\"push\"])'",
    "node -p 'require(\"fs\").readFileSync(\".env\", \"utf8\")'",
    "nodejs -e 'require(\"fs\").writeFileSync(\".env\", \"\")'",
    "perl -e 'system(\"rm -rf build\")'", "perl -e 'system(\"rm\", \"-rf\", \"build\")'",
    "perl -e 'print `rm -rf build`'", "perl -e 'qx{rm -rf build}'", "perl -le 'exec q(rm -rf build)'",
    "perl -e 'open(F, \"<\", \".env\"); print <F>'",
    "ruby -e 'system(\"rm -rf build\")'", "ruby -e '`rm -rf build`'", "ruby -e '%x(rm -rf build)'",
    "ruby -e 'puts File.read(\".env\")'",
    "php -r 'shell_exec(\"rm -rf build\");'", "php -r 'echo `rm -rf build`;'",
    "php -r 'echo file_get_contents(\".env\");'",
    "awk 'BEGIN{system(\"rm -rf build\")}'", "gawk 'BEGIN { \"git push\" | getline }'",
    "mawk 'BEGIN{print \"x\" > \".env\"}'", "awk -F: 'BEGIN{system(\"rm -rf build\")}' src/a.py",
    "awk '{print}' .env",  # awk's file operand: read as before
    "timeout 5 python3 -c 'import os; os.system(\"rm -rf build\")'",
    "sh -c 'python3 -c \"import os; os.system(\\\"rm -rf build\\\")\"'",
]


@pytest.mark.parametrize("command", DENIED)
def test_interpreter_code_is_denied(world_session, ctxs, command):
    _check_denied(world_session, ctxs, command)


ALLOWED = [
    "python3 -c 'print(1+1)'", "python3 -c 'import json,sys; print(json.load(sys.stdin))' < src/a.py",
    "python3 -c 'import subprocess; subprocess.run([\"ls\", \"-l\"])'", "python3 -c 'print(\"rm -rf build\")'",
    "python3 - <<'EOF'\nprint('hello')\nEOF", "python3 <<< 'import os'", "python3 -m json.tool src/a.py",
    "python3 src/a.py", "node -e 'console.log(1)'", "node -p '1+1'", "perl -e 'print \"hi\\n\"'",
    "perl -ne 'print if /x/' src/a.py", "ruby -e 'puts 1'", "php -r 'echo 1;'", "awk '{print $1}' src/a.py",
    "awk -F, 'NR>1{s+=$2} END{print s}' src/a.py", "awk -f prog.awk src/a.py",
    # a literal that is not shell (a parse error) is not the call's parse error
    "python3 -c 'import subprocess; subprocess.run([\"ls\"]); print(\"a (b\")'",
    "node -e 'const c = require(\"child_process\"); console.log(c.execSync(\"git status\").toString(), \"x;y|(\")'",
]


@pytest.mark.parametrize("command", ALLOWED)
def test_benign_code_stays_allowed(world_session, ctxs, command):
    v = world_session.decide(f"Bash({command})", ctxs["bypass"])
    assert v.behavior == "allow", v.to_json()


@pytest.mark.parametrize("command,reason", [
    ("python3 -c 'import os; os.system(\"rm -rf build\")'", "deny-rule"),  # a literal command meets the rule
    ("python3 -c 'open(\".env\").read()'", "maybe-deny"),  # a literal path: it may never be opened
    ("python3 -c \"$CODE\"", "maybe-deny"),  # code that is not static: the program is unknown
    ("python3 -c 'print(1+1)'", "bypass"),
    ("python3 -c 'import subprocess; print(\"rm -rf build (\")'", "deny-rule"),  # parse error in the literal: still read
])
def test_reasons(world_session, ctxs, command, reason):
    assert world_session.decide(f"Bash({command})", ctxs["bypass"]).reason == reason


def test_literals_are_deny_only_and_never_granted():
    analysis = analyse("python3 -c 'import os; os.system(\"rm -rf build\")'", "/w/p", "/h")
    inner = [cmd for cmd in analysis.cmds if cmd.basename == "rm"]
    assert inner and all(cmd.deny_only for cmd in inner)
    refs = [ref for cmd in analysis.cmds for ref in cmd.paths if ref.via == "code"]
    assert refs and all(ref.deny_only and ref.guess for ref in refs)


def test_ask_rule_asks_for_a_literal_command(world_session):
    s = world_session.setup(project={"ask": ["Bash(git push*)"]})
    try:
        v = world_session.decide("Bash(python3 -c 'import os; os.system(\"git push\")')", world_session.ctx(s, mode="auto"))
        assert v.behavior == "ask", v.to_json()
    finally:
        from test_deny_classes import DENY
        world_session.setup(project=DENY)


# The real interpreters, in the bash oracle's sandbox -------------------------------------------
# (action the oracle must see, command). The oracle's world denies Bash(rm -rf *), Bash(git push*),
# Write(.env*) and Read(secret/**).
REAL = [
    ("rm", "python3 -c 'import os; os.system(\"rm -rf build\")'"),
    ("rm", "python3 -c 'import subprocess; subprocess.run([\"rm\", \"-rf\", \"build\"])'"),
    ("rm", "python3 - <<'EOF'\nimport os\nos.system('rm -rf build')\nEOF"),
    ("rm", "python3 <<< 'import subprocess; subprocess.call(\"rm -rf build\", shell=True)'"),
    ("push", "python3 -c 'import os; os.system(\"git push\")'"),
    ("env-write", "python3 -c 'open(\".env\", \"w\").write(\"X=2\")'"),
    ("secret-read", "python3 -c 'print(open(\"secret/key\").read())'"),
    ("rm", "node -e 'require(\"child_process\").execSync(\"rm -rf build\")'"),
    ("rm", "node -e 'require(\"child_process\").execFileSync(\"rm\", [\"-rf\", \"build\"])'"),
    ("env-write", "node -e 'require(\"fs\").writeFileSync(\".env\", \"X=2\")'"),
    ("secret-read", "node -p 'require(\"fs\").readFileSync(\"secret/key\", \"utf8\")'"),
    ("rm", "perl -e 'system(\"rm -rf build\")'"),
    ("rm", "perl -e 'system(\"rm\", \"-rf\", \"build\")'"),
    ("rm", "perl -e 'print `rm -rf build`'"),
    ("env-write", "perl -e 'open(F, \">\", \".env\"); print F \"X=2\"'"),
    ("secret-read", "perl -e 'open(F, \"<\", \"secret/key\"); print <F>'"),
    ("rm", "awk 'BEGIN{system(\"rm -rf build\")}'"),
    ("push", "awk 'BEGIN{\"git push\" | getline}'"),
    ("env-write", "awk 'BEGIN{print \"X=2\" > \".env\"}'"),
    ("secret-read", "awk 'BEGIN{while ((getline l < \"secret/key\") > 0) print l}'"),
    ("rm", "mawk 'BEGIN{system(\"rm -rf build\")}'"),
    # sed's own commands: `e` runs a shell, `r` reads, `w` writes (GNU sed)
    ("rm", "sed -n '1e rm -rf build' README"), ("rm", "sed 's/.*/rm -rf build/e' README"),
    ("rm", "echo '1e rm -rf build' | sed -f - README"), ("env-write", "sed -n 'w .env' README"),
    ("env-write", "sed 's/a/b/w .env' README"), ("secret-read", "sed '1r secret/key' README"),
    ("secret-read", "sed -n '$R secret/key' README"),
    # perl's in-place edit writes its operands, and its loops read them
    ("env-write", "perl -i -pe 's/K/J/' .env"), ("env-write", "perl -pi.bak -e 1 .env"),
    ("secret-read", "perl -ne print secret/key"),
    # ruby's likewise (ruby is one of the oracle's programs: `make shells`)
    ("env-write", "ruby -i -pe 'sub(/K/, \"J\")' .env"), ("env-write", "ruby -pi -e 'sub(/K/, \"J\")' .env"),
    ("env-write", "ruby -i.bak -pe '$_ = \"X=2\\n\"' .env"), ("env-write", "ruby -pi.bak -e 'sub(/1/, \"2\")' .env"),
    ("env-write", "ruby -i -ne 'print $_.sub(/K/, \"J\")' -- .env"), ("secret-read", "ruby -ne print secret/key"),
    ("rm", "ruby -e 'system(\"rm -rf build\")'"), ("env-write", "ruby -e 'File.write(\".env\", \"X=2\")'"),
    ("secret-read", "ruby -e 'puts File.read(\"secret/key\")'"),
    # the code's arguments are what a script's are: a directory among them may be read whole
    ("secret-read", "python3 -c 'import os,sys; [print(open(os.path.join(d, f)).read()) for d, _, fs in os.walk(sys.argv[1]) for f in fs]' secret"),
    ("secret-read", "python3 -c 'import sys; print(open(sys.argv[1]).read())' secret/key"),
    ("secret-read", "node -e 'const fs = require(\"fs\"); for (const f of fs.readdirSync(process.argv[1])) console.log(fs.readFileSync(process.argv[1] + \"/\" + f, \"utf8\"))' secret"),
    ("secret-read", "perl -e 'for (glob(\"$ARGV[0]/*\")) { open(F, $_); print <F> }' secret"),
    ("secret-read", "ruby -e 'Dir.glob(ARGV[0] + \"/*\").each { |f| puts File.read(f) }' secret"),
]
REAL_BENIGN = ["python3 -c 'print(1+1)'", "node -e 'console.log(1)'", "perl -e 'print 1'", "awk 'BEGIN{print 1}'",
               "python3 -c 'import subprocess; subprocess.run([\"ls\"])'", "sed -n '/a/p' README", "sed '/^w/d' README",
               "sed 's/a/b/g' README", "sed --sandbox '1r secret/key' README", "sed -e 1d -e '$d' README",
               "perl -pe 's/a/b/' README", "ruby -pe 'sub(/a/, \"b\")' README", "ruby -e 'puts 1'"]


def _needs(command: str) -> None:
    # A program `make shells` installs for the oracle (bash_oracle.TOOLS: ruby) is required under
    # make test (METAHARNESS_REQUIRE_VENDOR=1): its cases fail there rather than pass unrun.
    from bash_oracle import TOOLS

    program = command.split()[0]
    if shutil.which(program) is None:
        if program in TOOLS and os.environ.get("METAHARNESS_REQUIRE_VENDOR") == "1":
            pytest.fail(f"{program} is not installed; `make shells` installs it for the oracle")
        pytest.skip(f"{program} is not installed here")


@pytest.mark.parametrize("action,command", REAL)
def test_real_interpreter_performs_what_the_engine_denies(oracle, engine, action, command):
    _needs(command)
    from bash_oracle import happened
    assert action in happened(oracle.run(command, timeout=15)), command  # the code really does it
    v = engine.decide(command)
    assert v.behavior == "deny", v.to_json()


@pytest.mark.parametrize("command", REAL_BENIGN)
def test_real_benign_code_does_nothing_denied_and_is_allowed(oracle, engine, command):
    _needs(command)
    from bash_oracle import happened
    assert happened(oracle.run(command, timeout=15)) == set()
    assert engine.decide(command).behavior == "allow"


# data/interpreters.toml ------------------------------------------------------------------------
def test_interpreter_table_is_whole():
    import re

    from metaharness.permissions.tables import load_table

    table = load_table("interpreters.toml")
    from metaharness.permissions.shell.interpreters import SCRIPT_SCANNERS

    for name, spec in table["program"].items():
        assert spec["family"] in table["family"] or spec["family"] in SCRIPT_SCANNERS, name
    for alias, target in table["alias"].items():
        assert target in table["program"], alias
    for family, spec in table["family"].items():
        assert spec["quotes"] and spec.get("runs"), family
        for pattern in spec.get("runs", []) + spec.get("writes", []):
            re.compile(pattern)


def test_the_unprovable_marks_read_the_same_table():
    # fileops marks interpreter code unprovable from data/interpreters.toml, the table the scan
    # reads: one list of code options.
    from metaharness.permissions.shell import analyse

    for text in ("lua -e 'os.execute(\"rm -rf build\")'", "Rscript -e 'system(\"rm -rf build\")'",
                 "osascript -e 'do shell script \"rm -rf build\"'", "nodejs -pe 1", "gawk 'BEGIN{}'"):
        cmds = analyse(text, "/w/p", "/h").cmds
        outer = [cmd for cmd in cmds if cmd.basename == text.split()[0]]
        assert outer and outer[0].unprovable, text
        if "rm -rf" in text:
            assert any(cmd.basename == "rm" for cmd in cmds), text


@pytest.mark.parametrize("command", ["python3 -c 'print(\".env\")'"])
def test_the_stated_over_match(world_session, ctxs, command):
    v = world_session.decide(f"Bash({command})", ctxs["bypass"])
    assert (v.behavior, v.reason) == ("deny", "maybe-deny"), v.to_json()
