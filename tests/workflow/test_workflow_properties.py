"""Property: every frame the host's step rules mint verifies — as a document and as a
`frame.set` — and its `step.index` and `attempt` follow the rules: the index counts
every step taken, the attempt starts at 1 on entering a node and rises by one only after
a failed step at that node, whose failure the frame then quotes verbatim."""

from __future__ import annotations

import msgspec
from hypothesis import given, settings, strategies as st
from examples import examples

from metaharness.protocol import frame as frames
from metaharness.workflow.document import END, problems, shape, LoadedWorkflow
from metaharness.workflow.mint import Position, Walk

OPS = ["file.read", "file.write", "file.edit", "shell", "search", "dir.list", "web.read", "task.todo"]
line = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=30)


@st.composite
def workflows(draw):
    n = draw(st.integers(1, 5))
    names = [f"n{i}" for i in range(n)]
    nodes = {}
    for i, name in enumerate(names):
        chain = [names[i + 1]] if i + 1 < n else [END]  # keeps every node reachable
        extra = draw(st.lists(st.sampled_from(names + [END]), max_size=2, unique=True))
        ways = list(dict.fromkeys(chain + extra))
        node = {"prompt": draw(line.filter(str.strip)), "obligations": draw(st.lists(line, max_size=2)),
                "operations": draw(st.lists(st.sampled_from(OPS), max_size=3, unique=True))
                + draw(st.lists(st.builds(lambda s, t: {"op": "mcp.call", "server": s, "tool": t},
                                          st.sampled_from(["a", "b"]), st.sampled_from(["x", "y"])), max_size=1)),
                "next": ways, "max_attempts": draw(st.integers(1, 3)),
                "establishes": draw(st.lists(line, max_size=2)), "requires": draw(st.lists(line, max_size=1))}
        if len(ways) > 1:
            node["entities"] = list(ways)
        kind = draw(st.sampled_from(["none", "artifact", "check"]))
        if kind == "artifact":
            node["handoff"] = {"kind": "artifact", "path": "out/" + name + ".md", "non_empty": draw(st.booleans())}
        elif kind == "check":
            node["check"] = {"command": "true", "name": draw(st.sampled_from(["t", "lint"]))}
        nodes[name] = node
    doc = {"format": "metaharness.workflow/1", "id": draw(st.sampled_from(["w", "wf/ü"])),
           "version": draw(st.sampled_from(["1", "2.0"])), "start": names[0], "nodes": nodes}
    wf = shape(doc)
    assert problems(LoadedWorkflow(wf, "/nonexistent/wf.json", "0" * 64)) == []
    return wf


verdicts = st.lists(st.tuples(st.booleans(), st.integers(0, 3), line), min_size=1, max_size=25)


@settings(max_examples=examples(150), deadline=None)
@given(workflows(), verdicts, st.integers(1, 40), st.lists(line, max_size=2))
def test_minted_frames_verify_and_count_steps_and_attempts(wf, outcomes, first_index, task):
    prior = [frames.PriorLine(text=t, source="task") for t in task]
    walk = Walk(wf, Position(node=wf.start), first_index, prior)
    expected_index = first_index
    previous = None  # (node, attempt, passed, failure)
    for passed, pick, why in outcomes:
        frame = walk.enter()
        # it verifies: as the on-disk document, and as the frame of a frame.set
        assert frames.parse_frame_document(frames.document_bytes(frame)) == frame
        assert frames.frame_from_command(msgspec.to_builtins(frame)).digest == frame.digest
        assert frame.digest == frames.compute_digest(frame)
        # index and attempt follow the rules
        assert frame.step.index == expected_index and frame.step.workflow == wf.id
        assert frame.step.state == frame.node.id == walk.position.node
        if previous is not None and not previous[2]:
            assert frame.node.id == previous[0] and frame.step.attempt == previous[1] + 1
            assert frame.obligations[-1].text == f"attempt {previous[1]} failed: {previous[3]}"
        else:
            assert frame.step.attempt == 1
        node = wf.nodes[frame.node.id]
        assert frame.step.attempt <= node.max_attempts
        assert [o.text for o in frame.obligations[:len(node.obligations)]] == node.obligations
        assert frame.prior[:len(prior)] == prior
        assert all(any(r.text.startswith(f"{way}: ") for r in frame.reaching) or not frame.reaching
                   for way in node.ways_out)
        assert (frame.entities is not None) == (len(node.ways_out) > 1)
        choice = node.ways_out[pick % len(node.ways_out)] if node.routing else None
        previous = (frame.node.id, frame.step.attempt, passed, why)
        walk.judged(passed=passed, choice=choice, failure=why, failed_by="check t",
                    established=[frames.PriorLine(text=f"{frame.node.id} done", source="x")] if passed else [])
        expected_index += 1
        if walk.done:
            if not passed:
                assert frame.step.attempt == node.max_attempts and walk.ending is not None
            else:
                assert (choice or node.ways_out[0]) == END and walk.ending is None
            break
