"""A real Arize Phoenix server for the OpenTelemetry tests, and the reading of its spans.

Phoenix runs from its own venv (.venv-phoenix, `make phoenix`, pinned in
tests/phoenix-requirements.txt: its dependencies conflict with metaharness's) on two free
127.0.0.1 ports (HTTP with its OTLP/HTTP receiver, and OTLP/gRPC, which Phoenix always opens),
with its sqlite database and HOME in a directory of its own that is removed when it stops, no
telemetry and no request of its own to the internet. The `phoenix` fixture (tests/conftest.py)
yields a `Phoenix`; a test sends spans to `phoenix.otlp_endpoint` under a project of its own
(`phoenix.project_env(name)`: the standard OTEL_RESOURCE_ATTRIBUTES with Phoenix's
`openinference.project.name`) and reads them back through Phoenix's REST API with
`phoenix.wait_for_spans(project, count)`. Imported with tests/ on sys.path.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import httpx

REPO = Path(__file__).resolve().parent.parent
VENV = REPO / ".venv-phoenix"
EXECUTABLE = VENV / "bin" / "phoenix"
REQUIREMENTS = REPO / "tests" / "phoenix-requirements.txt"
VERSION = re.search(r"^arize-phoenix==(\S+)$", REQUIREMENTS.read_text(), re.M).group(1)

# Phoenix's switches: no telemetry pixels (FullStory, Scarf), nothing fetched from the internet
# on its own (web fonts, its WASM sandbox), no agent assistant, no sign-in.
SWITCHES = {
    "PHOENIX_TELEMETRY_ENABLED": "false",
    "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
    "PHOENIX_DISABLE_AGENT_ASSISTANT": "true",
    "PHOENIX_ENABLE_AUTH": "false",
}
# Its migrations on a fresh sqlite database take 12-22 s on a busy 2-core machine; below the
# tests' 120 s timeout, so a server that never comes up fails with its log.
STARTUP_S = 90.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Phoenix:
    """A running server: where to send spans, and its REST API through `client`."""

    url: str
    grpc_port: int
    client: httpx.Client
    version: str = VERSION

    @property
    def otlp_endpoint(self) -> str:
        return f"{self.url}/v1/traces"

    @property
    def grpc_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.grpc_port}"

    @staticmethod
    def project_env(project: str) -> dict[str, str]:
        """The environment that puts an OpenTelemetry SDK's spans in Phoenix project PROJECT."""
        return {"OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={project}"}

    def project_id(self, project: str) -> str:
        (found,) = [p["id"] for p in self.client.get("/v1/projects").raise_for_status().json()["data"]
                    if p["name"] == project]
        return found

    def trace_url(self, project: str, trace_id: str) -> str:
        """The trace's page in Phoenix's UI."""
        return f"{self.url}/projects/{self.project_id(project)}/traces/{trace_id}"

    def spans(self, project: str, **filters: Any) -> list[dict[str, Any]]:
        """Every span of PROJECT (GET /v1/projects/{project}/spans, all pages), oldest first;
        none while the project does not exist yet."""
        out: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": 1000, "sort": "id", "order": "asc", **filters}
        while True:
            answer = self.client.get(f"/v1/projects/{project}/spans", params=params)
            if answer.status_code == 404:
                return out
            body = answer.raise_for_status().json()
            out.extend(body["data"])
            if not body.get("next_cursor"):
                return out
            params["cursor"] = body["next_cursor"]

    def wait_for_spans(self, project: str, count: int, timeout_s: float = 30.0) -> list[dict[str, Any]]:
        """PROJECT's spans once COUNT have arrived and no more come for a moment (Phoenix
        inserts what it receives in batches); what there is when TIMEOUT_S passes."""
        deadline = time.monotonic() + timeout_s
        spans = self.spans(project)
        while len(spans) < count and time.monotonic() < deadline:
            time.sleep(0.25)
            spans = self.spans(project)
        time.sleep(1.0)
        return self.spans(project)


def _environment(home: Path, port: int, grpc_port: int) -> dict[str, str]:
    # Nothing of the caller's Phoenix or OpenTelemetry settings, and a HOME and a temporary
    # directory of its own (Phoenix keeps its pid files in the temporary directory's .arize-phoenix).
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PHOENIX_", "OTEL_"))}
    (home / "tmp").mkdir(exist_ok=True)
    env.update(SWITCHES, HOME=str(home), TMPDIR=str(home / "tmp"), PHOENIX_WORKING_DIR=str(home / "phoenix"),
               PHOENIX_HOST="127.0.0.1", PHOENIX_PORT=str(port), PHOENIX_GRPC_PORT=str(grpc_port))
    return env


@contextlib.contextmanager
def serve(workdir: Path) -> Iterator[Phoenix]:
    """`phoenix serve` in WORKDIR (created, then removed with everything Phoenix wrote), until
    /healthz answers; a server that dies or never answers is an error with its log's tail."""
    workdir.mkdir(parents=True, exist_ok=True)
    port, grpc_port = free_port(), free_port()
    log_path = workdir / "phoenix.log"
    with log_path.open("wb") as log:
        child = subprocess.Popen([str(EXECUTABLE), "serve"], env=_environment(workdir, port, grpc_port),
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=workdir,
                                 start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    client = httpx.Client(base_url=url, timeout=10.0)
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            if child.poll() is not None:
                raise RuntimeError(f"phoenix serve exited ({child.returncode}) before it was healthy:\n"
                                   + log_path.read_text(errors="replace")[-3000:])
            with contextlib.suppress(httpx.TransportError):
                if client.get("/healthz").status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"phoenix serve did not answer /healthz within {STARTUP_S:.0f} s:\n"
                                   + log_path.read_text(errors="replace")[-3000:])
            time.sleep(0.25)
        yield Phoenix(url=url, grpc_port=grpc_port, client=client)
    finally:
        client.close()
        _stop(child)
        shutil.rmtree(workdir, ignore_errors=True)


def _stop(child: subprocess.Popen) -> None:
    """The server's process group: SIGTERM, then SIGKILL after 20 s."""
    if child.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGTERM)
        try:
            child.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait(timeout=10)
