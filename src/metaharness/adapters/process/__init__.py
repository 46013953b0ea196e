"""The child-process kit every adapter shares: one home for how a harness child is started,
given a home, fed and stopped.

The face re-exports the kit; each rule lives in exactly one module:

* `channel` — spawn on a Unix socketpair (never a pipe) and the channel's writing half;
* `confine` — the parent-death signal, the PID/mount namespace with a private /proc, non-dumpable;
* `child` — the child's PATH, its binary resolved on that PATH, its `--version` probe (stoppable
  by the run), the vendor timeout formula, the caller's settings a vendor config takes (`passed_through`);
* `scratch` — the one scratch base (METAHARNESS_SCRATCH_DIR, else ~/.cache/metaharness/scratch),
  private roots made by mkdtemp, the one layout of a root (`Scratch`), and its removal at the end;
* `lifecycle` — one child's whole life (`Child`): spawn, reading, halt, kill, wait, the services and
  files of the run, retain and clean-up;
* `tree` — the process-tree kill, the wait-then-kill every stop uses, whether the child exited;
* `jsonrpc` — JSON-RPC 2.0 line framing over the channel (Codex's app-server, the ACP agents).
"""

from metaharness.adapters.process.channel import (
    STDOUT_LIMIT,
    ChannelWriter,
    control_socketpair,
    open_channel,
    spawn_on_channel,
)
from metaharness.adapters.process.child import (
    VERSION_PROBES,
    BinaryMissing,
    LaunchError,
    VersionProbes,
    binary_version,
    child_path,
    default_vendor_dir,
    parse_version,
    passed_through,
    resolve_binary,
    stderr_file_tail,
    vendor_timeout_ms,
    whole_seconds,
)
from metaharness.adapters.process.confine import (
    NAMESPACE_ENV,
    confined_argv,
    confinement,
    make_non_dumpable,
    parent_death_signal,
)
from metaharness.adapters.process.lifecycle import Child
from metaharness.adapters.process.scratch import (
    SCRATCH_ENV,
    Scratch,
    make_scratch,
    ScratchInsideCwd,
    ScratchRefused,
    base_chosen,
    inside,
    new_scratch,
    private_base,
    private_scratch,
    remove_scratch,
    scratch_base,
)
from metaharness.adapters.process.tree import (
    descendant_groups,
    has_exited,
    is_gone,
    kill_group,
    kill_groups,
    kill_tree,
    wait_or_kill,
)

__all__ = [
    "STDOUT_LIMIT", "ChannelWriter", "control_socketpair", "open_channel", "spawn_on_channel",
    "VERSION_PROBES", "BinaryMissing", "LaunchError", "VersionProbes", "binary_version", "child_path", "default_vendor_dir", "parse_version",
    "resolve_binary", "stderr_file_tail", "vendor_timeout_ms", "whole_seconds",
    "NAMESPACE_ENV", "confined_argv", "confinement", "make_non_dumpable", "parent_death_signal",
    "Child", "SCRATCH_ENV", "Scratch", "make_scratch", "ScratchInsideCwd", "ScratchRefused", "base_chosen", "inside", "new_scratch", "private_base",
    "private_scratch", "remove_scratch", "scratch_base",
    "descendant_groups", "has_exited", "is_gone", "kill_group", "kill_groups", "kill_tree", "wait_or_kill",
]
