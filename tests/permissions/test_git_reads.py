"""Git as a reader of denied paths: with `Read(secret/**)` denied, a git subcommand that prints,
diffs, greps, archives or stores a denied file's content is denied in Bypass (a `deny-rule` or a
`maybe-deny`), like `cat secret/key` — data/wrappers.toml `git.reads`, shell/fileops.py
`_git_reads`, docs/reference/permissions.md ("Git as a reader").

The oracle is real git: in a throwaway repository with secret/key committed (and then changed in
the working tree), each spelling is run by bash and the test first checks that the secret really
reached its output (or the index, or a stash) — so every case is a real read the engine must close.
The ordinary git commands beside them stay allowed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import pytest


# (command, where the oracle finds the secret: "out" its output, or a git command printing what it stored)
READS = [
    ("git show HEAD:secret/key", "out"),
    ("git show :secret/key", "out"),
    ("git cat-file -p HEAD:secret/key", "out"),
    ("git diff --no-index secret/key README", "out"),
    ("git log -p -- secret/key", "out"),
    ("git blame secret/key", "out"),
    ("git grep s3cr3t", "out"),
    ("git archive HEAD secret", "out"),
    ("git add secret/key", "git show :secret/key"),
    ("git stash", "git show stash@{0}:secret/key"),
    ("git commit -am x", "git show HEAD:secret/key"),
    ("git add -A", "git show :secret/key"),
    ("cd src && git show HEAD:secret/key", "out"),
    ("git -C src show HEAD:secret/key", "out"),
    ("git show HEAD:./secret/key", "out"),
    ("git --no-pager show :0:secret/key", "out"),
    ("git archive HEAD:secret", "out"),
    ("git grep -e m0re -- secret", "out"),
    ("/usr/lib/git-core/git-show HEAD:secret/key", "out"),
]
# Spellings the oracle does not run: their path is dynamic, or they read what they are fed.
DENIED_UNRUN = ['git show "$R":secret/key', "git cat-file --batch", "git stash push -m x -- secret/key",
                "git hash-object -w secret/key", "git log -p HEAD -- ':(top)secret/key'", "git archive -o o.tar HEAD"]
BENIGN = ["git status", "git log", "git diff --stat", "git show HEAD --stat", "git add src/a.txt", "git commit -m x",
          "git log --oneline", "git stash list", "git show HEAD:src/a.txt", "git log -p -- src", "git diff -- README",
          "git grep foo -- src", "git blame README", "git add src", "git branch", "git checkout -b topic"]


def _git(args, cwd, env):
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, timeout=60)


class _Repo:
    def __init__(self) -> None:
        self.base = os.path.realpath(tempfile.mkdtemp(prefix="ohgitread-", dir="/var/tmp"))
        self.home = os.path.join(self.base, "home")
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": self.home, "GIT_CONFIG_NOSYSTEM": "1",
                    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
                    "GIT_COMMITTER_EMAIL": "t@x", "GIT_EDITOR": "true", "GIT_PAGER": "cat", "LANG": "C"}

    def fresh(self) -> str:
        """secret/key committed as `s3cr3t`, then `m0re` appended in the working tree."""
        for name in ("work", "home"):
            shutil.rmtree(os.path.join(self.base, name), ignore_errors=True)
        os.makedirs(self.home)
        work = os.path.join(self.base, "work")
        _git(["init", "-q", "-b", "main", work], self.base, self.env)
        for rel, text in (("secret/key", "s3cr3t\n"), ("README", "readme\n"), ("src/a.txt", "a\n")):
            os.makedirs(os.path.dirname(os.path.join(work, rel)) or work, exist_ok=True)
            with open(os.path.join(work, rel), "w") as f:
                f.write(text)
        _git(["add", "."], work, self.env)
        _git(["commit", "-q", "-m", "one"], work, self.env)
        with open(os.path.join(work, "secret/key"), "a") as f:
            f.write("m0re\n")
        return work

    def reads(self, command: str, where: str) -> bool:
        work = self.fresh()
        out = subprocess.run(["bash", "-c", command], cwd=work, env=self.env, capture_output=True, timeout=60).stdout
        if where == "out":
            return b"s3cr3t" in out or b"m0re" in out
        return b"m0re" in _git(where.split()[1:], work, self.env).stdout

    def close(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture(scope="module")
def repo():
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    r = _Repo()
    yield r
    r.close()


def _denied(engine, command):
    v = engine.decide(command)
    assert (v.behavior, v.reason) in (("deny", "deny-rule"), ("deny", "maybe-deny")), (command, v.to_json())


@pytest.mark.parametrize("command,where", READS)
def test_git_reading_a_denied_file_is_denied(engine, repo, command, where):
    assert repo.reads(command, where), f"the oracle: {command!r} did not read secret/key, so it tests nothing"
    _denied(engine, command)


@pytest.mark.parametrize("command", DENIED_UNRUN)
def test_other_git_reads_are_denied(engine, command):
    _denied(engine, command)


def test_an_object_name_is_a_read_not_a_guess(engine):
    # `REV:PATH` names a file: a match of the rule itself, not a maybe.
    for command in ("git show HEAD:secret/key", "git cat-file -p :secret/key", "git log -p -- secret/key"):
        assert engine.decide(command).reason == "deny-rule", command


@pytest.mark.parametrize("command", BENIGN)
def test_ordinary_git_still_allowed(engine, command):
    v = engine.decide(command)
    assert v.behavior == "allow", (command, v.to_json())


def test_adding_the_whole_tree_is_a_possible_read(engine):
    # `git add .` / `git add -A` copy every file under the directory into the object store, and
    # `git diff` prints every tracked file's changes. The engine's world is no repository: with no
    # `.git` to say what is tracked or ignored, every entry counts (test_git_reach.py has real
    # repositories, where an ignored or untracked secret leaves these allowed): maybe-deny.
    for command in ("git add .", "git add -A", "git add --all", "git diff", "git show", "git log -p"):
        v = engine.decide(command)
        assert (v.behavior, v.reason) == ("deny", "maybe-deny"), (command, v.to_json())
