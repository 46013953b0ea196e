"""SIGTERM and SIGINT at every phase of a real run, on every harness (issue 19): the run is
started for real (the vendors in their loopback-only namespace), the signal is sent to the
`metaharness run` process itself (found below the namespace wrappers with
`phase_commands.metaharness_pid`, never the wrapper) at one phase, and the end is checked.

The phases, and how each is reached from outside (every run is a `--keep-open`
`--decisions ask` run whose first turn makes the call `echo hi > pwned.txt`):

* `before`   — right after the process starts: as soon as metaharness catches SIGTERM (its
               handlers come before anything else it does), before anything is spawned;
* `spawning` — a process exists below metaharness (not a start check's `--version` probe) and
               the harness is not up yet;
* `mid`      — the call waits for its decision;
* `between`  — the embedder denied the call, the turn ended, the run idles at its boundary;
* `wind`     — a `halt` was processed (the pending call abandoned "the run was halted") and
               the run is stopping the harness: the signal comes during wind-up;
* `dead`     — with the call pending, metaharness frozen (SIGSTOP), everything below it killed,
               the signal sent, metaharness resumed: it meets the signal and the death together.

SIGTERM is sent at every phase; SIGINT at `spawning` and `mid` only (opencode and Gemini CLI,
whose runs cost 8-18 s before their first call: at `spawning` only). Why: both signals reach one
handler and one stop path (run/host.py routes both to `Run.request_stop`, tests/run/test_signals.py
checks both on oharness), so what differs by vendor — the adapter's stop at each phase — is covered
by SIGTERM; SIGINT on each vendor shows the handler routes it to that same stop, at the phase where
a swallowed signal was seen before (issue 19: during the spawn) and, where a run is cheap, where a
stop must abandon a pending call.

Commands race the stop: at `mid`, `between` and `dead` a batch of every command type but halt
and interrupt (tests/phase_commands.py) is written right before the signal; at `wind` right
after it (read during wind-up or never: answered at most once, and refused).

What every run must show: it ends within BOUND_S (a watchdog: a hang fails the test, it does
not time out the suite), `stream.closed` last with `events` matching the line count and seq
contiguous, every command line written before the signal answered exactly once, the scripted
call never ran (no `pwned.txt`, every `tool.decided` a deny), no process of the run's tree
alive afterwards (a sampler records the tree below the test's child while it runs), and nothing
left on disk: not in the run's scratch base (the default base, under a per-run XDG_CACHE_HOME,
so metaharness removes what it made; METAHARNESS_SCRATCH_DIR would keep it), not in its TMPDIR.

The close reason is the one oharness writes at each phase (REASONS; tests/run/
test_phases_signals_tree.py holds oharness to the same table): a signal is not a halt, so
`steer-halt` only where a halt was processed (`wind`), `completed` for a stop at a boundary, and
`error` for a stop before a session, mid-turn or after the child died; the exit code agrees (0
with a `session.ended`, 3 without). A stop before the spawn settled starts no turn; one before the
spawn spawns nothing.

Imported by the vendor test packages (which put tests/ on sys.path).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import phase_commands as pc
from event_stream import EventStream

REPO = Path(__file__).resolve().parents[1]
METAHARNESS = REPO / ".venv" / "bin" / "metaharness"
NETNS = REPO / "tests" / "fixtures" / "codex" / "netns_run.py"  # the generic loopback-only namespace runner
BOUND_S = 60  # from the signal to the end of the run; generous (a shared machine), a hang never ends
GRACE_S = 10  # after the end, how long a process of the run's tree may take to be gone
PHASES = ("before", "spawning", "mid", "between", "wind", "dead")
CASES = [(signal.SIGTERM, phase) for phase in PHASES] + [(signal.SIGINT, "spawning"), (signal.SIGINT, "mid")]
CASES_SLOW_BOOT = CASES[:-1]  # opencode and Gemini CLI: 8-18 s to their first call, so SIGINT once
IDS = [f"{signal.Signals(sig).name}-{phase}" for sig, phase in CASES]
IDS_SLOW_BOOT = IDS[:-1]
PWNED = "echo hi > pwned.txt"
TURNS = [{"calls": [{"op": "shell", "input": {"command": PWNED}}]}, {"text": "after"}, {"text": "third"}]
ASK = ["--decisions", "ask", "--decision-timeout-ms", "60000", "--keep-open"]


def netns(argv: list[str], dns_log: Path) -> list[str]:
    """`argv` inside a loopback-only network namespace with a logging DNS sink."""
    return ["unshare", "--user", "--map-root-user", "--net", "--mount", sys.executable, str(NETNS), str(dns_log),
            "--", *argv]


def scenario(path: Path) -> Path:
    path.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": TURNS}))
    return path


def _starttime(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _running(pid: int, started: str) -> bool:
    """The same process (same start time), not yet a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[19] == started and fields[0] not in ("Z", "X")


