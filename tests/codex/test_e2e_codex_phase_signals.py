"""SIGTERM and SIGINT at every phase of a real Codex app-server run (issue 19), in the
loopback-only namespace against the per-run loopback: the run ends in bounded time with
`stream.closed` last, every line answered once, the close reason oharness writes, the
scripted call never run, nothing left running and no scratch left (tests/phase_signals.py
says how each phase is reached and what is checked)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from e2e_support import CODEX, METAHARNESS, NETNS_OK, VENDOR, fresh_case  # noqa: F401  (fresh_case: a fixture)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import phase_signals as ps  # noqa: E402

pytestmark = pytest.mark.timeout(180)


@pytest.mark.parametrize(("sig", "phase"), ps.CASES, ids=ps.IDS)
def test_a_signal_at_a_phase_ends_the_run(fresh_case, sig, phase):
    assert CODEX.exists(), f"the pinned Codex binary is missing at {CODEX}; run make vendor"
    work = fresh_case / "work"
    script = ps.scenario(fresh_case / "s.json")
    argv = [str(METAHARNESS), "run", "codex", "--vendor-dir", str(VENDOR), "--script", str(script), "-p", "go",
            "--cwd", str(work), *ps.ASK]
    dns_log = fresh_case / "dns.log"
    ps.run_signalled(ps.netns(argv, dns_log) if NETNS_OK else argv, sig, phase, "codex", cwd=fresh_case, work=work)
    assert not dns_log.exists() or dns_log.read_text() == "", "the vendor looked up names"
