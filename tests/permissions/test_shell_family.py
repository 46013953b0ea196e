"""Issue 24: deny holds wherever the shell can reach, with fewer false refusals.

Class a: every shell of the family — the POSIX ones parsed like `sh -c`, the others opaque with
their string's words still analysed — and programs that hand a string to a shell.
Class d: programs whose operands are data are not refused for the words they print or look up;
a substitution, a redirect or a pipe into a shell around them is still analysed.
"""

from __future__ import annotations

import pytest

from test_deny_classes import DENY, _check_denied, ctxs  # noqa: F401  (the fixture)

POSIX = ["sh", "bash", "dash", "ksh", "zsh", "ash", "mksh", "lksh", "posh", "yash", "oksh", "loksh", "osh",
         "busybox sh", "busybox ash", "busybox hush", "toybox sh", "/usr/bin/mksh", "/bin/busybox ash"]
POSIX_FORMS = ["{S} -c 'rm -rf build'", "{S} -ec 'rm -rf build'", "{S} -x -c 'rm -rf build'",
               "{S} -s <<< 'rm -rf build'", "{S} <<EOF\nrm -rf build\nEOF", "{S} -- /dev/stdin <<< 'cat .env'",
               "{S} -c 'echo x > .env'", "echo 'rm -rf build' | {S}", "{S} -c \"cd src && rm -rf ../build\""]
FOREIGN = ["fish", "tcsh", "csh", "nu", "elvish", "xonsh", "rc", "es"]
FOREIGN_FORMS = ["{S} -c 'rm -rf build'", "{S} -c 'cat .env'", "{S} <<< 'rm -rf build'", "{S} -c 'echo hi'",
                 "echo 'rm -rf build' | {S}"]
RUNNERS = [
    "fish --command='rm -rf build'", "fish -C 'rm -rf build'", "fish -ic 'rm -rf build'", "tcsh -fc 'cat .env'",
    "pwsh -Command 'rm -rf build'", "expect -c 'exec rm -rf build'",
    "nix-shell --run 'rm -rf build'", "nix-shell -p hello --run 'rm -rf build'", "nix-shell --command='cat .env'",
    "su -s /usr/bin/fish -c 'rm -rf build'", "su -s /bin/mksh -c 'rm -rf build'", "su -s \"$S\" -c 'echo hi'",
    "su -c 'rm -rf build'", "runuser -l u -c 'rm -rf build'", "at now <<< 'rm -rf build'",
    "batch <<EOF\nrm -rf build\nEOF", "script -qc 'rm -rf build' /dev/null", "watch -n 1 'rm -rf build'",
    "flock /tmp/l -c 'rm -rf build'", "ssh localhost 'rm -rf build'", "entr -s 'rm -rf build'", "entr rm -rf build",
    "sudo busybox sh -c 'rm -rf build'", "timeout 5 yash -c 'rm -rf build'",
]
DENIED = ([form.format(S=shell) for shell in POSIX for form in POSIX_FORMS]
          + [form.format(S=shell) for shell in FOREIGN for form in FOREIGN_FORMS] + RUNNERS)


@pytest.mark.parametrize("command", DENIED)
def test_every_shell_of_the_family_is_read(world_session, ctxs, command):
    _check_denied(world_session, ctxs, command)


@pytest.mark.parametrize("command,reason", [
    ("mksh -c 'rm -rf build'", "deny-rule"), ("busybox ash -c 'cat .env'", "deny-rule"),
    ("fish -c 'echo hi'", "maybe-deny"),  # opaque: the language is not sh
    ("fish -c 'rm -rf build'", "deny-rule"),  # and the words still meet the rule
    ("nix-shell --run 'rm -rf build'", "deny-rule"),
])
def test_family_reasons(world_session, ctxs, command, reason):
    assert world_session.decide(f"Bash({command})", ctxs["bypass"]).reason == reason


