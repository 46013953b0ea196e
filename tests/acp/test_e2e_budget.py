"""--max-cost-usd holds on all five harnesses against the scripted loopback (real binaries): each
scripted answer reports 100k input and 1k output tokens, the run stops once two are spent, with a
BUDGET_REACHED warning and close reason budget, and the third turn's file is never written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from acp_support import E2E_ROOT, METAHARNESS, NETNS, NETNS_OK, VENDOR

pytestmark = pytest.mark.timeout(600)

KINDS = ("oharness", "claude", "codex", "opencode", "gemini")
# Every model a harness names is priced alike (a `*` row), so each scripted answer costs the same:
# 100k input at $3/M + 1k output at $15/M = $0.315; a cap of $0.5 is reached by the second.
PRICES = 'format = "metaharness.prices/1"\ntaken = "2031-01-01"\n[models."*"]\ninput = 3.0\noutput = 15.0\n'
USAGE = {"input_tokens": 100000, "output_tokens": 1000}


def scenario(path: Path) -> Path:
    turns = [{"text": f"step {i}", "usage": USAGE,
              "calls": [{"op": "file.write", "input": {"path": f"t{i}.txt", "content": f"{i}\n"}}]} for i in range(3)]
    path.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": turns + [{"text": "done"}]}))
    return path


def run_kind(kind: str, root: Path) -> tuple[list[dict], str, Path]:
    base = root / kind
    work = base / "work"
    work.mkdir(parents=True)
    (base / "prices.toml").write_text(PRICES)
    args = [str(METAHARNESS), "run", kind, "--script", str(scenario(base / "s.json")), "--decisions", "observe",
            "-p", "do the task", "--cwd", str(work), "--max-cost-usd", "0.5", "--prices", str(base / "prices.toml")]
    if kind != "oharness":
        args += ["--vendor-dir", str(VENDOR)]
        if NETNS_OK:
            args = ["unshare", "--user", "--map-root-user", "--net", "--mount", "python3", str(NETNS),
                    str(base / "dns.log"), "--", *args]
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
                          env=dict(os.environ, METAHARNESS_SCRATCH_DIR=str(base / "scratch")))
    return [json.loads(line) for line in done.stdout.splitlines()], done.stderr, work


@pytest.mark.parametrize("kind", KINDS)
def test_the_budget_stops_the_run(kind):
    if kind != "oharness" and not (VENDOR / {"claude": "claude", "codex": "codex", "opencode": "opencode",
                                             "gemini": "gemini"}[kind]).exists():
        if os.environ.get("METAHARNESS_REQUIRE_VENDOR") == "1":
            pytest.fail(f"{kind} is not installed in {VENDOR}")
        pytest.skip(f"{kind} is not installed")
    root = E2E_ROOT / f"budget-{uuid.uuid4().hex[:6]}"
    try:
        events, stderr, work = run_kind(kind, root)
        assert events and events[-1]["event"] == "stream.closed", f"{kind}: {stderr[-1500:]}"
        reached = [e for e in events if e["event"] == "warning" and e["code"] == "BUDGET_REACHED"]
        assert len(reached) == 1, f"{kind}: {[e for e in events if e['event'] == 'warning']} {stderr[-1500:]}"
        assert "--max-cost-usd 0.5 reached: spent $0.6" in reached[0]["message"], reached[0]["message"]
        assert "prices taken 2031-01-01" in reached[0]["message"]
        assert events[-1]["reason"] == "budget"
        assert not [e for e in events if e["event"] == "warning" and e["code"] == "PRICE_UNKNOWN"]
        assert (work / "t0.txt").exists(), f"{kind}: the first turn's write did not run"
        assert not (work / "t2.txt").exists(), f"{kind}: a turn past the budget ran"
        assert "metaharness: --max-cost-usd 0.5 reached" in stderr
    finally:
        shutil.rmtree(root, ignore_errors=True)
