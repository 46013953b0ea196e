"""SIGTERM/SIGINT at every phase of a real `metaharness run oharness` process, checked the way
the vendor harnesses are (tests/phase_signals.py): the baseline their tests are held to —
stream.closed last, every line answered once, the close reason, nothing left running, no
scratch left."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import phase_signals as ps  # noqa: E402


@pytest.mark.parametrize(("sig", "phase"), ps.CASES, ids=ps.IDS)
def test_a_signal_at_a_phase_ends_the_run(tmp_path, sig, phase):
    work = tmp_path / "work"
    work.mkdir()
    script = ps.scenario(tmp_path / "s.json")
    ps.run_signalled([str(ps.METAHARNESS), "run", "oharness", "--script", str(script), "--cwd", str(work),
                      "-p", "go", *ps.ASK], sig, phase, "oharness", cwd=tmp_path, work=work)
