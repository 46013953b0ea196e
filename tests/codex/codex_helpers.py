"""Shared helpers (imported by conftest and the tests) for the codex adapter tests: a fake RunContext that records what the
adapter reports, and a vendor directory holding the scripted stub app-server."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest

from metaharness.adapters.base import PresentedCall
from metaharness.protocol.events import event_name
from metaharness.run.spec import RunSpec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "codex"
REPO = Path(__file__).resolve().parents[2]


class FakeContext:
    """Records every report in order; `decide` answers presented calls at once
    (as frame mode would), or leaves them pending when it returns None."""

    def __init__(self, run_cwd: str, decide: Callable[[PresentedCall], Any] | None = None) -> None:
        self.run_cwd = run_cwd
        self.decide = decide
        self.lines: list[tuple[str, Any, str | None]] = []
        self.calls: list[PresentedCall] = []
        self.turn_ended_event: Any = None
        self.adapter: Any = None  # what `decide`'s answers are delivered to (the adapter or its seam)

    def _add(self, name: str, payload: Any, at: str | None = None) -> None:
        self.lines.append((name, payload, at))

    def session_started(self, event, *, at=None):
        self._add("session.started", event, at)

    def turn_started(self, *, at=None):
        self._add("turn.started", None, at)

    def turn_ended(self, stop_reason, *, at=None):
        self._add("turn.ended", stop_reason, at)
        if self.turn_ended_event is not None:
            self.turn_ended_event.set()

    def emit(self, event, *, at=None):
        self._add(event_name(event), event, at)

    def present(self, call: PresentedCall) -> None:
        self._add("tool.requested", call, call.at)
        self.calls.append(call)
        if self.decide is not None:
            decision = self.decide(call)
            if decision is not None:
                self.adapter.deliver(call.call_id, decision, "frame")
                self._add("tool.decided", decision)

    def record_call(self, call_id, name, input, *, at=None):
        self._add("tool.recorded", (call_id, name, input), at)

    def session_ended(self, event, *, at=None):
        self._add("session.ended", event, at)

    def warn(self, code, message):
        self._add("warning", (code, message))

    def opaque(self, raw_line, *, vendor_type, vendor_subtype, source_line):
        self._add("opaque", (vendor_type, vendor_subtype, source_line, raw_line))

    def names(self) -> list[str]:
        return [line[0] for line in self.lines]

    def of(self, name: str) -> list[Any]:
        return [line[1] for line in self.lines if line[0] == name]


@pytest.fixture
def stub_vendor(tmp_path):
    """A vendor directory with the stub `codex`; returns a function writing its behaviour."""
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    shutil.copy2(FIXTURES / "stub_codex" / "codex", vendor / "codex")
    os.chmod(vendor / "codex", 0o755)

    def configure(behavior: dict) -> Path:
        (vendor / "behavior.json").write_text(json.dumps(behavior))
        return vendor

    configure({})
    return configure


@pytest.fixture(autouse=True)
def scratch_home(tmp_path, monkeypatch):
    # Scratch directories go beside the test's files, never /tmp-shared state.
    monkeypatch.setenv("METAHARNESS_SCRATCH_DIR", str(tmp_path / "scratch"))


def make_spec(work: Path, vendor: Path | None, **fields) -> RunSpec:
    fields.setdefault("prompt", "do the task")
    fields.setdefault("model_endpoint", "http://127.0.0.1:9")
    return RunSpec(kind="codex", cwd=str(work), vendor_dir=str(vendor) if vendor else None, **fields)


def wire_log(vendor: Path) -> list[dict]:
    path = vendor / "wire.log"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
