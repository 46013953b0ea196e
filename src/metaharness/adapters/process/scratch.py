"""Scratch: the per-run directories a child gets for its home, config, temp files and transcript.

One base, one variable, for every adapter: `METAHARNESS_SCRATCH_DIR` if set, else
`$XDG_CACHE_HOME/metaharness/scratch` (`~/.cache/metaharness/scratch`). Why there: never under
`/tmp` (a sandboxed vendor command may write anywhere under it) nor any other directory every user
can write (another user could pre-make the base there and hold every run off), and in a directory
tree the user already owns.

Rules kept, the way security tools keep them:
* every run's root is `mkdtemp` (mode 0700) inside a base only this user can enter: created 0700
  if absent; if present it must be a real directory (a symlink is never followed), owned by
  this user and writable by no one else; a base that fails is refused by name (ScratchRefused),
  before anything is spawned;
* a root never lies inside the run's working directory (ScratchInsideCwd);
* a root dies with the run (`remove_scratch`), unless the operator chose the base — then it is
  kept for inspection.

`Scratch` is the one layout every harness's root has: `home` and `tmp` for the child, and the
files metaharness keeps beside them (`transcript.jsonl`, `sent.jsonl`, `stderr.log`); a vendor's
own directories are named below the root (`scratch / "codex-home"`).

A child that binds a Unix socket (Claude Code's and Qwen Code's cross-session inbox) binds it in
`XDG_RUNTIME_DIR`, else `TMPDIR`, and falls back to a directory in `/tmp` shared by every run and
left there, when the path would pass a socket's 103 bytes (a deep scratch base does). So a root
can have a `run` directory for it (`make_scratch(runtime=True)`, `Scratch.runtime`): below the
root when a socket path fits there, else a private `mkdtemp` in a short temporary directory,
linked from the root as `run` and removed with it — also when the root itself is kept. (A
metaharness killed outright, SIGKILL, removes neither: nothing can run at that point.)
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from metaharness.adapters.process.child import LaunchError

SCRATCH_ENV = "METAHARNESS_SCRATCH_DIR"
SOCKET_PATH_MAX = 103  # bytes of a Unix socket's path, as the vendors count them (sun_path less its NUL)
SOCKET_ROOM = 40  # the longest name a child puts below its runtime directory: "/qwen-socks/<pid>-<8 hex>.sock"
RUNTIME = "run"
RUNTIME_PREFIX = "metaharness-run-"


class ScratchRefused(LaunchError):
    """A scratch base that is not private to this user; the message names it and says why."""


class ScratchInsideCwd(ScratchRefused):
    """A scratch root that would lie inside the run's working directory."""


def scratch_base() -> str:
    """The base every run's scratch root is made in (absolute)."""
    configured = os.environ.get(SCRATCH_ENV)
    if configured:
        return os.path.abspath(configured)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(os.path.abspath(cache), "metaharness", "scratch")


def base_chosen() -> bool:
    """Whether the operator chose the base (METAHARNESS_SCRATCH_DIR set and not empty)."""
    return bool(os.environ.get(SCRATCH_ENV))


def inside(path: str, directory: str) -> bool:
    """`path` is `directory` or lies below it (both resolved)."""
    path, directory = os.path.realpath(path), os.path.realpath(directory)
    return os.path.commonpath([path, directory]) == directory


