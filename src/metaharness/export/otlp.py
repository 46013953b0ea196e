"""Where a run's spans go: the traces URL from `--otel` or the standard OTEL_* variables.

What belongs here: the one rule that says whether live export is on and to which URL, read
without importing anything of OpenTelemetry (a run without it imports none of the SDK).

On: `--otel URL`, a bare `--otel` (`"default"`), or — with no `--otel` — either standard endpoint
variable set (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT), unless the
standard switches say no traces (OTEL_SDK_DISABLED=true, OTEL_TRACES_EXPORTER=none) or the
variables are set for another protocol than OTLP/HTTP's protobuf (OTEL_EXPORTER_OTLP_PROTOCOL or
OTEL_EXPORTER_OTLP_TRACES_PROTOCOL `grpc`, `http/json`: a gRPC collector set up for a harness's own
telemetry is not sent HTTP). `--otel` by name always speaks OTLP/HTTP to the URL it names.
"""

from __future__ import annotations

import os
from typing import Mapping

DEFAULT = "default"  # `--otel` without a URL
LOCAL = "http://localhost:4318"


def endpoint_of(endpoint: str | None, environ: Mapping[str, str] = os.environ) -> str:
    """The traces URL: the one given, else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else
    OTEL_EXPORTER_OTLP_ENDPOINT plus /v1/traces, else the local default."""
    if endpoint and endpoint != DEFAULT:
        return endpoint
    if environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
    base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or LOCAL
    return base.rstrip("/") + "/v1/traces"


def live_target(option: str | None, environ: Mapping[str, str] = os.environ) -> tuple[str | None, bool]:
    """(traces URL or None when live export is off, whether `--otel` asked for it by name)."""
    if option:
        return endpoint_of(option, environ), True
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None, False
    if environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return None, False
    protocol = environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or ""
    if protocol.strip().lower() not in ("", "http/protobuf"):
        return None, False
    if environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return endpoint_of(None, environ), False
    return None, False


def otel_installed() -> bool:
    """The otel extra is there (found, not imported: nothing of the SDK is loaded by asking)."""
    import importlib.util

    try:
        return all(importlib.util.find_spec(name) is not None for name in (
            "opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"))
    except (ImportError, ValueError):
        return False
