"""The caller's Codex setting (`METAHARNESS_CODEX_IDLE_TIMEOUT_MS`) lands in the loopback provider's
`stream_idle_timeout_ms`, over metaharness's own default, and a value that is no whole number is
refused by name before anything starts. The real binary timing out on it: tests/run/test_e2e_model_failures.py."""

from __future__ import annotations

import tomllib

import pytest

from metaharness.adapters.codex import launch


def _provider(config: str) -> dict:
    return tomllib.loads(config)["model_providers"][launch.PROVIDER_ID]


def test_the_idle_timeout_is_written_into_the_provider_over_the_default():
    passed = launch.passed_through(tuple(launch.PASSED_THROUGH), {"METAHARNESS_CODEX_IDLE_TIMEOUT_MS": "3000"})
    provider = _provider(launch.config_toml("http://127.0.0.1:1/v1", passed=passed))
    assert provider["stream_idle_timeout_ms"] == 3000
    assert (provider["request_max_retries"], provider["stream_max_retries"]) == (0, 0)
    assert _provider(launch.config_toml("http://127.0.0.1:1/v1"))["stream_idle_timeout_ms"] == 20000


@pytest.mark.parametrize("value", ["0", "fast", "2.5"])
def test_a_bad_idle_timeout_is_refused_by_name(value, monkeypatch, tmp_path):
    from metaharness.adapters import adapter_class
    from metaharness.adapters.base import StartRefusal
    from metaharness.run.spec import RunSpec

    monkeypatch.setenv("METAHARNESS_CODEX_IDLE_TIMEOUT_MS", value)
    spec = RunSpec(kind="codex", prompt="hi", credentials="none", model_endpoint="http://127.0.0.1:9", cwd=str(tmp_path),
                   vendor_dir=str(tmp_path))
    with pytest.raises(StartRefusal) as refused:
        adapter_class("codex")(spec).plan()
    assert refused.value.name == "VendorSettingInvalid"
    assert "METAHARNESS_CODEX_IDLE_TIMEOUT_MS" in str(refused.value)