class SignalledRun(EventStream):
    """One `metaharness run` child (through its wrappers): events read by a thread, the
    process tree below it sampled by another until it ends."""

    def __init__(self, argv: list[str], *, cwd: Path, env: dict[str, str]) -> None:
        super().__init__(argv, cwd=cwd, env=env, stderr_path=cwd / "signal-stderr.txt")
        self.written: list[bytes] = []  # every command line written (each must be answered once)
        self.late: list[bytes] = []  # lines written after the signal during wind-up
        self.tree: dict[int, str] = {}  # every process seen below the child: pid → start time
        self.below_metaharness: dict[int, bytes] = {}  # pid → argv
        self.metaharness: int | None = None
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        while self.proc.poll() is None:
            for pid in pc.descendants(self.proc.pid):
                started = _starttime(pid)
                if started is not None:
                    self.tree.setdefault(pid, started)
            if self.metaharness is not None:
                own = pc._argv(self.metaharness)
                for pid in pc.descendants(self.metaharness):
                    argv = pc._argv(pid)
                    # A fork not yet exec'd wears metaharness's argv, a zombie none: each is seen for what it is
                    # while it runs (or never ran anything).
                    if any(argv) and argv != own:
                        self.below_metaharness[pid] = b" ".join(argv)
            time.sleep(0.02)

    def write(self, lines: list[bytes]) -> None:
        self.written += [line for line in lines if line.strip()]
        self.proc.stdin.write(pc.blob(lines))
        self.proc.stdin.flush()

    def finish(self, bound: float = BOUND_S) -> int:
        """Wait for the end, at most `bound` seconds; past it, kill everything and fail."""
        try:
            code = self.proc.wait(bound)
        except subprocess.TimeoutExpired:
            for pid in [*pc.descendants(self.proc.pid), self.proc.pid]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self.proc.wait(10)
            raise AssertionError(f"the run did not end within {bound} s of the signal; events: {self.names()}; "
                                 f"stderr: {self.stderr()[-800:]}") from None
        self._reader.join(10)
        self._sampler.join(10)
        with contextlib.suppress(OSError, ValueError):
            self.proc.stdin.close()
        return code

    def survivors(self) -> list[int]:
        """Processes of the run's tree still running, after a grace period."""
        deadline = time.monotonic() + GRACE_S
        while True:
            alive = [pid for pid, started in self.tree.items() if _running(pid, started)]
            if not alive or time.monotonic() > deadline:
                return alive
            time.sleep(0.05)


def _requested(e: dict) -> bool:
    return e["event"] == "tool.requested" and e["decision_required"]


