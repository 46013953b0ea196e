"""Helpers for the workflow tests: write a workflow and a scenario, run them on a
harness through the library (or the CLI), and read back the ledger and streams."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from metaharness.protocol.frame import load_frame
from metaharness.protocol.stream import check_stream
from metaharness.run.spec import RunSpec
from metaharness.workflow import run_workflow

REPO = Path(__file__).resolve().parents[2]
METAHARNESS = REPO / ".venv" / "bin" / "metaharness"
VENDOR = REPO / ".vendor" / "node_modules" / ".bin"
NETNS = REPO / "tests" / "fixtures" / "codex" / "netns_run.py"
sys.path.insert(0, str(REPO / "tests" / "codex"))
from e2e_support import NETNS_OK  # noqa: E402  (the loopback-only namespace probe, shared)
BUGFIX = REPO / "examples" / "bugfix"


def scenario(path: Path, *turns: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": list(turns)}))
    return path


def shell(command: str) -> dict[str, Any]:
    return {"op": "shell", "input": {"command": command}}


def write(path: str, content: str) -> dict[str, Any]:
    return {"op": "file.write", "input": {"path": path, "content": content}}


def edit(path: str, old: str, new: str) -> dict[str, Any]:
    return {"op": "file.edit", "input": {"path": path, "old": old, "new": new}}


HEAD = 'format = "metaharness.workflow/1"\nid = "t"\nversion = "1"\n'


class Case:
    """One workflow run in a scratch directory: `work/` the workspace, `out/` the ledger."""

    def __init__(self, root: Path, workflow: str, *turns: dict[str, Any], kind: str = "oharness") -> None:
        self.root, self.kind = root, kind
        self.work = root / "work"
        self.work.mkdir(parents=True, exist_ok=True)
        self.out = root / "out"
        self.file = root / "wf.toml"
        self.file.write_text(HEAD + workflow)
        self.script = scenario(root / "scenario.json", *turns)

    def spec(self, **extra: Any) -> RunSpec:
        options: dict[str, Any] = {"script": str(self.script), "cwd": str(self.work), "decision_timeout_ms": 5000}
        if self.kind != "oharness":
            options["vendor_dir"] = str(VENDOR)
        options.update(extra)
        return RunSpec(kind=self.kind, **options)

    def run(self, *, task: str | None = "the task", spec: dict[str, Any] | None = None, **kw: Any):
        return asyncio.run(run_workflow(str(self.file), harness=self.kind, out=str(self.out), task=task,
                                        spec=self.spec(**(spec or {})), **kw))

    # --- reading back ------------------------------------------------------------------
    def ledger(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in (self.out / "workflow.jsonl").read_text().splitlines() if line.strip()]

    def records(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.ledger() if r["record"] == kind]

    def events(self, name: str = "events.jsonl") -> list[dict[str, Any]]:
        return [json.loads(line) for line in (self.out / name).read_text().splitlines() if line.strip()]

    def frames(self) -> list[Any]:
        """Every step's sealed frame, loaded (and so verified) from its file, in step order."""
        return [load_frame(self.out / r["frame"]) for r in self.records("step.entered")]

    def assert_sound(self, stream: str = "events.jsonl") -> None:
        """The stream is complete and every frame file verifies and matches its ledger digest."""
        verdict = check_stream((self.out / stream).read_bytes())
        assert verdict.status == "complete", verdict.reason
        for record, frame in zip(self.records("step.entered"), self.frames()):
            assert frame.digest == record["frame_digest"]
            assert frame.step.index == record["step"]["index"] and frame.step.attempt == record["step"]["attempt"]
        entered = [e["frame_digest"] for e in self.events(stream) if e["event"] == "step.entered"]
        assert entered == [r["frame_digest"] for r in self.records("step.entered")][-len(entered):]

    def steps(self) -> list[tuple[int, str, int, str]]:
        return [(r["step"]["index"], r["step"]["node"], r["step"]["attempt"], r["outcome"])
                for r in self.records("step.ended")]


def netns_ok() -> bool:
    return NETNS_OK


def cli(args: list[str], *, cwd: Path, timeout: float = 300, namespace: bool = False,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`metaharness workflow …` as a child; vendor runs go through the loopback-only namespace."""
    command = [str(METAHARNESS), "workflow", *args]
    if namespace and netns_ok():
        command = ["unshare", "--user", "--map-root-user", "--net", "--mount", sys.executable, str(NETNS),
                   str(cwd / "dns.log"), "--", *command]
    child_env = dict(os.environ, METAHARNESS_SCRATCH_DIR=str(cwd / "scratch"), **(env or {}))
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=str(cwd),
                          stdin=subprocess.DEVNULL, env=child_env)


def copy_bugfix_workspace(root: Path) -> Path:
    work = root / "work"
    shutil.copytree(BUGFIX / "workspace", work)
    return work


def cli_run(case: Case, *extra: str, task: str = "the task", timeout: float = 300) -> subprocess.CompletedProcess:
    """`metaharness workflow run` on the case's harness (vendor harnesses inside the namespace)."""
    args = ["run", str(case.file), "--harness", case.kind, "--out", str(case.out), "--cwd", str(case.work),
            "--script", str(case.script), "--decision-timeout-ms", "5000", "-p", task, *extra]
    if case.kind != "oharness":
        args += ["--vendor-dir", str(VENDOR)]
    done = cli(args, cwd=case.root, timeout=timeout, namespace=case.kind != "oharness")
    dns = case.root / "dns.log"
    if dns.exists():
        assert dns.read_text().strip() == "", f"the vendor looked up names: {dns.read_text()}"
    return done
