"""SIGTERM and SIGINT at every phase of a real Claude Code run (issue 19), in the
loopback-only namespace against the loopback model: the run ends in bounded time with
`stream.closed` last, every line answered once, the close reason oharness writes, the
scripted call never run, nothing left running and no scratch left (tests/phase_signals.py
says how each phase is reached and what is checked)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

import phase_signals as ps  # tests/ is on sys.path for this package

from .support import NSRUN, SCRATCH_BASE, VENDOR_DIR, namespace_available, require_binary

pytestmark = pytest.mark.timeout(180)


@pytest.mark.parametrize(("sig", "phase"), ps.CASES, ids=ps.IDS)
def test_a_signal_at_a_phase_ends_the_run(sig, phase):
    require_binary()
    # Under the suite's private base in /var/tmp, never /tmp (sandboxed commands may write there).
    case = Path(tempfile.mkdtemp(prefix="signal-", dir=SCRATCH_BASE))
    work, out = case / "work", case / "out"
    work.mkdir()
    out.mkdir()
    script = ps.scenario(case / "scenario.json")
    argv = [sys.executable, str(NSRUN), str(out), str(script)]
    if namespace_available():
        argv = ["unshare", "-rnm", *argv, "--in-namespace"]
    argv += ["--", "claude", "-p", "do the task", "--cwd", str(work), "--vendor-dir", VENDOR_DIR, *ps.ASK]
    ps.run_signalled(argv, sig, phase, "claude", cwd=case, work=work, env={"MH_TEST_WORKDIR": str(work)})
    if namespace_available():
        assert (out / "dns.log").read_text() == "", "the vendor looked up names"
