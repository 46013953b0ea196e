"""The workflow page's Python example and its command lines run as written."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

from workflow_support import BUGFIX, REPO, cli


def test_docs_python_example_runs(tmp_path):
    page = (REPO / "docs" / "workflows.md").read_text()
    [block] = re.findall(r"```python\n(.*?)```", page, re.S)
    shutil.copytree(BUGFIX / "workspace", tmp_path / "work")
    code = block.replace("/tmp/bugfix-work", str(tmp_path / "work")).replace("/tmp/run", str(tmp_path / "run"))
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["1 reproduce 1 passed", "2 fix 1 passed", "3 review 1 passed",
                                        "4 fix 1 passed", "5 review 1 passed", "completed 0"]


def test_docs_command_lines_run(tmp_path):
    page = (REPO / "docs" / "workflows.md").read_text()
    block = re.findall(r"```bash\n(.*?)```", page, re.S)[0]
    script = block.replace("/tmp/bugfix-work", str(tmp_path / "work")).replace("/tmp/bugfix-run", str(tmp_path / "run"))
    script = script.replace("metaharness ", f"{REPO / '.venv' / 'bin' / 'metaharness'} ")
    proc = subprocess.run(["bash", "-e", "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "workflow bugfix (1) on oharness — completed" in proc.stdout
    assert cli(["show", str(tmp_path / "run")], cwd=tmp_path).returncode == 0
