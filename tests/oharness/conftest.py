"""Shared fixtures for the oharness tests: a tool context in a temporary directory, a
recording sink, and an isolated HOME so no user settings leak in."""

from __future__ import annotations

import pytest

from oharness.model import ToolCall
from oharness.tools import ToolContext
from oharness.tools.base import ToolOutput


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def ctx(tmp_path):
    return ToolContext(cwd=str(tmp_path))


class RecordingSink:
    def __init__(self):
        self.records = []

    def text(self, text, request_id, agent):
        self.records.append(("text", text, agent))

    def thinking(self, text, request_id, agent):
        self.records.append(("thinking", text, agent))

    def injection(self, text, origin):
        self.records.append(("injection", text, origin))

    def tool_call(self, call: ToolCall):
        self.records.append(("tool_call", call.name, call.input, call.agent))

    def tool_result(self, call: ToolCall, output: ToolOutput):
        self.records.append(("tool_result", call.name, output.is_error, output.content))

    def usage(self, request_id, model, usage):
        self.records.append(("usage", usage))

    def kinds(self):
        return [r[0] for r in self.records]


@pytest.fixture
def sink():
    return RecordingSink()
