"""What the child is given: its PATH, its binary found on exactly that PATH, and its timeout.

Rules kept, one place each, for every adapter:
* the child's PATH is the vendor dir (`--vendor-dir`, else METAHARNESS_VENDOR_DIR, else a source
  checkout's `.vendor/node_modules/.bin`), node's directory, and the system directories — never
  the PATH metaharness itself runs with;
* the binary is resolved on that PATH, so what runs is what was checked; a missing one is
  `BinaryMissing`, named with the package and pin to install;
* the vendor's own timeout for a blocking call is strictly longer than metaharness's decision
  deadline, so a refusal at the deadline is always metaharness's.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

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


def binary_version(binary: str, path: str, *, env: dict[str, str] | None = None, timeout: float = 60) -> str | None:
    """`binary --version`, run on the child's PATH with a minimal environment (plus `env`), its
    HOME a fresh directory removed afterwards: a vendor writes there even for `--version` (Codex
    makes `.codex/tmp/arg0-linux/…`), which with HOME at the temp directory itself was left in
    the user's TMPDIR by every run."""
    try:
        with tempfile.TemporaryDirectory(prefix="metaharness-version-") as home:
            base = {"PATH": path, "LANG": "C.UTF-8", "HOME": home, "NO_COLOR": "1", "TERM": "dumb"}
            out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=timeout,
                                 env={**base, **(env or {})}, stdin=subprocess.DEVNULL).stdout
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
