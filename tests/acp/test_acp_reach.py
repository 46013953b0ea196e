"""The ACP adapters' own look at a direct endpoint (`reach.probe`) and the vendor settings they
carry from metaharness's environment into the pinned configuration (`launch.passed_through`).
(The real agents against a dead port and an unresolvable host: tests/run/test_e2e_model_failures.py.)"""

from __future__ import annotations

import asyncio
import socket

import pytest

from metaharness.adapters.acp import gemini, launch, opencode, qwen, reach

pytestmark = pytest.mark.timeout(60)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_refused_port_is_named():
    assert asyncio.run(reach.probe(f"http://127.0.0.1:{_free_port()}/v1")) == "connection_refused"


def test_a_listening_endpoint_is_no_failure():
    async def main() -> str | None:
        server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            return await reach.probe(f"http://127.0.0.1:{port}")

    assert asyncio.run(main()) is None


def test_a_host_that_does_not_resolve_is_named(monkeypatch):
    async def no_name(*args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(asyncio, "open_connection", no_name)
    assert asyncio.run(reach.probe("http://model.metaharness.invalid")) == "dns"


def test_an_endpoint_without_a_host_is_a_connection_failure():
    assert asyncio.run(reach.probe("not a url")) == "connection"


def test_the_settings_are_written_where_the_vendor_reads_them():
    passed = launch.passed_through(tuple(gemini.PASSED_THROUGH), {"METAHARNESS_GEMINI_MAX_ATTEMPTS": "1"})
    assert gemini.settings(passed)["general"] == {"maxAttempts": 1}
    assert "general" not in gemini.settings({})
    passed = launch.passed_through(tuple(opencode.PASSED_THROUGH), {"METAHARNESS_OPENCODE_TIMEOUT_MS": "3000"})
    options = opencode.config("http://127.0.0.1:1", "m", passed)["provider"][opencode.PROVIDER]["options"]
    assert options["timeout"] == 3000 and options["baseURL"] == "http://127.0.0.1:1/v1"
    assert "timeout" not in opencode.config("http://127.0.0.1:1", "m")["provider"][opencode.PROVIDER]["options"]
    passed = launch.passed_through(tuple(qwen.PASSED_THROUGH), {"METAHARNESS_QWEN_MAX_RETRIES": "1",
                                                                 "METAHARNESS_QWEN_TIMEOUT_MS": "3000"})
    assert qwen.settings(passed)["model"] == {"generationConfig": {"maxRetries": 1, "timeout": 3000}}
    assert qwen.settings(passed)["permissions"] == qwen.SETTINGS["permissions"] and "model" not in qwen.settings({})


@pytest.mark.parametrize("value", ["0", "-1", "fast", "1.5"])
def test_a_setting_that_is_no_whole_number_is_refused(value):
    with pytest.raises(launch.LaunchError, match="METAHARNESS_GEMINI_MAX_ATTEMPTS"):
        launch.passed_through(("METAHARNESS_GEMINI_MAX_ATTEMPTS",), {"METAHARNESS_GEMINI_MAX_ATTEMPTS": value})


@pytest.mark.parametrize("kind", ["gemini", "opencode", "qwen"])
def test_the_adapter_refuses_a_bad_setting_by_name(kind, monkeypatch, tmp_path):
    from metaharness.adapters import adapter_class
    from metaharness.adapters.base import StartRefusal
    from metaharness.run.spec import RunSpec

    monkeypatch.setenv("METAHARNESS_GEMINI_MAX_ATTEMPTS", "zero")
    monkeypatch.setenv("METAHARNESS_OPENCODE_TIMEOUT_MS", "zero")
    monkeypatch.setenv("METAHARNESS_QWEN_MAX_RETRIES", "zero")
    spec = RunSpec(kind=kind, prompt="hi", credentials="none", model_endpoint="http://127.0.0.1:9", cwd=str(tmp_path),
                   vendor_dir=str(tmp_path))
    with pytest.raises(StartRefusal) as refused:
        adapter_class(kind)(spec).plan()
    assert refused.value.name == "VendorSettingInvalid"
