"""Helpers for the Inspect agent tests: a scripted mockllm model (tool calls, then a last word),
a sealed frame, one `inspect eval` of one sample in the `local` sandbox and its log read back, and
that eval run in a child process in a loopback-only network namespace (for the real vendors)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.log import EvalLog, read_eval_log
from inspect_ai.model import ChatMessageTool, ModelOutput, ModelUsage, get_model

from metaharness.protocol.frame import document_bytes, seal

# `metaharness` in the sandbox: this interpreter's, whatever the PATH of the local sandbox says.
COMMAND = (sys.executable, "-m", "metaharness")


def frame(ops: list[str]) -> dict[str, Any]:
    """A sealed one-step frame admitting exactly `ops`."""
    return json.loads(document_bytes(seal({
        "workflow": {"id": "wf", "version": "1"}, "node": {"id": "s1"},
        "step": {"workflow": "wf", "state": "s1", "index": 1, "attempt": 1},
        "prior": [], "obligations": [], "reaching": [], "next": [], "handoff": {"handoff": "none"},
        "operations": [{"op": op} for op in ops],
    })))


def scripted(calls: list[tuple[str, dict[str, Any]]], last: str = "done"):
    """mockllm's custom_outputs: the i-th request that carries tools and i tool results gets call i;
    a request with every result in, or one with no tools (a vendor's side request), gets `last`."""

    def answer(input, tools, tool_choice, config) -> ModelOutput:
        done = sum(isinstance(m, ChatMessageTool) for m in input)
        if tools and done < len(calls):
            name, arguments = calls[done]
            output = ModelOutput.for_tool_call("mockllm", name, arguments, tool_call_id=f"call_{done + 1}")
        else:
            output = ModelOutput.from_content("mockllm", last)
        # usage given, so mockllm counts no tokens (its tokenizer would be downloaded: offline, it fails)
        output.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)
        return output

    return answer


def run_eval(solver, calls, log_dir, *, prompt: str = "do the task", **eval_args: Any) -> EvalLog:
    model = get_model("mockllm/model", custom_outputs=scripted(calls))
    task = Task(dataset=[Sample(input=prompt)], solver=solver, sandbox="local")
    [log] = eval(task, model=model, log_dir=str(log_dir), display="none", **eval_args)
    return read_eval_log(log.location, resolve_attachments=True)


def decisions(log: EvalLog) -> list[dict[str, Any]]:
    """The decisions the transcript holds (the agent's info events, source metaharness)."""
    [sample] = log.samples
    return [e.data for e in sample.events if e.event == "info" and e.source == "metaharness"
            and isinstance(e.data, dict) and "decided_by" in e.data]


HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VENDOR_DIR = os.path.join(ROOT, ".vendor", "node_modules", ".bin")


def namespace_available() -> bool:
    try:
        probe = subprocess.run(["unshare", "-rnm", "sh", "-c", "ip link set lo up"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def run_eval_isolated(harness: str, decider: dict[str, Any], calls, tmp_path) -> tuple[EvalLog, str]:
    """One eval of `harness` under a decider (`frame_ops`, or `policy` and `policy_mode`), in a child
    process in a loopback-only namespace where the machine allows one (else in a plain child); its
    log read back, and the working directory."""
    binary = os.path.join(VENDOR_DIR, harness)
    if not os.path.exists(binary):
        pytest.fail(f"the pinned {harness} binary is missing at {binary}; run `make vendor`", pytrace=False)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"harness": harness, **decider, "calls": calls, "work": str(work),
                                  "logs": str(tmp_path / "logs"), "vendor_dir": VENDOR_DIR}))
    argv = [sys.executable, os.path.join(HERE, "inspect_child.py"), str(config)]
    if namespace_available():
        argv = ["unshare", "-rnm", *argv, "--in-namespace"]
    else:
        print("NOTE: unshare -rnm is not available; the Inspect e2e test runs without a network namespace",
              file=sys.stderr)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr[-4000:]
    return read_eval_log(done.stdout.strip().splitlines()[-1], resolve_attachments=True), str(work)