def signal_at(run: SignalledRun, sig: int, phase: str, kind: str) -> None:
    """Reach `phase` and send `sig` to the metaharness process (see the module docstring)."""
    mh = run.metaharness = pc.metaharness_pid(run.proc.pid)
    if phase == "before":
        deadline = time.monotonic() + 30
        while not _catches_sigterm(mh):
            assert time.monotonic() < deadline, "metaharness never installed its handlers"
            time.sleep(0.001)
        assert all(_probe(pid) for pid in pc.children_of(mh)), "metaharness spawned before the test could signal it"
        os.kill(mh, sig)
        return
    if phase == "spawning":
        _wait_for_the_spawn(mh)
        os.kill(mh, sig)
        return
    call = run.wait_for(_requested, timeout=90)
    # The commands racing the stop: every line must still get exactly one answer.
    batch = pc.every_command(phase, kind, interrupt=False)
    if phase == "mid":
        run.write(batch)
        os.kill(mh, sig)
    elif phase == "between":
        run.write([pc.command("deny", "tool.decide", call_id=call["call_id"],
                              decision={"decision": "deny", "reason": "not this"})])
        run.wait_for(lambda e: e["event"] == "turn.ended" and e["turn"] == 1, timeout=90)
        time.sleep(0.2)  # idle at the boundary
        run.write(batch)
        os.kill(mh, sig)
    elif phase == "wind":
        run.write([pc.command("halt", "halt", reason="done")])
        run.wait_for(lambda e: e["event"] == "tool.decided" and e["call_id"] == call["call_id"], timeout=90)
        os.kill(mh, sig)
        run.late = batch  # read during wind-up, or never read (the run may be gone): answered at most once
        with contextlib.suppress(BrokenPipeError):
            run.proc.stdin.write(pc.blob(batch))
            run.proc.stdin.flush()
    elif phase == "dead":
        with pc.frozen(mh):
            pc.kill_everything_below(mh)
            run.write(batch)
            os.kill(mh, sig)
    else:
        raise AssertionError(phase)


def _probe(pid: int) -> bool:
    """A start check's `<vendor> --version`: it runs before the spawn, it is not the harness."""
    return pc._argv(pid)[-2:-1] == [b"--version"] or pc._argv(pid)[-1:] == [b"--version"]


def _wait_for_the_spawn(mh: int, timeout: float = 60) -> None:
    """Until a process below metaharness exists that is not a version probe: the harness is being
    spawned (its own start-up not done)."""
    deadline = time.monotonic() + timeout
    while not [pid for pid in pc.children_of(mh) if pc._argv(pid) and not _probe(pid)]:
        assert time.monotonic() < deadline, "metaharness spawned nothing"
        time.sleep(0.002)


