"""Every command type at every phase, on the vendor harnesses (issue 19): the batches of
command lines the phase tests write, the count of `command.result`s against them, and the
process-tree helpers that reach the "after the child died" phase from outside.

A batch holds one line of each command type but halt — tool.decide (for no open call),
frame.set (a malformed frame), message.inject, steer, interrupt, permission.set (a posture
the harness accepts and one it does not) — plus a malformed line and a blank one. Every
non-blank line must get exactly one `command.result`, under its id.

"While metaharness spawns the harness" from outside: the batch is written once a process
exists below metaharness and before the harness is up; it is read then, and processed then
or — on Claude Code and Codex, whose permission.set is held until the spawn settles — held
behind the earlier batch's permission.set and answered right after the spawn.

"After the child died" from outside: metaharness is frozen (SIGSTOP), everything below it
killed and reaped as far as the kernel goes, the batch written, metaharness resumed — so
the lines are in its stdin before it can notice the death, and it must still answer each.

Imported by tests/claude, tests/codex, tests/acp and tests/run (which put tests/ on sys.path).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from typing import Callable, Iterator

from metaharness.protocol.harnesses import HARNESSES

# The harnesses on the shared ACP adapter (the registry's entries whose adapter lives there).
ACP = tuple(entry.name for entry in HARNESSES if entry.adapter.startswith("metaharness.adapters.acp."))
# A posture each harness accepts (permission.set); the ACP harnesses accept none (they get "plan").
POSTURES = {"oharness": "plan", "claude": "default", "codex": "read-only", **{kind: "plan" for kind in ACP}}


def command(cid: str, name: str, **payload) -> bytes:
    return json.dumps({"format": "metaharness.command/1", "id": cid, "command": name, **payload}).encode()


def every_command(tag: str, kind: str, *, interrupt: bool = True) -> list[bytes]:
    """The batch for one phase; ids are `<tag>-<what>`. The interrupt comes before the
    permission.set: a held permission.set holds every line behind it until the spawn settles."""
    lines = [
        command(f"{tag}-decide", "tool.decide", call_id="no-such-call", decision={"decision": "allow"}),
        command(f"{tag}-frame", "frame.set", frame={"bad": "frame"}),
        command(f"{tag}-inject", "message.inject", text=f"NOTE-{tag}"),
        command(f"{tag}-steer", "steer", text="go left"),
        command(f"{tag}-interrupt", "interrupt", reason="stop"),
        command(f"{tag}-posture", "permission.set", posture=POSTURES[kind]),
        command(f"{tag}-posture-bad", "permission.set", posture="no-such-posture"),
        json.dumps({"format": "metaharness.command/1", "id": f"{tag}-malformed", "command": "halt"}).encode(),
        b"   ",
    ]
    return [line for line in lines if interrupt or b'"interrupt"' not in line]


def injected(tag: str) -> Callable[[dict], bool]:
    """The `injection` line of the batch `tag`'s message.inject: its turn was written to the child."""
    return lambda e: e["event"] == "injection" and e.get("text") == f"NOTE-{tag}"


def ended_after(event: dict) -> Callable[[dict], bool]:
    """A turn ended after `event` — the end of the turn an inject opened, whichever turn
    number it got (Claude Code may run a steer the interrupt left queued as a turn of its own)."""
    return lambda e: e["event"] == "turn.ended" and e["seq"] > event["seq"]


def ids_of(lines: list[bytes]) -> list[str]:
    return [json.loads(line)["id"] for line in lines if line.strip()]


def blob(lines: list[bytes]) -> bytes:
    """One write: the lines reach metaharness together."""
    return b"".join(line + b"\n" for line in lines)


def flat(outcome: dict) -> dict:
    return {"result": "refused", **outcome["refused"]} if outcome["result"] == "refused" else outcome


def answers(events: list[dict], lines: list[bytes]) -> dict[str, dict]:
    """The outcome of each line of `lines`, checking that each got exactly one result."""
    wanted = ids_of(lines)
    got = [e["id"] for e in events if e["event"] == "command.result" and e["id"] in set(wanted)]
    assert sorted(got) == sorted(wanted), {"missing": sorted(set(wanted) - set(got)),
                                           "twice": sorted({i for i in got if got.count(i) > 1})}
    return {e["id"]: flat(e["outcome"]) for e in events if e["event"] == "command.result" and e["id"] in set(wanted)}


