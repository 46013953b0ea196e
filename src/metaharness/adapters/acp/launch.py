"""Hermetic launch pieces every ACP agent shares: the scratch layout and its making.

The scratch base, the child's PATH, binary resolution and version, and the process-group kill are
the shared kit's (adapters/process/), re-exported here for the ACP core and doctor.

Rules kept:
* the environment is built, never inherited (each vendor module adds its own keys);
* the binary is resolved on exactly the child's PATH;
* the scratch directory lies neither under /tmp nor inside the working directory, and dies
  with the run unless the operator chose its base (METAHARNESS_SCRATCH_DIR);
* the child gets PR_SET_PDEATHSIG=SIGKILL (the kit's spawn), so it never outlives metaharness.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# The kit's, reached by the ACP core and doctor through this module.
from metaharness.adapters.process import LaunchError, binary_version, child_path, default_vendor_dir, kill_group  # noqa: F401
from metaharness.adapters.process import new_scratch, passed_through, resolve_binary as resolve_on_path  # noqa: F401


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


def make_scratch(kind: str, cwd: str) -> Scratch:
    """A fresh scratch home for one run in the kit's scratch base (ScratchRefused, by name, for a
    base that is not private to this user), never inside the working directory `cwd`."""
    scratch = Scratch(Path(new_scratch(f"{kind}-", cwd=cwd)))
    for directory in (scratch.home, scratch.tmp, scratch.config, scratch.data, scratch.cache, scratch.state):
        directory.mkdir(parents=True, exist_ok=True)
    return scratch


def resolve_binary(name: str, path: str, package: str, pin: str) -> str:
    """The agent's launcher on the child's PATH (LaunchError, naming the pin, when it or node is absent)."""
    return resolve_on_path(name, path, package=package, pin=pin)