def _catches_sigterm(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as handle:
            caught = next(line for line in handle if line.startswith("SigCgt:")).split()[1]
    except (OSError, StopIteration):
        return False
    return bool(int(caught, 16) & (1 << (signal.SIGTERM - 1)))


# The close reason at each phase, as oharness writes it (and the wire rule “close reason” gives it): a signal is not a
# halt, so `steer-halt` only where a halt was processed; a stop at a boundary ends the session
# cleanly (`completed`); a stop before a session, mid-turn or after the child died leaves no clean
# end (`error`).
REASONS = {"before": "error", "spawning": "error", "mid": "error", "between": "completed", "wind": "steer-halt",
           "dead": "error"}


def _reasons(run: SignalledRun, phase: str) -> set[str]:
    """The close reasons this run may have. Mid-turn the stop first denies the pending call; a
    vendor harness that hands that deny to the model and ends its turn (and its session, its
    input closed) before the stop reaches it has ended cleanly — `completed` is then the truth,
    and what the stream must show for it: a turn that ended on its own and a `session.ended`.
    At the boundary the batch's inject may open the next turn before the signal is handled
    (the two race by design: the lines come through stdin's thread, the signal through the
    loop); a second `turn.started` then shows the stop came mid-turn, and it is held as one."""
    if phase == "between" and len(run.of("turn.started")) > 1:
        phase = "mid"
    if phase == "mid" and run.of("session.ended") and run.of("turn.ended") \
            and run.of("turn.ended")[-1].get("stop_reason") in ("end_turn", "completed"):
        return {REASONS[phase], "completed"}
    return {REASONS[phase]}


def check_end(run: SignalledRun, code: int, phase: str, kind: str, *, work: Path, scratch_base: Path,
              tmpdir: Path) -> None:
    events = run.events
    assert events, f"nothing was written; stderr: {run.stderr()[-800:]}"
    closed = events[-1]
    assert closed["event"] == "stream.closed", run.names()
    assert run.names().count("stream.closed") == 1
    assert closed["events"] == len(events) - 1
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    # Every line written is answered once (lines written after a wind-up's signal may go unread).
    by_id = pc.answers(events, run.written)
    for tag in {cid.split("-")[0] for cid in by_id if "-" in cid}:
        pc.assert_refusals(by_id, tag, kind)
    late = pc.ids_of(run.late)
    answered_late = [e["id"] for e in run.of("command.result") if e["id"] in late]
    assert len(answered_late) == len(set(answered_late)), answered_late
    for cid in answered_late:  # read while the run wound up: refused, never carried
        assert pc.flat(next(e for e in run.of("command.result") if e["id"] == cid)["outcome"])["result"] == "refused"
    assert closed["reason"] in _reasons(run, phase), (closed["reason"], run.names())
    assert code == (0 if run.of("session.ended") else 3), (code, run.stderr()[-800:])  # the exit code agrees
    if phase == "wind":
        results = run.of("command.result")
        assert results[-1]["id"] == "halt" and events[-2] is results[-1], run.names()
        assert results[-1]["outcome"] == {"result": "ok", "applies_at": None}
    if phase in ("before", "spawning"):  # a stop before the spawn settled starts no turn
        assert "turn.started" not in run.names(), run.names()
    if phase == "before":  # nothing was spawned (oharness: no session.started either)
        assert "session.started" not in run.names(), run.names()
        # The start checks may still probe the binary's version (`<vendor> --version`, bounded, run
        # before the spawn); the harness itself is never started.
        spawned = {pid: argv for pid, argv in run.below_metaharness.items() if not argv.split()[-1:] == [b"--version"]}
        assert not spawned, ("metaharness spawned after a signal that came before the spawn",
                             spawned, run.names())
    for decided in run.of("tool.decided"):  # the embedder allowed nothing: every call denied
        assert decided["decision"]["decision"] == "deny", decided
    assert not (work / "pwned.txt").exists(), "a call the embedder did not allow ran"
    assert run.survivors() == [], f"processes of the run outlived it: {run.survivors()}"
    if run.of("session.started"):  # a harness ran: its scratch was made in this base (the check is not idle)
        assert scratch_base.is_dir(), f"no scratch base at {scratch_base}"
    for base in (scratch_base, tmpdir):
        left = sorted(str(p.relative_to(base)) for p in base.rglob("*")) if base.exists() else []
        assert left == [], f"left on disk in {base}: {left[:10]}"


def run_signalled(argv: list[str], sig: int, phase: str, kind: str, *, cwd: Path, work: Path,
                  env: dict[str, str] | None = None) -> SignalledRun:
    """Start `argv`, signal it at `phase`, check the end (`check_end`); returns the run.
    The run's scratch base is the default one under a per-run XDG_CACHE_HOME (cwd/cache), so
    metaharness removes what it made; METAHARNESS_SCRATCH_DIR (a chosen base, kept) is unset. Its
    TMPDIR (and the wrappers') is cwd/tmp, which must be empty at the end too."""
    cache, tmpdir = cwd / "cache", cwd / "tmp"
    cache.mkdir(mode=0o700)
    tmpdir.mkdir(mode=0o700)
    child_env = {k: v for k, v in os.environ.items() if k != "METAHARNESS_SCRATCH_DIR"}
    child_env.update(XDG_CACHE_HOME=str(cache), TMPDIR=str(tmpdir), **(env or {}))
    run = SignalledRun(argv, cwd=cwd, env=child_env)
    try:
        signal_at(run, sig, phase, kind)
    except BaseException:
        run.finish()
        raise
    code = run.finish()
    check_end(run, code, phase, kind, work=work, scratch_base=cache / "metaharness" / "scratch", tmpdir=tmpdir)
    return run

