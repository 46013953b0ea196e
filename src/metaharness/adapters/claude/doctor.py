"""`metaharness doctor claude` and `metaharness conformance claude` (docs/guides/claude-and-codex.md).

What belongs here: the checks, each returning `(name, ok, detail)`. Doctor checks the
binary on the child's PATH, its version against the pin, the flags the adapter emits,
and the control channel's fail-closed capability (the adapter's exact launch and
`initialize`; no model is called). Conformance is free: the recorded wire replayed
through the translator against byte-exact expected items, and the launch plan's
invariants — no binary, no model, no network.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from typing import Iterator

from metaharness.adapters.base import StartRefusal
from metaharness.adapters.process import kill_tree, remove_scratch

from . import launch
from .translate import Translator, encode_item

Check = tuple[str, bool, str]
FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "tests", "fixtures", "claude")


def doctor_checks(vendor_dir: str | None) -> Iterator[Check]:
    path = launch.child_path(vendor_dir)
    try:
        binary = launch.resolve_binary(path)
    except StartRefusal as exc:
        yield ("binary on the child PATH", False, exc.sentence)
        return
    yield ("binary on the child PATH", True, binary)
    base_env = {"PATH": path, "HOME": tempfile.gettempdir(), "LANG": "C.UTF-8",
                **{s: "1" for s in launch.PHONE_HOME_SWITCHES}}
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30, env=base_env,
                             stdin=subprocess.DEVNULL).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        out = ""
        yield ("version against the pin", False, f"claude --version failed: {exc}")
    else:
        version = launch.parse_version(out)
        yield ("version against the pin", version == launch.PINNED_VERSION,
               f"{version} (pin {launch.PINNED_VERSION})")
    try:
        help_text = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30, env=base_env,
                                   stdin=subprocess.DEVNULL).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        yield ("flags the adapter emits", False, f"claude --help failed: {exc}")
    else:
        missing = [flag for flag in launch.FLAGS if flag not in help_text]
        yield ("flags the adapter emits", not missing, "all present" if not missing else "missing: " + ", ".join(missing))
    yield capability_check(binary, path)


def capability_check(binary: str, path: str) -> Check:
    name = "control-channel capabilities"
    scratch = launch.make_scratch()
    env = launch.build_env(scratch, path, base_url="http://127.0.0.1:9", api_key=launch.PLACEHOLDER_KEY)
    argv = launch.build_argv(binary, posture=None, model=None)
    try:
        child = subprocess.Popen(argv, cwd=scratch / "work", env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        remove_scratch(scratch.root, keep_chosen=False)
        return (name, False, f"spawn failed: {exc}")
    try:
        request = launch.initialize_request("mh-1", launch.hook_timeout_s(55000))
        assert child.stdin and child.stdout
        child.stdin.write((json.dumps(request) + "\n").encode())
        child.stdin.flush()
        reply = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = child.stdout.readline()
            if not line:
                break
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("type") == "control_response" and record.get("response", {}).get("request_id") == "mh-1":
                reply = record["response"]
                break
        if reply is None:
            return (name, False, "no reply to initialize")
        try:
            inner = launch.check_initialize_reply(reply)
        except Exception as exc:  # StartRefusal
            return (name, False, getattr(exc, "sentence", str(exc)))
        if inner.get("claude_code_version") != launch.PINNED_VERSION:
            return (name, False, f"initialize reports {inner.get('claude_code_version')}")
        child.stdin.close()
        try:
            code = child.wait(5)
        except subprocess.TimeoutExpired:
            return (name, False, "claude did not exit within 5 s of stdin closing")
        if code != 0:
            return (name, False, f"claude exited {code}")
        return (name, True, "hooks_applied, hook_on_failure_supported, clean exit")
    finally:
        kill_tree(child.pid)
        try:
            child.wait(5)
        except subprocess.TimeoutExpired:
            pass
        remove_scratch(scratch.root, keep_chosen=False)  # the doctor keeps nothing


def replay(wire: bytes, written: list) -> list[str]:
    translator = Translator(transcript_path="<transcript>")
    for kind, blocks in written:
        translator.expect_replay(kind, blocks)
    out: list[str] = []
    for number, raw in enumerate(wire.splitlines(keepends=True), start=1):
        out += [encode_item(item) for item in translator.feed(raw, number)]
    out += [encode_item(item) for item in translator.release_held()]
    return out


def conformance_checks(fixtures: str | None = None) -> Iterator[Check]:
    directory = os.path.abspath(fixtures or FIXTURES)
    names = sorted(f[: -len(".wire.jsonl")] for f in os.listdir(directory) if f.endswith(".wire.jsonl")) \
        if os.path.isdir(directory) else []
    if not names:
        yield ("recorded wire", False, f"no *.wire.jsonl fixtures in {directory}")
    for name in names:
        base = os.path.join(directory, name)
        with open(base + ".wire.jsonl", "rb") as handle:
            wire = handle.read()
        written = json.load(open(base + ".written.json")) if os.path.exists(base + ".written.json") else []
        try:
            got = replay(wire, written)
        except Exception as exc:  # the translator must never crash
            yield (f"replay {name}", False, f"translator raised {exc!r}")
            continue
        expected_path = base + ".expected.jsonl"
        if not os.path.exists(expected_path):
            yield (f"replay {name}", False, f"no {expected_path}")
            continue
        expected = open(expected_path, encoding="utf-8").read().splitlines()
        if got == expected:
            yield (f"replay {name}", True, f"{len(got)} items byte-exact")
        else:
            first = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
            yield (f"replay {name}", False, f"item {first + 1} differs (got {len(got)}, expected {len(expected)})")
    yield from launch_plan_checks()


def launch_plan_checks() -> Iterator[Check]:
    scratch = launch.Scratch("/scratch")
    env = launch.build_env(scratch, "/vendor:/usr/local/bin:/usr/bin:/bin", base_url="http://127.0.0.1:1234",
                           api_key=launch.PLACEHOLDER_KEY)
    expected_keys = {"PATH", "HOME", "CLAUDE_CONFIG_DIR", "TMPDIR", "XDG_RUNTIME_DIR", "LANG", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY",
                     *launch.PHONE_HOME_SWITCHES}
    yield ("environment is exactly the allowlist", set(env) == expected_keys, ", ".join(sorted(env)))
    yield ("phone-home switches set", all(env[s] == "1" for s in launch.PHONE_HOME_SWITCHES), "four switches = 1")
    argv = launch.build_argv("/vendor/claude", posture="acceptEdits", model="m")
    head = ["/vendor/claude", "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
            "--replay-user-messages", "--permission-prompts", "none", "--setting-sources", "", "--strict-mcp-config"]
    yield ("argv carries the seam's flags", argv[: len(head)] == head, " ".join(argv))
    yield ("argv has no hook-skipping flag", not set(argv) & set(launch.FORBIDDEN_FLAGS), "none of " + ", ".join(launch.FORBIDDEN_FLAGS))
    timeouts = {d: launch.hook_timeout_s(d) for d in (55000, 2000, 2500, 2501)}
    yield ("hook timeout above the decision budget", timeouts == {55000: 60, 2000: 4, 2500: 5, 2501: 8}, repr(timeouts))
    request = launch.initialize_request("mh-1", 60)["request"]["hooks"]["PreToolUse"][0]
    yield ("initialize registers a fail-closed hook for every tool",
           request == {"matcher": None, "hookCallbackIds": [launch.HOOK_CALLBACK_ID], "timeout": 60, "onFailure": "block"},
           json.dumps(request))
