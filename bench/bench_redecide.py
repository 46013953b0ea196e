"""`metaharness redecide` over 10,000 recorded calls (issue 24, item 4): what a user re-deciding a
month of CI runs meets. Goal: ≥ 5,000 calls/s on one core.

The calls are the conformance scenarios of the permission reference (the numbered cases of
tests/permissions/test_spec_cases.py, under its rules R), repeated round-robin into recorded Claude
Code streams of 1,000 calls each, the way a month of CI runs repeats the same few hundred commands.
Prints, measured in one run: the whole CLI process (start, read, decide, report), the library call
(`replay.redecide`) alone, and the bare baseline of reading the same lines with json. Figures only;
no assertion. The first line names the engine build measured (the CLI child inherits the path):
pure Python, or compiled with PYTHONPATH=build/compiled after `make compiled`.
Run: .venv/bin/python bench/bench_redecide.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "permissions"))

from permissions_rules import R  # noqa: E402
from test_spec_cases import R_CASES  # noqa: E402

CALLS = 10_000
PER_STREAM = 1_000
RUNS = 3


def tool_call(principal: str) -> tuple[str, dict] | None:
    """A recorded Claude Code call for one case's call in rule form, or None for a form not recorded."""
    if "(" not in principal:
        return (principal, {}) if principal.startswith("mcp__") else None
    tool, rest = principal.split("(", 1)
    value = rest[:-1]
    if tool == "Bash":
        return "Bash", {"command": value}
    if tool == "Read":
        return "Read", {"file_path": value}
    if tool in ("Write", "Edit"):
        return tool, {"file_path": value, "content": "x\n"} if tool == "Write" else \
            {"file_path": value, "old_string": "a", "new_string": "b"}
    if tool == "WebFetch":
        return "WebFetch", {"url": value, "prompt": "read"}
    return None


def write_streams(directory: str, cwd: str) -> int:
    calls = [c for c in (tool_call(case[1]) for case in R_CASES) if c is not None]
    written = 0
    for stream in range(CALLS // PER_STREAM):
        lines = [{"format": "metaharness.event/1", "seq": 1, "run": f"ci-{stream}", "event": "session.started",
                  "adapter": "claude", "cwd": cwd, "hermetic": {"deny_only": False}}]
        for i in range(PER_STREAM):
            name, tool_input = calls[(stream * PER_STREAM + i) % len(calls)]
            call_id = f"toolu_{stream}_{i}"
            lines.append({"format": "metaharness.event/1", "seq": 2 * i + 2, "run": f"ci-{stream}",
                          "event": "tool.requested", "call_id": call_id, "name": name, "input": tool_input})
            lines.append({"format": "metaharness.event/1", "seq": 2 * i + 3, "run": f"ci-{stream}",
                          "event": "tool.decided", "call_id": call_id, "decision": {"decision": "allow"},
                          "decided_by": "policy"})
            written += 1
        with open(os.path.join(directory, f"run-{stream:02d}.jsonl"), "w") as handle:
            handle.writelines(json.dumps(line) + "\n" for line in lines)
    return written


def main() -> None:
    base = tempfile.mkdtemp(prefix="ohredecide-", dir="/var/tmp")
    cwd, streams = os.path.join(base, "proj"), os.path.join(base, "streams")
    os.makedirs(os.path.join(cwd, "src"))
    os.makedirs(streams)
    subprocess.run(["git", "init", "-q", cwd], check=True)
    policy = os.path.join(base, "policy.json")
    with open(policy, "w") as handle:
        json.dump({"permissions": R}, handle)
    count = write_streams(streams, cwd)
    env = dict(os.environ, HOME=os.path.join(base, "home"))
    os.makedirs(env["HOME"])

    from metaharness.replay import redecide as rd

    bare, library, whole = [], [], []
    for _ in range(RUNS):
        t = time.perf_counter()
        for file in rd.stream_files(streams):
            with open(file, "rb") as handle:
                for raw in handle:
                    json.loads(raw)
        bare.append(time.perf_counter() - t)

        decider = rd.PolicyDeciderFor([policy], "manual")
        t = time.perf_counter()
        report = rd.redecide([streams], decider)
        library.append(time.perf_counter() - t)
        decider.close()
        assert len(report.outcomes) == count

        t = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "metaharness", "redecide", streams, "--policy", policy,
                               "--policy-mode", "manual", "--json", "--fail-on", "allowed"],
                              capture_output=True, text=True, env=env, cwd=cwd)
        whole.append(time.perf_counter() - t)
        if done.returncode not in (0, 1):
            sys.exit(f"redecide failed ({done.returncode}): {done.stderr}")
    summary = json.loads(done.stdout)["summary"]
    from metaharness.permissions.build import engine_build

    print(f"engine build: {engine_build()}")
    print(f"recorded calls: {count} in {CALLS // PER_STREAM} streams "
          f"({len(set(map(str, (tool_call(c[1]) for c in R_CASES))))} distinct scenario calls); summary {summary}")
    print(f"bare json read of the lines        best {min(bare) * 1000:8.1f} ms   {count / min(bare):10.0f} calls/s")
    print(f"replay.redecide (library)          best {min(library) * 1000:8.1f} ms   {count / min(library):10.0f} calls/s")
    print(f"metaharness redecide (whole CLI)   best {min(whole) * 1000:8.1f} ms   {count / min(whole):10.0f} calls/s")
    print(f"goal >= 5,000 calls/s (whole CLI): {'met' if count / min(whole) >= 5000 else 'NOT met'}")
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
