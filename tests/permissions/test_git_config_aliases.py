"""A git alias defined in a configuration file is what runs (docs/reference/permissions.md, "Git by
another name"): `git x` with `[alias] x = !rm -rf dist` in `.git/config`, `~/.gitconfig`, the XDG
config, an included file or `GIT_CONFIG_COUNT`'s variables runs `rm -rf dist`, and a
`Bash(rm -rf *)` deny rule holds for it in Bypass.

The oracle is real git and bash: each case builds a repository in tmp_path with real `git`, writes
the configuration (HOME and XDG_CONFIG_HOME point into tmp_path for git and for the engine alike;
the system config is off for both), asks the engine, then runs the command and checks the one
invariant both ways — when the engine allows, `dist` (the denied action's target) is still there;
when `dist` is gone, the engine denied. Each case also states what it expects of both, so a case
that tests nothing (the action never happens where it should) fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from metaharness.permissions import decide, load_settings, trust_workspace
from metaharness.permissions.engine import oharness_call
from metaharness.permissions.shell import gitconfig

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

DENY = ["Bash(rm -rf *)", "Bash(git push*)", "Read(secret/**)"]

RM_BANG = "!rm -rf dist"

# (id, files: where → text appended, command, engine verdict, whether git really removes dist).
# where: "repo" (.git/config), "global" (~/.gitconfig), "xdg" ($XDG_CONFIG_HOME/git/config),
# "inc" (~/inc.cfg, for includes), "other" (../other/.git/config). None: git's own answer varies.
CASES = [
    ("repo", {"repo": "[alias]\n\tx = !rm -rf dist\n"}, "git x", "deny", True),
    ("global", {"global": "[alias]\n\tx = !rm -rf dist\n"}, "git x", "deny", True),
    ("xdg", {"xdg": "[alias]\n\tx = !rm -rf dist\n"}, "git x", "deny", True),
    ("include", {"global": "[include]\n\tpath = inc.cfg\n", "inc": "[alias]\n\tx = !rm -rf dist\n"}, "git x", "deny",
     True),
    ("include-tilde", {"repo": "[include]\n\tpath = ~/inc.cfg\n", "inc": "[alias]\n\tx = !rm -rf dist\n"}, "git x",
     "deny", True),
    ("includeif-gitdir", {"global": '[includeIf "gitdir:{repo}/"]\n\tpath = inc.cfg\n',
                          "inc": "[alias]\n\tx = !rm -rf dist\n"}, "git x", "deny", True),
    ("includeif-gitdir-glob", {"global": '[includeIf "gitdir:**/proj/"]\n\tpath = inc.cfg\n',
                               "inc": "[alias]\n\tx = !rm -rf dist\n"}, "git x", "deny", True),
    ("includeif-gitdir-icase", {"global": '[includeIf "gitdir/i:{REPO}/"]\n\tpath = inc.cfg\n',
                                "inc": "[alias]\n\tx = !rm -rf dist\n"}, "git x", "deny", True),
    ("includeif-gitdir-elsewhere", {"global": '[includeIf "gitdir:/elsewhere/"]\n\tpath = inc.cfg\n',
                                    "inc": "[alias]\n\tx = !rm -rf dist\n"}, "git x", "allow", False),
    ("includeif-onbranch", {"repo": '[includeIf "onbranch:ma*"]\n\tpath = ~/inc.cfg\n',
                            "inc": "[alias]\n\tx = !rm -rf dist\n"}, "git x", "deny", None),  # git 2.39: not for aliases
    ("includeif-onbranch-other", {"repo": '[includeIf "onbranch:dev"]\n\tpath = ~/inc.cfg\n',
                                  "inc": "[alias]\n\tx = !rm -rf dist\n"}, "git x", "allow", False),
    ("includeif-hasconfig", {"global": '[includeIf "hasconfig:remote.*.url:https://x/**"]\n\tpath = inc.cfg\n',
                             "inc": "[alias]\n\tx = !rm -rf dist\n"}, "git x", "deny", False),
    ("later-wins-benign", {"repo": "[alias]\n\tx = !rm -rf dist\n[include]\n\tpath = ~/inc.cfg\n",
                           "inc": "[alias]\n\tx = status\n"}, "git x", "allow", False),
    ("repo-beats-global", {"global": "[alias]\n\tx = status\n", "repo": "[alias]\n\tx = !rm -rf dist\n"}, "git x",
     "deny", True),
    ("subsection-form", {"repo": '[alias "x"]\n\tcommand = !rm -rf dist\n'}, "git x", "deny", None),
    ("quoted", {"repo": '[alias]\n\tx = "!rm -rf \\"dist\\""\n'}, "git x", "deny", True),
    ("quoted-semicolon", {"repo": '[alias]\n\tx = "!true; rm -rf dist" ; a comment\n'}, "git x", "deny", True),
    ("escaped-tabs", {"repo": "[alias]\n\tx = !rm\\t-rf\\tdist\n"}, "git x", "deny", True),
    ("continued", {"repo": "[alias]\n\tx = !rm \\\n   -rf dist\n"}, "git x", "deny", True),
    ("comment-after", {"repo": "[alias]\n\tx = !rm -rf dist # gone\n"}, "git x", "deny", True),
    ("same-line-section", {"repo": "[alias] x = !rm -rf dist\n"}, "git x", "deny", True),
    ("case-insensitive", {"repo": "[ALIAS]\n\tXx = !rm -rf dist\n"}, "git xx", "deny", True),
    ("typed-upper", {"repo": "[alias]\n\txx = !rm -rf dist\n"}, "git XX", "deny", None),
    ("chain", {"repo": "[alias]\n\ta = b\n\tb = c\n\tc = !rm -rf dist\n"}, "git a", "deny", True),
    ("chain-shell", {"repo": "[alias]\n\ta = !git b\n\tb = !rm -rf dist\n"}, "git a", "deny", True),
    ("loop", {"repo": "[alias]\n\ta = b\n\tb = a\n"}, "git a", "deny", False),
    ("builtin-name", {"repo": "[alias]\n\tstatus = !rm -rf dist\n"}, "git status", "allow", False),
    ("builtin-name-c", {}, "git -c alias.status='!rm -rf dist' status", "allow", False),
    ("c-wins", {"repo": "[alias]\n\tx = !rm -rf dist\n"}, "git -c alias.x=status x", "allow", False),
    ("c-still-runs", {}, "git -c alias.x='!rm -rf dist' x", "deny", True),
    ("no-value", {"repo": "[alias]\n\tx\n"}, "git x", "deny", False),
    ("garbage", {"repo": "[alias\n\tx = !rm -rf dist\n"}, "git x", "deny", False),
    ("bad-escape", {"repo": "[alias]\n\tx = !rm -rf dist\\q\n"}, "git x", "deny", False),
    ("dash-c-other", {"other": "[alias]\n\tx = !rm -rf dist\n"}, "git -C ../other x", "deny", True),
    ("dash-c-other-none", {"repo": "[alias]\n\tx = !rm -rf dist\n"}, "git -C ../other x", "allow", False),
    ("cd-other", {"other": "[alias]\n\tx = !rm -rf dist\n"}, "cd ../other && git x", "deny", True),
    ("env-count", {}, "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.x GIT_CONFIG_VALUE_0='!rm -rf dist' git x", "deny",
     True),
    ("env-global", {"inc": "[alias]\n\tx = !rm -rf dist\n"}, "GIT_CONFIG_GLOBAL=$HOME/inc.cfg git x", "deny", True),
    ("env-global-static", {"inc": "[alias]\n\tx = !rm -rf dist\n"}, "GIT_CONFIG_GLOBAL={home}/inc.cfg git x",
     "deny", True),
    ("env-exported", {"inc": "[alias]\n\tx = !rm -rf dist\n"}, "export GIT_CONFIG_GLOBAL={home}/inc.cfg; git x",
     "deny", True),
    ("dynamic-subcommand", {"repo": "[alias]\n\tx = !rm -rf dist\n"}, "S=x; git $S", "deny", True),
    ("config-then-run", {}, "git config alias.x '!rm -rf dist' && git x", "deny", True),
    # benign
    ("st", {"repo": "[alias]\n\tst = status\n"}, "git st", "allow", False),
    ("st-global", {"global": "[user]\n\tname = t\n[alias]\n\tst = status -s\n\tlg = log --oneline\n"}, "git st",
     "allow", False),
    ("not-an-alias", {}, "git x", "allow", False),
    ("status", {"global": "[user]\n\tname = t\n"}, "git status", "allow", False),
    ("log", {"repo": "[alias]\n\tst = status\n"}, "git log --oneline", "allow", False),
    ("diff", {"repo": "[alias]\n\tx = !rm -rf dist\n"}, "git diff HEAD", "allow", False),
    ("commit", {}, "git commit --allow-empty -m x", "allow", False),
]


class _World:
    """A repository `proj` (one commit on main, a directory `dist`), a second one `other` beside
    it (its own `dist`), a bare `remote.git`, and HOME/XDG in tmp."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.repo = os.path.join(base, "proj")
        self.other = os.path.join(base, "other")
        self.home = os.path.join(base, "home")
        self.xdg = os.path.join(self.home, ".config")
        os.makedirs(os.path.join(self.xdg, "git"))
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": self.home, "XDG_CONFIG_HOME": self.xdg,
                    "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x",
                    "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x", "GIT_EDITOR": "true", "LANG": "C"}
        for path in (self.repo, self.other):
            self.git("init", "-q", "-b", "main", path, cwd=base)
            os.makedirs(os.path.join(path, "dist"))
            with open(os.path.join(path, "dist", "o.txt"), "w") as handle:
                handle.write("o\n")
            self.git("commit", "-q", "--allow-empty", "-m", "one", cwd=path)
        self.git("init", "-q", "--bare", os.path.join(base, "remote.git"), cwd=base)
        os.makedirs(os.path.join(self.repo, ".oharness"))
        with open(os.path.join(self.repo, ".oharness", "settings.json"), "w") as handle:
            json.dump({"deny": DENY}, handle)
        trust_workspace(self.repo, self.home)
        settings = load_settings(self.repo, home=self.home)
        assert settings.ok, [str(e) for e in settings.errors]
        self.ctx = settings.context(mode="bypass")
        self.files = {"repo": os.path.join(self.repo, ".git", "config"),
                      "other": os.path.join(self.other, ".git", "config"),
                      "global": os.path.join(self.home, ".gitconfig"),
                      "xdg": os.path.join(self.xdg, "git", "config"),
                      "inc": os.path.join(self.home, "inc.cfg")}

    def git(self, *args: str, cwd: str) -> None:
        subprocess.run(["git", *args], cwd=cwd, env=self.env, check=True, capture_output=True, timeout=60)

    def write(self, files: dict[str, str]) -> None:
        for where, text in files.items():
            text = text.replace("{repo}", self.repo).replace("{REPO}", self.repo.upper())
            with open(self.files[where], "a") as handle:
                handle.write(text)

    def decide(self, command: str) -> str:
        return decide(oharness_call("bash", {"command": command}, self.repo), self.ctx).behavior

    def run(self, command: str) -> bool:
        """Run `command` for real; whether a `dist` was removed."""
        subprocess.run(["bash", "-c", command], cwd=self.repo, env=self.env, capture_output=True, timeout=60)
        return not all(os.path.isdir(os.path.join(path, "dist")) for path in (self.repo, self.other))


