"""The W3C trace context a run hands to the processes it spawns.

What belongs here: one context variable holding the `TRACEPARENT` (and `TRACESTATE`)
variables of the run span in force, set by the run's OpenTelemetry tap (metaharness.export.otel)
and merged into every harness child's environment at spawn (adapters/process/channel.py).
Nothing of OpenTelemetry is imported: the value is two strings, the W3C env-carrier form.
"""

from __future__ import annotations

import contextvars
import os

TRACE_ENV: contextvars.ContextVar[dict[str, str]] = contextvars.ContextVar("metaharness_trace_env", default={})


def with_trace(env: dict[str, str] | None) -> dict[str, str] | None:
    """`env` with the trace context in force laid over it (None: the inherited environment)."""
    trace = TRACE_ENV.get()
    if not trace:
        return env
    return {**(os.environ if env is None else env), **trace}
