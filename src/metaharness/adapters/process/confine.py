"""Where the child runs: out of reach of what it starts, and never outliving metaharness.

What belongs here, one rule each, for every adapter:
* the child gets SIGKILL when metaharness dies (PR_SET_PDEATHSIG, `parent_death_signal`), so no
  call runs on undecided after a killed metaharness;
* where the platform allows it the child runs in a user, PID and mount namespace of its own with
  a private /proc and no capability, root or not (`confined_argv`), so the agent cannot name
  metaharness's pid nor override non-dumpable;
* metaharness itself is made non-dumpable (`make_non_dumpable`): another process of the same
  user cannot open its /proc files (fds, environ, memory) or ptrace it.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
from typing import Any

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4


@functools.lru_cache(maxsize=1)
def prctl_function() -> Any:
    """libc's prctl, resolved in the parent: a preexec_fn must not import or load anything
    (another thread may hold the import lock at the fork)."""
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _prctl(option: int, value: int) -> bool:
    prctl = prctl_function()
    return prctl is not None and prctl(option, value, 0, 0, 0) == 0


def parent_death_signal() -> None:
    """preexec_fn: the child gets SIGKILL when metaharness dies (prctl resolved beforehand)."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def make_non_dumpable() -> bool:
    """Make this process non-dumpable (its /proc files become root's, ptrace is refused to
    same-user processes). Idempotent; False where prctl is not available."""
    return _prctl(PR_SET_DUMPABLE, 0)



# --- confinement ---------------------------------------------------------------------------

NAMESPACE_ENV = "METAHARNESS_NAMESPACE"  # "off" turns confinement off (diagnosis only)


CHILD_UID = 1000  # who the child is inside its user namespace when metaharness runs as root


@functools.lru_cache(maxsize=1)
def confinement() -> tuple[list[str], str]:
    """(prefix, how): the argv prefix that runs a child in its own PID and mount namespace
    with a private /proc, and a sentence saying how — or ([], why not).

    Always inside a user namespace where the machine allows one, so the child holds no
    capability: as another user, that user mapped to itself; as root, root mapped to an
    unprivileged uid (CHILD_UID) — an agent then cannot override non-dumpable, ptrace
    what it did not start or leave the namespace, though it keeps root's file access.
    As root without user namespaces, the PID and mount namespace alone."""
    if os.environ.get(NAMESPACE_ENV) == "off":
        return [], f"{NAMESPACE_ENV}=off"
    unshare = shutil.which("unshare")
    if unshare is None:
        return [], "unshare(1) is not installed"
    namespaces = ["--pid", "--mount", "--mount-proc", "--fork", "--kill-child"]
    if os.geteuid() != 0:
        candidates = [(["--user", "--map-current-user"], "in an unprivileged user namespace")]
    else:
        candidates = [(["--user", f"--map-user={CHILD_UID}", f"--map-group={CHILD_UID}"],
                       f"as uid {CHILD_UID} without capabilities, in a user namespace"),
                      ([], "as root")]
    why_not = ""
    for user, how in candidates:
        prefix = [unshare, *user, *namespaces]
        try:
            probe = subprocess.run([*prefix, "true"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, timeout=10)
        except (OSError, subprocess.TimeoutExpired) as exc:
            why_not = f"unshare could not run: {exc}"
            continue
        if probe.returncode == 0:
            return prefix, f"own PID and mount namespace with a private /proc (unshare, {how})"
        detail = probe.stderr.decode("utf-8", "replace").strip().splitlines()
        why_not = f"unshare refused: {detail[-1] if detail else probe.returncode}"
    return [], why_not


def confined_argv(argv: list[str]) -> list[str]:
    prefix, _how = confinement()
    return [*prefix, *argv]