def assert_refusals(by_id: dict[str, dict], tag: str, kind: str) -> None:
    """What holds at every phase: the malformed lines are MALFORMED, the posture no harness
    has is refused, and the ACP harnesses refuse steer and permission.set by name."""
    assert by_id[f"{tag}-malformed"]["code"] == "MALFORMED"
    assert by_id[f"{tag}-frame"]["code"] == "MALFORMED"
    assert by_id[f"{tag}-posture-bad"]["result"] == "refused"
    if kind in ACP:
        for what in ("steer", "posture"):
            assert by_id[f"{tag}-{what}"]["code"] == "UNSUPPORTED_CONTROL", (tag, what, by_id[f"{tag}-{what}"])


def assert_winding_up(by_id: dict[str, dict], tag: str, kind: str) -> None:
    """Read during wind-up: everything well-formed that the adapter honours is TOO_LATE."""
    assert_refusals(by_id, tag, kind)
    honoured = ["decide", "inject", "interrupt"] + ([] if kind in ACP else ["steer", "posture"])
    for what in honoured:
        if f"{tag}-{what}" in by_id:
            assert by_id[f"{tag}-{what}"] == {"result": "refused", "code": "TOO_LATE", "reason": "the run is ending"}, what


HELD = ("claude", "codex")  # permission.set honoured: held before the spawn, carried after


def check_walk(events: list[dict], batches: dict[str, list[bytes]], kind: str) -> None:
    """The run of `walk` (or its async twin): one answer per line, the halt answered last,
    and what each phase fixes."""
    assert events[-1]["event"] == "stream.closed"
    for phase, lines in batches.items():
        assert_refusals(answers(events, lines), phase, kind)
    results = [e for e in events if e["event"] == "command.result"]
    assert events[-2] == results[-1] and results[-1]["id"] == "halt"  # the halt is answered last
    assert results[-1]["outcome"] == {"result": "ok", "applies_at": None}
    assert_winding_up(answers(events, batches["wind"][1:]), "wind", kind)
    mid = answers(events, batches["mid"])
    assert mid["mid-interrupt"] == {"result": "ok", "applies_at": None}
    assert mid["mid-decide"]["code"] == "UNKNOWN_CALL"
    for phase in ("early", "spawning", "mid", "between"):
        got = answers(events, batches[phase])[f"{phase}-inject"]
        assert got == {"result": "ok", "applies_at": "next turn"}, (phase, got)
    if kind in HELD:
        early = answers(events, batches["early"])
        assert early["early-posture"]["result"] == "ok", early  # held until the harness existed, then carried
        assert early["early-steer"]["code"] == "TOO_LATE"  # no turn was running
        assert answers(events, batches["between"])["between-posture"]["result"] == "ok"


def check_after_death(events: list[dict], lines: list[bytes], kind: str) -> None:
    """Nothing reaches a dead harness: each control refused, never `ok` (whether the run saw
    the death first or the control found the channel closed)."""
    assert events[-1]["event"] == "stream.closed"
    by_id = answers(events, lines)
    assert_refusals(by_id, "dead", kind)
    for what in ("interrupt", *(("posture", "steer") if kind in HELD else ())):
        assert by_id[f"dead-{what}"]["code"] == "TOO_LATE", (what, by_id[f"dead-{what}"])


def walk(run, kind: str) -> dict[str, list[bytes]]:
    """Drive a threaded run driver (CodexRun, AcpRun: `proc`, `wait_for`) through the phases
    of a `--keep-open` ask run whose first turn makes one call; returns the batches written
    (the caller finishes the run and calls `check_walk`)."""
    batches: dict[str, list[bytes]] = {}

    def at(phase: str, lines: list[bytes]) -> None:
        batches[phase] = lines
        run.proc.stdin.write(blob(lines))
        run.proc.stdin.flush()

    at("early", every_command("early", kind))
    wait_for_a_child(metaharness_pid(run.proc.pid))
    at("spawning", every_command("spawning", kind))
    run.wait_for(lambda e: e["event"] == "tool.requested" and e["decision_required"], timeout=60)
    at("mid", every_command("mid", kind))  # its interrupt stops the turn on the pending call; its inject opens the next
    run.wait_for(ended_after(run.wait_for(injected("mid"), timeout=60)), timeout=60)
    at("between", every_command("between", kind))  # its inject opens one more turn (which its interrupt may stop)
    run.wait_for(ended_after(run.wait_for(injected("between"), timeout=60)), timeout=60)
    at("wind", [command("halt", "halt", reason="done"), *every_command("wind", kind)])
    return batches


