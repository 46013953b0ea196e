from __future__ import annotations

import json
import pathlib

import pytest

GOLDEN = pathlib.Path(__file__).parent / "golden"


@pytest.fixture
def golden_bytes() -> bytes:
    return (GOLDEN / "frame.json").read_bytes()


@pytest.fixture
def golden_obj(golden_bytes) -> dict:
    return json.loads(golden_bytes)


@pytest.fixture
def golden_text() -> str:
    return (GOLDEN / "frame.rendered.txt").read_text(encoding="utf-8")
