"""Scratch roots the way security tools make them (issue 19): mkdtemp inside a base this
user owns, mode 0700, never through a symlink; a hostile pre-made base is refused by name,
by every adapter, before anything is spawned."""

from __future__ import annotations

import asyncio
import json
import os
import stat

import pytest

from metaharness.adapters import process
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
    monkeypatch.setenv("METAHARNESS_SCRATCH_DIR", str(base))
    with pytest.raises(codex_launch.LaunchError, match="writable by others"):
        codex_launch.make_scratch(None)
    assert os.listdir(base) == []
    good = tmp_path / "good"
    scratch = claude_launch.make_scratch(str(good))
    assert mode(good) == 0o700 and mode(scratch.root) == 0o700
    process.remove_scratch(scratch.root, keep_chosen=False)


async def test_an_oharness_run_with_a_hostile_base_is_refused_before_spawning(tmp_path, monkeypatch):
    from metaharness.run.loop import Run
    from metaharness.run.spec import RunSpec

    base = tmp_path / "loose"
    base.mkdir()
    os.chmod(base, 0o777)
    monkeypatch.setenv("METAHARNESS_SCRATCH_DIR", str(base))
    lines, stderr = [], []
    run = Run(RunSpec(kind="oharness", prompt="go", model="scripted:default", cwd=str(tmp_path)), lines.append,
              stderr=stderr.append)
    assert await asyncio.wait_for(run.execute(), 30) == 2
    events = [json.loads(line) for line in lines]
    assert [e["event"] for e in events] == ["stream.closed"]
    assert "ScratchRefused" in stderr[0] and str(base) in stderr[0]
    assert os.listdir(base) == []


# --- one base, one variable, one removal, for every adapter ----------------------------------