# Class d --------------------------------------------------------------------------------------
DATA_ALLOWED = [
    "echo rm -rf build", "echo cat .env", "printf '%s\\n' rm -rf build", "which rm", "type rm", "command -v rm",
    "command -V rm", "whereis rm", "man rm", "echo \"$X\" rm -rf build", "xargs echo rm -rf build",
    "git log --grep 'rm -rf build'", "git log -S rm -- build", "git show rm -rf build", "grep 'rm -rf build' src/a.py",
    "echo git push", "which git push", "basename rm -rf build",
]
DATA_STILL_DENIED = [
    "echo rm -rf build | sh", "echo $(rm -rf build)", "echo `cat .env`", "echo x > .env", "command rm -rf build",
    "echo hi && rm -rf build", "printf x | tee .env", "rg --pre rm -rf build", "git -c core.pager=rm log rm -rf build",
    "PATH=/tmp echo rm -rf build", "eval echo x\\; rm -rf build", "sh -c 'echo x; rm -rf build'",
    "man -P 'rm -rf build' ls",
]


@pytest.mark.parametrize("command", DATA_ALLOWED)
def test_data_operands_are_not_commands(world_session, ctxs, command):
    v = world_session.decide(f"Bash({command})", ctxs["bypass"])
    assert v.behavior == "allow", v.to_json()


@pytest.mark.parametrize("command", DATA_STILL_DENIED)
def test_around_data_programs_still_analysed(world_session, ctxs, command):
    _check_denied(world_session, ctxs, command)


def test_which_does_not_ask_under_an_ask_rule(world_session):
    s = world_session.setup(project={"ask": ["Bash(curl *)"], "deny": ["Bash(rm -rf *)"]})
    try:
        for command in ("which curl", "type curl", "command -v curl", "echo curl x"):
            v = world_session.decide(f"Bash({command})", world_session.ctx(s, mode="manual"))
            assert v.behavior == "allow", (command, v.to_json())
        v = world_session.decide("Bash(nohup curl x)", world_session.ctx(s, mode="manual"))
        assert v.behavior == "ask", v.to_json()
    finally:
        world_session.setup(project=DENY)


# Class b: options that move later operands ------------------------------------------------------
BASE_DIR_DENIED = [
    "tar -C config -cf /tmp/x.tar ../.env", "tar -cf /tmp/x.tar -C . .env", "tar --directory=config -cf /tmp/x ../.env",
    "tar -xf /tmp/x.tar .env", "tar -xf /tmp/x.tar -C src ../.env", "git -C src checkout -- ../.env",
    "patch -d config ../.env -i /tmp/p", "env -C config cat ../.env", "env --chdir=config cat ../.env",
    "sudo -D config cat ../.env", "env -C \"$D\" cat .env", "unshare -w config cat ../.env",
    "systemd-run --working-directory=config cat ../.env",
    # a wrapped shell's string starts in the wrapper's directory; a child shell's cd does not outlast it
    "env -C config sh -c 'cat ../.env'", "env -C config bash -c 'cd .. && cat .env'", "sh -c 'cd config'; cat .env",
    "bash -c 'cd src' && cat .env", "eval 'cd config'; cat ../.env", "tar -cf /tmp/x.tar -C src a.py -C .. .env",
]
BASE_DIR_ALLOWED = ["tar -C src -cf /tmp/x.tar a.py", "git -C src checkout -- a.py", "env -C config cat a.txt",
                    # tar's -C moves the names after it (only), so `.` is src, not the project
                    "tar -C src -cf /tmp/x.tar .", "tar -cf /tmp/x.tar -C src .", "env -C config sh -c 'cat a.txt'",
                    # a here-document the grammar hangs on a list belongs to the list's last command
                    "true && sh <<'EOF'\nls src\nEOF"]


@pytest.mark.parametrize("command", BASE_DIR_DENIED)
def test_base_directory_options_move_operands(world_session, ctxs, command):
    _check_denied(world_session, ctxs, command)


@pytest.mark.parametrize("command", BASE_DIR_ALLOWED)
def test_base_directory_options_allow_the_rest(world_session, ctxs, command):
    assert world_session.decide(f"Bash({command})", ctxs["bypass"]).behavior == "allow"


