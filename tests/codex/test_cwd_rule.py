"""One working-directory rule for every harness: --cwd, else the current directory (never a scratch one)."""

from __future__ import annotations

import asyncio
import os

from metaharness.adapters.codex import CodexAdapter
from metaharness.run.spec import RunSpec

from codex_helpers import FakeContext


async def test_codex_without_cwd_works_in_the_current_directory(tmp_path, stub_vendor, monkeypatch):
    vendor = stub_vendor({"turns": [[{"text": "hello"}]]})
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    ctx = FakeContext(str(here))
    adapter = CodexAdapter(RunSpec(kind="codex", prompt="go", model_endpoint="http://127.0.0.1:9",
                                   vendor_dir=str(vendor)))
    adapter.plan()
    await adapter.start(ctx)
    try:
        assert ctx.of("session.started")[0].cwd == str(here)
        assert adapter.work == str(here)
        assert not (adapter.child.scratch.root / "work").exists()
    finally:
        await adapter.finish()
        await asyncio.wait_for(adapter.child.wait(), 15)
    assert os.getcwd() == str(here)
