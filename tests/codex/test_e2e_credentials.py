"""The Codex adapter's credential modes (the vendor rule “credential modes”, the vendor rule “Codex environment and config.toml (exact)”; issue 6 item 2).

* `loopback` and `none`: the real Codex 0.171.0 through `metaharness run codex`, with a
  loopback model as the upstream endpoint (started beside metaharness, inside the
  loopback-only namespace when the machine allows it). While the run is live every vendor
  process's environ and argv is read; after it, every file of the kept scratch. The real key
  must appear nowhere; the placeholder must; in `loopback` the upstream must have received
  the real key (the per-run proxy substituted it).
* `api-key`: the launch through the adapter's own start path against an env-recording stub
  app-server (no model, no network): the child holds the caller's key and the default
  provider; a missing key refuses the start by name (exit 2, a stream of only stream.closed).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from metaharness.adapters.base import StartRefusal
from metaharness.adapters.codex import CodexAdapter, launch
from metaharness.run.spec import RunSpec

from codex_helpers import FIXTURES, FakeContext
from e2e_support import CODEX, E2E_ROOT, METAHARNESS, NETNS, NETNS_OK, VENDOR, CodexRun, frame, scenario, shell

UPSTREAM_RUN = FIXTURES / "upstream_run.py"
REAL_OPENAI_KEY = "sk-proj-REALKEY-" + "Q7x" * 16
REAL_CODEX_KEY = "sk-proj-CODEXKEY-" + "Z4m" * 16
SPEC_ENV_KEYS = {"PATH", "HOME", "CODEX_HOME", "TMPDIR", "LANG"}  # the vendor rule “Codex environment and config.toml (exact)”, plus the one key variable


# --- helpers -----------------------------------------------------------------------------


class UpstreamCodexRun(CodexRun):
    """`metaharness run codex` beside a loopback model that stands for the upstream endpoint;
    `@URL@` in the arguments becomes its URL. Events are read as CodexRun reads them."""

    def __init__(self, case_dir: Path, scenario_path: Path, args: list[str], *, env: dict[str, str]) -> None:
        self.case_dir = case_dir
        self.dns_log = case_dir / "dns.log"
        self.upstream_log = case_dir / "upstream.jsonl"
        command = [sys.executable, str(UPSTREAM_RUN), str(scenario_path), str(self.upstream_log), str(case_dir / "work"),
                   "--", str(METAHARNESS), "run", "codex", "--vendor-dir", str(VENDOR), *args]
        self.namespaced = NETNS_OK
        if self.namespaced:
            command = ["unshare", "--user", "--map-root-user", "--net", "--mount",
                       sys.executable, str(NETNS), str(self.dns_log), "--", *command]
        child_env = dict(os.environ, METAHARNESS_SCRATCH_DIR=str(case_dir / "scratch"))
        child_env.update(env)
        self.stderr_path = case_dir / "stderr.txt"
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=open(self.stderr_path, "wb"), cwd=str(case_dir), env=child_env)
        self.events = []
        self.raw = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.started = time.monotonic()

    def upstream_requests(self) -> list[dict]:
        if not self.upstream_log.exists():
            return []
        return [json.loads(line) for line in self.upstream_log.read_text().splitlines() if line.strip()]


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                found += [int(p) for p in handle.read().split()]
    except OSError:
        pass
    return found


def _descendants(pid: int) -> list[int]:
    found, frontier = [], [pid]
    while frontier:
        kids = _children(frontier.pop())
        found += kids
        frontier += kids
    return found


def _cmdline(pid: int) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().split(b"\0")
    except OSError:
        return []


def _environ(pid: int) -> dict[bytes, bytes] | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    return dict(entry.split(b"=", 1) for entry in raw.split(b"\0") if b"=" in entry)


def vendor_processes(run: CodexRun) -> tuple[dict[int, tuple[dict[bytes, bytes], list[bytes]]], list[int]]:
    """Every live descendant of the metaharness process: pid → (environ, argv); and
    metaharness's direct children (the launched vendor)."""
    ours = [pid for pid in _descendants(run.proc.pid) if _cmdline(pid)[1:2] == [str(METAHARNESS).encode()]]
    assert len(ours) == 1, f"metaharness process not found among {_descendants(run.proc.pid)}"
    seen: dict[int, tuple[dict[bytes, bytes], list[bytes]]] = {}
    for pid in _descendants(ours[0]):
        environ, argv = _environ(pid), _cmdline(pid)
        if environ is not None and argv:
            seen[pid] = (environ, argv)
    return seen, _children(ours[0])


