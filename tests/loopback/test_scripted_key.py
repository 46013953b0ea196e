"""The scripted loopback a vendor run serves (`--script`) answers only the run's own
per-run key, like the credential proxy (issue 19): another process on the machine that
finds its port gets 401, and the key differs from run to run."""

from __future__ import annotations

import json

import httpx

from metaharness.adapters.claude.adapter import ClaudeAdapter
from metaharness.adapters.codex import CodexAdapter
from metaharness.adapters.process import Child, Scratch
from metaharness.adapters.vendor import plan_model
from metaharness.run.spec import RunSpec

BODY = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}


def _script(tmp_path) -> str:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": [{"text": "a"}, {"text": "b"}]}))
    return str(path)


async def _probe(url: str, key: str, path: str, body: dict) -> tuple[int, int, int]:
    async with httpx.AsyncClient(trust_env=False) as http:
        none = await http.post(url + path, json=body)
        wrong = await http.post(url + path, json=body, headers={"x-api-key": "sk-ant-metaharness-placeholder",
                                                                 "authorization": "Bearer metaharness-placeholder-key"})
        right = await http.post(url + path, json=body, headers={"x-api-key": key, "authorization": f"Bearer {key}"})
    return none.status_code, wrong.status_code, right.status_code


async def test_claude_scripted_loopback_needs_the_per_run_key(tmp_path):
    keys = []
    for _ in range(2):
        spec = RunSpec(kind="claude", script=_script(tmp_path), prompt="go")
        adapter = ClaudeAdapter(spec)
        adapter.access = plan_model(spec, ("ANTHROPIC_API_KEY",), None)
        adapter.child = Child()
        url, key = await adapter.serve_model(), adapter.access.key
        try:
            assert await _probe(url, key, "/v1/messages", BODY) == (401, 401, 200)
        finally:
            await adapter.child.release()
        keys.append(key)
    assert keys[0] != keys[1]


async def test_codex_scripted_loopback_needs_the_per_run_key(tmp_path):
    from pathlib import Path

    spec = RunSpec(kind="codex", script=_script(tmp_path), prompt="go", cwd=str(tmp_path))
    adapter = CodexAdapter(spec)
    adapter.access = plan_model(spec, ("OPENAI_API_KEY",), None)
    adapter.child = Child(Scratch(Path(tmp_path)))
    url = await adapter.serve_model()
    try:
        key = adapter.access.key
        assert key.startswith("mh-placeholder-")
        assert await _probe(url, key, "/v1/responses", {"model": "m", "input": "hi"}) == (401, 401, 200)
    finally:
        await adapter.child.release()
