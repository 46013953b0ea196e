"""A decision made by the compiled engine is the decision made in pure Python (issue #24, item 4).

Two decision workers (decide_worker.py), one on the pure source (src/) and one on the compiled
tree `make compiled` builds (build/compiled: the same package, its hot modules C extensions made
by mypyc, setup.py), decide the same calls in the same project; every field of the two verdicts
must be equal, each decision a first sight. The calls: every command of the permission corpora
(the bypass corpus, the spec cases, the deny classes, the benign variants, the fuzzer's recorded
bypasses) and commands Hypothesis generates, in manual and auto mode.

Without a compiled tree, or with one built from other source than src/ holds now (a stale one), the
comparison is skipped, unless METAHARNESS_REQUIRE_COMPILED is set (`make test` sets it and builds
the tree first): `make check` needs no C compiler.
`METAHARNESS_EXPECT_BUILD=compiled|pure` makes this module check which build the test process
itself imports (`make test` runs the permission tests once more on the compiled tree).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from examples import examples

import test_benign_variants
import test_bypass_corpus
import test_deny_classes
import test_properties
import test_spec_cases
from metaharness.permissions.build import engine_build
from permissions_rules import R

REPO = pathlib.Path(__file__).resolve().parents[2]
PURE_TREE = REPO / "src"
COMPILED_TREE = REPO / "build" / "compiled"
WORKER = pathlib.Path(__file__).with_name("decide_worker.py")
MODES = ("manual", "auto")
RULES = {
    "allow": R["allow"] + ["Bash(echo *)", "Write(/src/**)", "Bash(npm test)", "Bash(ls *)", "Read(src/**)"],
    "ask": R["ask"] + ["Bash(docker *)"],
    "deny": R["deny"] + ["Read(.env)", "Read(~/.ssh/**)", "Bash(curl *)"],
}


def _bash(command: str) -> str:
    return f"Bash({command})"


def corpus_calls() -> list[str]:
    """Every call of the permission corpora, in rule notation, once."""
    calls = [call for _, call in test_bypass_corpus.CORPUS]
    calls += [case[1] for case in test_spec_cases.R_CASES] + [call for _, call in test_spec_cases.BYPASS_DENY]
    calls += [_bash(command) for _, command in test_deny_classes.DENIED]
    calls += [_bash(command) for command in test_deny_classes.CLASS_F + test_deny_classes.CLASS_G]
    calls += [_bash(command) for command in test_benign_variants.CASES + test_benign_variants.ROUTINE]
    calls += [_bash(command) for command in test_bypass_corpus.EXOTIC + test_properties.SIMPLE]
    calls += list(test_properties.OTHER)
    with open(REPO / "tests" / "permissions" / "data" / "fuzz_bypasses.jsonl") as recorded:
        calls += [_bash(json.loads(line)["command"]) for line in recorded if line.strip()]
    return list(dict.fromkeys(calls))


class Worker:
    def __init__(self, tree: pathlib.Path, root: str, home: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        read_end, write_end = os.pipe()
        self.process = subprocess.Popen([sys.executable, str(WORKER), root, home, str(read_end)], env=env,
                                        text=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        pass_fds=(read_end,))
        os.close(read_end)
        self.requests = os.fdopen(write_end, "w")
        self.build = json.loads(self._line())["build"]

    def _line(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, f"the decision worker ended (exit {self.process.poll()})"
        return line

    def decide(self, call: str, mode: str) -> dict:
        self.requests.write(json.dumps({"call": call, "mode": mode}) + "\n")
        self.requests.flush()
        return json.loads(self._line())

    def close(self) -> None:
        self.requests.close()
        self.process.wait(timeout=30)


def _why_not_comparable() -> str | None:
    """Why the compiled tree cannot stand for the source now, or None."""
    if not list(COMPILED_TREE.glob("metaharness/permissions/shell/walk.*.so")):
        return f"no compiled engine in {COMPILED_TREE} (make compiled; needs a C compiler)"
    for source in PURE_TREE.rglob("*.py"):
        built = COMPILED_TREE / source.relative_to(PURE_TREE)
        if not built.is_file() or built.read_bytes() != source.read_bytes():
            return f"the compiled engine in {COMPILED_TREE} was built from other source ({built.name}): make compiled"
    return None


@pytest.fixture(scope="module")
def builds(world_session):
    why = _why_not_comparable()
    if why is not None:
        if os.environ.get("METAHARNESS_REQUIRE_COMPILED"):
            pytest.fail(why)
        pytest.skip(why)
    world_session.setup(project=RULES)
    pure = Worker(PURE_TREE, world_session.root, world_session.home)
    compiled = Worker(COMPILED_TREE, world_session.root, world_session.home)
    try:
        assert (pure.build, compiled.build) == ("pure", "compiled")
        yield world_session, pure, compiled
    finally:
        pure.close()
        compiled.close()


def _same(builds, call: str) -> None:
    world, pure, compiled = builds
    call = world.sub(call)
    for mode in MODES:
        assert compiled.decide(call, mode) == pure.decide(call, mode), (call, mode)


def test_the_build_under_test_is_the_one_asked_for():
    expected = os.environ.get("METAHARNESS_EXPECT_BUILD")
    assert engine_build() == (expected or engine_build())
    assert engine_build() in ("compiled", "pure")


def test_the_corpora_are_decided_alike(builds):
    calls = corpus_calls()
    assert len(calls) > 1000, len(calls)
    for call in calls:
        _same(builds, call)


# Generated commands: the property tests' command pool composed with operators, and short strings
# of the characters the shell analysis cares about.
SHELL_TEXT = st.text(alphabet="abcrmls -./~*$'\"`\\;|&<>(){}[]=#!\n\t\x00é", max_size=40)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=list(HealthCheck))
@given(command=st.one_of(test_properties.commands, SHELL_TEXT,
                         st.tuples(test_properties.commands, SHELL_TEXT).map(" ".join)))
def test_generated_commands_are_decided_alike(builds, command):
    _same(builds, _bash(command))
