"""What the child is given: its PATH, its binary found on exactly that PATH, and its timeout.

Rules kept, one place each, for every adapter:
* the child's PATH is the vendor dir (`--vendor-dir`, else METAHARNESS_VENDOR_DIR, else a source
  checkout's `.vendor/node_modules/.bin`), node's directory, and the system directories — never
  the PATH metaharness itself runs with;
* the binary is resolved on that PATH, so what runs is what was checked; a missing one is
  `BinaryMissing`, named with the package and pin to install;
* the vendor's own timeout for a blocking call is strictly longer than metaharness's decision
  deadline, so a refusal at the deadline is always metaharness's;
* a caller's setting carried into a vendor's pinned configuration (`passed_through`) is a whole
  number of at least 1, else the run is refused naming it;
* a `--version` probe runs in a session of its own under the run's `VersionProbes` (when the run
  gives one): a stop during the start checks kills it, and every probe after it, at once.
"""

from __future__ import annotations

import contextvars
import math
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

from metaharness.adapters.process.tree import kill_group

SYSTEM_DIRS = ("/usr/local/bin", "/usr/bin", "/bin")


class LaunchError(Exception):
    """The launch cannot be planned; the message is one sentence naming what is wrong."""


class BinaryMissing(LaunchError):
    """The vendor's binary (or the node it needs) is not on the child's PATH."""


# --- the child's PATH ------------------------------------------------------------------------


def default_vendor_dir() -> str | None:
    """METAHARNESS_VENDOR_DIR, else a source checkout's `.vendor/node_modules/.bin` (`make
    vendor` installs the pinned CLIs there), else None (give --vendor-dir DIR)."""
    configured = os.environ.get("METAHARNESS_VENDOR_DIR")
    if configured:
        return configured
    checkout = Path(__file__).resolve().parents[4] / ".vendor" / "node_modules" / ".bin"
    return str(checkout) if checkout.is_dir() else None


def child_path(vendor_dir: str | None) -> str:
    """The child's PATH: the vendor dir (`vendor_dir`, else the default one), node's own dir
    (real and as found), the system dirs; each once, in that order."""
    vendor_dir = vendor_dir or default_vendor_dir()
    parts: list[str] = []
    if vendor_dir:
        parts.append(os.path.abspath(vendor_dir))
    node = shutil.which("node")
    if node:
        parts += [os.path.dirname(os.path.realpath(node)), os.path.dirname(node)]
    parts += SYSTEM_DIRS
    return ":".join(dict.fromkeys(parts))


# --- the binary ------------------------------------------------------------------------------


def resolve_binary(name: str, path: str, *, package: str, pin: str, needs_node: bool = True) -> str:
    """The absolute path of `name` on the child's `path` (BinaryMissing, naming what to install,
    when it is not there, or when its launcher needs node and node is not there)."""
    found = shutil.which(name, path=path)
    if found is None:
        raise BinaryMissing(f"{name} is not on the child PATH ({path}); install {package}@{pin} (in a source "
                            "checkout `make vendor` puts it in .vendor/node_modules/.bin) or give --vendor-dir DIR")
    if needs_node and shutil.which("node", path=path) is None:
        raise BinaryMissing(f"node is not on the child PATH ({path}); the {name} launcher needs it")
    return os.path.abspath(found)


def parse_version(text: str) -> str | None:
    """The first whitespace-separated token that starts with a digit (`<name> --version`)."""
    for token in text.split():
        if token[:1].isdigit():
            return token
    return None


class VersionProbes:
    """The `--version` probes of one run's start checks, so that a stop can end them: once
    `stop()` is called each running probe's group is killed and a later probe does not start."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[int] = set()
        self.stopped = False

    def started(self, pid: int) -> bool:
        with self._lock:
            if not self.stopped:
                self._running.add(pid)
            return not self.stopped

    def ended(self, pid: int) -> None:
        with self._lock:
            self._running.discard(pid)

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            running = list(self._running)
        for pid in running:
            kill_group(pid)


# The probes of the run whose start checks are running in this context (the run sets it in
# the thread its checks run on); None: a probe nobody can stop but its timeout (the doctors).
VERSION_PROBES: contextvars.ContextVar[VersionProbes | None] = contextvars.ContextVar(
    "metaharness_version_probes", default=None)


def binary_version(binary: str, path: str, *, env: dict[str, str] | None = None, timeout: float = 60) -> str | None:
    """`binary --version`, run on the child's PATH with a minimal environment (plus `env`), its
    HOME a fresh directory removed afterwards: a vendor writes there even for `--version` (Codex
    makes `.codex/tmp/arg0-linux/…`), which with HOME at the temp directory itself was left in
    the user's TMPDIR by every run. In a session of its own, so that its timeout or the run's
    stop (`VersionProbes`) kills whatever it started too. None: no version could be read."""
    probes = VERSION_PROBES.get()
    try:
        with tempfile.TemporaryDirectory(prefix="metaharness-version-") as home:
            base = {"PATH": path, "LANG": "C.UTF-8", "HOME": home, "NO_COLOR": "1", "TERM": "dumb"}
            with subprocess.Popen([binary, "--version"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  stdin=subprocess.DEVNULL, text=True, env={**base, **(env or {})},
                                  start_new_session=True) as probe:
                if probes is not None and not probes.started(probe.pid):
                    kill_group(probe.pid)
                try:
                    out, _ = probe.communicate(timeout=timeout)
                except subprocess.TimeoutExpired:
                    kill_group(probe.pid)
                    probe.communicate()
                    return None
                finally:
                    if probes is not None:
                        probes.ended(probe.pid)
                    kill_group(probe.pid)  # what it left behind does not outlive the probe
                if probes is not None and probes.stopped:
                    return None
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_version(out)


def stderr_file_tail(path: Any, lines: int = 3) -> str:
    """The last `lines` lines of a child's stderr file joined with " | " ("" when there are
    none or the file cannot be read): the part of a failure message that names the child's own words."""
    try:
        tail = Path(path).read_text(errors="replace").strip().splitlines()[-lines:]
    except OSError:
        return ""
    return " | ".join(tail)


# --- the vendor's timeout --------------------------------------------------------------------


def vendor_timeout_ms(deadline_ms: int) -> int:
    """The harness's own timeout for a blocking call, for metaharness's decision deadline D:
    strictly longer than D, so that a refusal at the deadline is metaharness's."""
    return deadline_ms + 5000 if deadline_ms > 2500 else 2 * deadline_ms


def whole_seconds(ms: int) -> int:
    """A vendor timeout given in whole seconds: rounded up, at least one."""
    return max(1, math.ceil(ms / 1000))


def passed_through(names: tuple[str, ...], environ: dict[str, str]) -> dict[str, int]:
    """The caller's settings (whole numbers of at least 1) a vendor module carries into its pinned
    configuration when set; LaunchError naming the first that is not one."""
    found: dict[str, int] = {}
    for name in names:
        value = environ.get(name, "").strip()
        if not value:
            continue
        if not value.isdigit() or int(value) < 1:
            raise LaunchError(f"{name} is {value!r}; it takes a whole number of at least 1")
        found[name] = int(value)
    return found
