"""Added latency per tool call through Codex's app-server approval seam (issue 6 item 5).

Three modes, 20 `exec_command` calls × 5 runs each, measured the same way in the same run:
  * bare      — `codex app-server` driven directly, approval policy `never` (no approvals);
  * seam      — `metaharness run codex` with a frame admitting shell (every call asked
                under `untrusted`, decided by the frame, answered `accept`);
  * relay     — the same with `--codex-replace-relay` (vendors.md § 4.6): each call first
                through the PreToolUse hook program and the run's socket, then its approval.
Per call: the rollout's gap from `function_call` to `function_call_output` (ms); the
seam mode also reports metaharness's own share (approval request read → answer written).
Prints median and p90 and the ratio seam/bare. No timed assertions: figures only.

    .venv/bin/python bench/bench_codex.py [--calls 20] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from metaharness.adapters.codex import doctor as codex_doctor, launch  # noqa: E402
from metaharness.protocol.frame import document_bytes, seal  # noqa: E402

VENDOR = str(REPO / ".vendor" / "node_modules" / ".bin")
METAHARNESS = str(REPO / ".venv" / "bin" / "metaharness")


def scenario(calls: int) -> dict:
    return {"format": "metaharness.scenario/1",
            "turns": [{"calls": [{"op": "shell", "input": {"command": f"echo call{i}"}}]} for i in range(calls)]
            + [{"text": "done"}]}


def rollout_gaps(path: Path) -> list[float]:
    started: dict[str, datetime] = {}
    gaps = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        payload = record.get("payload") or {}
        stamp = datetime.fromisoformat(record["timestamp"].replace("Z", "+00:00"))
        if payload.get("type") == "function_call":
            started[payload["call_id"]] = stamp
        elif payload.get("type") == "function_call_output" and payload.get("call_id") in started:
            gaps.append((stamp - started.pop(payload["call_id"])).total_seconds() * 1000)
    return gaps


def run_seam(root: Path, calls: int, *extra: str) -> tuple[list[float], list[float]]:
    work = root / "work"
    work.mkdir(parents=True)
    (root / "s.json").write_text(json.dumps(scenario(calls)))
    frame = seal({"workflow": {"id": "bench", "version": "1"}, "node": {"id": "n"},
                  "step": {"workflow": "bench", "state": "n", "index": 1, "attempt": 1}, "prior": [], "obligations": [],
                  "reaching": [], "next": [], "handoff": {"handoff": "none"}, "operations": [{"op": "shell"}]})
    (root / "f.json").write_bytes(document_bytes(frame))
    done = subprocess.run([METAHARNESS, "run", "codex", "--vendor-dir", VENDOR, "--script", str(root / "s.json"),
                           "--frame", str(root / "f.json"), "-p", "go", "--cwd", str(work), *extra],
                          capture_output=True, timeout=600, env=dict(os.environ, METAHARNESS_SCRATCH_DIR=str(root / "scratch")))
    started = next(json.loads(l) for l in done.stdout.splitlines() if b'"session.started"' in l)
    scratch = Path(started["transcript"]["path"]).parent
    rollout = next(scratch.glob("rollout-*.jsonl"))
    shares = [json.loads(l)["seam_ms"] for l in (scratch / "seam-timings.jsonl").read_text().splitlines()]
    return rollout_gaps(rollout), shares


def run_bare(calls: int) -> list[float]:
    from metaharness.loopback.server import LoopbackServer
    from metaharness.protocol.scenario import parse_scenario

    async def go() -> list[float]:
        env = codex_doctor._Env(VENDOR)
        server = LoopbackServer(parse_scenario(json.dumps(scenario(calls))), workdir=str(env.scratch / "work"), stderr=None)
        url = await server.start()
        (env.scratch / launch.CODEX_HOME / "config.toml").write_text(launch.config_toml(launch.provider_base_url(url)))
        binary = launch.resolve_binary(env.path)
        proc = await asyncio.create_subprocess_exec(
            binary, "app-server", cwd=str(env.scratch / "work"), env=env.env, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, start_new_session=True, limit=1 << 26)
        notes: list[dict] = []
        rpc = codex_doctor.RpcChannel(proc.stdout, proc.stdin, open(env.scratch.transcript, "wb"),
                                      on_request=lambda m, r, n: rpc.answer(m["id"], error={"code": -32601, "message": "no"}),
                                      on_notification=lambda m, r, n: notes.append(m))
        reader = asyncio.get_running_loop().create_task(rpc.read_forever())
        await rpc.request("initialize", {"clientInfo": {"name": "metaharness", "title": None, "version": "bench"},
                                         "capabilities": {"experimentalApi": False, "requestAttestation": False}})
        rpc.notify("initialized")
        thread = await rpc.request("thread/start", {"cwd": str(env.scratch / "work"), "approvalPolicy": "never",
                                                    "sandbox": "workspace-write"})
        await rpc.request("turn/start", {"threadId": thread["thread"]["id"],
                                         "input": [{"type": "text", "text": "go", "text_elements": []}]})
        while not any(n.get("method") == "turn/completed" for n in notes):
            await asyncio.sleep(0.05)
        rpc.close_stdin()
        await proc.wait()
        await reader
        await server.stop()
        gaps = rollout_gaps(Path(thread["thread"]["path"]))
        env.cleanup()
        return gaps

    return asyncio.run(go())


def summary(values: list[float]) -> str:
    if not values:
        return "n/a"
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]
    return f"median {statistics.median(ordered):7.2f} ms  p90 {p90:7.2f} ms  (n={len(ordered)})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    bare: list[float] = []
    seam: list[float] = []
    share: list[float] = []
    relay: list[float] = []
    base = Path(os.path.expanduser("~")) / ".cache" / "metaharness" / "bench"
    base.mkdir(parents=True, exist_ok=True)
    for _ in range(args.runs):
        bare += run_bare(args.calls)
        with tempfile.TemporaryDirectory(dir=base) as root:
            gaps, shares = run_seam(Path(root), args.calls)
        seam += gaps
        share += shares
        with tempfile.TemporaryDirectory(dir=base) as root:
            relay += run_seam(Path(root), args.calls, "--codex-replace-relay")[0]
    print(f"codex {args.calls} calls x {args.runs} runs, rollout gap function_call -> function_call_output")
    print(f"  bare app-server, policy never : {summary(bare)}")
    print(f"  metaharness seam, untrusted   : {summary(seam)}")
    print(f"  metaharness's own share       : {summary(share)}  (approval read -> answer written)")
    print(f"  relay run (hook, then approval): {summary(relay)}")
    if bare and seam:
        print(f"  ratio seam/bare (median)      : {statistics.median(seam) / statistics.median(bare):.2f}")
        print(f"  added per call (median)       : {statistics.median(seam) - statistics.median(bare):+.2f} ms")
    if bare and relay:
        print(f"  ratio relay/bare (median)     : {statistics.median(relay) / statistics.median(bare):.2f}")
        print(f"  added per call, relay (median): {statistics.median(relay) - statistics.median(bare):+.2f} ms")


if __name__ == "__main__":
    main()