def kill_then_write(run, kind: str) -> list[bytes]:
    """With a call pending: metaharness frozen, the harness killed, the batch written, resumed."""
    lines = every_command("dead", kind)
    metaharness = metaharness_pid(run.proc.pid)
    with frozen(metaharness):
        kill_everything_below(metaharness)
        run.proc.stdin.write(blob(lines))
        run.proc.stdin.flush()
    return lines


# --- the process tree ------------------------------------------------------------------

def children_of(pid: int) -> list[int]:
    found = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                found += [int(child) for child in handle.read().split()]
    except OSError:
        pass
    return found


def descendants(root: int) -> list[int]:
    found = [root]
    for pid in found:
        found += children_of(pid)
    return found[1:]


def running(pid: int) -> bool:
    """True while `pid` exists and is not a zombie (killed, not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _argv(pid: int) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().split(b"\0")
    except OSError:
        return []


def metaharness_pid(root: int, timeout: float = 30) -> int:
    """The `metaharness run` process at or below `root` (the tests start it through
    namespace wrappers)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid in [root, *descendants(root)]:
            argv = _argv(pid)
            if (len(argv) > 2 and argv[1].endswith(b"/metaharness") and argv[2] == b"run") or argv[1:4] == [
                    b"-m", b"metaharness", b"run"]:
                return pid
        time.sleep(0.01)
    raise AssertionError("no metaharness run process below the test's child")


def wait_for_a_child(pid: int, timeout: float = 60) -> None:
    """Until metaharness has started spawning its harness (a process below it exists)."""
    deadline = time.monotonic() + timeout
    while not children_of(pid):
        assert time.monotonic() < deadline, "metaharness spawned nothing"
        time.sleep(0.002)


def _dead(pid: int) -> bool:
    """Exited with every thread: only then are its files (the channel's far end) closed — a
    zombie leader may still have threads tearing down."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            zombie = handle.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
        return zombie and len(os.listdir(f"/proc/{pid}/task")) <= 1
    except OSError:
        return True


@contextlib.contextmanager
def frozen(pid: int) -> Iterator[None]:
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def kill_everything_below(pid: int, timeout: float = 10) -> None:
    """SIGKILL every process below `pid` and wait until none of them runs."""
    below = descendants(pid)
    assert below, "no harness process below metaharness"
    for child in below:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while not all(_dead(child) for child in below):
        assert time.monotonic() < deadline, "the harness did not die"
        time.sleep(0.01)


def stop_and_kill_below(pid: int) -> None:
    """SIGSTOP, then SIGKILL, every process below `pid`, and return at once: they are killed and
    not yet torn down (their end of metaharness's pipes may still be open)."""
    below = descendants(pid)
    assert below, "no harness process below metaharness"
    for signum in (signal.SIGSTOP, signal.SIGKILL):
        for child in below:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signum)


def check_decided_after_death(events: list[dict], cid: str, call_id: str) -> None:
    """A decision for a call the dead harness waited on: refused TOO_LATE — the harness can no
    longer be reached; or, when the run noticed the death first, the run is ending, or the call
    is already closed by the adapter's deny (a reaped Codex's channel closes before its output
    ends); the call's one `tool.decided` is that deny, and no census counts an allow."""
    assert events[-1]["event"] == "stream.closed"
    (result,) = [e for e in events if e["event"] == "command.result" and e["id"] == cid]
    refusal = result["outcome"].get("refused") or {}
    assert refusal.get("code") == "TOO_LATE", result
    closed = f"{call_id} was decided or its window closed"
    assert refusal["reason"].startswith(("the harness can no longer be reached: ", "the run is ending", closed)), refusal
    decided = [e for e in events if e["event"] == "tool.decided" and e["call_id"] == call_id]
    assert [(d["decided_by"], d["decision"]["decision"]) for d in decided] == [("adapter", "deny")], decided
    assert not [e for e in events if e["event"] == "tool.decided" and e["decision"]["decision"] == "allow"]
    for ended in (e for e in events if e["event"] == "session.ended"):
        assert ended["census"]["allowed"] == 0 and ended["census"]["by_decider"].get("embedder", 0) == 0, ended