def private_base(path: str) -> str:
    """`path` as a directory only this user can enter: created mode 0700 if absent; if present,
    it must be a real directory (a symlink is never followed), owned by this user, writable by
    no one else. A base that is only readable by others is tightened to 0700; anything else is
    refused by name (ScratchRefused)."""
    path = os.path.abspath(path)
    parent = os.path.dirname(path)
    if parent and not os.path.isdir(parent):
        os.makedirs(parent, mode=0o700, exist_ok=True)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise ScratchRefused(f"the scratch base {path} is not a directory of its own "
                             f"(a symlink is never followed): {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISDIR(info.st_mode):
            raise ScratchRefused(f"the scratch base {path} is not a directory")
        if info.st_uid != os.geteuid():
            raise ScratchRefused(f"the scratch base {path} belongs to uid {info.st_uid}, not to this user "
                                 f"(uid {os.geteuid()}); remove it or choose another base")
        if info.st_mode & 0o022:
            raise ScratchRefused(f"the scratch base {path} is writable by others (mode {info.st_mode & 0o777:o}); "
                                 "remove it or choose another base")
        if info.st_mode & 0o077:
            os.fchmod(fd, 0o700)
    finally:
        os.close(fd)
    return path


def private_scratch(base: str, prefix: str) -> str:
    """A fresh per-run directory (mkdtemp, mode 0700) inside the private `base`."""
    return tempfile.mkdtemp(prefix=prefix, dir=private_base(base))


def new_scratch(prefix: str, *, cwd: str | None = None) -> str:
    """A fresh root for one run in the scratch base (`private_scratch`); ScratchInsideCwd,
    leaving nothing behind, when it would lie inside the working directory `cwd`."""
    root = private_scratch(scratch_base(), prefix)
    if cwd is not None and inside(root, cwd):
        shutil.rmtree(root, ignore_errors=True)
        raise ScratchInsideCwd(f"the scratch directory {root} would lie inside the working directory {cwd}")
    return root


def remove_scratch(root: str | os.PathLike | None, *, keep_chosen: bool = True) -> None:
    """The end of a run's scratch root: removed, unless the operator chose the base
    (`keep_chosen`; a check that keeps nothing passes False). A runtime directory outside the
    root goes in either case: it holds only the child's sockets."""
    if root is None:
        return
    link = Path(root) / RUNTIME
    if link.is_symlink():
        target = os.readlink(link)
        if os.path.basename(target).startswith(RUNTIME_PREFIX):
            shutil.rmtree(target, ignore_errors=True)
        link.unlink(missing_ok=True)
    if not (keep_chosen and base_chosen()):
        shutil.rmtree(root, ignore_errors=True)


def _fits(directory: str | os.PathLike, below: int = 0) -> bool:
    """A child's socket fits below `directory` (with `below` bytes of names between them)."""
    return len(os.fsencode(directory)) + below + SOCKET_ROOM <= SOCKET_PATH_MAX


def _make_runtime(root: Path) -> None:
    run = root / RUNTIME
    if _fits(run):
        run.mkdir(mode=0o700)
        return
    # Short places this user already owns first: the user's own runtime directory, the temp directory.
    below = len(RUNTIME_PREFIX) + 9  # "/" and mkdtemp's eight characters
    bases = [b for b in (os.environ.get("XDG_RUNTIME_DIR"), tempfile.gettempdir(), "/tmp")
             if b and os.path.isabs(b) and os.path.isdir(b) and _fits(b, below)]
    if not bases:
        run.mkdir(mode=0o700)  # nowhere shorter: the vendor's own fallback it is
        return
    os.symlink(tempfile.mkdtemp(prefix=RUNTIME_PREFIX, dir=bases[0]), run)


@dataclass(frozen=True)
class Scratch:
    """One run's scratch root and the names every harness keeps in it."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    def __truediv__(self, name: str) -> Path:
        return self.root / name

    home = property(lambda self: self.root / "home")
    tmp = property(lambda self: self.root / "tmp")
    transcript = property(lambda self: self.root / "transcript.jsonl")  # the child's stdout, verbatim
    sent = property(lambda self: self.root / "sent.jsonl")  # every line metaharness wrote to it
    stderr = property(lambda self: self.root / "stderr.log")

    @property
    def runtime(self) -> Path:
        """The child's XDG_RUNTIME_DIR (`make_scratch(runtime=True)`): `run`, or where it links to."""
        run = self.root / RUNTIME
        return Path(os.readlink(run)) if run.is_symlink() else run


def make_scratch(kind: str, *, cwd: str | None = None, base: str | None = None, dirs: tuple[str, ...] = (),
                 runtime: bool = False) -> Scratch:
    """A fresh root for one run of `kind` (`new_scratch`; in `base` instead of the scratch base when
    given) with `home`, `tmp` and the vendor's own `dirs` (paths below the root) made, mode 0700;
    with `runtime`, the child's runtime directory too (`Scratch.runtime`)."""
    root = Path(private_scratch(base, f"{kind}-") if base else new_scratch(f"{kind}-", cwd=cwd))
    scratch = Scratch(root)
    for name in ("home", "tmp", *dirs):
        (root / name).mkdir(mode=0o700, parents=True, exist_ok=True)
    if runtime:
        _make_runtime(root)
    return scratch
