"""`batch run --atif` writes a trajectory.json beside every cell's events.jsonl, each valid
ATIF for Harbor and true to its stream; `batch report --html` links each beside its run page."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

from .conftest import EXAMPLES, METAHARNESS, check_round_trip, env


def test_a_batch_writes_and_links_a_trajectory_per_cell(tmp_path):
    for name in ("same-task.scenario.json", "same-task.frame.json"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    plan = tmp_path / "plan.toml"
    plan.write_text('format = "metaharness.batch/1"\nrepeats = 2\n\n[[tasks]]\nid = "same-task"\n'
                    'prompt = "do the task"\nscript = "same-task.scenario.json"\nframe = "same-task.frame.json"\n\n'
                    '[[harnesses]]\nkind = "oharness"\n')
    out = tmp_path / "out"
    done = subprocess.run([*METAHARNESS, "batch", "run", str(plan), "--out", str(out), "--atif", "--jobs", "1"],
                          capture_output=True, text=True, timeout=300, env=env(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    cells = sorted(p.parent for p in out.rglob("events.jsonl"))
    assert len(cells) == 2
    for cell in cells:
        assert (cell / "trajectory.json").is_file()
        doc = json.loads((cell / "trajectory.json").read_text())
        assert doc == check_round_trip(cell / "events.jsonl")
    page = tmp_path / "report.html"
    done = subprocess.run([*METAHARNESS, "batch", "report", str(out), "--html", str(page)],
                          capture_output=True, text=True, timeout=120, env=env(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    links = re.findall(r'href="([^"]+\.trajectory\.json)"', page.read_text())
    assert len(links) == 2
    for link in links:
        assert json.loads((tmp_path / link).read_text())["schema_version"] == "ATIF-v1.8"


def test_without_the_flag_no_trajectory_is_written(tmp_path):
    shutil.copy(EXAMPLES / "same-task.scenario.json", tmp_path / "s.json")
    plan = tmp_path / "plan.toml"
    plan.write_text('format = "metaharness.batch/1"\n\n[[tasks]]\nid = "t"\nprompt = "go"\nscript = "s.json"\n\n'
                    '[[harnesses]]\nkind = "oharness"\n')
    done = subprocess.run([*METAHARNESS, "batch", "run", str(plan), "--out", str(tmp_path / "out"), "--jobs", "1"],
                          capture_output=True, text=True, timeout=300, env=env(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert list((tmp_path / "out").rglob("events.jsonl")) and not list((tmp_path / "out").rglob("trajectory.json"))
