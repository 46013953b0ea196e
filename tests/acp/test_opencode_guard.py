"""The opencode adapter refuses a run whose opencode did not load the guard plugin (the plugin
records PR_GET_DUMPABLE once it made opencode non-dumpable; anything else is a refusal)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from metaharness.adapters.acp.launch import Scratch
from metaharness.adapters.acp.opencode import GUARD_PLUGIN, OpencodeAdapter
from metaharness.adapters.base import StartRefusal


@pytest.mark.parametrize("content", [None, "", "not json", '{"dumpable": 1, "pid": 1}', '{"pid": 1}', "[0]"])
def test_no_guard_no_run(tmp_path, content):
    if content is not None:
        (tmp_path / "guard.json").write_text(content)
    with pytest.raises(StartRefusal) as refused:
        OpencodeAdapter._check_guard(SimpleNamespace(scratch=Scratch(tmp_path)))
    assert refused.value.name == "VendorCapability" and "guard plugin" in refused.value.sentence


def test_a_non_dumpable_opencode_runs(tmp_path):
    (tmp_path / "guard.json").write_text('{"dumpable": 0, "pid": 1}')
    OpencodeAdapter._check_guard(SimpleNamespace(scratch=Scratch(tmp_path)))


def test_the_plugin_keeps_the_password_where_the_server_reads_it():
    # opencode's server reads OPENCODE_SERVER_PASSWORD on every request: removing it from
    # process.env would leave the server answering anyone (seen on 1.18.33).
    assert "delete process.env.OPENCODE_SERVER_PASSWORD" not in GUARD_PLUGIN
    assert "output.env.OPENCODE_SERVER_PASSWORD = \"\"" in GUARD_PLUGIN
    assert "prctl(4, 0" in GUARD_PLUGIN
