"""The test tiers, in one place: which tests are `e2e`, `browser` or `slow` is decided here at
collection, from the test's path, its name and the fixtures it uses — never by a mark in the test
file, so a new test file cannot forget one (tests/test_tiers.py holds this to it).

- `e2e`: drives a real vendor binary from .vendor/node_modules (`make vendor`, npm). Every file
  named test_e2e*.py is one, and so are the few tests listed below that live beside unit tests.
- `browser`: drives Debian's chromium through Playwright (apt); any test using the `chromium`
  fixture below is one.
- `slow`: a Ray cluster or the long bash-oracle fuzzing session: minutes of CPU, no npm or apt;
  and a real Arize Phoenix server (its own venv, `make phoenix`): any test using the `phoenix`
  fixture below is one.
- `waits`: an end-to-end case (so `e2e` too) that spends a minute or more asleep in a vendor's
  own retry back-off, using next to no CPU: `make test` runs these beside the CPU-bound tier
  instead of after it.

`make check` runs everything else in parallel; `make test` (CI) runs all of it.
"""

from __future__ import annotations

import fnmatch
import itertools
import json
import os
import re
import signal
from pathlib import Path

import pytest
from hypothesis import settings

from examples import DEFAULT, examples

# A property test that names no number draws hypothesis's default, scaled by the tier
# (tests/examples.py: a quarter under `make check`).
settings.register_profile("tier", max_examples=examples(DEFAULT))
settings.load_profile("tier")

# A suite started in the background of a non-interactive shell (`make test &`, nohup) inherits
# SIGINT ignored, and so would every process it starts (an ignored signal stays ignored across
# exec): a metaharness signalled before its handlers are in, or a batch, would then go on as if
# nothing came. The tests that send SIGINT are about a user's Ctrl-C, so the suite takes the
# default back (a Python handler is reset to the default in a child).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

ROOT = Path(__file__).resolve().parent.parent

# (marker, node id patterns, relative to the repository). A pattern ending in a file name covers
# every test of that file; `[claude*` covers the parametrized cases for that harness.
TIERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("e2e", (
        "tests/*/test_e2e*.py",
        "tests/codex/test_three_harnesses.py",
        "tests/acp/test_five_harnesses.py",
        "tests/loopback/test_real_clients.py",
        "tests/acp/test_conformance.py::test_doctor_on_the_pinned_binary*",
        "tests/claude/test_doctor_cli.py::test_doctor_claude_leaves_no_scratch_directory",
        # a workflow step or resume on Claude Code or Codex runs the pinned binary
        "tests/workflow/test_steps.py::*[[]claude*", "tests/workflow/test_steps.py::*[[]codex*",
        "tests/workflow/test_resume.py::*[[]claude*", "tests/workflow/test_resume.py::*[[]codex*",
        # `batch check` looks the pinned claude and codex up and asks their --version
        "tests/batch/test_cli.py::test_check_accepts_a_toml_plan_and_counts_its_cells",
        "tests/batch/test_cli.py::test_the_bundled_example_plan_is_valid_and_finds_the_vendor_clis_wherever_it_is_copied",
    )),
    ("slow", (
        "tests/batch/test_ray.py",  # a two-node Ray cluster per module
        # the bash-oracle fuzzer: OH_FUZZ_COUNT (3000) commands each run by bash; its count check
        # reads what the fuzzing test ran, so the two go together
        "tests/permissions/test_fuzz_bash_oracle.py::test_no_bypass_against_real_bash",
        "tests/permissions/test_fuzz_bash_oracle.py::test_the_fuzzer_ran_its_count",
        # its family generator (the other shells, OH_FUZZ_FAMILY_COUNT) and the benign generator
        # (OH_FUZZ_BENIGN commands that must stay allowed), with their count and rate checks
        "tests/permissions/test_fuzz_bash_oracle.py::test_no_bypass_across_the_family",
        "tests/permissions/test_fuzz_bash_oracle.py::test_benign_commands_stay_allowed",
        "tests/permissions/test_fuzz_bash_oracle.py::test_the_family_fuzzer_ran_its_count",
        # every way a model request fails, on oharness: the SDKs' own retry back-off (minutes)
        "tests/run/test_model_failures.py",
        # a workflow stopped at every boundary and mid-step, then resumed
        "tests/workflow/test_resume_property.py",
        # a real `inspect eval` per test (Inspect, its bridge and oharness: 10-35 s each)
        "tests/inspect/test_inspect_oharness.py",
    )),
    ("waits", (
        # a failed request the vendor retries for a minute or more before it gives up (measured
        # 66-95 s each, a few seconds of CPU): an unresolvable host, a refused connection, a held
        # request, a 429 Qwen Code asks again 27 times
        *(f"tests/run/test_e2e_model_failures.py::test_a_failed_request_is_an_event[[]{case}]"
          for case in ("qwen-dns", "qwen-429", "gemini-dns", "gemini-refused", "gemini-timeout",
                       "opencode-refused", "opencode-dns")),
    )),
)
# Fixtures that put a test in a tier wherever it is.
FIXTURE_TIERS = {"chromium": "browser", "phoenix": "slow"}


