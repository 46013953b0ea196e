"""Git's reach over the tree: what `git diff`, `git add .`, `git stash`, `git grep` … read of a
Read-denied file, as git's own files say (permissions/gitreach.py, data/wrappers.toml `git.reads`,
docs/reference/permissions.md "Git as a reader").

Each case builds a real repository with the real `git` in a temporary directory, asks the engine
(Bypass mode, `Read(secret.txt)` and `Read(.env)` denied) and runs the command with git as the
oracle: did the secret's marker reach the output, or an object git stored (the index, a commit, a
stash)? An allowed case must be one where git did not read the secret; a denied one is either a
read git really made or a named over-match (an index the engine cannot read, git's environment
moved). Beside them: the index reader against `git ls-files` on random trees (versions 2, 3, 4) and
the ignore rules against `git check-ignore`.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess

import pytest

from metaharness.permissions import decide, load_settings, trust_workspace
from metaharness.permissions.engine import oharness_call
from metaharness.permissions.gitreach import UnreadableIndex, read_index, view_of

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

MARK = "MARKER-5e1f9c"
DENY = ["Read(secret.txt)", "Read(.env)"]


class World:
    """A fresh repository under tmp_path (work/, with its own HOME), its engine and its oracle."""

    def __init__(self, base, monkeypatch) -> None:
        self.base = os.path.realpath(str(base))
        self.home = os.path.join(self.base, "home")
        self.work = os.path.join(self.base, "work")
        os.makedirs(os.path.join(self.home, ".config"))
        # the engine reads the global git config and excludes from this process's HOME, as git does
        monkeypatch.setenv("HOME", self.home)
        monkeypatch.setenv("XDG_CONFIG_HOME", os.path.join(self.home, ".config"))
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": self.home,
                    "XDG_CONFIG_HOME": os.path.join(self.home, ".config"),
                    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
                    "GIT_COMMITTER_EMAIL": "t@x", "GIT_EDITOR": "true", "GIT_PAGER": "cat", "LANG": "C"}
        self.git("init", "-q", "-b", "main", self.work, cwd=self.base)
        self.write("README", "readme\n")
        self.write("src/a.txt", "a\n")
        self.git("add", ".")
        self.git("commit", "-q", "-m", "one")

    def git(self, *args: str, cwd: str | None = None) -> bytes:
        done = subprocess.run(["git", *args], cwd=cwd or self.work, env=self.env, capture_output=True, timeout=60)
        assert done.returncode == 0, (args, done.stderr)
        return done.stdout

    def write(self, rel: str, text: str, root: str | None = None) -> None:
        path = os.path.join(root or self.work, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a") as f:
            f.write(text)

    def verdict(self, command: str, cwd: str | None = None) -> str:
        root = self.work
        settings_dir = os.path.join(self.base, "settings")
        os.makedirs(os.path.join(settings_dir, ".oharness"), exist_ok=True)
        with open(os.path.join(settings_dir, ".oharness", "settings.json"), "w") as f:
            json.dump({"deny": DENY}, f)
        # the rules live in the project's settings; the project root is the repository
        os.makedirs(os.path.join(root, ".oharness"), exist_ok=True)
        shutil.copy(os.path.join(settings_dir, ".oharness", "settings.json"), os.path.join(root, ".oharness"))
        trust_workspace(root, self.home)
        settings = load_settings(root, home=self.home)
        assert settings.ok, [str(e) for e in settings.errors]
        v = decide(oharness_call("bash", {"command": command}, cwd or root), settings.context(mode="bypass"))
        return v.behavior

    def _stored(self) -> bool:
        objects = subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch"], cwd=self.work,
                                 env=self.env, capture_output=True, timeout=60).stdout
        return MARK.encode() in objects

    def leaks(self, command: str, cwd: str | None = None) -> bool:
        """Did running `command` put the marker in its output or in an object git stored?"""
        before = self._stored()
        done = subprocess.run(["bash", "-c", command], cwd=cwd or self.work, env=self.env, capture_output=True,
                              timeout=60)
        return MARK.encode() in done.stdout + done.stderr or (self._stored() and not before)


@pytest.fixture
def world(tmp_path, monkeypatch):
    return World(tmp_path, monkeypatch)


def _ignored_env(w: World) -> None:
    """.env (the secret) ignored by the committed .gitignore; README changed in the work tree."""
    w.write(".gitignore", ".env\n.oharness/\n")
    w.git("add", ".gitignore")
    w.git("commit", "-q", "-m", "ignore")
    w.write(".env", f"KEY={MARK}\n")
    w.write("README", "more\n")


def _tracked_secret(w: World) -> None:
    """secret.txt committed with the marker, changed and staged, then changed again."""
    w.write(".gitignore", ".oharness/\n")
    w.write("secret.txt", f"{MARK}\n")
    w.git("add", ".")
    w.git("commit", "-q", "-m", "secret")
    w.write("secret.txt", "two\n")
    w.git("add", "secret.txt")
    w.write("secret.txt", "three\n")


def _stashed_secret(w: World) -> None:
    _tracked_secret(w)
    w.git("stash", "-q")


def _untracked_secret(w: World) -> None:
    """secret.txt untracked and not ignored; README changed."""
    w.write(".gitignore", ".oharness/\n")
    w.git("add", ".gitignore")
    w.git("commit", "-q", "-m", "ignore")
    w.write("secret.txt", f"{MARK}\n")
    w.write("README", "more\n")


def _ignore_file(rel: str, patterns: str, secret: str = "secret.txt"):
    def setup(w: World) -> None:
        w.write(".gitignore", ".oharness/\n")
        w.write(rel, patterns)
        if not rel.startswith(".git/"):
            w.git("add", "-f", rel, ".gitignore")
        w.git("commit", "-q", "--allow-empty", "-m", "ignore")
        w.write(secret, f"{MARK}\n")
        w.write("README", "more\n")
    return setup


def _global_excludes(w: World) -> None:
    w.write(".gitconfig", "[core]\n\texcludesFile = ~/global-ignore\n", root=w.home)
    w.write("global-ignore", "secret.txt\n", root=w.home)
    _ignore_file(".gitignore", "")(w)


def _continued_value_excludes(w: World) -> None:
    """A `[core] excludesFile` that is only the rest of a continued alias value: git reads no
    excludes file here, so secret.txt is not ignored (a line-by-line reading would think it is)."""
    w.write("global-ignore", "secret.txt\n", root=w.home)
    config = os.path.join(w.work, ".git", "config")
    with open(config, "a") as f:
        f.write(f"[alias]\n\tx = a\\\n[core] excludesFile = {w.home}/global-ignore\n")
    _ignore_file(".gitignore", "")(w)


def _xdg_excludes(w: World) -> None:
    w.write(".config/git/ignore", "secret.txt\n", root=w.home)
    _ignore_file(".gitignore", "")(w)


def _v4_index(setup):
    def v4(w: World) -> None:
        setup(w)
        w.git("update-index", "--index-version", "4")
    return v4


def _garbage_index(w: World) -> None:
    _ignored_env(w)
    with open(os.path.join(w.work, ".git", "index"), "wb") as f:
        f.write(b"DIRC\0\0\0\x09garbage" + bytes(40))


# (setup, command, the engine's verdict, what the oracle sees: True the secret was read, False it
# was not, None not asserted — an over-match the engine keeps on purpose)
CASES = [
    (_ignored_env, "git add .", "allow", False),
    (_ignored_env, "git add -A", "allow", False),
    (_ignored_env, "git commit -am msg", "allow", False),
    (_ignored_env, "git stash", "allow", False),
    (_ignored_env, "git stash -u", "allow", False),
    (_ignored_env, "git diff", "allow", False),
    (_ignored_env, "git show", "allow", False),
    (_ignored_env, "git log -p", "allow", False),
    (_ignored_env, f"git grep {MARK}", "allow", False),
    (_ignored_env, "git add -f .", "deny", True),
    (_ignored_env, "git stash -a", "deny", True),
    (_ignored_env, f"git grep --no-index {MARK}", "deny", True),
    (_ignored_env, "git -c core.excludesFile=/dev/null add .", "deny", None),
    (_ignored_env, "GIT_DIR=.git git add .", "deny", None),
    (_tracked_secret, "git diff", "deny", True),
    (_tracked_secret, "git diff --cached", "deny", True),
    (_tracked_secret, "git diff --staged", "deny", True),
    (_tracked_secret, "git diff HEAD", "deny", True),
    (_tracked_secret, "git show", "deny", True),
    (_tracked_secret, "git log -p", "deny", True),
    (_tracked_secret, "git log --patch", "deny", True),
    (_tracked_secret, "git whatchanged -p", "deny", True),
    (_tracked_secret, "git format-patch -1 --stdout", "deny", True),
    (_tracked_secret, f"git grep {MARK}", "deny", True),
    (_tracked_secret, "git archive HEAD", "deny", True),
    (_tracked_secret, "git diff --stat -p", "deny", True),
    (_tracked_secret, "cd src && git diff", "deny", True),
    (_tracked_secret, "git diff --stat", "allow", False),
    (_tracked_secret, "git diff --name-only", "allow", False),
    (_tracked_secret, "git diff --name-status", "allow", False),
    (_tracked_secret, "git log", "allow", False),
    (_tracked_secret, "git log --stat", "allow", False),
    (_tracked_secret, "git status", "allow", False),
    (_tracked_secret, "git show HEAD:README", "allow", False),
    (_tracked_secret, "git diff -- README", "allow", False),
    (_stashed_secret, "git stash show -p", "deny", True),
    (_stashed_secret, "git stash show", "allow", False),
    (_stashed_secret, "git stash list", "allow", False),
    (_untracked_secret, "git add .", "deny", True),
    (_untracked_secret, "git add -A", "deny", True),
    (_untracked_secret, "git stash -u", "deny", True),
    (_untracked_secret, f"git grep --untracked {MARK}", "deny", True),
    (_untracked_secret, "git diff", "allow", False),
    (_untracked_secret, "git stash", "allow", False),
    (_untracked_secret, "git commit -am msg", "allow", False),
    (_untracked_secret, "git add -u", "allow", False),
    (_untracked_secret, f"git grep {MARK}", "allow", False),
    (_untracked_secret, "git add src", "allow", False),
    (_garbage_index, "git diff", "deny", None),
    (_garbage_index, "git add .", "deny", None),
    (_ignore_file("sub/.gitignore", "secret.txt\n", "sub/secret.txt"), "git add .", "allow", False),
    (_ignore_file("sub/.gitignore", "secret.txt\n", "secret.txt"), "git add .", "deny", True),
    (_ignore_file(".gitignore", "*.txt\n!secret.txt\n"), "git add .", "deny", True),
    (_ignore_file(".gitignore", "*.txt\n"), "git add .", "allow", False),
    (_ignore_file(".gitignore", "private/\n", "private/secret.txt"), "git add -A", "allow", False),
    (_ignore_file(".gitignore", "private/\n!private/secret.txt\n", "private/secret.txt"), "git add .", "allow", False),
    (_ignore_file(".gitignore", "private/*\n!private/secret.txt\n", "private/secret.txt"), "git add .", "deny", True),
    (_ignore_file(".git/info/exclude", "secret.txt\n"), "git add .", "allow", False),
    (_global_excludes, "git add .", "allow", False),
    (_xdg_excludes, "git add .", "allow", False),
    (_continued_value_excludes, "git add .", "deny", True),
    (_v4_index(_tracked_secret), "git diff", "deny", True),
    (_v4_index(_ignored_env), "git add .", "allow", False),
    (_v4_index(_ignored_env), "git diff", "allow", False),
]


def _case_id(case) -> str:
    setup, command, verdict, _ = case
    name = getattr(setup, "__name__", "setup")
    return f"{name}-{command}-{verdict}"


@pytest.mark.parametrize("setup,command,verdict,read", CASES, ids=[_case_id(case) for case in CASES])
def test_git_reach_against_git(world, setup, command, verdict, read):
    setup(world)
    got = world.verdict(command)
    leaked = world.leaks(command)
    assert got == verdict, (command, got)
    if read is not None:
        assert leaked == read, f"the oracle: {command!r} {'did not read' if read else 'read'} the secret"
    if got == "allow":
        assert not leaked, (command, "allowed, but git read the secret")


def test_a_worktree_reads_its_own_index(world):
    # `.git` of a linked worktree is a file `gitdir: …`; its index is in the main repository's
    # .git/worktrees/NAME, its info/exclude in the common directory.
    _ignored_env(world)
    world.git("commit", "-q", "-am", "readme")
    linked = os.path.join(world.base, "linked")
    world.git("worktree", "add", "-q", linked)
    assert os.path.isfile(os.path.join(linked, ".git"))
    world.write(".env", f"KEY={MARK}\n", root=linked)
    world.write("README", "changed\n", root=linked)
    assert world.verdict("git add .", cwd=linked) == "allow"
    assert not world.leaks("git add .", cwd=linked)
    world.write("secret.txt", f"{MARK}\n", root=linked)
    assert world.verdict("git add .", cwd=linked) == "deny"
    world.git("add", ".", cwd=linked)
    world.git("commit", "-q", "-m", "s", cwd=linked)
    world.write("secret.txt", "more\n", root=linked)
    assert world.verdict("git diff", cwd=linked) == "deny"
    assert world.leaks("git diff", cwd=linked)


def test_a_submodule_counts_as_every_entry_under_it(world):
    # a gitlink's files are another repository's (`git diff --submodule=diff` prints their
    # changes): the engine walks all of it, over-matching
    inner = os.path.join(world.work, "sub")
    world.git("init", "-q", "-b", "main", inner)
    world.write("secret.txt", f"{MARK}\n", root=inner)
    world.git("add", ".", cwd=inner)
    world.git("commit", "-q", "-m", "inner", cwd=inner)
    world.write(".gitignore", ".oharness/\n")
    world.git("add", ".gitignore", "sub")
    world.git("commit", "-q", "-m", "outer")
    world.write("secret.txt", "more\n", root=inner)
    assert world.verdict("git diff") == "deny"
    assert world.leaks("git diff --submodule=diff")
    assert world.verdict("git diff -- README") == "allow"


def _random_tree(w: World, seed: int) -> None:
    rng = random.Random(seed)
    words = ["a", "b", "src", "lib", "x" * 40, "deep", "é", "名前", "with space", "z.txt", "prefix", "prefixed"]
    for _ in range(rng.randint(5, 60)):
        depth = rng.randint(1, 5)
        rel = "/".join(rng.choice(words) + ("" if i else str(rng.randint(0, 9))) for i in range(depth))
        if os.path.isdir(os.path.join(w.work, rel)):
            continue
        parent = os.path.dirname(rel)
        if parent and os.path.isfile(os.path.join(w.work, parent)):
            continue
        try:
            w.write(rel, f"{seed}\n")
        except (IsADirectoryError, NotADirectoryError):
            continue
    w.git("add", "-A")
    if seed % 3 == 0:
        w.write("intent.txt", "i\n")
        w.git("add", "-N", "intent.txt")  # an extended entry: version 3


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("version", [2, 3, 4])
def test_index_reader_agrees_with_ls_files(world, seed, version):
    _random_tree(world, seed)
    if version != 3 or seed % 3:
        world.git("update-index", "--index-version", str(version))
    with open(os.path.join(world.work, ".git", "index"), "rb") as f:
        data = f.read()
    modes = read_index(data)
    staged = world.git("ls-files", "-s", "-z").split(b"\0")
    expected = {}
    for line in filter(None, staged):
        info, _, path = line.partition(b"\t")
        expected[os.fsdecode(path)] = int(info.split()[0], 8)
    assert modes == expected


@pytest.mark.parametrize("data", [b"", b"DIRC", b"DIRC\0\0\0\x05\0\0\0\0" + bytes(20), b"XXXX\0\0\0\x02\0\0\0\0" + bytes(20),
                                  b"DIRC\0\0\0\x02\0\0\0\x05" + bytes(30)])
def test_an_index_that_cannot_be_read_is_no_answer(data):
    with pytest.raises(UnreadableIndex):
        read_index(data)


def test_a_required_extension_is_no_answer(world):
    # a sparse or split index carries a lower-case extension: the reader gives no answer
    with open(os.path.join(world.work, ".git", "index"), "rb") as f:
        data = f.read()
    body = data[:-20] + b"link" + (0).to_bytes(4, "big")
    with pytest.raises(UnreadableIndex):
        read_index(body + bytes(20))


IGNORES = "*.log\n!keep.log\nbuild/\n/top.txt\ndocs/**/secret*\n!docs/a/secret2\nout/*\n!out/keep\nnested/\n!nested/x\n"
PATHS = ["a.log", "keep.log", "sub/b.log", "build/x", "sub/build/y", "top.txt", "sub/top.txt", "docs/a/secret1",
         "docs/a/secret2", "docs/secret3", "out/keep", "out/other", "nested/x", "plain.txt", "sub/sub.txt"]


def test_ignore_rules_agree_with_check_ignore(world):
    world.write(".gitignore", IGNORES)
    world.write("sub/.gitignore", "sub.txt\n!b.log\n")
    for rel in PATHS:
        world.write(rel, "x\n")
    done = subprocess.run(["git", "check-ignore", "--no-index", *PATHS], cwd=world.work, env=world.env,
                          capture_output=True, timeout=60)
    expected = set(done.stdout.decode().split())
    _, view = view_of(world.work)
    assert view is not None
    assert {rel for rel in PATHS if view.ignored(rel, False)} == expected


def test_git_environment_is_no_answer(world, monkeypatch):
    monkeypatch.setenv("GIT_INDEX_FILE", "/elsewhere")
    assert view_of(world.work)[1] is None
