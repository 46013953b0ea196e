"""Differential test of the shell analysis against bash itself (the permission test cases): each static
command runs in a throwaway directory with PATH pointing at a recorder that logs its argv; the
recorded argv must equal the analysed words."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from metaharness.permissions.shell import analyse

PROGRAMS = ["rm", "git", "npm", "prog", "cat", "ls", "sudo", "timeout", "nice", "env", "xargs", "grep", "mkdir"]
CORPUS = [
    "rm -rf build", "'r'm -rf build", '"rm" -rf build', "r\\m -rf build", "$'\\x72m' -rf build",
    "rm -rf 'a b'", 'git commit -m "a b c"', "FOO=1 rm x", "rm a\\ b", "rm \"a\"'b'c", "rm ~/x",
    "rm $'a\\tb'", "rm 'it'\"'\"'s'", "r\\\nm -rf build", "rm x # comment", "rm -- -x", "prog \"a\\\"b\"",
    "prog 'a\\b'", "prog \"\\$x\"", "prog a\"\"b", "prog ''", "prog \"\"", "prog $'\\'quoted\\''", "prog a=b c",
    "LANG=C git status", "git -C /tmp/x push --force", "npm run test -- --watch", "prog \"a b\"'c d'e",
    "prog $'\\101\\x42\\u0043'", "prog \\*", "prog '*'", "prog a\\\"b", "prog \"~/x\"", "prog ~", "prog x~",
    "prog ls\nprog two", "prog one; prog two", "prog a && prog b", "prog a | prog b", "prog $'a\\nb'",
    "\\rm -rf build", "prog\tx", "prog \"tab\there\"", "prog 'semi;colon'", "prog \"pipe|here\"",
    "cat <<'EOF'\nrm -rf x\nEOF", "prog x >/dev/null", "prog -- '--'", "prog $'\\c@x'",
]


@pytest.fixture(scope="module")
def recorder(tmp_path_factory):
    d = tmp_path_factory.mktemp("recorder")
    bindir = d / "bin"
    bindir.mkdir()
    log = d / "argv.jsonl"
    script = f"#!{sys.executable}\nimport json, os, sys\nopen({str(log)!r}, 'a').write(json.dumps([os.path.basename(sys.argv[0])] + sys.argv[1:]) + '\\n')\n"
    for p in PROGRAMS:
        f = bindir / p
        f.write_text(script)
        f.chmod(0o755)
    return d, bindir, log


@pytest.mark.parametrize("command", CORPUS)
def test_analysis_matches_bash(recorder, command):
    d, bindir, log = recorder
    if log.exists():
        log.unlink()
    work = d / "work"
    work.mkdir(exist_ok=True)
    home = str(d / "home")
    env = {"PATH": str(bindir), "HOME": home}
    subprocess.run(["/bin/bash", "--noprofile", "--norc", "-c", command], cwd=work, env=env, timeout=10,
                   stdin=subprocess.DEVNULL, capture_output=True)
    ran = [json.loads(l) for l in log.read_text().splitlines()] if log.exists() else []
    analysis = analyse(command, str(work), home)
    assert not analysis.program_unknown, analysis.program_unknown
    words = []
    for c in analysis.cmds:
        if c.layer != 0:
            continue
        vals = [w.deny_value for w in c.words]
        assert None not in vals, (command, [w.text for w in c.words])
        if vals and vals[0].rsplit("/", 1)[-1] in PROGRAMS:
            words.append([vals[0].rsplit("/", 1)[-1]] + vals[1:])
    if "|" in command and "'" not in command and '"' not in command:
        words, ran = sorted(words), sorted(ran)  # a pipeline's commands start concurrently
    assert words == ran, (command, words, ran)
