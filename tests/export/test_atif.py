"""`metaharness export atif`: real runs on oharness (offline, scripted) and recorded vendor
streams exported, validated with Harbor's own ATIF models, and checked against their streams;
generated streams keep the same properties; bad input is one sentence and writes nothing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from examples import examples

from metaharness.export.atif import ATIF_VERSION, trajectory
from metaharness.export.source import ExportError, read_streams

from .conftest import EXAMPLES, METAHARNESS, REPO, check_round_trip, env, run_bugfix_workflow, run_oharness, validated

SAME_TASK = EXAMPLES / "same-task.scenario.json"
ASK = EXAMPLES / "ask.scenario.json"
RECORDED = [REPO / "tests" / "fixtures" / kind / "read-shell-write.events.jsonl" for kind in ("opencode", "gemini", "qwen")]


def steps_with_calls(doc):
    return [(s, c) for s in doc["steps"] for c in s.get("tool_calls") or []]


def test_a_frame_decided_run_validates_and_shows_the_refused_call_refused(tmp_path):
    doc = check_round_trip(run_oharness(tmp_path, SAME_TASK, "--frame", str(EXAMPLES / "same-task.frame.json")))
    assert doc["schema_version"] == ATIF_VERSION
    assert doc["agent"]["name"] == "oharness" and doc["agent"]["model_name"] == "scripted:default"
    decided = [(c["function_name"], c["extra"]["metaharness"]["decision"], c["extra"]["metaharness"]["ran"])
               for _, c in steps_with_calls(doc)]
    assert decided == [("write", "allow", True), ("bash", "deny", False), ("edit", "allow", True)]
    step, bash = steps_with_calls(doc)[1]
    assert bash["extra"]["metaharness"]["decided_by"] == "frame"
    assert "does not" in bash["extra"]["metaharness"]["reason"]
    assert bash["extra"]["metaharness"]["frame_digest"] == json.loads(
        (tmp_path / "events.jsonl").read_bytes().splitlines()[1])["frame_digest"]
    assert [r["extra"]["metaharness"]["status"] for r in step["observation"]["results"]] == ["refused"]
    assert step["message"] == "Checking the shell."
    assert doc["extra"]["metaharness"]["final_answer"] == "done"
    assert doc["final_metrics"]["total_steps"] == len(doc["steps"])
    assert not (tmp_path / "work" / "shell.txt").exists()


def test_an_embedder_decided_run_carries_allow_replace_and_deny(tmp_path):
    answers = {"ls": {"decision": "replace", "input": {"command": "ls -a"}},
               "rm -r build": {"decision": "deny", "reason": "no deletions here"}}
    doc = check_round_trip(run_oharness(tmp_path, ASK, "--decisions", "ask", answers=answers))
    calls = [c["extra"]["metaharness"] for _, c in steps_with_calls(doc)]
    assert [(c["decision"], c["decided_by"]) for c in calls] == [("replace", "embedder"), ("deny", "embedder")]
    assert calls[0]["replaced_input"] == {"command": "ls -a"} and calls[0]["ran"] is True
    assert calls[1]["reason"] == "no deletions here" and calls[1]["ran"] is False
    assert all("latency_ms" in c for c in calls)


def test_a_deadline_and_an_observed_run(tmp_path):
    doc = check_round_trip(run_oharness(tmp_path / "deadline", ASK, "--decisions", "ask",
                                        "--decision-timeout-ms", "50"))
    assert {c["extra"]["metaharness"]["decided_by"] for _, c in steps_with_calls(doc)} == {"deadline"}
    doc = check_round_trip(run_oharness(tmp_path / "observe", ASK, "--decisions", "observe"))
    assert {c["extra"]["metaharness"]["decided_by"] for _, c in steps_with_calls(doc)} <= {"observe"}


def test_a_workflow_run_directory_is_one_trajectory_with_its_steps_marked(tmp_path):
    out = run_bugfix_workflow(tmp_path)
    doc = check_round_trip(out)
    events = [json.loads(line) for line in (out / "events.jsonl").read_bytes().splitlines()]
    entered = [e for e in events if e["event"] == "step.entered"]
    marks = [s["extra"]["metaharness"] for s in doc["steps"] if s["extra"]["metaharness"].get("marker") == "step.entered"]
    assert [(m["workflow_step"]["state"], m["frame_digest"]) for m in marks] == [
        (e["step"]["state"], e["frame_digest"]) for e in entered]
    assert len(entered) == 5
    left = [s for s in doc["steps"] if s["extra"]["metaharness"].get("marker") == "step.left"]
    assert len(left) == 5 and all(s["source"] == "system" for s in left)
    for step, call in steps_with_calls(doc):  # every call under the frame of its workflow step
        assert call["extra"]["metaharness"]["frame_digest"] == step["extra"]["metaharness"]["frame_digest"]


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.parent.name)
def test_recorded_vendor_streams_validate(path):
    doc = check_round_trip(path)
    assert doc["agent"]["name"] == path.parent.name
    assert any(c["extra"]["metaharness"]["decision"] == "deny" for _, c in steps_with_calls(doc))


def test_every_event_kind_has_a_place_or_is_counted():
    path = REPO / "tests" / "view" / "fixtures" / "all_events.jsonl"
    doc = check_round_trip(path)
    names = [json.loads(line)["event"] for line in path.read_bytes().splitlines()]
    skipped = doc["extra"]["metaharness"].get("not_exported", {})
    assert set(skipped) <= {"rate_limit", "command.result", "opaque", "thinking.estimate"}
    assert all(names.count(name) == count for name, count in skipped.items())
    assert any(s.get("reasoning_content") for s in doc["steps"])
    assert any(s.get("metrics") for s in doc["steps"])


# -- generated streams -------------------------------------------------------------------

HEAD = json.loads((REPO / "tests" / "fixtures" / "opencode" / "read-shell-write.events.jsonl").read_bytes()
                  .splitlines()[0])
DECISIONS = st.sampled_from([
    ({"decision": "allow"}, "allowed"), ({"decision": "deny", "reason": "not here"}, "denied"),
    ({"decision": "replace", "input": {"command": "true"}}, "replaced"), ({"decision": "abstain"}, "abstained")])
CALL = st.tuples(DECISIONS, st.sampled_from(["frame", "embedder", "policy", "deadline"]),
                 st.sampled_from(["hook", "owned_tool", "control_request"]), st.booleans(), st.booleans())


def stream_of(responses: list[list[tuple]]) -> bytes:
    """A finished stream: one turn of model responses, each a text then its calls, every call
    decided and (if `has_result`) answered after them; the census written as the run would."""
    payloads: list[dict] = [{k: v for k, v in HEAD.items() if k not in ("format", "seq", "run")}]
    payloads.append({"event": "turn.started", "turn": 1, "frame_digest": None})
    census = {"allowed": 0, "denied": 0, "replaced": 0, "abstained": 0, "by_seam": {}, "by_decider": {}}
    n = 0
    for r, calls in enumerate(responses):
        payloads.append({"event": "text", "text": f"response {r}", "request_id": f"req_{r}"})
        results: list[dict] = []
        for (decision, bucket), decider, seam, has_result, is_error in calls:
            n += 1
            call_id = f"call_{n}"
            payloads.append({"event": "tool.requested", "call_id": call_id, "name": "bash",
                             "input": {"command": f"echo {n}"}, "decision_required": decider == "embedder",
                             "deadline_ms": None, "seam": seam})
            payloads.append({"event": "tool.decided", "call_id": call_id, "decision": decision,
                             "decided_by": decider, "seam": seam, "latency_ms": 3})
            census[bucket] += 1
            census["by_seam"][seam] = census["by_seam"].get(seam, 0) + 1
            census["by_decider"][decider] = census["by_decider"].get(decider, 0) + 1
            if has_result:
                results.append({"event": "tool.result", "call_id": call_id, "is_error": is_error, "content": f"out {n}"})
        payloads += results  # a response's results after its calls: a call after a result is the model's next response
    payloads.append({"event": "turn.ended", "turn": 1, "stop_reason": "end_turn"})
    payloads.append({"event": "session.ended", "census": census, "is_error": False, "subtype": "success"})
    payloads.append({"event": "stream.closed", "process": {"kind": "exited", "code": 0}, "events": len(payloads),
                     "reason": "completed", "run_id": "gen-1"})
    lines = [json.dumps({"format": "metaharness.event/1", "seq": i, "run": "gen-1", **p}) for i, p in
             enumerate(payloads, start=1)]
    return ("\n".join(lines) + "\n").encode()


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(CALL, max_size=4), min_size=1, max_size=5))
def test_generated_streams_keep_every_property(tmp_path, responses):
    path = tmp_path / "events.jsonl"
    path.write_bytes(stream_of(responses))
    doc = check_round_trip(path)
    agent_steps = [s for s in doc["steps"] if s["source"] == "agent"]
    assert len(agent_steps) == len(responses)  # one step per model response
    assert [len(s.get("tool_calls") or []) for s in agent_steps] == [len(calls) for calls in responses]


# -- bad input ---------------------------------------------------------------------------


def export(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*METAHARNESS, "export", "atif", *args], capture_output=True, text=True, timeout=60, cwd=cwd)


def test_the_cli_writes_the_file_and_refuses_bad_input_in_one_sentence(tmp_path):
    good = tmp_path / "good.jsonl"
    good.write_bytes(stream_of([[((({"decision": "allow"}), "allowed"), "frame", "hook", True, False)]]))
    done = export(str(good), "-o", "t.json", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout == "", done.stderr
    validated(json.loads((tmp_path / "t.json").read_text()))
    lines = good.read_bytes().splitlines(keepends=True)
    cases = {
        "no-close.jsonl": b"".join(lines[:-1]),
        "cut.jsonl": b"".join(lines)[:-40],
        "twice.jsonl": b"".join(lines + lines[-1:]),
        "newer.jsonl": b"".join(lines).replace(b"metaharness.event/1", b"metaharness.event/2"),
        "empty.jsonl": b"",
    }
    said = {}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        done = export(name, "-o", f"{name}.json", cwd=tmp_path)
        assert done.returncode == 2 and not (tmp_path / f"{name}.json").exists(), name
        assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"metaharness: {name}: "), done.stderr
        said[name] = done.stderr
    assert "truncated" in said["no-close.jsonl"] and "truncated" in said["cut.jsonl"]
    assert "inconsistent" in said["twice.jsonl"]
    assert "metaharness.event/2" in said["newer.jsonl"] and "does not read" in said["newer.jsonl"]
    (tmp_path / "dir").mkdir()
    done = export("dir", cwd=tmp_path)
    assert done.returncode == 2 and "events.jsonl" in done.stderr


def test_a_decision_for_a_call_never_requested_is_inconsistent(tmp_path):
    data = stream_of([[(({"decision": "allow"}, "allowed"), "frame", "hook", True, False)]])
    lines = [json.loads(line) for line in data.splitlines()]
    lines = [line for line in lines if line["event"] != "tool.requested"]
    for seq, line in enumerate(lines, start=1):
        line["seq"] = seq
    lines[-1]["events"] = len(lines) - 1
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(ExportError, match="decided but was never requested"):
        trajectory(read_streams(str(path)))
