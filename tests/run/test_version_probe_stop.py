"""A stop during the start checks ends a hung `<vendor> --version` probe at once (issue 19: no
hang, ever): the probe runs in a session of its own under the run's `VersionProbes`, the checks
run on a thread, and a SIGTERM kills the probe and whatever it started instead of waiting out
its timeout (30 s for Codex). The run then ends as a stop before the spawn: nothing spawned,
`stream.closed` last, exit code 3.

The vendor is a stand-in `codex` whose `--version` starts a grandchild and waits forever."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time

from metaharness.adapters.process import VERSION_PROBES, VersionProbes, binary_version

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import phase_commands as pc  # noqa: E402

HUNG = "#!/bin/sh\nif [ \"$1\" = --version ]; then sleep 600 & echo $! > {pids}; wait; fi\nexit 1\n"


def _vendor(tmp_path):
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    codex = vendor / "codex"
    codex.write_text(HUNG.format(pids=tmp_path / "grandchild.pid"))
    codex.chmod(codex.stat().st_mode | stat.S_IXUSR)
    return vendor



def test_a_signal_during_a_hung_version_probe_ends_the_run_at_once(tmp_path):
    vendor = _vendor(tmp_path)
    metaharness = os.path.join(os.path.dirname(sys.executable), "metaharness")
    # --strict-version: the one case Codex's start asks `--version` (its thread reports the version otherwise).
    proc = subprocess.Popen([metaharness, "run", "codex", "--vendor-dir", str(vendor), "--model-endpoint",
                             "http://127.0.0.1:9", "--cwd", str(tmp_path), "-p", "go", "--strict-version"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "grandchild.pid").exists() or not (tmp_path / "grandchild.pid").read_text().strip():
            assert time.monotonic() < deadline, "the version probe never started"
            time.sleep(0.01)
        grandchild = int((tmp_path / "grandchild.pid").read_text())
        probe = [pid for pid in pc.descendants(proc.pid) if pc._argv(pid)[-2:-1] == [b"--version"]]
        assert probe, "no --version probe below metaharness"
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
        took = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    events = [json.loads(line) for line in out.splitlines()]
    assert took < 10, f"the stop waited {took:.1f} s for the probe"
    assert events and events[-1]["event"] == "stream.closed", (events, err)
    assert events[-1]["reason"] == "error"
    assert "session.started" not in [e["event"] for e in events]
    assert proc.returncode == 3, err
    time.sleep(0.2)
    assert not pc.running(grandchild), "what the probe started outlived the stop"


def test_a_stopped_probe_set_reads_no_version_and_starts_none(tmp_path):
    vendor = tmp_path / "v"
    vendor.write_text("#!/bin/sh\necho 'v 1.2.3'\n")
    vendor.chmod(vendor.stat().st_mode | stat.S_IXUSR)
    probes = VersionProbes()
    token = VERSION_PROBES.set(probes)
    try:
        assert binary_version(str(vendor), os.environ["PATH"]) == "1.2.3"
        probes.stop()
        assert binary_version(str(vendor), os.environ["PATH"]) is None  # a probe after the stop reads nothing
    finally:
        VERSION_PROBES.reset(token)
    assert binary_version(str(vendor), os.environ["PATH"]) == "1.2.3"  # outside a run: no stop applies
