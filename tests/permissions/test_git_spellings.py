"""Git by another name (issue 24): a `Bash(git push*)` or `Bash(git fetch*)` deny rule holds for the
other git spellings that push or fetch — `send-pack`, `subtree push`, the dashed programs, an alias
stored by `git config`, a command run by `rebase -x` or `submodule foreach` — as at least `maybe`.

The oracle is real git: each spelling is run in a throwaway clone whose remote is a local bare
repository, and the test first checks that the push (or fetch) really happened — so every case is a
real bypass the engine must close — then that the engine denies it in Bypass and never allows it in
Manual. The benign git commands beside them must still be allowed, and push nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import pytest

from permissions_rules import R

GIT_DENY = {"allow": R["allow"], "deny": R["deny"] + ["Bash(git push*)", "Bash(git fetch*)"]}

# Spellings that really push to ../remote.git (the oracle checks it), each denied.
PUSHES = [
    "git send-pack ../remote.git main",
    "git --no-pager send-pack ../remote.git main",
    "git -C . send-pack ../remote.git main",
    "/usr/lib/git-core/git-send-pack ../remote.git main",
    "/usr/lib/git-core/git-push ../remote.git main",
    "git -c alias.x=send-pack x ../remote.git main",
    "git subtree push --prefix=sub ../remote.git split",
    "git -C . subtree push -P sub ../remote.git split",
    "git config alias.p push && git p ../remote.git main",
    "git config --global alias.p '!git push ../remote.git main' && git p",
    "git config diff.external 'git push ../remote.git main; true' && git diff HEAD~1",
    "git rebase -x 'git push ../remote.git HEAD:refs/heads/x' HEAD~1",
    "git rebase --exec='git send-pack ../remote.git main' HEAD~1",
]
# Spellings of a push or a fetch the engine must deny without the oracle running them (a remote
# helper, an SVN or Perforce bridge, a dynamic alias).
DENIED_UNRUN = [
    "git http-push https://example.invalid/r.git main", "git receive-pack ../remote.git",
    "git remote-https origin https://example.invalid/r.git", "git remote-ext origin 'ssh host'", "git svn dcommit",
    "git p4 submit", "git-send-pack ../remote.git main", "sudo git send-pack ../remote.git main",
    "git submodule foreach 'git push'", "git submodule foreach --recursive git push", "git bisect run git push",
    "git filter-branch --tree-filter 'git push' HEAD", "git config \"$K\" push", "git config alias.p \"$V\"",
    "git config --global alias.p '!rm -rf build'", "git rebase -x \"$CMD\" main",
    "git config set alias.p push; git p ../remote.git main",
    "git fetch-pack ../remote.git main", "git pull", "git pull origin main", "git remote update", "git remote -v update",
    "git svn fetch", "git svn rebase", "git p4 sync", "git subtree pull --prefix=sub origin main",
]
# Fetches the oracle runs: did `refs/remotes/origin/other` or FETCH_HEAD appear?
FETCHES = ["git remote update", "git pull origin other --no-rebase --no-edit", "git -c alias.u='remote update' u"]
# Benign git commands beside them: allowed in Bypass, and they push nothing.
BENIGN = [
    "git status", "git log --oneline", "git remote -v", "git stash list", "git subtree split --prefix=sub",
    "git config alias.st status", "git config user.name x", "git commit --allow-empty -m push",
    "git config alias.p", "git branch push",
]


def _git(args, cwd, env):
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


class _Repos:
    """A clone `work` (two commits on main, a subtree directory `sub`, a remote `origin` whose
    branch `other` it has not fetched) and a fresh bare `remote.git` for each run."""

    def __init__(self) -> None:
        self.base = os.path.realpath(tempfile.mkdtemp(prefix="ohgit-", dir="/var/tmp"))
        self.home = os.path.join(self.base, "home")
        os.makedirs(self.home)
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": self.home, "GIT_CONFIG_NOSYSTEM": "1",
                    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
                    "GIT_COMMITTER_EMAIL": "t@x", "GIT_EDITOR": "true", "LANG": "C"}

    def fresh(self) -> tuple[str, str]:
        for name in ("work", "remote.git", "origin.git", "home"):
            shutil.rmtree(os.path.join(self.base, name), ignore_errors=True)
        os.makedirs(self.home)
        work, remote, origin = (os.path.join(self.base, n) for n in ("work", "remote.git", "origin.git"))
        _git(["init", "-q", "--bare", remote], self.base, self.env)
        _git(["init", "-q", "--bare", "-b", "main", origin], self.base, self.env)
        _git(["init", "-q", "-b", "main", work], self.base, self.env)
        os.makedirs(os.path.join(work, "sub"))
        for rel, text in (("a.txt", "a\n"), ("sub/s.txt", "s\n")):
            with open(os.path.join(work, rel), "w") as f:
                f.write(text)
        _git(["add", "."], work, self.env)
        _git(["commit", "-q", "-m", "one"], work, self.env)
        with open(os.path.join(work, "a.txt"), "a") as f:
            f.write("b\n")
        _git(["commit", "-q", "-am", "two"], work, self.env)
        _git(["push", "-q", origin, "main:main", "main:other"], work, self.env)
        _git(["remote", "add", "origin", origin], work, self.env)
        return work, remote

    def run(self, command: str) -> tuple[bool, bool]:
        """(pushed to remote.git, fetched from origin) when bash runs `command` in a fresh clone."""
        work, remote = self.fresh()
        subprocess.run(["bash", "-c", command], cwd=work, env=self.env, capture_output=True, timeout=60)
        refs = _git(["for-each-ref"], remote, self.env).stdout.strip()
        fetched = (bool(_git(["for-each-ref", "refs/remotes/origin/other"], work, self.env).stdout.strip())
                   or os.path.exists(os.path.join(work, ".git", "FETCH_HEAD")))
        return bool(refs), fetched

    def close(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture(scope="module")
def repos():
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    r = _Repos()
    yield r
    r.close()


@pytest.fixture(scope="module")
def ctxs(world_session):
    os.environ["HOME"] = world_session.home
    s = world_session.setup(project=GIT_DENY)
    yield {"bypass": world_session.ctx(s, mode="bypass"), "manual": world_session.ctx(s, mode="manual")}
    world_session.setup()


def _denied(world, ctxs, command):
    bypass = world.decide(f"Bash({command})", ctxs["bypass"])
    assert bypass.behavior == "deny", (command, bypass.to_json())
    manual = world.decide(f"Bash({command})", ctxs["manual"])
    assert manual.behavior in ("deny", "ask"), (command, manual.to_json())


@pytest.mark.parametrize("command", PUSHES)
def test_a_push_by_another_name_is_denied(world_session, ctxs, repos, command):
    pushed, _ = repos.run(command)
    assert pushed, f"the oracle: {command!r} did not push, so it tests nothing"
    _denied(world_session, ctxs, command)


@pytest.mark.parametrize("command", FETCHES)
def test_a_fetch_by_another_name_is_denied(world_session, ctxs, repos, command):
    _, fetched = repos.run(command)
    assert fetched, f"the oracle: {command!r} did not fetch, so it tests nothing"
    _denied(world_session, ctxs, command)


@pytest.mark.parametrize("command", DENIED_UNRUN)
def test_other_spellings_are_denied(world_session, ctxs, command):
    _denied(world_session, ctxs, command)


@pytest.mark.parametrize("command", BENIGN)
def test_benign_git_still_allowed(world_session, ctxs, repos, command):
    pushed, fetched = repos.run(command)
    assert not pushed and not fetched, command
    v = world_session.decide(f"Bash({command})", ctxs["bypass"])
    assert v.behavior == "allow", (command, v.to_json())


def test_a_spelling_is_maybe_not_a_match(world_session, ctxs):
    # `git send-pack` may push nothing (no ref named): a maybe-deny, which asks in Manual.
    v = world_session.decide("Bash(git send-pack ../remote.git main)", ctxs["manual"])
    assert (v.behavior, v.reason) == ("ask", "maybe-deny"), v.to_json()
    v = world_session.decide("Bash(/usr/lib/git-core/git-push origin main)", ctxs["manual"])
    assert (v.behavior, v.reason) == ("deny", "deny-rule"), v.to_json()


def test_an_exact_allow_of_the_spelling_is_not_widened(world_session):
    # The extra `git push` layer is for deny and ask only: an allow rule for the spelling covers it.
    s = world_session.setup(project={"allow": ["Bash(git send-pack *)"]})
    try:
        v = world_session.decide("Bash(git send-pack ../remote.git main)", world_session.ctx(s, mode="manual"))
        assert v.behavior == "allow", v.to_json()
    finally:
        world_session.setup(project=GIT_DENY)
