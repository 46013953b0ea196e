"""The agent cannot write oharness's memory (issue 19): a process of the same user may open
`/proc/<pid>/mem` of a dumpable parent for writing where the kernel lets it trace its
parent (no Yama, or `kernel.yama.ptrace_scope` 0) — and with it make the harness say
anything on its channel. oharness makes itself non-dumpable in `--stdio` mode, like
metaharness, so that open is refused.

Root ignores non-dumpable, so the run is made as an unprivileged user: `metaharness run`
is started as uid 65534 inside a user namespace of its own (no capabilities), and the
agent's shell, below oharness, tries to open oharness's memory, read its environment and
follow its fds. (Where Yama already forbids tracing a parent the open is refused either way.)"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = r'''
import json, os, sys
def parent(pid):
    data = open(f"/proc/{pid}/stat").read()
    return int(data[data.rfind(")") + 2:].split()[1])
pid, found = os.getpid(), None
while pid > 1:
    pid = parent(pid)
    if b"\0-m\0oharness\0--stdio" in open(f"/proc/{pid}/cmdline", "rb").read():
        found = pid
        break
out = {"oharness": found, "uid": os.getuid()}
for what, attempt in (("mem", lambda: os.close(os.open(f"/proc/{found}/mem", os.O_RDWR))),
                      ("environ", lambda: open(f"/proc/{found}/environ", "rb").read()),
                      ("fd", lambda: os.readlink(f"/proc/{found}/fd/0"))):
    try:
        attempt()
        out[what] = "reachable"
    except OSError as exc:
        out[what] = exc.strerror
json.dump(out, open(sys.argv[1], "w"))
'''


def _userns_available() -> bool:
    try:
        return subprocess.run(["unshare", "--user", "--map-user=65534", "--map-group=65534", "true"],
                              capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.mark.skipif(not _userns_available(), reason="no unprivileged user namespace to run as another user")
def test_the_agent_cannot_open_oharness_memory(tmp_path):
    tmp_path.chmod(0o777)
    probe, report = tmp_path / "probe.py", tmp_path / "report.json"
    probe.write_text(PROBE)
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": [
        {"calls": [{"op": "shell", "input": {"command": f"{sys.executable} {probe} {report}"}}]}, {"text": "done"}]}))
    done = subprocess.run(
        ["unshare", "--user", "--map-user=65534", "--map-group=65534", sys.executable, "-m", "metaharness", "run",
         "oharness", "--decisions", "observe", "--script", str(script), "--cwd", str(tmp_path), "-p", "go"],
        capture_output=True, timeout=120, env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path), "HOME": str(tmp_path)})
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events and events[-1]["event"] == "stream.closed", done.stderr.decode()[-800:]
    found = json.loads(report.read_text())
    assert found["oharness"] and found["uid"] == 65534, found
    assert found["mem"] == "Permission denied", found  # it cannot write the harness's memory
    assert found["environ"] == "Permission denied", found
    assert found["fd"] == "Permission denied", found
