import json
import os

import pytest

from metaharness.protocol import frame as frames

GOLDEN = os.path.join(os.path.dirname(__file__), "..", "protocol", "golden", "frame.json")


def make_frame(ops: list[dict], *, state: str = "s1", index: int = 1, subjects=None) -> dict:
    obj = {
        "workflow": {"id": "wf", "version": "1"},
        "node": {"id": state},
        "step": {"workflow": "wf", "state": state, "index": index, "attempt": 1},
        "prior": [], "obligations": [], "reaching": [], "next": [],
        "handoff": {"handoff": "none"},
        "operations": ops,
    }
    if subjects is not None:
        obj["subjects"] = {"rules": subjects}
    import msgspec

    return msgspec.to_builtins(frames.seal(obj))


@pytest.fixture
def frame_file(tmp_path):
    def write(ops, **kw):
        path = tmp_path / f"frame-{len(list(tmp_path.iterdir()))}.json"
        frame = frames.seal(make_frame(ops, **kw))
        path.write_bytes(frames.document_bytes(frame))
        return str(path)

    return write
