"""Start-up of the ACP agents under metaharness. Prints figures; asserts nothing.

For opencode, Gemini CLI and Qwen Code (the pinned binaries in .vendor): process start of
`metaharness run <kind> --script` (a one-turn scenario on the run's own loopback model) →
its `session.started` line, and its whole run to the end of the stream; beside the bare
`<vendor> --version` start, measured in the same run, interleaved (Gemini CLI's with
GEMINI_CLI_NO_RELAUNCH=1, as the run starts it: one node process, not two). The CPU figure is the
run's whole process tree (the agent included). What metaharness adds is the difference
between a run's start and the agent's own start-up (its `initialize` and `session/new`
answered, which `--version` does not cover).

Run: .venv/bin/python bench/bench_acp_start.py [--starts 5] [--kinds gemini,opencode,qwen]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

VENDOR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".vendor", "node_modules", ".bin")
BINARY = {"opencode": "opencode", "gemini": "gemini", "qwen": "qwen"}
BARE_ENV = {"gemini": {"GEMINI_CLI_NO_RELAUNCH": "1"}}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def bare(kind: str) -> tuple[float, float]:
    """(wall ms, CPU s) of `<vendor> --version`."""
    cpu, t = children_cpu(), time.perf_counter()
    subprocess.run([os.path.join(VENDOR, BINARY[kind]), "--version"], check=True, capture_output=True,
                   env={**os.environ, **BARE_ENV.get(kind, {})})
    return (time.perf_counter() - t) * 1000, children_cpu() - cpu


def run(kind: str, work: str, script: str) -> tuple[float, float, float]:
    """(ms to session.started, ms to the stream's end, CPU s of the whole run)."""
    cpu, t = children_cpu(), time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "metaharness", "run", kind, "--vendor-dir", VENDOR,
                             "--script", script, "-p", "x", "--cwd", work],
                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    first = json.loads(proc.stdout.readline())
    started = (time.perf_counter() - t) * 1000
    if first.get("event") != "session.started":
        raise SystemExit(f"{kind}: the run's first event is {first}, not session.started")
    proc.communicate()
    return started, (time.perf_counter() - t) * 1000, children_cpu() - cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--kinds", default="gemini,opencode,qwen")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-acp-") as work:
        script = os.path.join(work, "one.json")
        with open(script, "w") as f:
            json.dump({"format": "metaharness.scenario/1", "turns": [{"text": "hi"}]}, f)
        for kind in args.kinds.split(","):
            bares, runs = [], []
            for _ in range(args.starts):
                bares.append(bare(kind))
                runs.append(run(kind, work, script))
            b_ms, b_cpu = (statistics.median(x[i] for x in bares) for i in (0, 1))
            s_ms, e_ms, r_cpu = (statistics.median(x[i] for x in runs) for i in (0, 1, 2))
            print(f"{kind:9s} start → session.started median {s_ms:6.0f} ms, whole one-turn run {e_ms:6.0f} ms, "
                  f"{r_cpu:5.2f} s CPU | bare --version {b_ms:5.0f} ms, {b_cpu:5.2f} s CPU "
                  f"| start/bare {s_ms / b_ms:4.1f}x, CPU {r_cpu / b_cpu:4.1f}x")


if __name__ == "__main__":
    main()
