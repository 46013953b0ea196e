"""The frame (the frame rules; checklist 50–57)."""

from __future__ import annotations

import copy
import hashlib
import json

import pytest

from metaharness.protocol.frame import (
    FRAME_FORMAT, OPERATION_NAMES, DirList, FileRead, FileWrite, Frame, FrameCommandError, FrameRefusal, McpCall,
    Search, Shell, admitted_names, canonical_bytes, compute_digest, document_bytes, frame_from_command, load_frame,
    normalise_operations, op_from_key, op_key, parse_frame_document, render, seal,
)

GOLDEN_DIGEST = "43a6f845a21f3475569323950a9d276bfed3df11979adc3edf18878da6963a12"
MUTATED_DETAIL = (
    "the stated digest 43a6f845a21f3475569323950a9d276bfed3df11979adc3edf18878da6963a12 does not describe the contents "
    "(computed 306141e6b3b4a74f4b50b85d60e5e0f27d1105579f76455efcfbe82a9ae40926); the frame was never sealed or was edited after sealing"
)
GOLDEN_CANONICAL = (
    b'{"entities":null,"handoff":{"handoff":"none"},"next":[],"node":{"id":"implement"},"obligations":[{"asked_by":null,'
    b'"text":"the suite is red before the implementation"}],"operations":[{"op":"dir.list"},{"op":"file.edit"},{"op":"file.read"},'
    b'{"op":"file.write"},{"op":"search"},{"op":"shell"},{"op":"skill.load"}],"prior":[],"reaching":[{"asked_by":null,'
    b'"text":"to verify: the suite is green"}],"step":{"attempt":1,"index":2,"state":"implement","workflow":"development/default"},'
    b'"workflow":{"id":"development/default","version":"1"}}'
)


def refused(data) -> FrameRefusal:
    with pytest.raises(FrameRefusal) as info:
        parse_frame_document(data if isinstance(data, bytes) else json.dumps(data).encode())
    return info.value


def resealed(obj: dict) -> dict:
    """obj with its digest recomputed (a producer sealing honestly)."""
    o = {k: v for k, v in obj.items() if k != "digest"}
    return dict(o, digest=seal(o).digest)


def test_golden_vector_files_are_the_spec_bytes(golden_bytes, golden_text):
    assert hashlib.sha256(golden_bytes).hexdigest() == "ef897a58a624848aad942d69d2745b431f2eaad5180cd0f5b2e1c8975adcb93b"
    assert hashlib.sha256(golden_text.encode()).hexdigest() == "309b879edfaf8a78af35bc58c637896385b8860a2a49a0655772e66bce7b6dd8"


def test_golden_loads_and_verifies(golden_bytes, tmp_path):  # checklist 50
    frame = parse_frame_document(golden_bytes)
    assert frame.digest == GOLDEN_DIGEST
    assert canonical_bytes(frame) == GOLDEN_CANONICAL
    assert compute_digest(frame) == GOLDEN_DIGEST
    path = tmp_path / "f.json"
    path.write_bytes(golden_bytes)
    assert load_frame(path) == frame


