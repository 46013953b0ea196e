"""--max-cost-usd on a run: metaharness prices the model traffic it sees and stops the run at the
cap (close reason budget, a BUDGET_REACHED warning naming budget and spend), refuses by name where
it does not see the traffic, and reports its own figure beside the harness's in session.ended."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from metaharness.run.spec import RunSpec
from metaharness.run.start import cost_unseen

TURN = {"usage": {"input_tokens": 100000, "output_tokens": 1000}}  # $0.315 at claude-sonnet-4-5's price


def scenario(tmp_path: Path, turns: int = 3) -> Path:
    body = [dict(TURN, text=f"turn {i}", calls=[{"op": "file.write", "input": {"path": f"t{i}.txt", "content": "x"}}])
            for i in range(turns)] + [{"text": "done"}]
    path = tmp_path / "budget.scenario.json"
    path.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": body}))
    return path


def run(tmp_path: Path, *args: str, env: dict | None = None) -> tuple[int, list[dict], str]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    done = subprocess.run([sys.executable, "-m", "metaharness", "run", "oharness", "-p", "go", "--cwd", str(work),
                           "--decisions", "observe", *args], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, env=dict(os.environ, **(env or {})))
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines()], done.stderr


def test_oharness_stops_at_the_cap_with_close_reason_budget(tmp_path):
    code, events, stderr = run(tmp_path, "--script", str(scenario(tmp_path)), "--max-cost-usd", "0.5")
    warnings = [e for e in events if e["event"] == "warning" and e["code"] == "BUDGET_REACHED"]
    assert len(warnings) == 1, events
    assert "--max-cost-usd 0.5 reached: spent $0.6300 over 2 model responses" in warnings[0]["message"]
    assert "prices taken 2025-11-24" in warnings[0]["message"]
    assert events[-1]["event"] == "stream.closed" and events[-1]["reason"] == "budget"
    assert "metaharness: --max-cost-usd 0.5 reached" in stderr
    assert len([e for e in events if e["event"] == "usage"]) == 2  # no third model response was asked for
    assert not (tmp_path / "work" / "t2.txt").exists()
    # The cap's deny stops oharness's turn before it asks its model again, and the halt follows:
    # whichever lands first decides whether oharness wrote its terminal record (exit 0, as the wire
    # reference has it for an ended session) or was stopped before it (exit 3, as after a halt).
    ended = any(e["event"] == "session.ended" for e in events)
    assert code == (0 if ended else 3), (code, events)


def test_under_the_cap_the_run_completes_and_session_ended_carries_metaharnesss_figure(tmp_path):
    code, events, _ = run(tmp_path, "--script", str(scenario(tmp_path, 2)), "--max-cost-usd", "5")
    ended = [e for e in events if e["event"] == "session.ended"][0]
    assert code == 0 and events[-1]["reason"] == "completed"
    # two scripted turns, then the final answer at the scenario's default usage (10 in, 5 out)
    assert ended["metered_cost_usd"] == pytest.approx(2 * 0.315 + (10 * 3 + 5 * 15) / 1e6, abs=1e-6)
    assert not [e for e in events if e["event"] == "warning"]


def test_a_price_file_reprices_the_run(tmp_path):
    prices = tmp_path / "prices.toml"
    prices.write_text('format = "metaharness.prices/1"\ntaken = "2031-02-03"\n'
                      '[models.default]\ninput = 30.0\noutput = 150.0\n')
    code, events, _ = run(tmp_path, "--script", str(scenario(tmp_path)), "--max-cost-usd", "0.5",
                          "--prices", str(prices))
    warning = [e for e in events if e["event"] == "warning" and e["code"] == "BUDGET_REACHED"][0]
    assert "spent $3.1500 over 1 model response (prices taken 2031-02-03)" in warning["message"]
    code, events, stderr = run(tmp_path, "--script", str(scenario(tmp_path)), "--max-cost-usd", "0.5",
                               env={"METAHARNESS_PRICES": str(tmp_path / "nope.toml")})
    assert code == 2 and "PricesInvalid: the price file" in stderr and "could not be read" in stderr


@pytest.mark.parametrize("kind, credentials, endpoint, says", [
    ("claude", "api-key", None, "with --credentials api-key"),
    ("codex", "none", "http://127.0.0.1:9", "with --model-endpoint http://127.0.0.1:9"),
    ("opencode", "none", "http://127.0.0.1:9", "use --script"),
])
def test_a_harness_whose_traffic_metaharness_does_not_see_is_refused_by_name(kind, credentials, endpoint, says):
    sentence = cost_unseen(RunSpec(kind=kind, credentials=credentials, model_endpoint=endpoint, max_cost_usd=1.0))
    assert sentence is not None and says in sentence and "does not see that traffic" in sentence


@pytest.mark.parametrize("spec", [
    RunSpec(kind="oharness", model="anthropic:claude-sonnet-4-5"),
    RunSpec(kind="claude", script="s.json"), RunSpec(kind="gemini", script="s.json"),
    RunSpec(kind="claude", credentials="loopback"), RunSpec(kind="codex", credentials="loopback"),
])
def test_every_path_metaharness_sees_keeps_the_cap(spec):
    assert cost_unseen(spec) is None


def test_the_refusal_reaches_the_command_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "metaharness", "run", "claude", "-p", "go", "--credentials",
                           "api-key", "--max-cost-usd", "1"], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, env=dict(os.environ, ANTHROPIC_API_KEY="sk-test"))
    assert done.returncode == 2 and "metaharness: CostNotSeen: --max-cost-usd cannot be kept on claude" in done.stderr


def test_a_recording_is_priced_and_a_replay_is_refused_by_name():
    from metaharness.cassette_host import refusal

    # the recorder sees every request and answer (or oharness, or a credential proxy, in front of it)
    assert cost_unseen(RunSpec(kind="claude", record="c.jsonl", credentials="api-key", max_cost_usd=1.0)) is None
    assert cost_unseen(RunSpec(kind="gemini", record="c.jsonl", max_cost_usd=1.0)) is None
    sentence = refusal(RunSpec(kind="claude", replay="c.jsonl", max_cost_usd=1.0))
    assert sentence == ("CostNotSeen: --max-cost-usd is not kept on a replayed run: its answers come from the "
                        "cassette and cost nothing")
    assert refusal(RunSpec(kind="claude", replay="c.jsonl")) is None
