"""The complete Python programs on the site run, from the clone, and print what the page says."""

from __future__ import annotations

import re
import subprocess
import sys

from .support import DOCS, ROOT


def _programs(page: str) -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(), flags=re.S)
    return [block for block in blocks if "asyncio.run(" in block]


def _run(program: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def test_the_python_guide_program_decides_as_it_says():
    (program,) = _programs("guides/python.md")
    proc = _run(program)
    assert proc.returncode == 0, proc.stderr
    assert "allowed 1 denied 1" in proc.stdout and "exit code 0" in proc.stdout


def test_the_getting_started_program_runs():
    (program,) = _programs("getting-started.md")
    proc = _run(program)
    assert proc.returncode == 0, proc.stderr
    assert "exit code 0" in proc.stdout
