"""The ACP agent's control channel is a socketpair, not a pipe (a pipe can be reopened for writing
through /proc/<pid>/fd by anything the agent's shell starts; a socket cannot), and the agent runs in
a PID namespace of its own where the platform allows one — the same as every other harness."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from metaharness.adapters.process import confinement

from test_acp_seam import AGENT, KINDS, drive

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def recording_vendor(tmp_path) -> Path:
    """Vendor binaries that write where their stdin, stdout and PID namespace lead, then run the
    scripted agent."""
    directory = tmp_path / "vendor"
    directory.mkdir()
    for kind in KINDS:
        script = directory / kind
        script.write_text("#!/bin/sh\n"
                          # read first, written after: a redirect would stand in the shell's own fds
                          "fd0=$(readlink /proc/$$/fd/0); fd1=$(readlink /proc/$$/fd/1); ns=$(readlink /proc/$$/ns/pid)\n"
                          f"echo \"$fd0\" > {tmp_path}/{kind}.fd0; echo \"$fd1\" > {tmp_path}/{kind}.fd1\n"
                          f"echo \"$ns\" > {tmp_path}/{kind}.pidns\n"
                          f"exec {sys.executable} {AGENT} --flavour {kind} \"$@\"\n")
        script.chmod(0o755)
    return directory


@pytest.mark.parametrize("kind", KINDS)
def test_the_agent_speaks_acp_over_a_socketpair_in_its_own_pid_namespace(kind, tmp_path, recording_vendor):
    run = drive(kind, tmp_path / "run", recording_vendor, "SHELL", answer=lambda e: {"decision": "allow"},
                decisions="ask")
    assert run.of("stream.closed")
    for fd in ("fd0", "fd1"):
        assert (tmp_path / f"{kind}.{fd}").read_text().startswith("socket:"), fd
    prefix, _how = confinement()
    if prefix:  # confinement is available here: the agent does not share our PID namespace
        assert (tmp_path / f"{kind}.pidns").read_text().strip() != os.readlink("/proc/self/ns/pid")