def tiers_of(nodeid: str, fixtures: tuple[str, ...] = ()) -> set[str]:
    """The tier markers a test gets: one rule, also read by tests/test_tiers.py."""
    path = nodeid.split("::", 1)[0]
    found = {tier for tier, patterns in TIERS
             if any(fnmatch.fnmatchcase(path if "::" not in p else nodeid, p) for p in patterns)}
    return found | {FIXTURE_TIERS[name] for name in fixtures if name in FIXTURE_TIERS}


def pytest_ignore_collect(collection_path, config):
    """A test file whose path alone puts it in a tier the `-m` expression leaves out is not imported
    at all: every worker collects every file, and some import seconds of libraries (Inspect, Ray,
    the vendor SDKs) for tests that will not run. Left out means out whatever marks its tests add."""
    expression = config.option.markexpr
    if not expression or collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    marks = tiers_of(os.path.relpath(str(collection_path), ROOT))
    if not marks:
        return None
    named = set(re.findall(r"[A-Za-z_]\w*", expression)) - {"and", "or", "not"}
    compiled = _compiled(expression)
    for extra in itertools.chain.from_iterable(itertools.combinations(sorted(named), n) for n in range(len(named) + 1)):
        if compiled.evaluate(lambda name, *_, **__: name in marks or name in extra):
            return None
    return True


def _compiled(expression: str):
    from _pytest.mark.expression import Expression  # pytest's own reading of `-m`

    return Expression.compile(expression)


# Each test file's seconds in a recent run (`make durations` writes them). The files go to the
# workers longest first (the Makefile's `--dist loadfile --no-loadscope-reorder` keeps this order),
# so a run does not end on one worker busy with a long file started last; a file not measured yet
# goes first of all. Only the order comes from here, never which tests run.
DURATIONS: dict[str, float] = json.loads((ROOT / "tests" / "durations.json").read_text())


def pytest_collection_modifyitems(config, items):
    for item in items:
        nodeid = os.path.relpath(str(item.path), ROOT) + item.nodeid[len(item.nodeid.split("::", 1)[0]):]
        for tier in sorted(tiers_of(nodeid, tuple(getattr(item, "fixturenames", ())))):
            item.add_marker(tier)
    items.sort(key=lambda item: -DURATIONS.get(os.path.relpath(str(item.path), ROOT), float("inf")))


# --- the browser ---------------------------------------------------------------------------------

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


@pytest.fixture(scope="module")
def chromium():
    """Debian's chromium under Playwright (no browser download). Under the test command
    (METAHARNESS_REQUIRE_VENDOR=1) a missing chromium fails; elsewhere the test is skipped."""
    if not CHROMIUM.exists():
        if os.environ.get("METAHARNESS_REQUIRE_VENDOR") == "1":
            pytest.fail("Debian's chromium is not installed at /usr/bin/chromium; `make test` installs it")
        pytest.skip("Debian's chromium is not installed at /usr/bin/chromium (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


# --- Arize Phoenix -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    """A real Arize Phoenix server on free 127.0.0.1 ports, from .venv-phoenix (tests/phoenix_server.py),
    started once per module and removed with its files after it. Under the test command
    (METAHARNESS_REQUIRE_VENDOR=1) a missing venv fails; elsewhere the test is skipped."""
    import phoenix_server

    if not phoenix_server.EXECUTABLE.exists():
        if os.environ.get("METAHARNESS_REQUIRE_VENDOR") == "1":
            pytest.fail(f"Arize Phoenix is not installed at {phoenix_server.EXECUTABLE}; `make test` installs it")
        pytest.skip(f"Arize Phoenix is not installed at {phoenix_server.EXECUTABLE} (make phoenix)")
    with phoenix_server.serve(tmp_path_factory.mktemp("phoenix")) as server:
        yield server