def test_golden_reemits_byte_identically(golden_bytes, golden_obj):  # checklist 51
    frame = parse_frame_document(golden_bytes)
    assert document_bytes(frame) == golden_bytes
    assert document_bytes(frame) == (json.dumps(golden_obj, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode()
    assert document_bytes(seal(golden_obj)) == golden_bytes


def test_golden_renders(golden_bytes, golden_text):  # checklist 52
    text = render(parse_frame_document(golden_bytes))
    assert text == golden_text and not text.endswith("\n")


def test_index_3_mutation_is_refused_and_never_resealed(golden_bytes, golden_obj):  # checklist 53
    mutated = golden_bytes.replace(b'"index": 2', b'"index": 3')
    r = refused(mutated)
    assert (r.name, r.detail) == ("FrameInvalid", MUTATED_DETAIL)
    # a mutated in-memory frame written out keeps its stale digest, so it is refused again on load
    frame = parse_frame_document(golden_bytes)
    frame.step.index = 3
    out = document_bytes(frame)
    assert json.loads(out)["digest"] == GOLDEN_DIGEST
    assert refused(out).detail == MUTATED_DETAIL
    with pytest.raises(FrameRefusal) as info:
        seal(json.loads(mutated))  # sealing never repairs an edited frame
    assert info.value.detail == MUTATED_DETAIL


def test_load_checks_in_order(golden_obj, tmp_path):  # checklist 54
    with pytest.raises(FrameRefusal) as info:
        load_frame(tmp_path / "missing.json")
    assert info.value.name == "FrameUnreadable"
    assert "could not be read" in info.value.sentence("x.json")
    assert refused(b"{nope").detail.startswith("not a JSON object: ")
    assert refused(b"\xff{}").detail.startswith("not a JSON object: ")
    assert refused(b"[1]").detail == "not a JSON object: the document is JSON but not an object"
    no_tag = {k: v for k, v in golden_obj.items() if k != "format"}
    assert refused(no_tag).detail == 'no format tag, expected "metaharness.frame/1"'
    assert refused(dict(golden_obj, format="metaharness.frame/2")).detail == 'unknown format tag "metaharness.frame/2", expected "metaharness.frame/1"'
    assert refused(dict(golden_obj, format=1)).detail == 'unknown format tag "<not a string>", expected "metaharness.frame/1"'
    assert refused(dict(golden_obj, format=None)).detail == 'unknown format tag "<not a string>", expected "metaharness.frame/1"'
    bad_op = dict(golden_obj, operations=[{"op": "file.delete"}])
    assert refused(bad_op).detail == ("not a frame: unknown variant `file.delete`, expected one of `file.read`, `file.write`, `file.edit`, "
                                      "`dir.list`, `search`, `shell`, `web.read`, `skill.load`, `subagent.spawn`, `task.todo`, `mcp.call`")
    assert refused({k: v for k, v in golden_obj.items() if k != "node"}).detail == "not a frame: missing field `node`"
    assert refused(dict(golden_obj, handoff={"handoff": "maybe"})).detail.startswith("not a frame: unknown variant `maybe`")
    assert refused(dict(golden_obj, step=dict(golden_obj["step"], index=-1))).detail == "not a frame: invalid value: integer `-1`, expected u32"
    assert refused(dict(golden_obj, step=dict(golden_obj["step"], index=True))).detail == "not a frame: invalid type: boolean `true`, expected u32"
    assert refused(dict(golden_obj, operations=[{"op": "mcp.call", "server": "s"}])).detail == "not a frame: missing field `tool`"
    assert refused(dict(golden_obj, digest="0" * 64)).detail.startswith("the stated digest 000")
    # order: a wrong tag is reported before a shape fault, a shape fault before a digest mismatch
    assert refused({"format": "x", "operations": 5}).detail.startswith("unknown format tag")
    assert refused({"format": FRAME_FORMAT, "digest": "0" * 64}).detail.startswith("not a frame: missing field")


def test_canonical_form_rules(golden_obj):  # checklist 55
    shuffled = dict(golden_obj, operations=list(reversed(golden_obj["operations"])) + [{"op": "shell", "extra": 1}])
    assert parse_frame_document(json.dumps(shuffled).encode()).digest == GOLDEN_DIGEST  # verifies
    extra = copy.deepcopy(golden_obj)
    extra["unknown"] = {"x": 1}
    extra["node"]["color"] = "red"
    del extra["obligations"][0]["asked_by"]
    del extra["entities"]
    assert parse_frame_document(json.dumps(extra).encode()).digest == GOLDEN_DIGEST
    empty_scope = dict(golden_obj, subjects={"rules": []})
    frame = parse_frame_document(json.dumps(empty_scope).encode())
    assert b"subjects" not in canonical_bytes(frame) and b"subjects" not in document_bytes(frame)
    scoped = dict(golden_obj, subjects={"rules": [{"subjects": ["file:src/**"], "operations": [{"op": "file.read"}, {"op": "dir.list"}]}]})
    r = refused(scoped)
    assert r.detail.startswith("the stated digest") and GOLDEN_DIGEST in r.detail
    sealed = seal({k: v for k, v in scoped.items() if k != "digest"})
    assert sealed.digest != GOLDEN_DIGEST
    assert b'"subjects":{"rules":[{"operations":[{"op":"dir.list"},{"op":"file.read"}],"subjects":["file:src/**"]}]}' in canonical_bytes(sealed)
    assert parse_frame_document(document_bytes(sealed)) == sealed


def test_canonical_operation_order():  # checklist 56
    assert OPERATION_NAMES == ("dir.list", "file.edit", "file.read", "file.write", "search", "shell", "skill.load",
                               "subagent.spawn", "task.todo", "web.read")
    ops = [Shell(), McpCall(server="b", tool="a"), FileRead(), McpCall(server="a", tool="z"), Search(), FileWrite(),
           McpCall(server="a", tool="b"), DirList(), Shell(), McpCall(server="a", tool="b")]
    assert [op_key(o) for o in normalise_operations(ops)] == [
        ("dir.list", "", ""), ("file.read", "", ""), ("file.write", "", ""), ("mcp.call", "a", "b"), ("mcp.call", "a", "z"),
        ("mcp.call", "b", "a"), ("search", "", ""), ("shell", "", "")]
    for o in ops:
        assert op_from_key(op_key(o)) == o
    with pytest.raises(ValueError):
        op_from_key(("file.delete", "", ""))


def base(**over) -> dict:
    obj = {"workflow": {"id": "w", "version": "2"}, "node": {"id": "n"},
           "step": {"workflow": "w", "state": "n", "index": 4, "attempt": 2},
           "prior": [], "obligations": [], "reaching": [], "next": [], "handoff": {"handoff": "none"}, "operations": []}
    obj.update(over)
    return obj


def test_render_every_branch():  # checklist 57
    text = render(seal(base()))
    lines = text.split("\n")
    assert lines[0] == "Workflow w (2), state n, step 4 attempt 2."
    assert "- nothing yet." in lines and "- nothing is required of this step beyond its handoff." in lines
    assert "Not yet satisfied on a way out:" not in text and "Reachable from here" not in text
    assert "This step owes: nothing." in lines and "Choose exactly one" not in text
    assert lines[-3:] == ["- none. This step calls no tools.", "", f"Frame {seal(base()).digest}."]
    full = seal(base(
        prior=[{"text": "p1", "source": "doc.md"}, {"text": "p2"}],
        obligations=[{"text": "o1", "asked_by": "lead"}, {"text": "o2", "asked_by": None}],
        reaching=[{"text": "to verify: green", "asked_by": "verify"}],
        next=[{"id": "verify"}, {"id": "abandon"}],
        handoff={"handoff": "artifact", "name": "report", "kind": "markdown"},
        entities={"source": "the board", "members": ["a", "b"]},
        operations=[{"op": "mcp.call", "server": "gh", "tool": "issue"}, {"op": "file.read"}],
    ))
    assert render(full) == "\n".join([
        "Workflow w (2), state n, step 4 attempt 2.", "",
        "Already established:", "- p1 (doc.md)", "- p2", "",
        "Must hold here:", "- o1 (lead)", "- o2", "",
        "Not yet satisfied on a way out:", "- to verify: green (verify)", "",
        "Reachable from here: verify, abandon.", "",
        "This step owes: the artifact report (kind markdown).", "",
        "Choose exactly one of these, enumerated from the board:", "- a", "- b", "",
        "Strictly only these operations are admitted here:", "- file.read", "- mcp.call gh/issue", "",
        f"Frame {full.digest}.",
    ])
    assert "This step owes: the artifact report." in render(seal(base(handoff={"handoff": "artifact", "name": "report"})))
    assert "This step owes: a structured answer against the schema s.json." in render(seal(base(handoff={"handoff": "structured_answer", "schema": "s.json"})))
    assert admitted_names(full) == ["file.read", "mcp.call"]


def test_seal_computes_or_verifies(golden_obj):
    obj = {k: v for k, v in golden_obj.items() if k not in ("digest", "format")}
    assert seal(obj).digest == GOLDEN_DIGEST
    with pytest.raises(FrameRefusal) as info:
        seal(dict(obj, format="metaharness.frame/0"))
    assert info.value.detail.startswith("unknown format tag")
    with pytest.raises(FrameRefusal):
        seal([1])


def test_frame_from_command(golden_obj):
    assert frame_from_command(golden_obj).digest == GOLDEN_DIGEST
    for bad, prefix in [
        (dict(golden_obj, format="x"), 'malformed frame.set: unknown format tag "x"'),
        (dict(golden_obj, format=3), "malformed frame.set: no format tag"),
        (dict(golden_obj, digest="f" * 64), "malformed frame.set: the stated digest fff"),
        ({"workflow": 1}, "malformed frame.set: not a frame: "),
        ([], "malformed frame.set: "),
    ]:
        with pytest.raises(FrameCommandError) as info:
            frame_from_command(bad)
        assert info.value.reason.startswith(prefix), info.value.reason


def test_non_ascii_frame_round_trips():
    f = seal(base(obligations=[{"text": "naïve ✓ \u2028 \x01"}]))
    doc = document_bytes(f)
    assert "naïve ✓".encode() in doc
    assert parse_frame_document(doc) == f
    assert hashlib.sha256(json.dumps(json.loads(canonical_bytes(f)), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest() == f.digest