def scratch_files(case: Path) -> dict[Path, bytes]:
    root = case / "scratch"
    found = {}
    for folder, _dirs, files in os.walk(root):
        for name in files:
            path = Path(folder) / name
            if path.is_file() and not path.is_symlink():
                found[path] = path.read_bytes()
    return found


def run_shell_case(case: Path, credential_args: list[str], env: dict[str, str]):
    """One live run with an admitted shell call that sleeps, so the vendor and the sandboxed
    command are running while their /proc entries are read."""
    s = scenario(case / "s.json", [{"calls": [shell("sleep 1.5; echo hi > out.txt")]}, {"text": "done"}])
    f = frame(case / "frame.json", ["shell"])
    run = UpstreamCodexRun(case, s, ["-p", "go", "--cwd", str(case / "work"), "--frame", str(f),
                                     *credential_args], env=env)
    run.wait_for(lambda e: e["event"] == "tool.decided", timeout=20)
    time.sleep(0.3)  # the accepted command's process tree is up
    live, direct = vendor_processes(run)
    assert run.finish(timeout=30) == 0, run.stderr()[-800:]
    run.assert_complete()
    decided = run.of("tool.decided")
    assert [d["decision"]["decision"] for d in decided] == ["allow"]
    results = run.of("tool.result")
    assert results and results[0]["exit_code"] == 0, results
    assert (case / "work" / "out.txt").read_text() == "hi\n"
    assert len(direct) == 1 and direct[0] in live and b"app-server" in live[direct[0]][1], direct
    # metaharness's own child holds exactly the vendor rule “Codex environment and config.toml (exact)” environment.
    assert set(live[direct[0]][0]) == {k.encode() for k in SPEC_ENV_KEYS | {"LOOPBACK_API_KEY"}}
    return run, live


def assert_nowhere(secret: str, live: dict, files: dict[Path, bytes]) -> None:
    needle = secret.encode()
    for pid, (environ, argv) in live.items():
        assert not any(needle in key or needle in value for key, value in environ.items()), f"key in environ of {pid}"
        assert not any(needle in part for part in argv), f"key in argv of {pid}: {argv}"
        assert not any(key.startswith(b"OPENAI_") or key == b"CODEX_API_KEY" for key in environ), (pid, list(environ))
    for path, content in files.items():
        assert needle not in content, f"the real key is in {path}"


@pytest.fixture
def case(request):
    if not CODEX.exists():
        pytest.fail(f"the pinned codex binary is missing at {CODEX}; run "
                    "`make vendor` (the vendor installation rule)")
    directory = E2E_ROOT / f"{request.node.name[:40]}-{uuid.uuid4().hex[:6]}"
    (directory / "work").mkdir(parents=True)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


# --- loopback ----------------------------------------------------------------------------


