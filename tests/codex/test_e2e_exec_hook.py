"""Vendor check X31 (the Codex end-to-end checklist) against the real Codex CLI 0.171.0: the fallback seam
of the vendor rule “fallback seam: codex exec + PreToolUse hook” — `codex exec` with a PreToolUse command hook and `--dangerously-bypass-hook-trust` —
and what each hook behaviour of the outcomes table (the vendor rule “outcomes”) lets through.

One `codex exec` per behaviour, launched with the adapter's hermetic pieces (launch.py,
through tests/fixtures/codex/exec_serve.py) against an in-process loopback whose scenario
makes one `exec_command` shell write (`out.txt`) and one `apply_patch` add (`w.txt`). The
verdict is read on disk: the two reliable deny forms must stop both calls; the ten
fail-open behaviours let both run. Each case also checks which calls the hook was shown,
what the model was told, and (inside the loopback-only namespace of the vendor rule “end-to-end tests run the vendor in a loopback-only network namespace” when the machine
allows it) that the vendor looked up no name.

Measured on 0.171.0, the binary agrees with every row of the vendor rule “outcomes” that this check covers (the
two deny forms, the legacy `decision:block` row, the ten numbered fail-open cases). One
reading of the table needs care: for row 6 (`timeout=2`, hook sleeps 4 s) the table says
"yes (after 4.4 s)". Each call actually ran ≈2.1 s after it was made — at the hook's
timeout; Codex stops the hook there (its post-sleep line never runs) and never reads its
late deny. 4.4 s is the sum over the two calls, not the wait for one. The case asserts the
measured form (each call → output gap ≥ the timeout, the hook stopped) and prints the gaps.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

from e2e_support import CODEX, E2E_ROOT, NETNS, NETNS_OK, VENDOR


EXEC_SERVE = Path(__file__).resolve().parents[1] / "fixtures" / "codex" / "exec_serve.py"

SHELL_COMMAND = "echo hi > out.txt"
PATCH_CONTENT = "written by apply_patch"
PATCH_TEXT = f"*** Begin Patch\n*** Add File: w.txt\n+{PATCH_CONTENT}\n*** End Patch\n"
SCENARIO = {
    "format": "metaharness.scenario/1",
    "turns": [
        {"calls": [{"op": "shell", "input": {"command": SHELL_COMMAND}}]},
        {"calls": [{"op": "file.write", "input": {"path": "w.txt", "content": PATCH_CONTENT}}]},
        {"text": "done"},
    ],
}
BLOCKED = "Command blocked by PreToolUse hook: "
BYPASS_WARNING = "`--dangerously-bypass-hook-trust` is enabled."


def _print_json(payload: dict) -> str:
    return f"printf '%s' '{json.dumps(payload)}'"


def _pre_tool_use(decision: str, reason: str | None = None) -> dict:
    output: dict = {"hookEventName": "PreToolUse", "permissionDecision": decision}
    if reason is not None:
        output["permissionDecisionReason"] = reason
    return {"hookSpecificOutput": output}


@dataclass(frozen=True)
class Behaviour:
    """One row of the vendor rule “outcomes”: what the hook does after reading its input, and what follows."""

    body: str  # shell lines run after the hook has logged its stdin
    blocks: bool  # the vendor rule “outcomes”: neither the shell nor the patch runs
    reason: str | None = None  # the text the model must see after `Command blocked by PreToolUse hook: `
    timeout: int = 30
    hook_missing: bool = False  # the declared command does not exist
    bypass_trust: bool = True  # pass `--dangerously-bypass-hook-trust`

    @property
    def hook_runs(self) -> bool:
        return self.bypass_trust and not self.hook_missing


BEHAVIOURS: dict[str, Behaviour] = {
    # The two reliable deny forms.
    "deny-with-reason": Behaviour(_print_json(_pre_tool_use("deny", "X31-DENY-REASON")), blocks=True,
                                  reason="X31-DENY-REASON"),
    "exit-2-with-stderr": Behaviour("echo X31-EXIT2-REASON >&2\nexit 2", blocks=True, reason="X31-EXIT2-REASON"),
    # Beyond X31's twelve: the vendor rule “outcomes”'s legacy deny row, pinned at the cost of one more short run.
    "legacy-decision-block": Behaviour(_print_json({"decision": "block", "reason": "X31-LEGACY-REASON"}), blocks=True,
                                       reason="X31-LEGACY-REASON"),
    # The ten fail-open behaviours, numbered as in the vendor rule “outcomes”.
    "01-deny-empty-reason": Behaviour(_print_json(_pre_tool_use("deny", "")), blocks=False),
    "02-deny-blank-reason": Behaviour(_print_json(_pre_tool_use("deny", "   ")), blocks=False),
    "03-exit-2-empty-stderr": Behaviour("exit 2", blocks=False),
    "04-exit-1-crash": Behaviour("echo X31-CRASH >&2\nexit 1", blocks=False),
    "05-non-json-stdout": Behaviour("echo 'this is not json'", blocks=False),
    # The hook outlives its 2 s timeout; the marker line after the sleep shows whether it was stopped.
    "06-timeout": Behaviour("sleep 4\necho finished >> '@CASE@/hook-finished.log'\n"
                            + _print_json(_pre_tool_use("deny", "X31-TOO-LATE")), blocks=False, timeout=2),
    "07-ask": Behaviour(_print_json(_pre_tool_use("ask", "X31-ASK")), blocks=False),
    "08-allow": Behaviour(_print_json(_pre_tool_use("allow", "X31-ALLOW")), blocks=False),
    "09-hook-binary-missing": Behaviour("", blocks=False, hook_missing=True),
    "10-untrusted-deny": Behaviour(_print_json(_pre_tool_use("deny", "X31-UNTRUSTED")), blocks=False,
                                   bypass_trust=False),
}


@pytest.fixture
def case(request):
    if not CODEX.exists():
        pytest.fail(f"the pinned codex binary is missing at {CODEX}; run "
                    "`make vendor` (the vendor installation rule)")
    directory = E2E_ROOT / f"x31-{request.node.callspec.id[:30]}-{uuid.uuid4().hex[:6]}"
    directory.mkdir(parents=True)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@dataclass
class ExecRun:
    returncode: int
    case_dir: Path
    stderr: str

    def lines(self, name: str) -> list[dict]:
        path = self.case_dir / name
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def items(self, kind: str) -> list[dict]:
        return [e["item"] for e in self.lines("exec.jsonl")
                if e.get("type") == "item.completed" and e["item"]["type"] == kind]

    def hook_inputs(self) -> list[dict]:
        return self.lines("hook-input.jsonl")

    def tool_outputs(self) -> dict[str, str]:
        """call_id → the output the model was last sent for it."""
        outputs: dict[str, str] = {}
        for entry in self.lines("loopback.jsonl"):
            if not entry["main"]:
                continue
            for item in entry["body"]["input"]:
                if item.get("type") in ("function_call_output", "custom_tool_call_output"):
                    output = item.get("output")
                    outputs[item["call_id"]] = output if isinstance(output, str) else json.dumps(output)
        return outputs

    def calls(self) -> dict[str, str]:
        """tool name → call_id, from the history the model was sent back."""
        found: dict[str, str] = {}
        for entry in self.lines("loopback.jsonl"):
            for item in entry["body"]["input"] if entry["main"] else []:
                if item.get("type") in ("function_call", "custom_tool_call"):
                    found[item["name"]] = item["call_id"]
        return found

    def dns_names(self) -> list[str]:
        return [line["name"] for line in self.lines("dns.log")]

    def rollout_gaps(self) -> dict[str, float]:
        """call_id → seconds from the call to its output in the rollout (the vendor rule “invocation”: the reliable record)."""
        called: dict[str, datetime] = {}
        gaps: dict[str, float] = {}
        for rollout in (self.case_dir / "scratch" / "codex-home" / "sessions").rglob("rollout-*.jsonl"):
            for line in rollout.read_text().splitlines():
                record = json.loads(line)
                payload = record.get("payload") or {}
                at = datetime.fromisoformat(record["timestamp"].replace("Z", "+00:00"))
                if payload.get("type") in ("function_call", "custom_tool_call"):
                    called[payload["call_id"]] = at
                elif payload.get("type") in ("function_call_output", "custom_tool_call_output"):
                    gaps[payload["call_id"]] = (at - called[payload["call_id"]]).total_seconds()
        return gaps


def write_hook(case_dir: Path, behaviour: Behaviour) -> Path:
    """The hook script, outside the work dir; it logs each input as one JSON line, then acts."""
    script = case_dir / "hooks" / "pre-tool-use.sh"
    script.parent.mkdir()
    if behaviour.hook_missing:
        return case_dir / "hooks" / "no-such-hook"
    log = case_dir / "hook-input.jsonl"
    body = behaviour.body.replace("@CASE@", str(case_dir))
    script.write_text(f"#!/bin/sh\ntr -d '\\n' >> '{log}'\necho >> '{log}'\n{body}\n")
    script.chmod(0o755)
    return script


def run_exec(case_dir: Path, behaviour: Behaviour) -> ExecRun:
    work = case_dir / "work"
    work.mkdir()
    scenario = case_dir / "scenario.json"
    scenario.write_text(json.dumps(SCENARIO))
    hook = write_hook(case_dir, behaviour)
    extra = case_dir / "hook.toml"
    extra.write_text("[[hooks.PreToolUse]]\n[[hooks.PreToolUse.hooks]]\n"
                     f'type = "command"\ncommand = "{hook}"\ntimeout = {behaviour.timeout}\n')
    exec_args = ["--json", "--skip-git-repo-check", "-C", str(work), "--sandbox", "workspace-write"]
    if behaviour.bypass_trust:
        exec_args.append("--dangerously-bypass-hook-trust")
    command = [sys.executable, str(EXEC_SERVE), str(case_dir), str(scenario), str(work), str(case_dir / "scratch"),
               str(VENDOR), "--config-extra", str(extra), "--", *exec_args, "go"]
    if NETNS_OK:
        command = ["unshare", "--user", "--map-root-user", "--net", "--mount",
                   sys.executable, str(NETNS), str(case_dir / "dns.log"), "--", *command]
    done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
                          start_new_session=True)
    return ExecRun(done.returncode, case_dir, done.stderr.decode("utf-8", "replace"))


def test_x31_namespace_note():
    """Says once whether the X31 runs were namespaced (the vendor rule “end-to-end tests run the vendor in a loopback-only network namespace”: never skipped for want of it)."""
    print(f"X31 runs inside the loopback-only namespace: {NETNS_OK}")


@pytest.mark.parametrize("name", list(BEHAVIOURS))
def test_x31_exec_hook_outcome(case, name):
    behaviour = BEHAVIOURS[name]
    run = run_exec(case, behaviour)
    context = f"exit {run.returncode}; stderr tail: {run.stderr[-800:]}"
    assert run.returncode == 0, context

    # The verdict, on disk.
    shell_file, patch_file = case / "work" / "out.txt", case / "work" / "w.txt"
    if behaviour.blocks:
        assert not shell_file.exists(), f"{name}: the shell ran; {context}"
        assert not patch_file.exists(), f"{name}: the patch ran; {context}"
    else:
        assert shell_file.exists() and shell_file.read_text() == "hi\n", f"{name}: the shell did not run; {context}"
        assert patch_file.exists() and patch_file.read_text() == PATCH_CONTENT + "\n", \
            f"{name}: the patch did not run; {context}"

    # What the hook was shown (the vendor rule “hook input and output”): Codex's normalised names, the whole command or patch.
    inputs = run.hook_inputs()
    if behaviour.hook_runs:
        assert [(i["tool_name"], i["tool_input"]) for i in inputs] == [
            ("Bash", {"command": SHELL_COMMAND}), ("apply_patch", {"command": PATCH_TEXT})], inputs
        assert {i["hook_event_name"] for i in inputs} == {"PreToolUse"}
        assert {i["cwd"] for i in inputs} == {str(case / "work")}
    else:
        assert inputs == [], f"{name}: the hook ran"

    # What the model was told.
    calls = run.calls()
    assert set(calls) == {"exec_command", "apply_patch"}, calls
    outputs = run.tool_outputs()
    shell_output, patch_output = outputs[calls["exec_command"]], outputs[calls["apply_patch"]]
    if behaviour.blocks:
        assert shell_output == f"{BLOCKED}{behaviour.reason}. Command: {SHELL_COMMAND}"
        assert patch_output == f"{BLOCKED}{behaviour.reason}. Command: {PATCH_TEXT}"
        assert "pre-tool-use.sh" not in shell_output + patch_output  # the hook command does not leak
        # A blocked call produces no exec item (the vendor rule “invocation”).
        assert run.items("command_execution") == [] and run.items("file_change") == []
    else:
        assert BLOCKED not in shell_output and BLOCKED not in patch_output
        commands = run.items("command_execution")
        assert len(commands) == 1 and commands[0]["exit_code"] == 0 and commands[0]["status"] == "completed", commands
        changes = run.items("file_change")
        assert len(changes) == 1 and [(c["kind"]) for c in changes[0]["changes"]] == ["add"], changes
        assert changes[0]["changes"][0]["path"].endswith("w.txt")

    # The trust bypass announces itself as two error items; without it, nothing is said.
    warnings = [i for i in run.items("error") if BYPASS_WARNING in i["message"]]
    assert len(warnings) == (2 if behaviour.bypass_trust else 0), run.items("error")

    if name == "06-timeout":
        # Codex stops waiting at the hook's timeout and stops the hook: its late deny is never read.
        gaps = run.rollout_gaps()
        print(f"X31 record: call → output with a 2 s hook timeout and a 4 s hook: {gaps}")
        assert set(gaps) == set(calls.values()) and all(gap >= 1.9 for gap in gaps.values()), gaps
        time.sleep(2.5)  # past the moment the patch's hook would have finished its sleep
        assert not (case / "hook-finished.log").exists(), "the timed-out hook ran to its end"

    assert run.dns_names() == [], f"the vendor looked up names: {run.dns_names()}"
