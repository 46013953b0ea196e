"""The test suite keeps no scratch for passing tests: a passing test's tmp_path is removed."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_a_passing_tests_tmp_path_is_removed_a_failing_ones_kept(tmp_path):
    tests = tmp_path / "probe"
    tests.mkdir()
    (tests / "test_probe.py").write_text(
        "def test_pass(tmp_path):\n    (tmp_path / 'home').mkdir()\n    (tmp_path / 'home' / 'f').write_text('x')\n\n"
        "def test_fail(tmp_path):\n    (tmp_path / 'kept').write_text('x')\n    assert False\n")
    temp = tmp_path / "temp"
    temp.mkdir()
    env = dict(os.environ, TMPDIR=str(temp), PYTEST_ADDOPTS="")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "-c", os.path.join(ROOT, "pyproject.toml"), "--rootdir", str(tests), str(tests)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert "1 failed, 1 passed" in proc.stdout, proc.stdout
    left = [os.path.relpath(os.path.join(d, f), temp) for d, _, files in os.walk(temp) for f in files]
    assert any(path.endswith("kept") for path in left), left
    assert not any(path.endswith(os.path.join("home", "f")) for path in left), left