def test_loopback_mode_proxy_holds_the_key_and_the_child_sees_a_placeholder(case):
    run, live = run_shell_case(case, ["--credentials", "loopback", "--model-endpoint", "@URL@"],
                               {"OPENAI_API_KEY": REAL_OPENAI_KEY})
    # The app-server (and what it spawned) was read while the run was live.
    app_servers = [pid for pid, (_env, argv) in live.items() if b"app-server" in argv]
    assert app_servers, f"no app-server among the vendor processes: {[argv for _e, argv in live.values()]}"
    placeholders = {env.get(b"LOOPBACK_API_KEY") for pid, (env, _argv) in live.items() if pid in app_servers}
    assert len(placeholders) == 1
    placeholder = placeholders.pop().decode()
    assert placeholder.startswith("mh-placeholder-") and placeholder != launch.PLACEHOLDER_KEY
    files = scratch_files(case)
    assert any(p.name == "config.toml" for p in files) and any(p.name.startswith("rollout-") for p in files)
    assert_nowhere(REAL_OPENAI_KEY, live, files)
    config = next(content for p, content in files.items() if p.name == "config.toml").decode()
    assert 'env_key = "LOOPBACK_API_KEY"' in config
    # The child's provider is the per-run proxy, not the upstream itself.
    upstream_port = run.upstream_requests()[0]["headers"]["host"].rsplit(":", 1)[1]
    assert 'base_url = "http://127.0.0.1:' in config and f":{upstream_port}/v1" not in config
    # The upstream saw the real key on every model request, and never the placeholder.
    requests = run.upstream_requests()
    assert len([r for r in requests if r["main"]]) >= 2  # the call, then the answer after its output
    assert all(r["headers"]["authorization"] == f"Bearer {REAL_OPENAI_KEY}" for r in requests), \
        [r["headers"].get("authorization") for r in requests]
    assert placeholder not in run.upstream_log.read_text()


# --- none --------------------------------------------------------------------------------


def test_none_mode_child_sees_the_fixed_placeholder_and_the_endpoint(case):
    run, live = run_shell_case(case, ["--credentials", "none", "--model-endpoint", "@URL@"],
                               {"OPENAI_API_KEY": REAL_OPENAI_KEY, "CODEX_API_KEY": REAL_CODEX_KEY})
    app_servers = [pid for pid, (_env, argv) in live.items() if b"app-server" in argv]
    assert app_servers
    assert {live[pid][0].get(b"LOOPBACK_API_KEY") for pid in app_servers} == {launch.PLACEHOLDER_KEY.encode()}
    files = scratch_files(case)
    assert_nowhere(REAL_OPENAI_KEY, live, files)
    assert_nowhere(REAL_CODEX_KEY, live, files)
    requests = run.upstream_requests()
    url = "http://" + requests[0]["headers"]["host"]
    config = next(content for p, content in files.items() if p.name == "config.toml").decode()
    assert f'base_url = "{url}/v1"' in config and 'model_provider = "loopback"' in config
    assert all(r["headers"]["authorization"] == f"Bearer {launch.PLACEHOLDER_KEY}" for r in requests)


# --- api-key (launch plan through the adapter's start path, no network) -----------------------

RECORDING_WRAPPER = """#!/usr/bin/env python3
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
if sys.argv[1:2] == ["app-server"]:
    with open(os.path.join(here, "child-env.json"), "w") as handle:
        json.dump({"env": dict(os.environ), "argv": sys.argv}, handle)
os.execv(sys.executable, [sys.executable, os.path.join(here, "codex-stub"), *sys.argv[1:]])
"""


@pytest.fixture
def recording_vendor(tmp_path):
    """The stub app-server behind a wrapper that records the environment it was given."""
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    shutil.copy2(FIXTURES / "stub_codex" / "codex", vendor / "codex-stub")
    (vendor / "codex").write_text(RECORDING_WRAPPER)
    for name in ("codex", "codex-stub"):
        os.chmod(vendor / name, 0o755)
    (vendor / "behavior.json").write_text(json.dumps({"turns": [[{"text": "hello"}]]}))
    return vendor


async def _launch(tmp_path: Path, vendor: Path, **fields) -> tuple[CodexAdapter, dict, str]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    adapter = CodexAdapter(RunSpec(kind="codex", cwd=str(work), vendor_dir=str(vendor), prompt="go", **fields))
    adapter.plan()
    await adapter.start(FakeContext(str(work)))
    try:
        recorded = json.loads((vendor / "child-env.json").read_text())
        config = (adapter.child.scratch / launch.CODEX_HOME / "config.toml").read_text()
    finally:
        await adapter.finish()
        await adapter.halt()
        await adapter.child.wait()
    return adapter, recorded, config


