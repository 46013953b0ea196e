"""What a start imports: `import metaharness.protocol`, and `metaharness run oharness` up to its
first event, pull in none of the heavy libraries only other paths need (a model SDK, an HTTP
client or server, a terminal renderer, a template engine, the shell parser). Counted from
`python -X importtime`, never timed: the cost of a start is a benchmark's figure
(bench/bench_wire.py (d), bench/bench_run.py), the modules it loads are this test's verdict."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("anthropic", "openai", "httpx", "aiohttp", "rich", "pygments", "jinja2", "tree_sitter",
         "google", "opentelemetry", "ray")


def imported(argv: list[str], **kwargs) -> set[str]:
    """Top-level names of the modules a `python -X importtime ...` process imported."""
    proc = subprocess.run([sys.executable, "-X", "importtime", *argv], capture_output=True, text=True,
                          timeout=120, **kwargs)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {line.rsplit("|", 1)[1].strip().split(".")[0] for line in proc.stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


def test_importing_the_protocol_loads_no_heavy_library_nor_json():
    names = imported(["-c", "import metaharness.protocol"])
    assert "msgspec" in names  # the reading works
    assert not names & set(HEAVY), sorted(names & set(HEAVY))
    assert "json" not in names  # only the slow paths (duplicate keys, a failed request's body) need it


@pytest.mark.parametrize("program", ["metaharness", "oharness"])
def test_a_scripted_oharness_run_loads_no_heavy_library(tmp_path, program):
    script = tmp_path / "one.json"
    script.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": [{"text": "hi"}]}))
    if program == "metaharness":  # the run's own process (oharness is its child)
        argv = ["-m", "metaharness", "run", "oharness", "--script", str(script), "-p", "x", "--cwd", str(tmp_path)]
        names = imported(argv, stdin=subprocess.DEVNULL)
    else:  # the child as the run starts it, with the scripted model
        argv = ["-m", "oharness", "--stdio", "--model", "scripted:default", "--script", str(script),
                "--cwd", str(tmp_path)]
        names = imported(argv, input="")
    assert "asyncio" in names  # it ran
    assert not names & set(HEAVY), sorted(names & set(HEAVY))
