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
    work = property(lambda self: self.root / "work")
    transcript = property(lambda self: self.root / "transcript.jsonl")
    sent = property(lambda self: self.root / "sent.jsonl")
    stderr = property(lambda self: self.root / "stderr.log")


def scratch_base() -> Path:
    configured = os.environ.get("METAHARNESS_SCRATCH")
    if configured:
        return Path(configured)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "metaharness" / "scratch"


def make_scratch(kind: str, cwd: str | None) -> Scratch:
    base = scratch_base()
    base.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix=f"{kind}-", dir=base))
    if cwd is not None:
        resolved = Path(cwd).resolve()
        if root.resolve() == resolved or resolved in root.resolve().parents:
            shutil.rmtree(root, ignore_errors=True)
            raise LaunchError(f"the scratch directory {root} would lie inside the working directory {cwd}")
    scratch = Scratch(root)
    for directory in (scratch.home, scratch.tmp, scratch.config, scratch.data, scratch.cache, scratch.state):
        directory.mkdir(parents=True, exist_ok=True)
    if cwd is None:
        scratch.work.mkdir()
    return scratch


def default_vendor_dir() -> str | None:
    configured = os.environ.get("METAHARNESS_VENDOR_DIR")
    if configured:
        return configured
    checkout = Path(__file__).resolve().parents[4] / ".vendor" / "node_modules" / ".bin"
    return str(checkout) if checkout.is_dir() else None


def child_path(vendor_dir: str | None) -> str:
    parts: list[str] = []
    if vendor_dir:
        parts.append(os.path.abspath(vendor_dir))
    node = shutil.which("node")
    if node:
        parts += [os.path.dirname(os.path.realpath(node)), os.path.dirname(node)]
    parts += ["/usr/local/bin", "/usr/bin", "/bin"]
    return ":".join(dict.fromkeys(parts))


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


def wrap_argv(argv: list[str]) -> list[str]:
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--", *argv] if setpriv else argv


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
