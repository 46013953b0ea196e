"""SIGTERM and SIGINT at every phase of a real opencode and Gemini CLI run (issue 19), in
the loopback-only namespace against the per-run loopback: the run ends in bounded time with
`stream.closed` last, every line answered once, the close reason oharness writes, the
scripted call never run, nothing left running and no scratch left (tests/phase_signals.py
says how each phase is reached and what is checked)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from acp_support import METAHARNESS, NETNS_OK, VENDOR
from test_e2e_acp import case, kind  # noqa: F401  (fixtures: each kind, a fresh case directory)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import phase_signals as ps  # noqa: E402

pytestmark = pytest.mark.timeout(240)


@pytest.mark.parametrize(("sig", "phase"), ps.CASES_SLOW_BOOT, ids=ps.IDS_SLOW_BOOT)
def test_a_signal_at_a_phase_ends_the_run(kind, case, sig, phase):
    work = case / "ws"
    script = ps.scenario(case / "scenario.json")
    argv = [str(METAHARNESS), "run", kind, "--vendor-dir", str(VENDOR), "-p", "do the task", "--script", str(script),
            "--cwd", str(work), *ps.ASK]
    dns_log = case / "dns.log"
    ps.run_signalled(ps.netns(argv, dns_log) if NETNS_OK else argv, sig, phase, kind, cwd=case, work=work)
    assert not dns_log.exists() or dns_log.read_text() == "", "the vendor looked up names"