@pytest.fixture
def world(tmp_path, monkeypatch):
    base = os.path.realpath(str(tmp_path))
    made = _World(base)
    for name in ("HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_NOSYSTEM"):
        monkeypatch.setenv(name, made.env[name])
    for name in ("GIT_DIR", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_COUNT", "GIT_CONFIG_PARAMETERS"):
        monkeypatch.delenv(name, raising=False)
    return made


@pytest.mark.parametrize("files, command, verdict, removes", [case[1:] for case in CASES],
                         ids=[case[0] for case in CASES])
def test_config_alias_against_real_git(world, files, command, verdict, removes):
    world.write(files)
    command = command.replace("{home}", world.home)
    got = world.decide(command)
    removed = world.run(command)
    assert not (got == "allow" and removed), f"{command!r}: allowed, and git removed dist"
    assert not (removed and got != "deny"), f"{command!r}: git removed dist, the engine said {got}"
    assert got == verdict, f"{command!r}: {got}, expected {verdict}"
    if removes is not None:
        assert removed == removes, f"the oracle: {command!r} {'did not remove' if removes else 'removed'} dist"


def test_plain_alias_to_a_denied_git_command(world):
    world.write({"repo": "[alias]\n\tp = push ../remote.git main\n\tpp = p\n"})
    for command in ("git p", "git pp"):
        assert world.decide(command) == "deny", command
    world.run("git pp")
    heads = subprocess.run(["git", "--git-dir", os.path.join(world.base, "remote.git"), "show-ref"],
                           capture_output=True, text=True, env=world.env).stdout
    assert "refs/heads/main" in heads, "the oracle: git pp did not push"


@pytest.mark.parametrize("command", ["cd src && git x", "git -C src x", "cd src && git -c alias.x='!cat secret/key' x"])
def test_a_shell_alias_runs_at_the_top_of_the_tree(world, command):
    """git runs a `!` alias in the top of the working tree: `cat secret/key` there, from `src/`, is
    the tree's `secret/key`, which `Read(secret/**)` denies."""
    os.makedirs(os.path.join(world.repo, "secret"))
    os.makedirs(os.path.join(world.repo, "src"))
    with open(os.path.join(world.repo, "secret", "key"), "w") as handle:
        handle.write("s3cr3t\n")
    world.write({"repo": "[alias]\n\tx = !cat secret/key\n"})
    assert world.decide(command) == "deny"
    shown = subprocess.run(["bash", "-c", command], cwd=world.repo, env=world.env, capture_output=True, text=True)
    assert "s3cr3t" in shown.stdout, "the oracle: the alias did not read the tree's secret/key"


def test_a_decision_is_not_kept_past_a_config_change(world):
    assert world.decide("git x") == "allow"
    world.git("config", "alias.x", RM_BANG, cwd=world.repo)
    assert world.decide("git x") == "deny"
    world.git("config", "alias.x", "status", cwd=world.repo)
    assert world.decide("git x") == "allow"


def test_a_kept_decision_follows_includes_and_the_environment(world, monkeypatch):
    """The decision of `git y` is kept (the files are stats, not reads) and made again when an
    included file or a variable git reads changes."""
    world.write({"repo": "[include]\n\tpath = ~/inc.cfg\n", "inc": "[alias]\n\ty = status\n"})
    assert world.decide("git y") == "allow"
    assert world.decide("git y") == "allow"
    world.write({"inc": "[alias]\n\ty = !rm -rf dist\n"})
    assert world.decide("git y") == "deny"
    elsewhere = os.path.join(world.base, "xdg2")
    os.makedirs(os.path.join(elsewhere, "git"))
    with open(os.path.join(elsewhere, "git", "config"), "w") as handle:
        handle.write("[alias]\n\tz = !rm -rf dist\n")
    assert world.decide("git z") == "allow"
    monkeypatch.setenv("XDG_CONFIG_HOME", elsewhere)
    assert world.decide("git z") == "deny"


def test_a_builtin_reads_no_config(world, monkeypatch):
    """`git status`, `git push` are decided without the alias table (what keeps them fast)."""
    def refuse(*_args, **_kwargs):
        raise AssertionError("the alias table was read")

    monkeypatch.setattr(gitconfig, "aliases", refuse)
    for command in ("git status", "git -C . log", "git -c alias.status=x status"):
        assert world.decide(command) == "allow", command


def test_unreadable_config_is_unknown(world):
    """A global config that cannot be read (a directory: unreadable even as root) leaves every
    non-built-in subcommand unknown; a built-in is still decided."""
    os.makedirs(world.files["global"])
    assert world.decide("git st") == "deny"
    assert world.decide("git status") == "allow"
    assert not world.run("git st")


def test_worktree_config(world):
    world.git("worktree", "add", "-q", os.path.join(world.base, "wt"), cwd=world.repo)
    world.git("config", "extensions.worktreeConfig", "true", cwd=world.repo)
    world.git("config", "--worktree", "alias.x", RM_BANG, cwd=os.path.join(world.base, "wt"))
    assert world.decide("cd ../wt && git x") == "deny"
    assert world.decide("git x") == "allow"  # the main worktree has no such alias


@pytest.mark.parametrize("text, expected", [
    ("[alias]\n\tx = a\n", [("alias.x", "a")]),
    ('[Alias "Sub"]\n\tKey\n', [("alias.Sub.key", None)]),
    ("[alias.Sub]\nk=v", [("alias.sub.k", "v")]),
    ('[a]\n\tk = " sp "  x  \n', [("a.k", " sp   x")]),
    ("[a]\n\tk = one\\\n\ttwo\n", [("a.k", "one two")]),
    ("[a]\n\tk = x\\\\y\\\"\\n\n", [("a.k", 'x\\y"\n')]),
    ("# c\n; c\n[a] k = 1 ; c\n", [("a.k", "1")]),
])
def test_parser(text, expected):
    assert gitconfig.parse_config(text) == expected


@pytest.mark.parametrize("text", ["[a\nk=v\n", "[a]\nk = \"v\n", "[a]\nk = \\q\n", "[a]\n1k = v\n",
                                  "[a]\nk # c\n"])
def test_parser_refuses_what_git_refuses(text):
    with pytest.raises(gitconfig.ConfigSyntaxError):
        gitconfig.parse_config(text)


# Texts the parser must read as git does (checked against `git config --file F --list` itself).
AS_GIT_READS = [
    "[alias]\n\tx = \"\" y\n", "[alias]\n\tx = a\t\tb  \n", "[alias]\n\tx = \"a ; b\" # c\n",
    "[alias]\n\tx = !rm \\\n   -rf dist\n", "[Alias \"Sub.X\"]\n\tKey = v\n", "[alias.Sub]\n\tk=v\n",
    "[alias] x = 1\n[core]\n\tbare = false\n", "[alias]\r\n\tx = crlf\r\n", "\ufeff[alias]\n\tx = bom\n",
    "[alias]\n\tflag\n\tx = \"q\\\"uote\\\\\"\n", "k = before any section\n", "[a \"b\\\\c\\\"d\"]\n\tk = v\n", "[alias]\n\tx = end\\",
]


@pytest.mark.parametrize("text", AS_GIT_READS)
def test_parser_reads_as_git(tmp_path, text):
    path = tmp_path / "config"
    path.write_bytes(text.encode())
    listed = subprocess.run(["git", "config", "--file", str(path), "--list", "-z"], capture_output=True,
                            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)})
    if listed.returncode:
        with pytest.raises(gitconfig.ConfigSyntaxError):
            gitconfig.parse_config(text)
        return
    expected = []
    for item in listed.stdout.decode().split("\0")[:-1]:
        key, newline, value = item.partition("\n")
        expected.append((key, value if newline else None))
    assert gitconfig.parse_config(text) == expected


