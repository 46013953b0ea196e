"""Start refusals: each by name, naming the node, before any harness is started or any
model request made — and `workflow check`'s problems, each naming the node and field."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

import metaharness.api
from metaharness.run.spec import RunSpec
from metaharness.workflow import WorkflowRefused, run_workflow, start_refusal

from workflow_support import HEAD, cli

ONE = '''start = "a"
[nodes.a]
prompt = "do a"
'''


@pytest.fixture
def no_run(monkeypatch):
    """Any harness start fails the test: a refusal must come before it."""
    def forbidden(*args, **kwargs):
        raise AssertionError("a harness was started although the workflow should have been refused")
    monkeypatch.setattr(metaharness.api, "start_run", forbidden)


def refuse(tmp_path, body: str, kind: str = "oharness", *, spec: dict | None = None, **kw) -> WorkflowRefused:
    wf = tmp_path / "wf.toml"
    wf.write_text(HEAD + body)
    out = tmp_path / "out"
    run_spec = RunSpec(kind=kind, **{"cwd": str(tmp_path), **(spec or {})})
    with pytest.raises(WorkflowRefused) as caught:
        asyncio.run(run_workflow(str(wf), harness=kind, out=str(out), spec=run_spec, **kw))
    assert not out.exists(), "a refused workflow wrote its out directory"
    # the start checks on their own (what `batch check` asks of a workflow cell) say the same
    assert start_refusal(str(wf), harness=kind, spec=run_spec, **kw) == f"{caught.value.name}: {caught.value.sentence}"
    return caught.value


@pytest.mark.parametrize("kind,op", [("codex", "file.read"), ("claude", "dir.list"), ("oharness", "subagent.spawn"),
                                     ("claude", "subagent.spawn"), ("codex", "search")])
def test_operation_the_adapter_cannot_enforce(tmp_path, no_run, kind, op):
    refusal = refuse(tmp_path, ONE + f'operations = ["shell", "{op}"]\n', kind)
    assert refusal.name == "OperationNotEnforceable"
    assert f"node 'a' admits {op}" in refusal.sentence


def test_schema_that_does_not_load(tmp_path, no_run):
    (tmp_path / "bad.json").write_text('{"type": 12}')
    refusal = refuse(tmp_path, ONE + 'handoff = { kind = "structured_answer", schema = "bad.json" }\n')
    assert refusal.name == "SchemaUnloadable"
    assert refusal.sentence.startswith("node 'a': the schema ") and "is not a valid JSON Schema" in refusal.sentence
    (tmp_path / "bad.json").write_text("not json")
    assert "is not JSON" in refuse(tmp_path, ONE + 'handoff = { kind = "structured_answer", schema = "bad.json" }\n').sentence
    missing = refuse(tmp_path, ONE + 'handoff = { kind = "structured_answer", schema = "gone.json" }\n')
    assert missing.name == "SchemaUnloadable" and "could not be read" in missing.sentence
    # workflow check reports it too, with node and field
    done = cli(["check", str(tmp_path / "wf.toml")], cwd=tmp_path)
    assert done.returncode == 1 and "node 'a', field 'handoff.schema': the schema" in done.stdout


def test_invalid_workflow_is_refused_with_every_problem(tmp_path, no_run):
    refusal = refuse(tmp_path, ONE + 'next = ["nowhere"]\n[nodes."x/y"]\nprompt = "p"\n')
    assert refusal.name == "WorkflowInvalid"
    assert "node 'a', field 'next[0]': names 'nowhere', which is not a node" in refusal.sentence
    assert "node 'x/y', field 'nodes': a node id is letters" in refusal.sentence


def test_check_without_a_reachable_workspace(tmp_path, no_run):
    body = ONE + 'check = { command = "true" }\n'
    refusal = refuse(tmp_path, body, spec={"cwd": str(tmp_path / "missing")})
    assert refusal.name == "WorkspaceUnreachable"
    assert "node 'a' has a check" in refusal.sentence and "missing" in refusal.sentence


@pytest.mark.parametrize("kind, spec", [("claude", {"credentials": "api-key"}),
                                        ("codex", {"model_endpoint": "http://127.0.0.1:9"}), ("gemini", {})])
def test_cost_budget_where_metaharness_does_not_see_the_traffic(tmp_path, no_run, kind, spec):
    refusal = refuse(tmp_path, ONE, kind, spec=spec, max_cost_usd=1.0)
    assert refusal.name == "CostNotSeen" and f"cannot be kept on {kind}" in refusal.sentence


def test_ask_mode_needs_a_decider_and_observe_cannot_frame(tmp_path, no_run):
    assert refuse(tmp_path, ONE, spec={"decisions": "ask"}).name == "AskWithoutDecider"
    assert refuse(tmp_path, ONE, spec={"decisions": "observe"}).name == "ObserveCannotFrame"


def test_a_price_file_that_does_not_load(tmp_path, no_run):
    (tmp_path / "prices.toml").write_text('format = "metaharness.prices/1"\n')  # no `taken`
    refusal = refuse(tmp_path, ONE, spec={"prices": str(tmp_path / "prices.toml")}, max_cost_usd=1.0)
    assert refusal.name == "PricesInvalid" and "needs `taken`" in refusal.sentence
    # on the command line too, by name, before the out directory is made
    done = cli(["run", str(tmp_path / "wf.toml"), "--harness", "oharness", "--out", str(tmp_path / "out"),
                "--prices", "prices.toml"], cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("metaharness: PricesInvalid: the price file prices.toml")
    assert not (tmp_path / "out").exists()


def test_a_workflow_that_would_start_has_no_refusal(tmp_path, no_run):
    (tmp_path / "wf.toml").write_text(HEAD + ONE)
    (tmp_path / "s.json").write_text(json.dumps({"format": "metaharness.scenario/1", "turns": [{"text": "done"}]}))
    spec = RunSpec(kind="oharness", cwd=str(tmp_path), script=str(tmp_path / "s.json"))
    assert start_refusal(str(tmp_path / "wf.toml"), harness="oharness", spec=spec) is None
    assert start_refusal(str(tmp_path / "wf.toml"), harness="oharness").startswith("NoModel: ")  # the session's own
    assert start_refusal(str(tmp_path / "gone.toml"), harness="oharness", spec=spec).startswith(
        "WorkflowInvalid: the workflow file ")
    assert sorted(os.listdir(tmp_path)) == ["s.json", "wf.toml"]  # nothing written


def test_out_directory_that_is_not_empty(tmp_path, no_run):
    wf = tmp_path / "wf.toml"
    wf.write_text(HEAD + ONE)
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(WorkflowRefused) as caught:
        asyncio.run(run_workflow(str(wf), harness="oharness", out=str(out), spec=RunSpec(kind="oharness")))
    assert caught.value.name == "OutNotEmpty"
    assert os.listdir(out) == ["keep.txt"]


def test_cli_refusal_exit_code_and_sentence(tmp_path):
    wf = tmp_path / "wf.toml"
    wf.write_text(HEAD + ONE + 'operations = ["file.read"]\n')
    done = cli(["run", str(wf), "--harness", "codex", "--out", str(tmp_path / "out")], cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("metaharness: OperationNotEnforceable: node 'a' admits file.read")
    assert not (tmp_path / "out").exists()


# --- workflow check ----------------------------------------------------------------------

BROKEN = '''start = "begin"
[nodes.a]
prompt = "a"
operations = ["file.read", "file.teleport", "mcp.call"]
next = ["b", "ghost"]
entities = ["b", "end"]
[nodes.b]
prompt = "b"
max_attempts = 0
[nodes.island]
prompt = "never reached"
next = ["b", "end"]
'''


def test_check_names_every_problem_with_node_and_field(tmp_path):
    wf = tmp_path / "wf.toml"
    wf.write_text(HEAD + BROKEN)
    done = cli(["check", str(wf)], cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    lines = [line.split(": ", 1)[1] for line in done.stdout.splitlines()]
    assert "field 'start': names 'begin', which is not a node (nodes: a, b, island)" in lines
    assert any(l.startswith("node 'a', field 'operations[1]': unknown operation 'file.teleport'") for l in lines)
    assert any(l.startswith("node 'a', field 'operations[2]': mcp.call names its server and tool") for l in lines)
    assert "node 'a', field 'next[1]': names 'ghost', which is not a node" in lines
    assert any(l.startswith("node 'a', field 'entities': must be exactly the ways out ['b', 'ghost']") for l in lines)
    assert "node 'b', field 'max_attempts': must be at least 1, it is 0" in lines
    assert any(l.startswith("node 'island', field 'entities': a node with several ways out") for l in lines)
    # unreachable is judged only once the start node exists
    wf.write_text(HEAD + BROKEN.replace('start = "begin"', 'start = "a"'))
    lines = cli(["check", str(wf)], cwd=tmp_path).stdout
    assert "node 'island', field 'nodes': is unreachable from the start node 'a'" in lines


def test_check_shape_errors_name_the_node_and_field(tmp_path):
    wf = tmp_path / "wf.toml"
    wf.write_text(HEAD + 'start = "a"\n[nodes.a]\nprompt = 3\n')
    done = cli(["check", str(wf)], cwd=tmp_path)
    assert done.returncode == 1
    assert "node 'a', field 'prompt': Expected `str`, got `int`" in done.stderr
    wf.write_text(HEAD + 'start = "a"\n[nodes.a]\nprompt = "x"\nhandoff = { kind = "artefact", path = "x" }\n')
    assert "node 'a', field 'handoff.kind': Invalid value 'artefact'" in cli(["check", str(wf)], cwd=tmp_path).stderr
    wf.write_text('id = "x"\n')
    assert "no format tag" in cli(["check", str(wf)], cwd=tmp_path).stderr
    assert cli(["check", str(tmp_path / "nope.toml")], cwd=tmp_path).returncode == 2


def test_json_and_toml_are_the_same_document_and_the_schema_accepts_both(tmp_path):
    import tomllib

    import jsonschema

    from metaharness.workflow import load
    from workflow_support import BUGFIX

    toml_path = BUGFIX / "bugfix.workflow.toml"
    obj = tomllib.loads(toml_path.read_text())
    json_path = tmp_path / "bugfix.workflow.json"
    json_path.write_text(json.dumps(obj))
    assert load(str(json_path)).workflow == load(str(toml_path)).workflow
    import subprocess

    from workflow_support import METAHARNESS

    schema = json.loads(subprocess.run([str(METAHARNESS), "schema", "workflow"], capture_output=True, text=True,
                                       check=True).stdout)
    jsonschema.validate(obj, schema)
    bad = dict(obj, nodes={"fix": dict(obj["nodes"]["fix"], unknown_key=1)})
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
