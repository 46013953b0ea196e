"""A refused start raises `metaharness.api.RunRefused` (name + sentence) from every entry point of
the library API: `start_run` in process and as a subprocess, `host_stdio`, for a plain, a
recorded and a replayed spec alike — and a run that starts does not raise."""

from __future__ import annotations

import io
import json
import re

import pytest

from metaharness import api
from metaharness.run.spec import RunSpec

# (the spec's fields, the refusal's name, a phrase of its sentence): one refusal of each layer
# that can refuse a start (the adapter's launch planning, the run's own checks, the cassette's).
REFUSED = [
    (dict(prompt="go"), "NoModel", "model"),
    (dict(prompt="go", model="scripted:default", posture="yolo"), "PostureUnknown", "'yolo'"),
    (dict(prompt="go", model="anthropic:m", record="c.jsonl", replay="c.jsonl"), "CassetteConflict",
     "either records"),
    (dict(prompt="go", model="anthropic:m", replay="missing.cassette.jsonl"), "CassetteInvalid", "cannot be read"),
]


def _spec(tmp_path, fields: dict) -> RunSpec:
    fields = {k: (str(tmp_path / v) if k in ("record", "replay") else v) for k, v in fields.items()}
    return RunSpec(kind="oharness", cwd=str(tmp_path), **fields)


@pytest.mark.parametrize("fields, name, phrase", REFUSED)
@pytest.mark.parametrize("subprocess", [False, True])
async def test_start_run_raises_the_refusal(tmp_path, monkeypatch, fields, name, phrase, subprocess):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(api.RunRefused) as refused:
        await api.start_run(_spec(tmp_path, fields), subprocess=subprocess)
    exc = refused.value
    assert exc.name == name and phrase in exc.sentence and str(exc) == f"{name}: {exc.sentence}"
    assert exc.exit_code == 2
    assert [json.loads(line)["event"] for line in exc.lines] == ["stream.closed"]
    assert f"metaharness: {name}: {exc.sentence}" in exc.stderr
    assert not (tmp_path / "c.jsonl").exists(), "a refused recording writes no cassette"


@pytest.mark.parametrize("fields, name, phrase", REFUSED)
async def test_host_stdio_writes_the_refusal_then_raises_it(tmp_path, monkeypatch, fields, name, phrase):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    out, err = io.BytesIO(), []
    with pytest.raises(api.RunRefused) as refused:
        await api.host_stdio(_spec(tmp_path, fields), stdin=None, stdout=out, stderr=err.append)
    assert refused.value.name == name and phrase in refused.value.sentence
    assert [json.loads(line)["event"] for line in out.getvalue().splitlines()] == ["stream.closed"]
    assert err[-1] == f"metaharness: {name}: {refused.value.sentence}"


@pytest.mark.parametrize("subprocess", [False, True])
async def test_a_run_that_starts_does_not_raise(tmp_path, subprocess):
    scenario = tmp_path / "s.json"
    scenario.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": [{"text": "done"}]}))
    run = await api.start_run(RunSpec(kind="oharness", script=str(scenario), prompt="go", cwd=str(tmp_path)),
                              subprocess=subprocess)
    async with run:
        names = [type(event).__name__ async for _envelope, event in run]
    assert run.exit_code == 0 and names[0] == "SessionStarted" and names[-1] == "StreamClosed"


def test_every_start_refusal_of_the_run_is_named():
    """The run's own start checks name every refusal (the API's `name` is never a fallback)."""
    import ast
    import pathlib

    import metaharness.run.start as start

    tree = ast.parse(pathlib.Path(start.__file__).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and getattr(node.exc.func, "id", "") == "RunRefused":
            text = ast.unparse(node.exc.args[0])  # a refusal name's constant, or the StartRefusal's own name
            assert re.match(r"f['\"]\{(RefusalName\.[A-Z][A-Za-z0-9]+|exc\.name)\}: ", text), f"line {node.lineno}: {text}"