# Pieces of config text a fuzzed file is made of: every construct of the syntax and its mistakes.
PIECES = ["[alias]", '[a "b"]', "[a.B]", "[", "]", '"', "\\", "\\\n", "\n", " ", "\t", "=", "#", ";", "x", "Key", "k-1",
          "1", "\\t", "\\n", '\\"', "\\\\", "\r\n", "!", ".", "[x y]", "é", "\\b", "\\q", '""', "  = ", "v a l"]


def test_parser_against_git_fuzzed(tmp_path):
    """Random texts of PIECES: the parser refuses what git refuses and reads the rest as git does."""
    import random

    rng = random.Random(2026)
    path = tmp_path / "config"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    for _ in range(300):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 14)))
        text = "[alias]\n" + text if rng.random() < 0.7 else text
        path.write_bytes(text.encode())
        listed = subprocess.run(["git", "config", "--file", str(path), "--list", "-z", "--no-includes"],
                                capture_output=True, env=env)
        try:
            mine = gitconfig.parse_config(text)
        except gitconfig.ConfigSyntaxError:
            mine = None
        if listed.returncode:
            assert mine is None, f"git refuses {text!r}, the parser reads {mine}"
            continue
        expected = []
        for item in listed.stdout.decode().split("\0")[:-1]:
            key, newline, value = item.partition("\n")
            expected.append((key, value if newline else None))
        assert mine == expected, text
