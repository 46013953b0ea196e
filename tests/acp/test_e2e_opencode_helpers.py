"""On the real opencode: no process opencode starts inherits the password of its loopback HTTP
API. A helper (git, pgrep, ripgrep) is dumpable again once it execs, so an agent of the same
user that read its /proc/<pid>/environ while it ran could authenticate and answer its own
permission requests; the adapter's guard plugin gives every spawn an environment without it.

The helpers are wrapped: the run's vendor dir (first on the child's PATH) links the real vendor
binaries and holds, for each helper found on the system, a shim that logs whether it was given the
password and then execs the real one. The workspace is a git repository, so opencode runs git
(its project and snapshot bookkeeping) on every step.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from acp_support import VENDOR, AcpRun, scenario
from test_e2e_acp import case  # noqa: F401  (fixture: a fresh case directory)

pytestmark = pytest.mark.timeout(240)

HELPERS = ("git", "pgrep", "rg")
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


@pytest.fixture
def kind() -> str:
    if not (VENDOR / "opencode").exists():
        pytest.fail("opencode is not installed in .vendor; run make vendor")
    return "opencode"


def shimmed_vendor_dir(case: Path, log: Path) -> Path:
    """A copy of the vendor install made of links (`node_modules/.bin` beside the packages, which
    the adapter links into opencode's config directory), the helpers' shims added to `.bin`."""
    modules = case / "node_modules"
    shims = modules / ".bin"
    shims.mkdir(parents=True)
    for package in VENDOR.parent.iterdir():
        if package.name != ".bin":
            (modules / package.name).symlink_to(package)
    for entry in VENDOR.iterdir():
        (shims / entry.name).symlink_to(entry.resolve())
    for name in HELPERS:
        real = shutil.which(name, path=SYSTEM_PATH)
        if real is None:
            continue
        shim = shims / name
        shim.write_text(  # a line when it starts (given the password or not) and one when it ends
            f'#!/bin/sh\nprintf "%s %s %s start %s\\n" "$(date +%s.%N)" $$ {name} '
            f'"${{OPENCODE_SERVER_PASSWORD:+given}}" >> {log}\n{real} "$@"\nstatus=$?\n'
            f'printf "%s %s %s end -\\n" "$(date +%s.%N)" $$ {name} >> {log}\nexit $status\n')
        shim.chmod(0o755)
    return shims


def test_no_process_opencode_starts_is_given_its_server_password(kind, case):
    ws = case / "ws"
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / "notes.txt").write_text("nothing here\n")
    log = case / "helpers.log"
    log.touch()
    os.chmod(log, 0o666)  # the child may run as another uid (root mapped to 1000)
    os.chmod(case, 0o755)
    vendor = shimmed_vendor_dir(case, log)
    scenario(case / "scenario.json", [
        {"text": "looking", "calls": [
            {"op": "shell", "id": "look", "input": {"command": "git status --short >/dev/null; echo looked"}}]},
        {"text": "done"}])
    mh = AcpRun(kind, case, ["-p", "do the task", "--script", str(case / "scenario.json"), "--cwd", str(ws),
                             "--vendor-dir", str(vendor), "--decisions", "observe"])
    assert mh.finish() == 0, mh.stderr()
    mh.assert_complete()
    assert [e for e in mh.events if e["event"] == "tool.result"], mh.names()

    # The guard is in place from the moment it wrote its file, which opencode's plugins do when it
    # opens the session: before that (its project detection, a few git calls in its first tenth of
    # a second, checked to have ended by then) no agent code can have run, so no helper can be read by it.
    (guard,) = (case / "scratch").glob("opencode-*/guard.json")
    guarded_from = guard.stat().st_mtime
    lines = [line.split(" ") for line in log.read_text().splitlines()]
    started = {pid: (float(at), name, flag) for at, pid, name, what, flag in lines if what == "start"}
    ended = {pid: float(at) for at, pid, _name, what, _flag in lines if what == "end"}
    guarded = [(name, flag) for at, name, flag in started.values() if at >= guarded_from]
    # opencode ran git itself (its snapshots), not only the agent's shell (the "look" call)
    assert [name for name, _ in guarded].count("git") >= 2, lines
    given = [name for name, flag in guarded if flag == "given"]
    assert not given, f"given the password once guarded: {given}; every helper: {json.dumps(lines)}"
    early = [pid for pid, (_at, _name, flag) in started.items() if flag == "given"]
    assert all(ended.get(pid, float("inf")) < guarded_from for pid in early), lines
