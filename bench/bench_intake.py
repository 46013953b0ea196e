"""Intake under a flood (issue 19): figures beside a bare baseline measured in the same run.

A `metaharness run oharness --keep-open --decisions ask` child is flooded on stdin, as fast
as a pipe takes it, with N command lines (unknown-call `tool.decide`s, garbage JSON,
non-UTF-8 lines), while its scripted model makes CALLS calls that nobody answers, each
closed by its DEADLINE_MS deadline. Printed:

* flood throughput: answered lines/s, against a bare `decode_command_line` loop over the
  same lines (the target: within 2x of it);
* peak RSS of the metaharness process (the target: under 100 MiB, whatever N);
* deadline lateness under the flood, p50/p99 over the calls (`latency_ms - deadline_ms`;
  the target: p99 under 10 ms; the loop measures latency in whole ms).

It asserts nothing (speed is not a test verdict).

Usage: python bench/bench_intake.py [--lines N] [--calls C] [--deadline-ms D]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from metaharness.protocol.decode import decode_command_line


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


def bare_decode(lines: list[bytes]) -> float:
    start = time.perf_counter()
    for line in lines:
        decode_command_line(line)
    return len(lines) / (time.perf_counter() - start)


def scenario(path: str, calls: int) -> None:
    turns = [{"calls": [{"op": "shell", "input": {"command": f"echo {i}"}} for i in range(calls)]}, {"text": "done"}]
    with open(path, "w") as handle:
        json.dump({"format": "metaharness.scenario/1", "turns": turns}, handle)


def run_flood(lines: list[bytes], calls: int, deadline_ms: int) -> dict:
    work = tempfile.mkdtemp(prefix="bench-intake-")
    script = os.path.join(work, "s.json")
    scenario(script, calls)
    proc = subprocess.Popen(
        [sys.executable, "-m", "metaharness", "run", "oharness", "--keep-open", "--decisions", "ask",
         "--decision-timeout-ms", str(deadline_ms), "--script", script, "--cwd", work, "-p", "go"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin and proc.stdout
    results = 0
    lateness: list[int] = []
    first_result = last_result = None
    started = threading.Event()

    def write() -> None:
        started.wait()
        payload = b"\n".join(lines) + b"\n"
        view = memoryview(payload)
        for offset in range(0, len(view), 1 << 16):
            proc.stdin.write(view[offset:offset + (1 << 16)])
        proc.stdin.flush()
        halt = {"format": "metaharness.command/1", "id": "end", "command": "halt", "reason": "bench over"}
        proc.stdin.write(json.dumps(halt).encode() + b"\n")
        proc.stdin.flush()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
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
    flood_start = None
    for raw in proc.stdout:
        event = json.loads(raw)
        name = event["event"]
        if name == "session.started":
            flood_start = time.perf_counter()
            started.set()
        elif name == "command.result":
            results += 1
            last_result = time.perf_counter()
            first_result = first_result or last_result
        elif name == "tool.decided" and event["decided_by"] == "deadline":
            lateness.append(event["latency_ms"] - deadline_ms)
    _pid, _status, usage = os.wait4(proc.pid, 0)
    return {
        "answered": results,
        "seconds": (last_result or time.perf_counter()) - (flood_start or time.perf_counter()),
        "peak_rss_mib": hwm[0] / 1024,
        "tree_peak_rss_mib": usage.ru_maxrss / 1024,
        "lateness": lateness,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=300_000)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--deadline-ms", type=int, default=100)
    args = parser.parse_args()
    lines = flood_lines(args.lines)
    size = sum(len(line) + 1 for line in lines)
    bare = bare_decode(lines)
    figures = run_flood(lines, args.calls, args.deadline_ms)
    rate = figures["answered"] / figures["seconds"]
    late = sorted(figures["lateness"])
    print(f"flood: {args.lines} lines, {size / 2**20:.1f} MiB; {figures['answered']} answered")
    print(f"throughput: {rate:,.0f} lines/s; bare decode {bare:,.0f} lines/s; ratio {bare / rate:.2f}x (goal <= 2x)")
    print(f"peak RSS of metaharness: {figures['peak_rss_mib']:.1f} MiB (goal < 100 MiB); "
          f"largest of its process tree (wait4): {figures['tree_peak_rss_mib']:.1f} MiB")
    if late:
        p99 = late[min(len(late) - 1, int(round(0.99 * (len(late) - 1))))]
        print(f"deadline lateness over {len(late)} calls: p50 {statistics.median(late):.0f} ms, p99 {p99} ms, "
              f"max {late[-1]} ms (goal p99 < 10 ms)")
    else:
        print("deadline lateness: no call reached its deadline during the flood")


if __name__ == "__main__":
    main()
