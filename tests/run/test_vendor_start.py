"""The start every vendor CLI shares (adapters/vendor.py): the route to the model for each
credential mode, the scratch base outside the working directory, and a handshake that fails —
the child is killed and the start refused `VendorCapability`, naming what the child said."""

from __future__ import annotations

import asyncio
import os

import pytest

from metaharness.adapters import adapter_class
from metaharness.adapters.base import StartRefusal
from metaharness.adapters.vendor import plan_model
from metaharness.run.spec import RunSpec

from report_context import ReportContext

SCENARIO = '{"format": "metaharness.scenario/1", "turns": [{"text": "done"}]}'


def _script(tmp_path) -> str:
    path = tmp_path / "scenario.json"
    path.write_text(SCENARIO)
    return str(path)


# --- the route to the model -------------------------------------------------------------------


def test_a_script_is_served_by_a_loopback_that_answers_only_a_fresh_key(tmp_path):
    spec = RunSpec(kind="codex", prompt="go", script=_script(tmp_path))
    first, second = (plan_model(spec, ("OPENAI_API_KEY",), "fixed") for _ in range(2))
    assert first.scenario is not None and first.real_key is None
    assert first.key and first.key != "fixed" and first.key != second.key


def test_a_vendor_with_no_key_variables_takes_only_a_script_or_an_endpoint(tmp_path):
    scripted = plan_model(RunSpec(kind="opencode", prompt="go", script=_script(tmp_path)), (), None)
    assert scripted.scenario is not None and scripted.key is None  # the agent's own placeholder
    with pytest.raises(StartRefusal) as refused:
        plan_model(RunSpec(kind="opencode", prompt="go", credentials="loopback"), (), None)
    assert refused.value.name == "CredentialsUnsupported"


def test_credentials_none_needs_an_endpoint_and_gives_the_placeholder():
    assert plan_model(RunSpec(kind="codex", prompt="go", model_endpoint="http://127.0.0.1:9"),
                      ("OPENAI_API_KEY",), "fixed").key == "fixed"
    with pytest.raises(StartRefusal) as refused:
        plan_model(RunSpec(kind="codex", prompt="go"), ("OPENAI_API_KEY",), "fixed")
    assert refused.value.name == "NoModelEndpoint"


