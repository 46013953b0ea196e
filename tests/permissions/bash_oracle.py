"""Real bash as the oracle for the permission engine (issue "deny holds", deliverable 4).

`BashOracle` starts bash_oracle_driver.py in a throwaway namespace sandbox and answers, for one
command, which denied actions really happened when bash ran it: `rm -rf build`, `git push`, a
write to `.env`, a read of `secret/key`. The predicates below read the recorders' argv logs; they
are written independently of the engine's matchers (no engine code is used to judge bash).

The engine side is `EngineWorld`: a directory with the same layout, whose project settings deny
exactly those actions, decided in Bypass.

The other shells (issue "deny holds wherever the shell can reach"): `SHELLS` names the ones the
oracle runs strings in, each with the program that must be installed (`make shells`, Debian's
packages), `TOOLS` the other programs the class spellings use (rsync, ssh, zip, vim, gdb, ruby). `missing_shell` says whether one is absent: its oracle cases are then skipped, and fail
under METAHARNESS_REQUIRE_VENDOR=1 (make test) — a missing shell never passes silently.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

from metaharness.permissions import decide, load_settings, notation_call, trust_workspace
from metaharness.permissions.engine import oharness_call

DENY_RULES = ["Bash(rm -rf *)", "Bash(git push*)", "Write(.env*)", "Read(secret/**)"]
ACTIONS = ("rm", "push", "env-write", "secret-read")
DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bash_oracle_driver.py")
UNSHARE = ["unshare", "-Urmnp", "--fork", "--mount-proc"]


# (name as spelled in a command, program that must be installed, POSIX?): the family the oracle runs.
SHELLS = (
    ("dash", "dash", True), ("mksh", "mksh", True), ("yash", "yash", True), ("posh", "posh", True),
    ("zsh", "zsh", True), ("ksh", "ksh", True), ("busybox sh", "busybox", True), ("busybox ash", "busybox", True),
    ("fish", "fish", False), ("tcsh", "tcsh", False), ("csh", "csh", False),
)
# Programs whose applets reach the file system without the recorders (`busybox rm`, `toybox cat`).
APPLETS = ("busybox", "toybox")
# Programs beyond coreutils that the class spellings use: rsync into a directory, and the programs
# that run an option's value (`ssh -o ProxyCommand=S`, `zip -TT S`, `vim -c '!S'`, `gdb -ex 'shell S'`),
# and ruby's in-place edit (`ruby -i -pe … .env`, tests/permissions/test_interpreter_code.py).
TOOLS = ("rsync", "ssh", "zip", "vim", "gdb", "ruby")


def missing_shell(program: str) -> bool:
    return shutil.which(program, path="/usr/local/bin:/usr/bin:/bin") is None


class OracleUnavailable(RuntimeError):
    pass


def _long(arg: str, full: str) -> bool:
    name = arg.split("=", 1)[0]
    return len(name) >= 3 and full.startswith(name)


def rm_rf_build(argv: list[str]) -> bool:
    """rm ran with a recursive and a force option and an operand naming `build`."""
    recursive = force = False
    operand = False
    options_done = False
    for a in argv:
        if not options_done and a == "--":
            options_done = True
        elif not options_done and a.startswith("--"):
            recursive |= _long(a, "--recursive")
            force |= _long(a, "--force")
        elif not options_done and a.startswith("-") and a != "-":
            recursive |= "r" in a or "R" in a
            force |= "f" in a
        elif os.path.normpath(a) == "build":
            operand = True
    return recursive and force and operand


_GIT_VALUE = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path", "--config-env"}


def git_push(argv: list[str]) -> bool:
    """git's subcommand, after its global options, is `push`."""
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in _GIT_VALUE:
            i += 2
            continue
        if a.startswith("-"):
            i += 1
            continue
        return a == "push"
    return False


def happened(result: dict) -> set[str]:
    seen = set()
    # a recorded `rm -rf build`, or `build` gone (an applet's rm: busybox, toybox, which no recorder shadows)
    if any(rm_rf_build(a) for a in result["rm"]) or result.get("build_gone"):
        seen.add("rm")
    if any(git_push(a) for a in result["git"]):
        seen.add("push")
    if result["env_changed"]:
        seen.add("env-write")
    if result["secret_read"]:
        seen.add("secret-read")
    return seen


class BashOracle:
    def __init__(self) -> None:
        self.base = tempfile.mkdtemp(prefix="ohoracle-", dir="/var/tmp")
        try:
            self.proc = subprocess.Popen([*UNSHARE, sys.executable, DRIVER, self.base], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        except FileNotFoundError as e:
            raise OracleUnavailable(f"cannot start the namespace sandbox: {e}") from None
        ready = self.proc.stdout.readline()
        if not ready:
            err = self.proc.stderr.read()
            raise OracleUnavailable(f"the namespace sandbox did not start ({' '.join(UNSHARE)}): {err.strip()}")

    def run(self, command: str, timeout: float = 5) -> dict:
        self.proc.stdin.write(json.dumps({"cmd": command, "timeout": timeout}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise OracleUnavailable("the oracle driver died: " + self.proc.stderr.read())
        return json.loads(line)

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()
        shutil.rmtree(self.base, ignore_errors=True)


class EngineWorld:
    """The same layout as the sandbox's project, with DENY_RULES in project scope."""

    def __init__(self) -> None:
        self.base = os.path.realpath(tempfile.mkdtemp(prefix="ohfuzz-", dir="/var/tmp"))
        self.root = os.path.join(self.base, "proj")
        self.home = os.path.join(self.base, "home")
        os.makedirs(self.home)
        os.makedirs(os.path.join(self.base, "other"))  # a sibling of the project: a `.env` to copy in
        with open(os.path.join(self.base, "other", ".env"), "w") as f:
            f.write("KEY=2\n")
        for d in ("build", "secret", "src", ".oharness"):
            os.makedirs(os.path.join(self.root, d))
        for rel, text in (("build/o.txt", "o\n"), (".env", "KEY=1\n"), ("secret/key", "s3cr3t\n"),
                          ("README", "readme a\n"), ("src/a.txt", "a\n")):
            with open(os.path.join(self.root, rel), "w") as f:
                f.write(text)
        with open(os.path.join(self.root, ".oharness", "settings.json"), "w") as f:
            json.dump({"deny": DENY_RULES}, f)
        trust_workspace(self.root, self.home)
        settings = load_settings(self.root, home=self.home)
        assert settings.ok, [str(e) for e in settings.errors]
        self.ctx = settings.context(mode="bypass")

    def decide(self, command: str):
        return decide(oharness_call("bash", {"command": command}, self.root), self.ctx)

    def close(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)


__all__ = ["APPLETS", "TOOLS", "BashOracle", "EngineWorld", "OracleUnavailable", "SHELLS", "happened", "missing_shell",
           "ACTIONS", "DENY_RULES", "notation_call"]
