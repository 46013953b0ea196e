"""Added latency per tool call on the real Claude Code 2.1.328 (issue 5, item 5).

Three configurations, interleaved, 20 Bash calls × 5 runs each, all against an
in-process loopback model: `observe` (metaharness records, answers every callback
at once — the closest to "no seam" the adapter runs; launched in bypassPermissions
so its abstained writes run), `frame` (a frame admitting
shell decides each call), `ask` through the CLI (`metaharness run claude --decisions
ask` as a subprocess; this script is the embedder, reading its stdout and writing
`tool.decide` `allow` on its stdin for each `tool.requested`). Figures:

* per call, the gap from the `assistant(tool_use)` record to the `user(tool_result)`
  record, from the records' own timestamps (ms resolution), median and p90;
* metaharness's own share, measured inside the process: the callback record read →
  the answer written (plus, where the decision was parked, the assistant record read
  → present() returned). Target: under 0.5 ms median.

Run: .venv/bin/python bench/bench_claude.py [--runs 5] [--calls 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
from datetime import datetime

from metaharness.adapters.claude import ClaudeAdapter
from metaharness.protocol.frame import document_bytes, seal
from metaharness.run.loop import Run
from metaharness.run.spec import RunSpec

VENDOR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".vendor", "node_modules", ".bin")


def ts(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000


def gaps_of(transcript: str) -> list[float]:
    """Per call: the `assistant(tool_use)` record → its `user(tool_result)` record, from
    the records' own timestamps."""
    records = [json.loads(line) for line in open(transcript)]
    asked: dict[str, float] = {}
    gaps: list[float] = []
    for record in records:
        if record.get("type") == "assistant":
            for block in record["message"]["content"]:
                if block.get("type") == "tool_use":
                    asked[block["id"]] = ts(record["timestamp"])
        elif record.get("type") == "user" and isinstance(record["message"].get("content"), list):
            for block in record["message"]["content"]:
                if block.get("type") == "tool_result" and block["tool_use_id"] in asked:
                    gaps.append(ts(record["timestamp"]) - asked[block["tool_use_id"]])
    return gaps


async def ask_through_cli(work: str, scen: str) -> list[float]:
    """`metaharness run claude --decisions ask` as a subprocess; we are its embedder."""
    retained = work + ".retained"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "metaharness", "run", "claude", "-p", "go", "--script", scen, "--cwd", work,
        "--vendor-dir", VENDOR, "--decisions", "ask", "--retain-dir", retained,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        limit=64 * 1024 * 1024)
    assert proc.stdin and proc.stdout and proc.stderr
    asked = 0
    while True:
        line = await proc.stdout.readline()
        if not line:
            break
        if b'"decision_required":true' in line:
            event = json.loads(line)
            asked += 1
            proc.stdin.write(json.dumps({"format": "metaharness.command/1", "id": f"d{asked}", "command": "tool.decide",
                                         "call_id": event["call_id"], "decision": {"decision": "allow"}}).encode() + b"\n")
            await proc.stdin.drain()
    proc.stdin.close()
    code = await proc.wait()
    if code != 0:
        raise SystemExit(f"ask run exited {code}: {(await proc.stderr.read()).decode()[-2000:]}")
    return gaps_of(os.path.join(retained, "claude-transcript.jsonl"))


async def one_run(mode: str, calls: int, base: str) -> tuple[list[float], list[float]]:
    work = tempfile.mkdtemp(dir=base)
    scen = os.path.join(work, "..", os.path.basename(work) + ".json")
    with open(scen, "w") as handle:
        json.dump({"format": "metaharness.scenario/1", "turns": [
            {"calls": [{"op": "shell", "input": {"command": f"echo call{i} > f{i}.txt"}}]} for i in range(calls)
        ] + [{"text": "done"}]}, handle)
    if mode == "ask":
        return await ask_through_cli(work, scen), []
    spec = RunSpec(kind="claude", prompt="go", script=scen, cwd=work, vendor_dir=VENDOR,
                   posture="bypassPermissions" if mode == "observe" else None, decisions=mode)
    if mode == "frame":
        frame_path = os.path.join(work, "..", os.path.basename(work) + ".frame.json")
        with open(frame_path, "wb") as handle:
            handle.write(document_bytes(seal({
                "workflow": {"id": "b", "version": "1"}, "node": {"id": "n"},
                "step": {"workflow": "b", "state": "n", "index": 1, "attempt": 1}, "prior": [], "obligations": [],
                "reaching": [], "next": [], "handoff": {"handoff": "none"}, "operations": [{"op": "shell"}]})))
        spec.frame = frame_path
    adapter = ClaudeAdapter(spec)
    run = Run(spec, lambda line: None, adapter=adapter)
    code = await run.execute()
    if code != 0:
        raise SystemExit(f"{mode} run exited {code}")
    gaps = gaps_of(str(adapter.child.scratch.transcript))
    shares = []
    for timing in adapter.seam.timings.values():
        if timing.callback_read_ns and timing.answer_written_ns:
            share = max(0, timing.answer_written_ns - max(timing.callback_read_ns, timing.presented_ns or 0))
            if timing.presented_ns and timing.record_read_ns and timing.presented_ns < timing.callback_read_ns:
                share += timing.presented_ns - timing.record_read_ns
            shares.append(share / 1e6)
    return gaps, shares


def p90(values: list[float]) -> float:
    return sorted(values)[max(0, int(round(0.9 * len(values))) - 1)]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    base = tempfile.mkdtemp(prefix="bench-claude-", dir="/var/tmp")
    try:
        await measure(args, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)  # the runs' scratch and work, read and done with


async def measure(args: argparse.Namespace, base: str) -> None:
    # Keep each run's scratch (the transcript the gaps are read from) until the figures are printed.
    os.environ["METAHARNESS_SCRATCH_DIR"] = os.path.join(base, "scratch")
    gaps = {m: [] for m in ("observe", "frame", "ask")}
    shares = {m: [] for m in gaps}
    for _ in range(args.runs):
        for mode in gaps:  # interleaved
            g, s = await one_run(mode, args.calls, base)
            gaps[mode] += g
            shares[mode] += s
    baseline = statistics.median(gaps["observe"])
    print(f"Claude Code 2.1.328, {args.calls} Bash calls x {args.runs} runs, interleaved; gap tool_use -> tool_result (ms)")
    for mode in gaps:
        g = gaps[mode]
        print(f"  {mode:8} n={len(g):3} median {statistics.median(g):6.1f}  p90 {p90(g):6.1f}  "
              f"median vs observe {statistics.median(g) - baseline:+.1f}")
    for mode in ("observe", "frame"):
        s = shares[mode]
        if s:
            print(f"  metaharness's own share ({mode}): median {statistics.median(s):.3f} ms  p90 {p90(s):.3f} ms "
                  f"(target < 0.5 ms median)")


if __name__ == "__main__":
    asyncio.run(main())