def test_a_real_key_is_read_from_the_first_variable_set(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("CODEX_API_KEY", "sk-real")
    names = ("OPENAI_API_KEY", "CODEX_API_KEY")
    handed = plan_model(RunSpec(kind="codex", prompt="go", credentials="api-key"), names, "fixed")
    assert (handed.key, handed.real_key, handed.key_name) == ("sk-real", "sk-real", "CODEX_API_KEY")
    proxied = plan_model(RunSpec(kind="codex", prompt="go", credentials="loopback"), names, "fixed")
    assert proxied.real_key == "sk-real" and proxied.key not in ("sk-real", "fixed")
    monkeypatch.delenv("CODEX_API_KEY")
    with pytest.raises(StartRefusal) as refused:
        plan_model(RunSpec(kind="codex", prompt="go", credentials="loopback"), names, "fixed")
    assert refused.value.name == "NoApiKey" and "OPENAI_API_KEY or CODEX_API_KEY" in refused.value.sentence


# --- plan and start on a stand-in binary -----------------------------------------------------


def stand_in(directory, name: str, body: str) -> str:
    """A `name` launcher that says the registry's pin for --version and otherwise runs `body`."""
    from metaharness.protocol.harnesses import REGISTRY

    pin = next(entry.pin for entry in REGISTRY.values() if entry.binary == name)
    path = directory / name
    path.write_text(f"#!/bin/sh\nif [ \"$1\" = --version ]; then echo '{pin}'; exit 0; fi\n{body}\n")
    os.chmod(path, 0o755)
    return str(directory)


@pytest.mark.parametrize("kind", ["claude", "codex", "opencode"])
def test_a_scratch_base_inside_the_working_directory_is_refused_at_the_plan(kind, tmp_path, monkeypatch):
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    monkeypatch.setenv("METAHARNESS_SCRATCH_DIR", str(tmp_path / "work" / "scratch"))
    (tmp_path / "work").mkdir()
    spec = RunSpec(kind=kind, prompt="go", cwd=str(tmp_path / "work"), credentials="none",
                   model_endpoint="http://127.0.0.1:9", vendor_dir=stand_in(vendor, kind, "exit 0"))
    with pytest.raises(StartRefusal) as refused:
        adapter_class(kind)(spec).plan()
    assert refused.value.name == "ScratchInsideCwd" and "METAHARNESS_SCRATCH_DIR" in refused.value.sentence
    assert not (tmp_path / "work" / "scratch").exists()  # nothing was made


@pytest.mark.parametrize("kind", ["claude", "codex", "opencode"])
def test_the_version_probe_runs_only_where_it_is_read(kind, tmp_path, monkeypatch):
    """`--version` costs a vendor's start-up: the plan asks it only under --strict-version; every
    harness names its version in its handshake (an ACP agent whose `initialize` names none is
    asked after it: tests/acp/test_acp_seam.py)."""
    monkeypatch.setenv("METAHARNESS_SCRATCH_DIR", str(tmp_path / "scratch"))
    (tmp_path / "work").mkdir()
    for strict in (False, True):
        vendor = tmp_path / f"vendor-{strict}"
        vendor.mkdir()
        asked = vendor / "asked"
        directory = stand_in(vendor, kind, "exit 0")
        launcher = vendor / kind
        launcher.write_text(launcher.read_text().replace("#!/bin/sh\n", f"#!/bin/sh\necho \"$1\" >> {asked}\n", 1))
        spec = RunSpec(kind=kind, prompt="go", cwd=str(tmp_path / "work"), credentials="none",
                       model_endpoint="http://127.0.0.1:9", vendor_dir=directory, strict_version=strict)
        adapter_class(kind)(spec).plan()
        probed = asked.exists() and "--version" in asked.read_text()
        assert probed == strict, (kind, strict)


def left_behind(marker: str) -> bool:
    """A `sleep <marker>` is still running (it would be a zombie at most once killed)."""
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                argv = handle.read().split(b"\0")
            with open(f"/proc/{entry}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if argv[:2] == [b"sleep", marker.encode()] and state != b"Z":
            return True
    return False


@pytest.mark.parametrize("kind", ["claude", "codex", "opencode"])
async def test_a_failed_handshake_kills_the_child_and_names_its_last_words(kind, tmp_path, monkeypatch):
    vendor, work = tmp_path / "vendor", tmp_path / "work"
    vendor.mkdir()
    work.mkdir()
    monkeypatch.setenv("METAHARNESS_SCRATCH_DIR", str(tmp_path / "scratch"))
    # It says why on stderr and exits, leaving a process of its group behind.
    body = "echo 'cannot open the session store' >&2; sleep 61.2345 >/dev/null 2>&1 & exit 3"
    spec = RunSpec(kind=kind, prompt="go", cwd=str(work), credentials="none", model_endpoint="http://127.0.0.1:9",
                   vendor_dir=stand_in(vendor, kind, body))
    adapter = adapter_class(kind)(spec)
    context = ReportContext(str(work))
    try:
        with pytest.raises(StartRefusal) as refused:
            await asyncio.wait_for(adapter.start(context), 60)
    finally:
        if adapter.child is not None:  # its runtime directory may lie in the temp directory: never left there
            adapter.child.cleanup()
    assert refused.value.name == "VendorCapability"
    assert "did not complete its handshake" in refused.value.sentence
    assert "cannot open the session store" in refused.value.sentence
    assert not adapter.child.running() and not left_behind("61.2345")
    assert "session_started" not in context.reports and "session_ended" not in context.reports
