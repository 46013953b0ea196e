"""Recursive readers the file table does not know (issue 24): a program the table does not know,
given a directory, may read everything under it — so a `Read` deny rule matching an entry inside
gives `maybe` (a forced ask; in Bypass a denial), found by the recursive reader's bounded walk.
So do the arguments of a script or a module an interpreter runs (`python3 -m zipfile -c out.zip .`,
`bash x.sh DIR`): they are the operands of a program the table does not know.

The oracle is the bash oracle's sandbox (bash_oracle.py): each denied case is run there and the
read of `secret/key` (inotify on it) must really happen; each benign case must read nothing denied
and be allowed.
"""

from __future__ import annotations

import shutil

import pytest

from bash_oracle import happened

# An unknown program: a script the command writes to /tmp (the sandbox's own) and runs; it reads
# every file under its operand.
_READER = "printf '#!/bin/sh\\nfind \"$1\" -type f -exec cat {} +\\n' > /tmp/rd && chmod +x /tmp/rd && "

REAL = [
    "python3 -m zipfile -c /tmp/o.zip .",
    "python3 -m zipfile -c /tmp/o.zip secret",
    "python3 -mzipfile -c /tmp/o.zip ./",
    "python3 -W ignore -m tarfile -c /tmp/o.tar .",
    "cd src && python3 -m tarfile -c /tmp/o.tar ..",
    _READER + "/tmp/rd .",
    _READER + "/tmp/rd secret",
    _READER + "cd src && /tmp/rd ../",
    _READER + "sh /tmp/rd .",
    _READER + "bash /tmp/rd \"$PWD\"",
]
# Denied without the oracle running them (the program is not installed here, or needs more).
DENIED = [
    "somearchiver a /tmp/x.7z .", "somearchiver --input=. /tmp/x", "frob ./", "frob secret/", "cd src && frob ..",
    "node x.js .", "python3 x.py .", "bash x.sh .", "python3 -m somemodule .",
    # inline code's arguments are a script's: code may read them without naming them
    # (`perl -e 'print <>'`, python's fileinput), so no reading of the code narrows them
    "python3 -c 'print(1)' .", "node -e 1 .", "perl -e 1 .", "ruby -e 1 .",
]
BENIGN_REAL = [
    "python3 -m zipfile -c /tmp/o.zip src",
    "python3 -m zipfile -c /tmp/o.zip README",
    _READER + "/tmp/rd src",
    "python3 -m tarfile -c /tmp/o.tar build src",
]
BENIGN = ["frob src", "frob README src/a.txt", "make build", "npm test", "python3 -m pytest src", "python3 x.py src",
          "python3 -c 'print(1)' src",
          # programs that look at a directory's names and metadata only, never its files' contents
          "ls .", "ls -R .", "du -sh .", "tree .", "cd . && ls", "test -d .", "realpath .", "stat .", "mkdir -p ./x"]


def _needs(command: str) -> None:
    for program in ("python3", "find"):
        if program in command and shutil.which(program) is None:
            pytest.skip(f"{program} is not installed here")


@pytest.mark.parametrize("command", REAL)
def test_unknown_reader_of_a_directory_reads_and_is_denied(oracle, engine, command):
    _needs(command)
    assert "secret-read" in happened(oracle.run(command, timeout=15)), command  # the read really happens
    v = engine.decide(command)
    assert (v.behavior, v.reason) == ("deny", "maybe-deny"), v.to_json()


@pytest.mark.parametrize("command", DENIED)
def test_unknown_reader_of_a_directory_is_denied(engine, command):
    v = engine.decide(command)
    assert (v.behavior, v.reason) == ("deny", "maybe-deny"), v.to_json()


@pytest.mark.parametrize("command", BENIGN_REAL)
def test_unknown_reader_of_a_clean_directory_reads_nothing_denied_and_is_allowed(oracle, engine, command):
    _needs(command)
    assert happened(oracle.run(command, timeout=15)) == set(), command
    v = engine.decide(command)
    assert v.behavior == "allow", v.to_json()


@pytest.mark.parametrize("command", BENIGN)
def test_unknown_reader_of_a_clean_directory_is_allowed(engine, command):
    v = engine.decide(command)
    assert v.behavior == "allow", v.to_json()


def test_a_directory_read_is_maybe_in_manual(world_session):
    # Manual asks (maybe-deny), never denies outright: the program may read nothing there.
    s = world_session.setup(project={"deny": ["Read(.env)"]})
    try:
        v = world_session.decide("Bash(frob .)", world_session.ctx(s, mode="manual"))
        assert (v.behavior, v.reason) == ("ask", "maybe-deny"), v.to_json()
    finally:
        world_session.setup()


def test_a_decision_on_a_file_operand_is_kept_and_checked_again(world_session):
    # A possible read of a plain file is not walked: the decision is kept (the memo checks that the
    # operand is still no directory), and turning the file into a directory holding a denied
    # entry changes the answer.
    import os

    s = world_session.setup(project={"deny": ["Read(.env)"]})
    ctx = world_session.ctx(s, mode="bypass")
    path = os.path.join(world_session.root, "later")
    with open(path, "w") as f:
        f.write("x\n")
    try:
        assert world_session.decide("Bash(frob later)", ctx).behavior == "allow"
        assert world_session.decide("Bash(frob later)", ctx).behavior == "allow"
        os.unlink(path)
        os.makedirs(path)
        with open(os.path.join(path, ".env"), "w") as f:
            f.write("K=1\n")
        v = world_session.decide("Bash(frob later)", ctx)
        assert (v.behavior, v.reason) == ("deny", "maybe-deny"), v.to_json()
    finally:
        shutil.rmtree(path, ignore_errors=True)
        if os.path.exists(path):
            os.unlink(path)
        world_session.setup()
