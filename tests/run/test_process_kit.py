"""The child-process kit every adapter shares (adapters/process.py): the process tree and the
vendor's timeout."""

from __future__ import annotations

import os
import subprocess
import time

from metaharness.adapters import process
from metaharness.adapters.claude import launch as claude_launch


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_the_tree_is_collected_and_killed_group_by_group(tmp_path):
    pidfile = tmp_path / "grandchild"
    # The child leads its own group; its child starts a session (a group) of its own.
    child = subprocess.Popen(["sh", "-c", f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 60' & wait"],
                             start_new_session=True)
    try:
        for _ in range(200):
            if pidfile.exists() and pidfile.read_text().strip():
                break
            time.sleep(0.01)
        grandchild = int(pidfile.read_text())
        below = process.descendant_groups(child.pid)
        assert grandchild in below and child.pid not in below
        assert process.descendant_groups(child.pid, with_root=True) == below | {child.pid}
        process.kill_tree(child.pid)
        child.wait(timeout=10)
        for _ in range(200):
            if not _alive(grandchild):
                break
            time.sleep(0.01)
        assert not _alive(grandchild)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_our_own_group_is_never_killed():
    process.kill_groups({os.getpgrp(), 0, 1})  # would kill this test run if it were not spared


def test_the_vendor_timeout_is_strictly_longer_than_the_deadline():
    for deadline in (1, 2000, 2500, 2501, 55000):
        assert process.vendor_timeout_ms(deadline) > deadline
    assert [process.vendor_timeout_ms(d) for d in (2000, 2500, 2501)] == [4000, 5000, 7501]
    assert [process.whole_seconds(ms) for ms in (1, 1000, 1001, 60000)] == [1, 1, 2, 60]
    # Claude's hook timeout is the same formula in whole seconds.
    assert {d: claude_launch.hook_timeout_s(d) for d in (55000, 2000, 2500, 2501)} == {55000: 60, 2000: 4, 2500: 5, 2501: 8}
