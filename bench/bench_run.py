"""Run-loop benchmarks (issue: run loop + oharness). Prints figures; asserts nothing.

1. Start-up: process start → first event line of `metaharness run oharness --script`,
   beside a bare `python -c pass` start measured in the same run.
2. Ask-mode decision latency through the CLI: the embedder writes `tool.decide` → the
   tool's `tool.result` line arrives, over N calls; beside the same interval in frame mode
   (`tool.decided` read → `tool.result` read), where no round trip is needed.
   Targets: start-up under 300 ms; ask median under 1 ms above frame.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

PY = sys.executable
N_CALLS = int(os.environ.get("BENCH_CALLS", "1000"))
N_STARTS = int(os.environ.get("BENCH_STARTS", "10"))


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def startup(work: str) -> None:
    script = os.path.join(work, "one.json")
    with open(script, "w") as f:
        json.dump({"format": "metaharness.scenario/1", "turns": [{"text": "hi"}]}, f)
    bare, ours = [], []
    for _ in range(N_STARTS):
        t = time.perf_counter()
        subprocess.run([PY, "-c", "pass"], check=True)
        bare.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        proc = subprocess.Popen([PY, "-m", "metaharness", "run", "oharness", "--script", script, "-p", "x",
                                 "--cwd", work], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        proc.stdout.readline()
        ours.append((time.perf_counter() - t) * 1000)
        proc.communicate()
    b, o = statistics.median(bare), statistics.median(ours)
    print(f"start-up to first event: median {o:.0f} ms (min {min(ours):.0f}) "
          f"| bare python start {b:.0f} ms | ratio {o / b:.1f}x | target < 300 ms")


def decision_latency(work: str, mode: str) -> list[float]:
    with open(os.path.join(work, "f.txt"), "w") as f:
        f.write("x")
    script = os.path.join(work, f"many-{mode}.json")
    with open(script, "w") as f:
        json.dump({"format": "metaharness.scenario/1", "turns": [
            {"calls": [{"op": "file.read", "input": {"path": "f.txt"}} for _ in range(N_CALLS)]}]}, f)
    args = [PY, "-m", "metaharness", "run", "oharness", "--script", script, "-p", "x", "--cwd", work,
            "--posture", "bypass"]
    args += ["--decisions", "ask"] if mode == "ask" else ["--decisions", "observe"]
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    marks: dict[str, float] = {}
    samples: list[float] = []
    n = 0
    for raw in proc.stdout:
        event = json.loads(raw)
        kind = event["event"]
        if kind == "tool.requested" and event["decision_required"]:
            n += 1
            line = json.dumps({"format": "metaharness.command/1", "id": f"c{n}", "command": "tool.decide",
                               "call_id": event["call_id"], "decision": {"decision": "allow"}}) + "\n"
            marks[event["call_id"]] = time.perf_counter()
            proc.stdin.write(line.encode())
            proc.stdin.flush()
        elif kind == "tool.decided" and mode != "ask":
            marks[event["call_id"]] = time.perf_counter()
        elif kind == "tool.result" and event["call_id"] in marks:
            samples.append((time.perf_counter() - marks.pop(event["call_id"])) * 1000)
    proc.stdin.close()
    proc.wait()
    return samples


def main() -> None:
    with tempfile.TemporaryDirectory() as work:
        startup(work)
        observe = decision_latency(work, "observe")
        ask = decision_latency(work, "ask")
        om, am = statistics.median(observe), statistics.median(ask)
        print(f"decision → tool.result over {len(ask)} calls: ask median {am:.2f} ms p99 {pct(ask, .99):.2f} ms "
              f"| no round trip (observe) median {om:.2f} ms p99 {pct(observe, .99):.2f} ms "
              f"| added {am - om:+.2f} ms median | target < 1 ms added")


if __name__ == "__main__":
    main()
