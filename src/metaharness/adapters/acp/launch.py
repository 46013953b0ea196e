"""Hermetic launch pieces every ACP agent shares: scratch layout, the child's PATH, binary
resolution, its version, the argv wrapper and the process-group sweep.

Rules kept:
* the environment is built, never inherited (each vendor module adds its own keys);
* the binary is resolved on exactly the child's PATH;
* the scratch directory lies neither under /tmp nor inside the working directory, and dies
  with the run unless the operator chose its base (METAHARNESS_SCRATCH);
* the child gets PR_SET_PDEATHSIG=SIGKILL through setpriv when present, so it never
  outlives metaharness.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from metaharness.adapters.process import child_path, default_vendor_dir, private_scratch


class LaunchError(Exception):
    """The launch cannot be planned; the message is one sentence."""


@dataclass
class Scratch:
    root: Path

    home = property(lambda self: self.root / "home")
    tmp = property(lambda self: self.root / "tmp")
    config = property(lambda self: self.root / "home" / ".config")
    data = property(lambda self: self.root / "home" / ".local" / "share")
    cache = property(lambda self: self.root / "home" / ".cache")
    state = property(lambda self: self.root / "home" / ".local" / "state")
    transcript = property(lambda self: self.root / "transcript.jsonl")
    sent = property(lambda self: self.root / "sent.jsonl")
    stderr = property(lambda self: self.root / "stderr.log")


def scratch_base() -> Path:
    configured = os.environ.get("METAHARNESS_SCRATCH")
    if configured:
        return Path(configured)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "metaharness" / "scratch"


def make_scratch(kind: str, cwd: str) -> Scratch:
    """A fresh scratch home for one run: mkdtemp inside a base only this user can enter
    (ScratchRefused, by name, otherwise), never inside the working directory `cwd`."""
    root = Path(private_scratch(str(scratch_base()), f"{kind}-"))
    resolved = Path(cwd).resolve()
    if root.resolve() == resolved or resolved in root.resolve().parents:
        shutil.rmtree(root, ignore_errors=True)
        raise LaunchError(f"the scratch directory {root} would lie inside the working directory {cwd}")
    scratch = Scratch(root)
    for directory in (scratch.home, scratch.tmp, scratch.config, scratch.data, scratch.cache, scratch.state):
        directory.mkdir(parents=True, exist_ok=True)
    return scratch


def resolve_binary(name: str, path: str, package: str, pin: str) -> str:
    found = shutil.which(name, path=path)
    if found is None:
        raise LaunchError(f"{name} is not on the child PATH ({path}); install {package}@{pin} "
                          "(make vendor installs it into .vendor)")
    if shutil.which("node", path=path) is None:
        raise LaunchError(f"node is not on the child PATH ({path}); the {name} launcher needs it")
    return os.path.abspath(found)


def binary_version(binary: str, path: str) -> str | None:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60,
                             env={"PATH": path, "LANG": "C.UTF-8", "HOME": tempfile.gettempdir(),
                                  "NO_COLOR": "1", "TERM": "dumb"}).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for token in out.split():
        if token[:1].isdigit():
            return token
    return None


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
