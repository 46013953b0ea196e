"""Intake under a flood (issue 19): figures beside a bare baseline measured in the same run.

A `metaharness run … --keep-open` is flooded on stdin, as fast as a pipe takes it, with N
command lines (unknown-call `tool.decide`s, garbage JSON, non-UTF-8 lines):

* oharness with `--decisions ask`, while its scripted model makes CALLS calls that nobody
  answers, each closed by its DEADLINE_MS deadline;
* oharness with `--decisions observe`, while its scripted model makes CALLS calls that run
  `sleep 0.05; date +%s.%N`: each tool result (a harness record) carries the wall-clock time
  the harness was about to write it, and this script notes when it reads the `tool.result`
  line metaharness made of it;
* codex (the test suite's stub app-server, tests/fixtures/codex/stub_codex) with
  `--decisions observe`, sending CALLS agent messages 50 ms apart: each notification carries
  its `emittedAtMs`, which metaharness writes as the line's `at`, so the time from the
  harness's write to this script's read of the `text` line is exact (to the millisecond).

Each record run is also made without a flood, as its baseline.

Printed:

* flood throughput: answered lines/s (from session.started until the flood's last line is
  answered), against a bare `decode_command_line` loop over the same lines (the target:
  within 2x of it); and the same comparison in CPU time per line (metaharness's, all its
  threads, over the flood, against the bare loop's), which a shared machine distorts less;
  and the CPU time per line of the run loop alone, fed the same lines in one process;
  and the floor: the CPU time per line of the least any run must do with a line — decode it
  (the bare loop's work) and encode its `command.result` (built directly: no run, no checks,
  no queue), which bounds from below what the 2x goal leaves for everything else;
* peak RSS of the metaharness process (the target: under 100 MiB, whatever N);
* deadline lateness under the flood, p50/p99 over the calls (`latency_ms - deadline_ms`;
  the target: p99 under 10 ms; the loop measures latency in whole ms);
* record-read lateness under the flood, p50/p99 over the records written while the flood
  lasted (the target: p99 under 50 ms). Both hold this script's time to read the line; the
  oharness figure also holds the harness's own time from `date` to its write.

Each figure is the best of REPEATS runs, the baseline's included. It asserts nothing (speed
is not a test verdict).

Usage: python bench/bench_intake.py [--lines N] [--calls C] [--deadline-ms D]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from metaharness.protocol.decode import decode_command_line

RECORD_COMMAND = "sleep 0.05; date +%s.%N"
STUB_CODEX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "codex", "stub_codex", "codex")
_RESULT = b'"event":"command.result"'
REPEATS = 3  # runs of each figure; the best is printed


def flood_lines(n: int, seed: int = 19) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        roll = rng.random()
        if roll < 0.7:
            out.append(json.dumps({"format": "metaharness.command/1", "id": f"f{i}", "command": "tool.decide",
                                   "call_id": f"nope-{i}", "decision": {"decision": "allow"}}).encode())
        elif roll < 0.9:
            out.append(b'{"format":"metaharness.command/1","id":"g%d","command":"tool.decide","decision":' % i)
        else:
            out.append(b'{"id":"u%d","text":"\xff\xfe"}' % i)
    return out


def bare_decode(lines: list[bytes]) -> tuple[float, float]:
    """(lines/s of wall time, CPU seconds per line)."""
    start, cpu = time.perf_counter(), time.process_time()
    for line in lines:
        decode_command_line(line)
    return len(lines) / (time.perf_counter() - start), (time.process_time() - cpu) / len(lines)


def floor(lines: list[bytes]) -> float:
    """CPU seconds per line of decoding each line and encoding its answer, nothing else: a
    MALFORMED line's refusal, and for a `tool.decide` the UNKNOWN_CALL refusal in the run's own
    words (no call is open in the flood)."""
    from metaharness.protocol.decode import CommandRefusal
    from metaharness.protocol.events import CommandResult
    from metaharness.protocol.stream import encode_event_line
    from metaharness.protocol.values import refused
    from metaharness.run.decide import UNKNOWN_CALL

    out: list[bytes] = []
    cpu = time.process_time()
    for seq, line in enumerate(lines, 1):
        command = decode_command_line(line)
        if type(command) is CommandRefusal:
            outcome = refused(command.code, command.reason)
        else:
            outcome = refused("UNKNOWN_CALL", UNKNOWN_CALL.format(call_id=command.call_id))
        out.append(encode_event_line(seq, "bench", CommandResult(id=command.id, outcome=outcome)))
    return (time.process_time() - cpu) / len(lines)


def in_process(lines: list[bytes]) -> float:
    """CPU seconds per line of the run loop alone: the lines handed to a `Run` (over the test
    suite's fake harness) in bursts of 600, as the intake hands them, the event lines kept in
    a list — no pipes, no other process."""
    import asyncio

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from metaharness.run.loop import Run
    from metaharness.run.spec import RunSpec
    from tests.run.fake import FakeAdapter, Turn

    async def main() -> float:
        out: list[bytes] = []
        spec = RunSpec(kind="oharness", prompt="go", decisions="ask", keep_open=True)
        run = Run(spec, out.append, adapter=FakeAdapter(spec, [Turn([])]), run_id="bench")
        task = asyncio.ensure_future(run.execute())
        while not any(b'"turn.ended"' in line for line in out):
            await asyncio.sleep(0.01)
        cpu = time.process_time()
        for offset in range(0, len(lines), 600):
            run.feed_lines(lines[offset:offset + 600])
        await run.queue.join()
        spent = time.process_time() - cpu
        run.feed_command(decode_command_line(b'{"format":"metaharness.command/1","id":"end","command":"halt",'
                                             b'"reason":"bench over"}'))
        await task
        return spent / len(lines)

    return asyncio.run(main())


def cpu_seconds(pid: int) -> float:
    """The CPU time (user + system) a process has used so far, its children not included."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scenario(path: str, calls: int, command: str) -> None:
    turns = [{"calls": [{"op": "shell", "input": {"command": command.format(i=i)}} for i in range(calls)]},
             {"text": "done"}]
    with open(path, "w") as handle:
        json.dump({"format": "metaharness.scenario/1", "turns": turns}, handle)


def stub_codex(work: str, records: int) -> str:
    """A vendor dir with the test suite's stub `codex` app-server, scripted to send `records`
    agent messages 50 ms apart; each notification carries its emittedAtMs."""
    vendor = os.path.join(work, "vendor")
    os.mkdir(vendor)
    shutil.copy2(STUB_CODEX, os.path.join(vendor, "codex"))
    steps: list[dict] = []
    for i in range(records):
        steps += [{"sleep": 0.05}, {"text": f"t{i}"}]
    with open(os.path.join(vendor, "behavior.json"), "w") as handle:
        json.dump({"turns": [steps]}, handle)
    return vendor


def _unix(at: str) -> float:
    return datetime.datetime.strptime(at, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp()


def run_flood(lines: list[bytes], calls: int, deadline_ms: int, *, kind: str) -> dict:
    """One flooded run; `kind` is "deadlines", "oharness-records" or "codex-records" (see the
    module docstring)."""
    work = tempfile.mkdtemp(prefix="bench-intake-")
    try:
        return _flood(work, lines, calls, deadline_ms, kind=kind)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _flood(work: str, lines: list[bytes], calls: int, deadline_ms: int, *, kind: str) -> dict:
    records = kind != "deadlines"
    if kind == "codex-records":
        harness = ["codex", "--vendor-dir", stub_codex(work, calls), "--model-endpoint", "http://127.0.0.1:9",
                   "--decisions", "observe"]
    else:
        script = os.path.join(work, "s.json")
        scenario(script, calls, RECORD_COMMAND if records else "echo {i}")
        mode = ["observe"] if records else ["ask", "--decision-timeout-ms", str(deadline_ms)]
        harness = ["oharness", "--script", script, "--decisions", *mode]
    proc = subprocess.Popen(
        [sys.executable, "-m", "metaharness", "run", *harness, "--keep-open", "--cwd", work, "-p", "go"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin and proc.stdout
    started = threading.Event()
    calls_done = threading.Event()  # the halt waits for the calls too, so none is cut short

    def write() -> None:
        started.wait()
        payload = b"\n".join(lines) + b"\n" if lines else b""
        view = memoryview(payload)
        for offset in range(0, len(view), 1 << 16):
            proc.stdin.write(view[offset:offset + (1 << 16)])
        proc.stdin.flush()
        calls_done.wait(120)
        halt = {"format": "metaharness.command/1", "id": "end", "command": "halt", "reason": "bench over"}
        proc.stdin.write(json.dumps(halt).encode() + b"\n")
        proc.stdin.flush()

    threading.Thread(target=write, daemon=True).start()
    hwm = [0]

    def watch() -> None:  # metaharness's own high-water mark (wait4's figure includes its children)
        while proc.poll() is None:
            try:
                with open(f"/proc/{proc.pid}/status") as handle:
                    hwm[0] = max(hwm[0], next(int(l.split()[1]) for l in handle if l.startswith("VmHWM:")))
            except (OSError, StopIteration):
                pass
            time.sleep(0.05)

    threading.Thread(target=watch, daemon=True).start()
    results = 0
    lateness: list[int] = []
    record_lateness: list[tuple[float, float]] = []  # (the harness's clock, ms until its line was read here)
    flood_start = flood_end = None
    cpu_start = cpu_end = 0.0
    closed_calls = 0
    flood_end_wall = float("inf")
    for raw in proc.stdout:  # kept cheap (a result is counted, not parsed): this reader must keep up
        if _RESULT in raw:
            results += 1
            if results == len(lines):  # every flood line is answered, in order, before the halt
                flood_end, flood_end_wall = time.perf_counter(), time.time()
                cpu_end = cpu_seconds(proc.pid)
            continue
        event = json.loads(raw)
        name = event["event"]
        if name == "session.started":
            flood_start = time.perf_counter()
            cpu_start = cpu_seconds(proc.pid)
            started.set()
        elif name == "tool.decided" and event["decided_by"] == "deadline":
            lateness.append(event["latency_ms"] - deadline_ms)
        elif name == "tool.result" and kind == "oharness-records":
            read_at = time.time()
            written = float(event["content"])
            record_lateness.append((written, (read_at - written) * 1000))
        elif name == "text" and kind == "codex-records":
            read_at = time.time()
            written = _unix(event["at"])
            record_lateness.append((written, (read_at - written) * 1000))
        if name == {"deadlines": "tool.decided", "oharness-records": "tool.result", "codex-records": "text"}[kind]:
            closed_calls += 1
            if closed_calls == calls:
                calls_done.set()
    _pid, _status, usage = os.wait4(proc.pid, 0)
    seconds = (flood_end or time.perf_counter()) - (flood_start or time.perf_counter())
    return {
        "answered": results,
        "seconds": seconds,
        "peak_rss_mib": hwm[0] / 1024,
        "tree_peak_rss_mib": usage.ru_maxrss / 1024,
        "flood_cpu_s": cpu_end - cpu_start,
        "lateness": lateness,
        "record_lateness": [late for written, late in record_lateness if written < flood_end_wall],
    }


def percentiles(values: list[float]) -> tuple[float, float, float]:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]
    return statistics.median(ordered), p99, ordered[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=300_000)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--deadline-ms", type=int, default=100)
    args = parser.parse_args()
    lines = flood_lines(args.lines)
    size = sum(len(line) + 1 for line in lines)
    # Each figure is the best of REPEATS (a shared machine's noise only ever slows a figure down):
    # the bare loop's best against metaharness's best.
    bares = [bare_decode(lines) for _ in range(REPEATS)]
    bare, bare_cpu = max(wall for wall, _cpu in bares), min(cpu for _wall, cpu in bares)
    figures = max((run_flood(lines, args.calls, args.deadline_ms, kind="deadlines") for _ in range(REPEATS)),
                  key=lambda run: run["answered"] / run["seconds"])
    rate = figures["answered"] / figures["seconds"]
    print(f"flood: {args.lines} lines, {size / 2**20:.1f} MiB; {figures['answered']} answered "
          f"(the flood's and the closing halt)")
    print(f"throughput: {rate:,.0f} lines/s; bare decode {bare:,.0f} lines/s; ratio {bare / rate:.2f}x (goal <= 2x)")
    least = min(floor(lines) for _ in range(REPEATS))
    print(f"the floor (decode each line and encode its answer, nothing else): {least * 1e6:.2f} us a line; "
          f"ratio {least / bare_cpu:.2f}x")
    print(f"throughput against the floor: {1e6 / rate:.2f} us a line over the pipes, the floor's {least * 1e6:.2f}; "
          f"ratio {1 / (rate * least):.2f}x (goal <= 1.5x)")
    alone = min(in_process(lines) for _ in range(REPEATS))
    print(f"the run loop alone (in this process, no pipes): {alone * 1e6:.2f} us a line; "
          f"ratio {alone / bare_cpu:.2f}x")
    per_line = figures["flood_cpu_s"] / len(lines)
    print(f"CPU per flood line: metaharness {per_line * 1e6:.2f} us (all its threads; {figures['flood_cpu_s']:.1f} s "
          f"of CPU over the flood's {figures['seconds']:.1f} s); bare decode {bare_cpu * 1e6:.2f} us; "
          f"ratio {per_line / bare_cpu:.2f}x (the wall ratio on a machine to itself)")
    print(f"peak RSS of metaharness: {figures['peak_rss_mib']:.1f} MiB (goal < 100 MiB); "
          f"largest of its process tree (wait4): {figures['tree_peak_rss_mib']:.1f} MiB")
    if figures["lateness"]:
        p50, p99, top = percentiles(figures["lateness"])
        print(f"deadline lateness over {len(figures['lateness'])} calls: p50 {p50:.0f} ms, p99 {p99} ms, "
              f"max {top} ms (goal p99 < 10 ms)")
    else:
        print("deadline lateness: no call reached its deadline during the flood")
    for kind, what, bound in (("oharness-records", "oharness tool results stamped by `date`", "an upper bound"),
                              ("codex-records", "stub codex notifications stamped at their write", "exact to 1 ms")):
        quiet = run_flood([], args.calls, args.deadline_ms, kind=kind)["record_lateness"]
        flood = run_flood(lines, args.calls, args.deadline_ms, kind=kind)
        if not flood["record_lateness"]:
            print(f"record-read lateness ({what}): no record was written during the flood")
            continue
        p50, p99, top = percentiles(flood["record_lateness"])
        q50, q99, _top = percentiles(quiet)
        print(f"record-read lateness, {what} ({bound}), over the {len(flood['record_lateness'])} written during "
              f"the flood ({flood['answered'] / flood['seconds']:,.0f} lines/s): p50 {p50:.1f} ms, p99 {p99:.1f} ms, "
              f"max {top:.1f} ms (goal p99 < 50 ms); without a flood p50 {q50:.1f} ms, p99 {q99:.1f} ms")

if __name__ == "__main__":
    main()
