"""Scratch roots the way security tools make them (issue 19): mkdtemp inside a base this
user owns, mode 0700, never through a symlink; a hostile pre-made base is refused by name,
by every adapter, before anything is spawned."""

from __future__ import annotations

import asyncio
import json
import os
import stat

import pytest

from metaharness.adapters.process import ScratchRefused, private_base, private_scratch

NOBODY = 65534


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_a_new_base_is_made_private_and_scratch_is_mkdtemp(tmp_path):
    base = tmp_path / "base"
    root = private_scratch(str(base), "x-")
    assert mode(base) == 0o700 and mode(root) == 0o700
    assert os.path.dirname(root) == str(base) and os.path.basename(root).startswith("x-")
    assert private_scratch(str(base), "x-") != root


def test_an_own_base_readable_by_others_is_tightened(tmp_path):
    base = tmp_path / "base"
    base.mkdir(mode=0o755)
    os.chmod(base, 0o755)
    private_base(str(base))
    assert mode(base) == 0o700


@pytest.mark.skipif(os.geteuid() != 0, reason="making a directory another user owns needs root")
def test_a_base_premade_by_another_user_is_refused_by_name(tmp_path):
    base = tmp_path / "hostile"
    base.mkdir()
    os.chmod(base, 0o777)
    os.chown(base, NOBODY, NOBODY)
    with pytest.raises(ScratchRefused, match=f"{base} belongs to uid {NOBODY}"):
        private_scratch(str(base), "x-")
    assert os.listdir(base) == []


def test_a_base_writable_by_others_is_refused_by_name(tmp_path):
    base = tmp_path / "loose"
    base.mkdir()
    os.chmod(base, 0o777)
    with pytest.raises(ScratchRefused, match=r"writable by others \(mode 777\)"):
        private_scratch(str(base), "x-")
    assert os.listdir(base) == []


def test_a_symlinked_base_is_never_followed(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(ScratchRefused, match="symlink is never followed"):
        private_scratch(str(link), "x-")
    assert os.listdir(target) == []


def test_a_file_as_base_is_refused(tmp_path):
    base = tmp_path / "file"
    base.write_text("")
    with pytest.raises(ScratchRefused):
        private_base(str(base))


def test_claude_and_codex_scratch_refuse_a_hostile_base(tmp_path, monkeypatch):
    from metaharness.adapters.claude import launch as claude_launch
    from metaharness.adapters.codex import launch as codex_launch

    base = tmp_path / "loose"
    base.mkdir()
    os.chmod(base, 0o777)
    with pytest.raises(ScratchRefused, match="writable by others"):
        claude_launch.make_scratch(str(base))
    monkeypatch.setenv("METAHARNESS_SCRATCH", str(base))
    with pytest.raises(codex_launch.LaunchError, match="writable by others"):
        codex_launch.make_scratch(None)
    assert os.listdir(base) == []
    good = tmp_path / "good"
    scratch = claude_launch.make_scratch(str(good))
    assert mode(good) == 0o700 and mode(scratch.root) == 0o700


async def test_an_oharness_run_with_a_hostile_base_is_refused_before_spawning(tmp_path, monkeypatch):
    from metaharness.adapters.oharness import adapter as oharness
    from metaharness.run.loop import Run
    from metaharness.run.spec import RunSpec

    base = tmp_path / "loose"
    base.mkdir()
    os.chmod(base, 0o777)
    monkeypatch.setattr(oharness, "session_base", lambda: str(base))
    lines, stderr = [], []
    run = Run(RunSpec(kind="oharness", prompt="go", model="scripted:default", cwd=str(tmp_path)), lines.append,
              stderr=stderr.append)
    assert await asyncio.wait_for(run.execute(), 30) == 2
    events = [json.loads(line) for line in lines]
    assert [e["event"] for e in events] == ["stream.closed"]
    assert "ScratchRefused" in stderr[0] and str(base) in stderr[0]
    assert os.listdir(base) == []
