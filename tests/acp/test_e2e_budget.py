"""--max-cost-usd holds on every harness of the registry against the scripted loopback (real binaries): each
scripted answer reports 100k input and 1k output tokens, the run stops once two are spent, with a
BUDGET_REACHED warning and close reason budget, and the third turn's file is never written. The
same holds when the run is recorded (`--record`: the recorder, in front of the loopback as its
upstream, prices what it passes on and refuses past the cap). Claude Code prices its session
itself: both figures are shown, and a disagreement beyond the tolerance is a COST_DISAGREES."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from acp_support import E2E_ROOT, METAHARNESS, NETNS, NETNS_OK, VENDOR
from metaharness.loopback.pricing import disagrees
from metaharness.protocol.harnesses import KINDS

pytestmark = pytest.mark.timeout(600)

# Every model a harness names is priced alike (a `*` row), so each scripted answer costs the same:
# 100k input at $3/M + 1k output at $15/M = $0.315; a cap of $0.5 is reached by the second.
PRICES = 'format = "metaharness.prices/1"\ntaken = "2031-01-01"\n[models."*"]\ninput = 3.0\noutput = 15.0\n'
USAGE = {"input_tokens": 100000, "output_tokens": 1000}


def scenario(path: Path, usage: dict = USAGE) -> Path:
    turns = [{"text": f"step {i}", "usage": usage,
              "calls": [{"op": "file.write", "input": {"path": f"t{i}.txt", "content": f"{i}\n"}}]} for i in range(3)]
    path.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": turns + [{"text": "done"}]}))
    return path


def run_kind(kind: str, root: Path, *extra: str, prices: str = PRICES, usage: dict = USAGE,
             cap: str | None = "0.5") -> tuple[list[dict], str, Path]:
    base = root / kind
    work = base / "work"
    work.mkdir(parents=True)
    (base / "prices.toml").write_text(prices)
    args = [str(METAHARNESS), "run", kind, "--script", str(scenario(base / "s.json", usage)), "--decisions", "observe",
            "-p", "do the task", "--cwd", str(work), "--prices", str(base / "prices.toml"), *extra]
    args += ["--max-cost-usd", cap] if cap is not None else []
    if kind != "oharness":
        args += ["--vendor-dir", str(VENDOR)]
        if NETNS_OK:
            args = ["unshare", "--user", "--map-root-user", "--net", "--mount", "python3", str(NETNS),
                    str(base / "dns.log"), "--", *args]
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
                          env=dict(os.environ, METAHARNESS_SCRATCH_DIR=str(base / "scratch")))
    return [json.loads(line) for line in done.stdout.splitlines()], done.stderr, work


def need(kind: str) -> None:
    if kind != "oharness" and not (VENDOR / kind).exists():
        if os.environ.get("METAHARNESS_REQUIRE_VENDOR") == "1":
            pytest.fail(f"{kind} is not installed in {VENDOR}")
        pytest.skip(f"{kind} is not installed")


@pytest.mark.parametrize("recorded", [False, True], ids=["plain", "recorded"])
@pytest.mark.parametrize("kind", KINDS)
def test_the_budget_stops_the_run(kind, recorded):
    need(kind)
    root = E2E_ROOT / f"budget-{uuid.uuid4().hex[:6]}"
    cassette = root / "run.cassette.jsonl"
    try:
        events, stderr, work = run_kind(kind, root, *(["--record", str(cassette)] if recorded else []))
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
        if recorded:  # the exchanges the harness made are in the cassette
            exchanges = [json.loads(line) for line in cassette.read_text().splitlines() if '"exchange"' in line]
            assert len(exchanges) >= 2, f"{kind}: {len(exchanges)} exchanges recorded"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _cost_figures(events: list[dict]) -> tuple[dict, list[dict]]:
    ended = [e for e in events if e["event"] == "session.ended"]
    assert ended, [e["event"] for e in events]
    return ended[0], [e for e in events if e["event"] == "warning" and e["code"] == "COST_DISAGREES"]


def test_claude_code_s_own_cost_is_shown_beside_metaharness_s_and_a_disagreement_is_flagged():
    """Each scripted answer reports 100k input tokens only, so each figure is linear in one price:
    priced at $0.30/M (far under Claude Code's own table) the two disagree; priced at the rate Claude
    Code's figure implies, they agree and no warning is written."""
    need("claude")
    usage = {"input_tokens": 100000, "output_tokens": 0}
    root = E2E_ROOT / f"cost-{uuid.uuid4().hex[:6]}"
    low = 'format = "metaharness.prices/1"\ntaken = "2031-01-01"\n[models."*"]\ninput = 0.3\noutput = 0.0\n'
    try:
        events, stderr, _ = run_kind("claude", root / "low", prices=low, usage=usage, cap=None)
        ended, warned = _cost_figures(events)
        metered, reported = ended["metered_cost_usd"], ended["total_cost_usd"]
        assert metered is not None and reported is not None, (ended, stderr[-1500:])
        # three turns of 100k input tokens, and the final answer at the scenario's default 10 in, 5 out
        assert metered == pytest.approx(3 * 0.03 + 10 * 0.3 / 1e6, abs=1e-6)
        assert disagrees(metered, reported), f"Claude Code priced the traffic at ${reported}, close to $0.30/M"
        assert len(warned) == 1 and warned[0]["message"] == (
            f"the harness reports ${reported:.4f}, metaharness priced ${metered:.4f} from the traffic it saw "
            "(prices taken 2031-01-01)")
        rate = 0.3 * reported / metered  # the $/M that prices the same traffic at Claude Code's figure
        same = f'format = "metaharness.prices/1"\ntaken = "2031-01-01"\n[models."*"]\ninput = {rate!r}\noutput = 0.0\n'
        events, stderr, _ = run_kind("claude", root / "same", prices=same, usage=usage, cap=None)
        ended, warned = _cost_figures(events)
        assert ended["metered_cost_usd"] == pytest.approx(ended["total_cost_usd"], rel=0.01), ended
        assert not warned, warned
    finally:
        shutil.rmtree(root, ignore_errors=True)