# Class c: destinations that are directories ------------------------------------------------------
@pytest.fixture
def outside(tmp_path):
    """A source tree outside the project: names that land on denied or protected paths."""
    (tmp_path / ".env.local").write_text("x")
    (tmp_path / "plain.txt").write_text("x")
    (tmp_path / "tree" / ".oharness").mkdir(parents=True)
    (tmp_path / "tree" / ".oharness" / "settings.json").write_text("{}")
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / ".git" / "config").write_text("")
    return str(tmp_path)


DIR_DEST_DENIED = [
    "cp {o}/.env.local .", "cp {o}/.env.local src/..", "mv {o}/.env.local ./", "install {o}/.env.local .",
    "ln -s {o}/.env.local .", "rsync {o}/.env.local .", "cp -t . {o}/.env.local", "cp -r {o}/tree/.oharness .",
    "rsync -a {o}/tree/ .", "cp -a {o}/tree/. src/..",
]


@pytest.mark.parametrize("command", DIR_DEST_DENIED)
def test_directory_destination_writes_each_source_name(world_session, ctxs, outside, command):
    _check_denied(world_session, ctxs, command.format(o=outside))


def test_directory_destination_is_protected_and_gated(world_session, outside):
    s = world_session.setup(project={})
    try:
        v = world_session.decide(f"Bash(cp -r {outside}/repo/.git .)", world_session.ctx(s, mode="manual"))
        assert (v.behavior, v.reason) == ("ask", "protected-path"), v.to_json()
        v = world_session.decide(f"Bash(cp {outside}/plain.txt src)", world_session.ctx(s, mode="bypass"))
        assert v.behavior == "allow", v.to_json()
    finally:
        world_session.setup(project=DENY)


def test_a_tree_past_the_walk_limit_is_a_write_under_the_destination(world_session, ctxs, tmp_path):
    # The recursive copy's walk stops at its bound (2,000 entries); what lies past it is still a
    # write somewhere under the destination, so a deny rule there holds (toward denying).
    tree = tmp_path / "tree"
    (tree / "deep").mkdir(parents=True)
    (tree / "deep" / ".env.local").write_text("x")
    for i in range(2_100):
        (tree / f"f{i:04d}").write_text("")
    _check_denied(world_session, ctxs, f"cp -a {tree}/. .")
    _check_denied(world_session, ctxs, f"cp -r {tree} .")


# A program the table does not know may read what its operands name ------------------------------
@pytest.mark.parametrize("command", ["bat secret/key", "mytool --config=secret/key", "w3m ./secret/key",
                                     "docker compose --env-file secret/key up"])
def test_an_unknown_program_naming_a_denied_path_may_read_it(world_session, command):
    s = world_session.setup(project={"deny": ["Read(secret/**)"]})
    try:
        v = world_session.decide(f"Bash({command})", world_session.ctx(s, mode="bypass"))
        assert (v.behavior, v.reason) == ("deny", "maybe-deny"), v.to_json()
    finally:
        world_session.setup(project=DENY)


@pytest.mark.parametrize("command", ["mytool src/a.py", "make build", "npm install", "echo secret/key", "ls secret"])
def test_an_unknown_program_naming_nothing_denied_is_allowed(world_session, command):
    s = world_session.setup(project={"deny": ["Read(secret/**)"]})
    try:
        assert world_session.decide(f"Bash({command})", world_session.ctx(s, mode="bypass")).behavior == "allow"
    finally:
        world_session.setup(project=DENY)


def test_proc_links_are_the_commands_own_and_only_from_the_root(tmp_path):
    from metaharness.permissions.paths import PathError, canonical

    cwd = str(tmp_path)
    assert canonical("/proc/self/cwd/a", cwd).lexical == f"{cwd}/a"
    assert canonical("/proc/thread-self/root/etc/x", cwd).lexical == "/etc/x"
    assert canonical("/proc/self/root/proc/self/cwd/a", cwd).lexical == f"{cwd}/a"
    assert canonical("proc/self/cwd/a", cwd).lexical == f"{cwd}/proc/self/cwd/a"  # a directory named proc
    with pytest.raises(PathError):
        canonical("/proc/1/cwd/a", cwd)
