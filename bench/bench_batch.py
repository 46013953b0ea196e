"""Batch benchmarks (issue: metaharness batch). Prints figures; asserts nothing.

1. Batch overhead: N scripted oharness cells (default 100) through `metaharness batch run
   --jobs 2`, beside a plain shell pipeline (`xargs -P 2`) running the same N
   `metaharness run` commands two at a time, each in its own fresh workspace copy, in the
   same run. Goal: batch ≤ 1.1x the shell loop.
2. Ray overhead: the same plan with `--backend ray` (a local Ray started by the batch,
   bound to 127.0.0.1, start-up included) beside the local pool.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

PY = sys.executable
N = int(os.environ.get("BENCH_CELLS", "100"))
JOBS = 2


def write_inputs(work: str) -> tuple[str, str, str]:
    template = os.path.join(work, "template")
    os.makedirs(template)
    with open(os.path.join(template, "README.txt"), "w") as f:
        f.write("the template\n")
    script = os.path.join(work, "s.json")
    with open(script, "w") as f:
        json.dump({"format": "metaharness.scenario/1", "turns": [
            {"calls": [{"op": "file.write", "input": {"path": "notes.txt", "content": "hello"}}]}, {"text": "done"}]}, f)
    plan = os.path.join(work, "plan.json")
    with open(plan, "w") as f:
        json.dump({"format": "metaharness.batch/1", "repeats": N,
                   "tasks": [{"id": "notes", "prompt": "write", "script": script, "workspace": template}],
                   "harnesses": [{"kind": "oharness", "decisions": "observe"}]}, f)
    return template, script, plan


def shell_loop(work: str, template: str, script: str) -> float:
    out = os.path.join(work, "shell-out")
    os.makedirs(out)
    command = (f"d={shlex.quote(out)}/$0; mkdir -p $d; cp -r {shlex.quote(template)} $d/workspace; "
               f"{shlex.quote(PY)} -m metaharness run oharness --decisions observe --script {shlex.quote(script)} "
               f"-p write --cwd $d/workspace --events $d/events.jsonl > /dev/null < /dev/null")
    started = time.perf_counter()
    subprocess.run(f"seq 1 {N} | xargs -P {JOBS} -n 1 sh -c {shlex.quote(command)}", shell=True, check=True)
    return time.perf_counter() - started


def batch(work: str, plan: str, name: str, *extra: str) -> float:
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_USAGE_STATS_ENABLED="0")
    started = time.perf_counter()
    subprocess.run([PY, "-m", "metaharness", "batch", "run", plan, "--out", os.path.join(work, name),
                    "--jobs", str(JOBS), *extra], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=env)
    elapsed = time.perf_counter() - started
    with open(os.path.join(work, name, "results.jsonl")) as f:
        lines = [json.loads(line) for line in f]
    assert len(lines) == N and all(line["passed"] for line in lines), f"{name}: not every cell passed"
    return elapsed


def main() -> None:
    with tempfile.TemporaryDirectory(dir=os.path.expanduser("~")) as work:
        template, script, plan = write_inputs(work)
        loop = shell_loop(work, template, script)
        local = batch(work, plan, "local")
        print(f"{N} scripted oharness cells, two at a time: batch --jobs {JOBS} {local:.1f} s "
              f"({local / N * 1000:.0f} ms/cell) | shell loop (xargs -P {JOBS}) {loop:.1f} s "
              f"({loop / N * 1000:.0f} ms/cell) | ratio {local / loop:.2f}x | goal <= 1.1x")
        try:
            import ray  # noqa: F401
        except ImportError:
            print("ray backend: not measured (the ray extra is not installed: pip install 'metaharness[ray]')")
            return
        on_ray = batch(work, plan, "ray", "--backend", "ray")
        print(f"the same plan on --backend ray (a local Ray, start-up included) {on_ray:.1f} s "
              f"({on_ray / N * 1000:.0f} ms/cell) | local pool {local:.1f} s | ratio {on_ray / local:.2f}x | no goal set")


if __name__ == "__main__":
    main()
