"""A failed model request is an event on the vendor harnesses too (issue 23, item 1): Claude
Code, Codex, opencode, Gemini CLI and Qwen Code (the pinned binaries, in a loopback-only network
namespace) against the loopback told to fail in each way, through the credential proxy to a dead
port or an unresolvable host (Claude Code, Codex), and pointed straight at them (opencode, Gemini
CLI, Qwen Code, which talk to --model-endpoint themselves: metaharness names what it finds there
after the prompt failed).

Each case is what the vendor was measured to do (docs/guides/ci.md, "What each harness lets
through"): how many requests the loopback saw (the vendor's retries), whether the session ended in
error, and with --fail-on-error the exit code. Every failed request is a MODEL_REQUEST_FAILED
warning naming the provider, the kind and the status; a session that ended in error has one
`metaharness:` line on stderr and exits 1. oharness's own cases are in test_model_failures.py.

Kept short: Claude Code is run with CLAUDE_CODE_MAX_RETRIES=0 (its default of 10 retries backs off
to minutes, for a 401 too), and where a vendor retries a status with back-off (opencode and Gemini
CLI on 429/5xx) the failure is served once (`times`), so the retry is seen to succeed — or, to see
the failure end the session, opencode is given `retry-after: 0` (its 5 retries take seconds) and
Gemini CLI METAHARNESS_GEMINI_MAX_ATTEMPTS=1. A held request times out on opencode through
METAHARNESS_OPENCODE_TIMEOUT_MS. Codex has no setting that ends a request held before its first
byte (measured: still waiting after ten minutes), so its timeout case is a stream that stalls after
its headers and first event (`stall`), ended by Codex's stream idle timeout,
METAHARNESS_CODEX_IDLE_TIMEOUT_MS. Qwen Code retries a
429 or 5xx in two layers (its 7 attempts, each retried by its client), and a 429 also a minute and
more apart: METAHARNESS_QWEN_MAX_RETRIES=1 brings a failing 429 down to 28 requests in about 90 s.
It has no timeout case: with METAHARNESS_QWEN_TIMEOUT_MS each held request times out, but
it keeps asking (still after four minutes, measured).

A failed request costs nothing: opencode's cases check that metaharness priced only what was
answered (opencode's title request), and that opencode's own $0, a cost it has no price for, is
written as unknown and never compared (no COST_DISAGREES).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENDOR = ROOT / ".vendor" / "node_modules" / ".bin"
METAHARNESS = ROOT / ".venv" / "bin" / "metaharness"
NETNS = ROOT / "tests" / "fixtures" / "codex" / "netns_run.py"
E2E_ROOT = Path(os.path.expanduser("~")) / ".cache" / "metaharness" / "failure-e2e"
PROVIDER = {"claude": "anthropic", "codex": "openai", "opencode": "openai", "gemini": "gemini", "qwen": "openai"}
NO_RETRY = {"CLAUDE_CODE_MAX_RETRIES": "0"}
GEMINI_ONCE = {"METAHARNESS_GEMINI_MAX_ATTEMPTS": "1"}
# One scripted answer at the scenario's default usage (10 in, 5 out) at the loopback's price
# ($3/M in, $15/M out): what opencode's title request costs. A failed request costs nothing.
ONE_ANSWER_USD = round(10 * 3.0 / 1e6 + 5 * 15.0 / 1e6, 6)
DEAD = "http://127.0.0.1:9"  # nothing listens on port 9 inside the namespace
NOWHERE = "http://model.metaharness.invalid"  # .invalid never resolves (RFC 6761)

pytestmark = pytest.mark.timeout(300)


def _netns_ok() -> bool:
    try:
        return subprocess.run(["unshare", "--user", "--map-root-user", "--net", "--mount", "true"],
                              capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


NETNS_OK = _netns_ok()


# (id, harness, fail (None: no scenario, the proxy to a dead port), extra args, env,
#  expected: failure kind, HTTP status, failed requests the loopback saw, session in error)
CASES = [
    ("claude-529", "claude", {"status": 529}, (), NO_RETRY, ("overloaded", 529, 1, True)),
    ("claude-401", "claude", {"status": 401}, (), NO_RETRY, ("auth", 401, 1, True)),
    ("claude-cut", "claude", {"kind": "cut"}, (), NO_RETRY, ("stream_cut", 200, 2, True)),
    ("claude-malformed", "claude", {"kind": "malformed"}, (), NO_RETRY, ("malformed_stream", 200, 2, True)),
    ("claude-timeout", "claude", {"kind": "hold"}, (), {**NO_RETRY, "API_TIMEOUT_MS": "2000"},
     ("timeout", None, 1, True)),
    ("claude-429-retried", "claude", {"status": 429, "retry_after": "0", "times": 1}, (), {},
     ("rate_limited", 429, 1, False)),
    ("claude-refused", "claude", None, ("--credentials", "loopback", "--model-endpoint", DEAD),
     {**NO_RETRY, "ANTHROPIC_API_KEY": "sk-ant-test-0123456789abcdef"}, ("connection_refused", None, 1, True)),
    ("claude-dns", "claude", None, ("--credentials", "loopback", "--model-endpoint", NOWHERE),
     {**NO_RETRY, "ANTHROPIC_API_KEY": "sk-ant-test-0123456789abcdef"}, ("dns", None, 1, True)),
    # (Claude Code reports the proxy's own answer to it, a 502, as its api_error_status)
    ("codex-500", "codex", {"status": 500, "message": "upstream exploded"}, (), {}, ("http_error", 500, 1, True)),
    ("codex-401", "codex", {"status": 401, "message": "invalid api key"}, (), {}, ("auth", 401, 1, True)),
    ("codex-429", "codex", {"status": 429, "retry_after": "1", "message": "slow down"}, (), {},
     ("rate_limited", 429, 1, True)),
    ("codex-cut", "codex", {"kind": "cut"}, (), {}, ("stream_cut", 200, 1, True)),
    ("codex-malformed", "codex", {"kind": "malformed"}, (), {}, ("malformed_stream", 200, 1, True)),
    # a stream that stalls after its first event times out on Codex's stream idle timeout
    ("codex-timeout", "codex", {"kind": "stall"}, (), {"METAHARNESS_CODEX_IDLE_TIMEOUT_MS": "3000"},
     ("timeout", 200, 1, True)),
    ("codex-refused", "codex", None, ("--credentials", "loopback", "--model-endpoint", DEAD + "/v1"),
     {"OPENAI_API_KEY": "sk-test-0123456789abcdef"}, ("connection_refused", None, 1, True)),
    ("codex-dns", "codex", None, ("--credentials", "loopback", "--model-endpoint", NOWHERE + "/v1"),
     {"OPENAI_API_KEY": "sk-test-0123456789abcdef"}, ("dns", None, 1, True)),
    ("opencode-401", "opencode", {"status": 401}, (), {}, ("auth", 401, 1, True)),
    ("opencode-403", "opencode", {"status": 403, "message": "no access to this model"}, (), {}, ("auth", 403, 1, True)),
    ("opencode-429-retried", "opencode", {"status": 429, "retry_after": "0", "times": 1}, (), {},
     ("rate_limited", 429, 1, False)),
    ("opencode-cut-retried", "opencode", {"kind": "cut", "times": 2}, (), {}, ("stream_cut", 200, 2, False)),
    ("gemini-401", "gemini", {"status": 401}, (), {}, ("auth", 401, 1, True)),
    ("gemini-cut", "gemini", {"kind": "cut"}, (), {}, ("stream_cut", 200, 1, True)),
    ("gemini-malformed", "gemini", {"kind": "malformed"}, (), {}, ("malformed_stream", 200, 1, True)),
    ("gemini-500-retried", "gemini", {"status": 500, "times": 1}, (), {}, ("http_error", 500, 1, False)),
    # A direct endpoint (opencode and Gemini CLI talk to --model-endpoint themselves): metaharness
    # looks at the endpoint after the agent failed the prompt and names what it found.
    ("opencode-refused", "opencode", None, ("--model-endpoint", DEAD), {}, ("connection_refused", None, 1, True)),
    ("opencode-dns", "opencode", None, ("--model-endpoint", NOWHERE), {}, ("dns", None, 1, True)),
    # opencode waits the retry-after it is given (with none, ~80 s of back-off for its 5 retries)
    ("opencode-500", "opencode", {"status": 500, "retry_after": "0", "message": "upstream exploded"}, (), {},
     ("http_error", 500, 6, True)),
    ("opencode-malformed", "opencode", {"kind": "malformed"}, (), {}, ("malformed_stream", 200, 1, True)),
    ("opencode-timeout", "opencode", {"kind": "hold"}, (), {"METAHARNESS_OPENCODE_TIMEOUT_MS": "3000"},
     ("timeout", None, 1, True)),
    ("gemini-refused", "gemini", None, ("--model-endpoint", DEAD), GEMINI_ONCE, ("connection_refused", None, 1, True)),
    ("gemini-dns", "gemini", None, ("--model-endpoint", NOWHERE), GEMINI_ONCE, ("dns", None, 1, True)),
    ("gemini-timeout", "gemini", {"kind": "hold"}, (), GEMINI_ONCE, ("timeout", None, 1, True)),
    ("gemini-429", "gemini", {"status": 429, "retry_after": "1"}, (), GEMINI_ONCE, ("rate_limited", 429, 1, True)),
    ("gemini-500", "gemini", {"status": 500, "message": "upstream exploded"}, (), GEMINI_ONCE,
     ("http_error", 500, 1, True)),
    ("qwen-401", "qwen", {"status": 401}, (), {}, ("auth", 401, 1, True)),
    ("qwen-malformed", "qwen", {"kind": "malformed"}, (), {}, ("malformed_stream", 200, 1, True)),
    # Qwen Code asks for a cut stream twice more, then fails the prompt
    ("qwen-cut", "qwen", {"kind": "cut"}, (), {}, ("stream_cut", 200, 3, True)),
    ("qwen-429-retried", "qwen", {"status": 429, "retry_after": "0", "times": 1}, (), {},
     ("rate_limited", 429, 1, False)),
    ("qwen-500-retried", "qwen", {"status": 500, "times": 1}, (), {}, ("http_error", 500, 1, False)),
    ("qwen-refused", "qwen", None, ("--model-endpoint", DEAD), {}, ("connection_refused", None, 1, True)),
    ("qwen-429", "qwen", {"status": 429, "retry_after": "1"}, (), {"METAHARNESS_QWEN_MAX_RETRIES": "1"},
     ("rate_limited", 429, 28, True)),
    ("qwen-dns", "qwen", None, ("--model-endpoint", NOWHERE), {}, ("dns", None, 1, True)),  # ~100 s of its retries
]

# What the vendor itself reports as api_error_status where it is not the status served.
API_STATUS = {("claude", "connection_refused"): "502", ("claude", "dns"): "502"}


def _run(case_dir: Path, harness: str, fail: dict | None, extra: tuple, env: dict, *flags: str):
    work = case_dir / "work"
    work.mkdir(parents=True)
    args = [str(METAHARNESS), "run", harness, "--vendor-dir", str(VENDOR), "-p", "say hello", "--cwd", str(work),
            *extra, *flags]
    if fail is not None:
        scenario = case_dir / "scenario.json"
        scenario.write_text(json.dumps({"format": "metaharness.scenario/1",
                                        "turns": [{"text": "hello", "fail": fail}]}))
        args += ["--script", str(scenario)]
    if NETNS_OK:
        args = ["unshare", "--user", "--map-root-user", "--net", "--mount", sys.executable, str(NETNS),
                str(case_dir / "dns.log"), "--", *args]
    done = subprocess.run(args, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL,
                          env={**os.environ, **env, "METAHARNESS_SCRATCH_DIR": str(case_dir / "scratch")})
    return done, [json.loads(line) for line in done.stdout.splitlines()]


def _need(harness: str) -> None:
    if not (VENDOR / harness).exists():
        if os.environ.get("METAHARNESS_REQUIRE_VENDOR") == "1":
            pytest.fail(f"{harness} is not installed in {VENDOR}")
        pytest.skip(f"{harness} is not installed")
    if not NETNS_OK and os.environ.get("METAHARNESS_REQUIRE_VENDOR") == "1":
        pytest.fail("this machine cannot make a loopback-only network namespace (unshare --net)")


@pytest.fixture
def case_dir():
    path = E2E_ROOT / uuid.uuid4().hex[:8]
    path.mkdir(parents=True)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("harness,fail,extra,env,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_failed_request_is_an_event(case_dir, harness, fail, extra, env, expected):
    _need(harness)
    kind, status, requests, in_error = expected
    done, events = _run(case_dir, harness, fail, extra, env, "--fail-on-error")
    context = f"{harness}: {[e for e in events if e['event'] == 'warning']} {done.stderr[-1500:]}"
    assert events and events[-1]["event"] == "stream.closed", context
    failures = [e["model_failure"] for e in events if e["event"] == "warning" and e["code"] == "MODEL_REQUEST_FAILED"]
    assert len(failures) == requests, context
    last = failures[-1]
    assert (last["provider"], last["kind"], last["http_status"]) == (PROVIDER[harness], kind, status), context
    if requests > 1:  # the vendor's retries, as the loopback counted them
        assert (last["retries"], last["last_status"]) == (requests - 1, status), context
    if fail and fail.get("retry_after"):
        assert last["retry_after"] == fail["retry_after"]
    ended = next(e for e in events if e["event"] == "session.ended")
    assert ended["is_error"] is in_error, context
    lines = [line for line in done.stderr.splitlines() if line.startswith("metaharness: ") and "request failed" in line]
    if harness == "opencode":  # opencode has no price of its own here: its cost is unknown, never compared
        assert ended["total_cost_usd"] is None, ended
        assert not [e for e in events if e["event"] == "warning" and e["code"] == "COST_DISAGREES"], context
        if in_error and fail is not None:  # its title request was answered; the failed ones cost nothing
            assert ended["metered_cost_usd"] == pytest.approx(ONE_ANSWER_USD), ended
    if in_error:
        assert ended["api_error_status"] == API_STATUS.get((harness, kind), str(status) if status not in (None, 200)
                                                           else None), ended
        assert events[-1]["reason"] == "error"
        assert len(lines) == 1 and lines[0].startswith(f"metaharness: the {PROVIDER[harness]} request failed"), context
        assert done.returncode == 1, context
    else:  # retried to an answer: the failure is in the stream, the session is fine
        assert ended["final_answer"]["text"] == "hello", ended
        assert not lines, done.stderr
        assert done.returncode == 0, context


def test_without_fail_on_error_a_failed_session_exits_0(case_dir):
    _need("codex")
    done, events = _run(case_dir, "codex", {"status": 500}, (), {})
    ended = next(e for e in events if e["event"] == "session.ended")
    assert ended["is_error"] is True and ended["api_error_status"] == "500"
    assert "metaharness: the openai request failed: HTTP error, HTTP 500" in done.stderr
    assert done.returncode == 0
