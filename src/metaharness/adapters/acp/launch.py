"""Hermetic launch pieces every ACP agent shares: the scratch layout, its making, the base
environment and the attestation of what a launch imposed.

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

# The kit's, reached by the ACP core and doctor through this module.
from metaharness.adapters.process import LaunchError, binary_version, child_path, default_vendor_dir, kill_group  # noqa: F401
from metaharness.adapters.process import Scratch, passed_through, resolve_binary as resolve_on_path  # noqa: F401
from metaharness.adapters.process import make_scratch as new_scratch_root
from metaharness.adapters.vendor import pin_row
from metaharness.protocol.values import HermeticAttestation, ImposedRow


# The agent's XDG directories, below the scratch root (its HOME is `home`).
XDG_DIRS = {"XDG_CONFIG_HOME": "home/.config", "XDG_DATA_HOME": "home/.local/share",
            "XDG_CACHE_HOME": "home/.cache", "XDG_STATE_HOME": "home/.local/state"}
CONFIG = XDG_DIRS["XDG_CONFIG_HOME"]


def make_scratch(kind: str, cwd: str) -> Scratch:
    """A fresh scratch home for one run in the kit's scratch base (ScratchRefused, by name, for a
    base that is not private to this user), never inside the working directory `cwd`."""
    return new_scratch_root(kind, cwd=cwd, dirs=tuple(XDG_DIRS.values()), runtime=True)


def child_env(scratch: Scratch, path: str) -> dict[str, str]:
    """The environment every ACP agent starts from (each vendor adds its pinning keys)."""
    return {"PATH": path, "HOME": str(scratch.home), "TMPDIR": str(scratch.tmp), "LANG": "C.UTF-8",
            "NO_COLOR": "1", "TERM": "dumb", "XDG_RUNTIME_DIR": str(scratch.runtime),
            **{name: str(scratch / below) for name, below in XDG_DIRS.items()}}


def resolve_binary(name: str, path: str, package: str, pin: str) -> str:
    """The agent's launcher on the child's PATH (LaunchError, naming the pin, when it or node is absent)."""
    return resolve_on_path(name, path, package=package, pin=pin)


def attestation(name: str, pin: str, version: str | None, base_url: str, work: str | None,
                vendor_rows: list[ImposedRow]) -> HermeticAttestation:
    """metaharness's own claim about an ACP agent's launch (docs/reference/wire.md)."""
    rows = [
        ImposedRow(row="h1a", how=f"HOME and XDG_* are a per-run scratch directory; {name} is pinned by files "
                                  "written there"),
        ImposedRow(row="h3", how="constructed environment: PATH HOME TMPDIR LANG NO_COLOR TERM XDG_* (XDG_RUNTIME_DIR "
                                 "too) and the vendor's pinning variables"),
        ImposedRow(row="h4", how="the child sees a placeholder key"),
        ImposedRow(row="h5", how="session/new carries no MCP servers"),
        ImposedRow(row="h6", how=f"model endpoint {base_url}"),
        ImposedRow(row="h7", how=f"cwd {work}"),
        *vendor_rows,
    ]
    on_pin, unavailable = pin_row(name, version, pin, f"{name} {version}")
    return HermeticAttestation(imposed=rows + on_pin, unavailable=unavailable)