@pytest.mark.parametrize("variable", ["OPENAI_API_KEY", "CODEX_API_KEY"])
async def test_api_key_mode_child_gets_the_callers_key_and_the_default_provider(tmp_path, monkeypatch,
                                                                                recording_vendor, variable):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("CODEX_API_KEY", raising=False)
    monkeypatch.setenv(variable, REAL_OPENAI_KEY)
    _adapter, recorded, config = await _launch(tmp_path, recording_vendor, credentials="api-key")
    env = recorded["env"]
    assert recorded["argv"][1:] == ["app-server"]
    assert env[variable] == REAL_OPENAI_KEY
    # Exactly the vendor rule “Codex environment and config.toml (exact)” with the caller's key variable in place of LOOPBACK_API_KEY: nothing inherited.
    assert set(env) == SPEC_ENV_KEYS | {variable}
    assert env["CODEX_HOME"].endswith("/codex-home") and env["LANG"] == "C.UTF-8"
    # The default (OpenAI) provider: no provider override, no base URL, the phone-home switches off.
    assert "model_provider" not in config and "model_providers" not in config and "base_url" not in config
    assert 'model = "gpt-5.5"' in config and "plugins = false" in config and "check_for_update_on_startup = false" in config


async def test_api_key_mode_prefers_openai_api_key_when_both_are_set(tmp_path, monkeypatch, recording_vendor):
    monkeypatch.setenv("OPENAI_API_KEY", REAL_OPENAI_KEY)
    monkeypatch.setenv("CODEX_API_KEY", REAL_CODEX_KEY)
    _adapter, recorded, _config = await _launch(tmp_path, recording_vendor, credentials="api-key")
    assert recorded["env"]["OPENAI_API_KEY"] == REAL_OPENAI_KEY
    assert REAL_CODEX_KEY not in json.dumps(recorded)


async def test_api_key_mode_with_an_endpoint_uses_the_provider_key_variable(tmp_path, monkeypatch, recording_vendor):
    monkeypatch.delenv("CODEX_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", REAL_OPENAI_KEY)
    _adapter, recorded, config = await _launch(tmp_path, recording_vendor, credentials="api-key",
                                               model_endpoint="http://127.0.0.1:9")
    assert recorded["env"]["LOOPBACK_API_KEY"] == REAL_OPENAI_KEY
    assert set(recorded["env"]) == SPEC_ENV_KEYS | {"LOOPBACK_API_KEY"}
    assert 'base_url = "http://127.0.0.1:9/v1"' in config and 'env_key = "LOOPBACK_API_KEY"' in config


@pytest.mark.parametrize("mode", ["api-key", "loopback"])
def test_missing_key_refuses_the_start_by_name(tmp_path, monkeypatch, recording_vendor, mode):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("CODEX_API_KEY", raising=False)
    work = tmp_path / "work"
    work.mkdir()
    adapter = CodexAdapter(RunSpec(kind="codex", cwd=str(work), vendor_dir=str(recording_vendor), prompt="go",
                                   credentials=mode))
    with pytest.raises(StartRefusal) as refusal:
        adapter.plan()
    assert refusal.value.name == "NoApiKey" and "OPENAI_API_KEY" in refusal.value.sentence
    # Through the CLI: exit 2, the refusal named on stderr, a stream of only stream.closed, no vendor started.
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "CODEX_API_KEY")}
    done = subprocess.run([str(METAHARNESS), "run", "codex", "--credentials", mode, "-p", "go", "--cwd", str(work),
                           "--vendor-dir", str(recording_vendor)],
                          capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("metaharness: NoApiKey: ") and done.stderr.count("\n") == 1, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(lines) == 1 and lines[0]["event"] == "stream.closed", lines
    assert lines[0]["reason"] == "error" and lines[0]["events"] == 0 and lines[0]["process"] == {"kind": "unknown"}
    assert not (recording_vendor / "child-env.json").exists()
