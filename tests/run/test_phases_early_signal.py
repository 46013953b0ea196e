"""A SIGTERM/SIGINT in the first milliseconds of `metaharness run` (issue 19).

metaharness installs its SIGINT/SIGTERM handlers as the first thing its own code does
(cli/main.py, before click and the run's modules are imported). Signalled at a spread of
fixed delays after the process starts, every run ends within a bound — never a hang — in
one of two ways, and this test tells which one was due:

* the handlers were installed when the signal was sent (the kernel's caught-signals mask
  says so, read right before sending): the run ends with `stream.closed` last;
* they were not yet (the interpreter had not reached metaharness's first line): the
  signal has its default effect — the process ends by it (or, for SIGINT during the
  interpreter's own start-up, with Python's KeyboardInterrupt) — with nothing written on
  stdout.

Either way nothing is left on disk: no scratch directory in TMPDIR, nothing in --cwd.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from .test_faults import catches_sigterm  # our handlers come together; SIGTERM's bit is ours alone

BOUND_S = 30
DELAYS_MS = [0, 5, 10, 20, 50, 100, 200, 400]
METAHARNESS = os.path.join(os.path.dirname(sys.executable), "metaharness")


def _left_on_disk(tmpdir: str) -> list[str]:
    """Everything under TMPDIR but the (empty) private base directory runs make their scratch in."""
    left = []
    for root, dirs, files in os.walk(tmpdir):
        left += [os.path.join(root, name) for name in files]
        left += [os.path.join(root, name) for name in dirs if not name.startswith("metaharness-")]
        left += [os.path.join(root, name, entry) for name in dirs if name.startswith("metaharness-")
                 for entry in os.listdir(os.path.join(root, name))]
        break
    return left


# CPython's own start-up catches a SIGINT that lands while it checks whether argv[0] is an import
# path entry: it prints this and the KeyboardInterrupt, and goes on to run the script, so the signal
# never reaches metaharness (nothing of it runs yet to see it).
SWALLOWED = b"Failed checking if argv[0] is an import path entry"


def _ended(proc: subprocess.Popen, sig: int, delay_ms: int) -> tuple[bytes, bytes]:
    """(stdout, stderr) once the signalled run ended, within BOUND_S. A SIGINT the interpreter
    swallowed (SWALLOWED) is sent again, once, now that metaharness's handlers are in place;
    the interpreter's report is cut from stderr then."""
    give_up = time.monotonic() + BOUND_S
    resent = False
    while True:
        try:
            out, err = proc.communicate(timeout=1)
            break
        except subprocess.TimeoutExpired as exc:
            if not resent and SWALLOWED in (exc.stderr or b"") and catches_sigterm(proc.pid):
                resent = True
                proc.send_signal(sig)
            elif time.monotonic() > give_up:
                proc.kill()
                proc.communicate()
                pytest.fail(f"metaharness did not end within {BOUND_S} s of a signal {delay_ms} ms after its start")
    if resent:
        report_end = err.index(b"KeyboardInterrupt\n", err.index(SWALLOWED)) + len(b"KeyboardInterrupt\n")
        err = err[:err.index(SWALLOWED)] + err[report_end:]
    return out, err


def _signal_after(tmp_path, argv0: list[str], sig: int, delay_ms: int) -> tuple[int, list[dict], str, bool]:
    tmpdir, work = tmp_path / "tmp", tmp_path / "work"
    tmpdir.mkdir()
    work.mkdir()
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": [
        {"calls": [{"op": "shell", "input": {"command": "echo one > one.txt"}}]}, {"text": "done"}]}))
    env = dict(os.environ, TMPDIR=str(tmpdir))
    proc = subprocess.Popen([*argv0, "run", "oharness", "--keep-open", "--decisions", "ask", "--script", str(script),
                             "--cwd", str(work), "-p", "go"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    time.sleep(delay_ms / 1000)
    caught = catches_sigterm(proc.pid)
    proc.send_signal(sig)
    out, err = _ended(proc, sig, delay_ms)
    events = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert _left_on_disk(str(tmpdir)) == [], "a scratch directory was left behind"
    assert os.listdir(work) == [], "the run left files in --cwd"
    return proc.returncode, events, err.decode("utf-8", "replace"), caught


def _assert_outcome(code: int, events: list[dict], err: str, caught: bool, sig: int) -> None:
    if caught or events:
        assert events, f"the handlers were installed, yet nothing was written (exit {code}): {err[-600:]}"
        assert events[-1]["event"] == "stream.closed", [e["event"] for e in events]
        assert [e["event"] for e in events].count("stream.closed") == 1
        assert events[-1]["events"] == len(events) - 1
        assert code in (0, 3), (code, err[-600:])
        assert "Traceback" not in err, err[-600:]
        return
    # Before the interpreter ran our first line: the signal's default effect, nothing written.
    interrupted_start_up = sig == signal.SIGINT and code == 1 and err.rstrip().endswith("KeyboardInterrupt")
    assert code == -sig or interrupted_start_up, (code, err[-600:])


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("delay_ms", DELAYS_MS)
def test_an_early_signal_ends_the_run_cleanly(tmp_path, sig, delay_ms):
    _assert_outcome(*_signal_after(tmp_path, [METAHARNESS], sig, delay_ms), sig)


@pytest.mark.parametrize("delay_ms", [0, 20, 100])
def test_an_early_signal_to_python_dash_m(tmp_path, delay_ms):
    _assert_outcome(*_signal_after(tmp_path, [sys.executable, "-m", "metaharness"], signal.SIGTERM, delay_ms),
                    signal.SIGTERM)


def test_the_handlers_come_before_the_heavy_imports():
    """The handlers are in place before click is imported: the window in which a signal kills
    metaharness outright is the interpreter's own start-up, not ours."""
    probe = ("import sys, signal; sys.argv = ['metaharness', 'run', 'oharness']; "
             "sys.modules['__main__'].__file__ = '/x/bin/metaharness'; "
             "import metaharness.cli.main; "
             "print(signal.getsignal(signal.SIGTERM).__name__)")
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "_note_early_signal", done.stderr[-600:]
    order = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert order.index("metaharness.run") < order.index("click"), order


def test_a_process_that_only_imports_the_cli_keeps_its_signals():
    probe = ("import sys, signal; sys.argv = ['pytest', 'run']; import metaharness.cli.main; "
             "print(signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "True", done.stderr[-600:]