def test_one_base_for_every_adapter(tmp_path, monkeypatch):
    from metaharness.adapters.acp import launch as acp_launch
    from metaharness.adapters.claude import launch as claude_launch
    from metaharness.adapters.codex import launch as codex_launch

    monkeypatch.delenv("METAHARNESS_SCRATCH_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    base = tmp_path / "cache" / "metaharness" / "scratch"
    assert process.scratch_base() == str(base)
    work = tmp_path / "work"
    work.mkdir()
    roots = [claude_launch.make_scratch().root, str(codex_launch.make_scratch(str(work)).root),
             str(acp_launch.make_scratch("opencode", str(work)).root), process.new_scratch("oharness-session-")]
    assert {os.path.dirname(root) for root in roots} == {str(base)}
    assert all(mode(root) == 0o700 for root in roots) and mode(base) == 0o700
    for root in roots:
        process.remove_scratch(root)
    chosen = tmp_path / "chosen"
    monkeypatch.setenv("METAHARNESS_SCRATCH_DIR", str(chosen))
    assert process.scratch_base() == str(chosen)
    assert os.path.dirname(codex_launch.make_scratch(None).root) == str(chosen)


def test_a_scratch_root_inside_the_working_directory_is_refused_and_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("METAHARNESS_SCRATCH_DIR", str(tmp_path / "work" / "base"))
    with pytest.raises(process.ScratchInsideCwd, match="would lie inside the working directory"):
        process.new_scratch("x-", cwd=str(tmp_path / "work"))
    assert os.listdir(tmp_path / "work" / "base") == []


def test_scratch_dies_with_the_run_unless_the_operator_chose_the_base(tmp_path, monkeypatch):
    monkeypatch.delenv("METAHARNESS_SCRATCH_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = process.new_scratch("x-")
    process.remove_scratch(root)
    assert not os.path.exists(root)
    monkeypatch.setenv("METAHARNESS_SCRATCH_DIR", str(tmp_path / "chosen"))
    kept = process.new_scratch("x-")
    process.remove_scratch(kept)
    assert os.path.isdir(kept)  # kept for inspection
    process.remove_scratch(kept, keep_chosen=False)  # a check that keeps nothing
    assert not os.path.exists(kept)
    monkeypatch.setenv("METAHARNESS_SCRATCH_DIR", "")  # empty: not chosen
    assert not process.base_chosen()


def test_every_adapter_removes_its_scratch_through_the_one_function():
    """No adapter carries its own removal rule: cleanup is the one child lifecycle's (the run calls
    `adapter.child.cleanup()`), which calls `remove_scratch`."""
    import inspect

    from metaharness.adapters import adapter_class
    from metaharness.protocol.harnesses import KINDS

    for kind in KINDS:
        assert not hasattr(adapter_class(kind), "cleanup"), kind
    source = inspect.getsource(process.Child.cleanup)
    assert "remove_scratch(" in source and "rmtree" not in source

# --- the child's runtime directory: where its sockets go ---------------------------------------

def _bind_where_a_vendor_would(runtime) -> str:
    """Bind a socket at the longest name a vendor gives its inbox below XDG_RUNTIME_DIR (Qwen
    Code's `qwen-socks/<pid>-<8 hex>.sock`, the largest pid there can be): it must fit."""
    import socket

    folder = runtime / "qwen-socks"
    folder.mkdir(mode=0o700)
    path = str(folder / "4194304-0123abcd.sock")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(path)  # OSError "AF_UNIX path too long" when it does not fit
    return path


@pytest.fixture
def short_dir():
    """A directory with a short path (pytest's own are too deep for a socket below a root)."""
    import shutil
    import tempfile

    path = tempfile.mkdtemp(prefix="rt-", dir="/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_shallow_root_keeps_the_runtime_directory_inside_it(short_dir, monkeypatch):
    monkeypatch.setenv("METAHARNESS_SCRATCH_DIR", os.path.join(short_dir, "b"))
    scratch = process.make_scratch("k", runtime=True)
    assert scratch.runtime == scratch.root / "run" and not (scratch.root / "run").is_symlink()
    assert mode(scratch.runtime) == 0o700
    _bind_where_a_vendor_would(scratch.runtime)
    process.remove_scratch(scratch.root, keep_chosen=False)
    assert not scratch.root.exists()


def test_a_deep_root_gets_a_private_short_runtime_directory_removed_with_it(tmp_path, short_dir, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", short_dir)  # stands for the user's own /run/user/<uid>
    monkeypatch.setenv("METAHARNESS_SCRATCH_DIR", str(tmp_path / "scratch"))  # chosen: the root is kept
    scratch = process.make_scratch("k", runtime=True)
    runtime = scratch.runtime
    assert (scratch.root / "run").is_symlink() and str(runtime.parent) == short_dir
    assert runtime.name.startswith("metaharness-run-") and mode(runtime) == 0o700
    socket_path = _bind_where_a_vendor_would(runtime)
    with pytest.raises(OSError):  # what the vendor met below the root itself: too long
        _bind_where_a_vendor_would(scratch.tmp)
    process.remove_scratch(scratch.root)
    assert scratch.root.is_dir() and not (scratch.root / "run").exists()  # the root kept for inspection
    assert not os.path.exists(socket_path) and os.listdir(short_dir) == []  # its sockets went, wherever they were


def test_claude_and_the_acp_agents_are_given_the_runtime_directory(tmp_path, monkeypatch):
    from metaharness.adapters.acp import launch as acp_launch
    from metaharness.adapters.claude import launch as claude_launch

    monkeypatch.setenv("METAHARNESS_SCRATCH_DIR", str(tmp_path / "b"))
    claude = claude_launch.make_scratch()
    env = claude_launch.build_env(claude, "/usr/bin", base_url=None, api_key="k")
    assert env["XDG_RUNTIME_DIR"] == str(claude.runtime) and claude.runtime.is_dir()
    agent = acp_launch.make_scratch("qwen", str(tmp_path / "work"))
    assert acp_launch.child_env(agent, "/usr/bin")["XDG_RUNTIME_DIR"] == str(agent.runtime)
    assert agent.runtime.is_dir()
    for scratch in (claude, agent):
        process.remove_scratch(scratch.root, keep_chosen=False)
        assert not scratch.runtime.exists()
