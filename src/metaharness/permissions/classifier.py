"""Command classes: the read-only set, edit commands and the Auto classifier.

The classifier measures blast radius, not intent, and is deterministic: risky features are checked
first and no routine entry overrides one; anything not recognised as routine asks. All tables live
in `data/*.toml`; this module only interprets them.
"""

from __future__ import annotations

from typing import Callable

from . import shell as _shell
from .shell import Cmd, SAFE_ASSIGNMENTS
from .tables import lazy_attributes, load_table

__all__ = ["is_read_only", "is_edit_command", "risky_feature", "is_routine", "READONLY", "ROUTINE", "RISKY"]

EDIT_COMMANDS = {"mkdir", "touch", "cp", "mv"}

# The tables are built on first use, not at import (see tables.py); they stay module attributes
# (`classifier.RISKY`); read them here through `_lazy`.
__getattr__, _lazy = lazy_attributes(globals(), {
    "READONLY": lambda: load_table("readonly.toml"),
    "ROUTINE": lambda: load_table("routine.toml")["entry"],
    "RISKY": lambda: load_table("risky.toml")["feature"],
})


def _vals(cmd: Cmd) -> list[str | None]:
    return [w.value for w in cmd.words[1:]]


def _clean(cmd: Cmd) -> bool:
    if cmd.unprovable or cmd.opaque or cmd.program_unknown:
        return False
    if any(not (SAFE_ASSIGNMENTS(n) and w.static) for n, w in cmd.assigns):
        return False
    return cmd.program is not None and cmd.program.value is not None


def is_read_only(cmd: Cmd, *, trusted: bool) -> bool:
    """The read-only set: listed program, no write-capable option, no dynamic option word, only reads."""
    if not _clean(cmd):
        return False
    if cmd.inner is not None:
        # A transparent wrapper is read-only when its inner command is; other wrappers never.
        return cmd.transparent and is_read_only(cmd.inner, trusted=trusted)
    if cmd.wrapper is not None:
        return False
    prog = cmd.program.value
    if "/" in prog:
        return False  # `./ls` is not the listed program
    if any(p.access == "write" for p in cmd.paths):
        return False
    vals = _vals(cmd)
    if prog == "command":
        return len(vals) >= 1 and vals[0] in _lazy("READONLY")["command"]["lookup_options"]
    if prog == "git":
        return trusted and _git_read_only(vals)
    entry = _lazy("READONLY")["programs"].get(prog)
    if entry is None:
        return False
    forbidden = entry.get("forbidden", [])
    for v in vals:
        if v is None:
            return False if prog != "echo" else True
        if v in forbidden or any(v.startswith(f + "=") for f in forbidden if f.startswith("--")):
            return False
        if prog in ("sort", "date", "tree", "printf") and any(
            v.startswith(f) and not f.startswith("--") and len(v) > len(f) and v[1:2] == f[1] for f in forbidden
        ):
            return False
    operands = [v for v in vals if v is not None and not v.startswith("-")]
    if "max_operands" in entry and len(operands) > entry["max_operands"]:
        return False
    if entry.get("static_operands") and any(v is None for v in vals):
        return False
    return True


def _git_read_only(vals: list[str | None]) -> bool:
    spec = _lazy("READONLY")["git"]
    if any(v is None for v in vals):
        return False
    if any(v in spec["forbidden"] or any(v.startswith(f + "=") for f in spec["forbidden"] if f.startswith("--")) for v in vals):
        return False
    if not vals or vals[0] not in spec["subcommands"]:
        return False
    sub, rest = vals[0], vals[1:]
    if sub == "branch":
        return all(v in spec["branch_allowed"] for v in rest)
    if sub == "remote":
        return all(v in spec["remote_allowed"] for v in rest)
    return True


def is_edit_command(cmd: Cmd) -> bool:
    """`mkdir`/`touch`/`cp`/`mv` with every operand static (write targets are checked by the engine)."""
    if not _clean(cmd) or cmd.inner is not None or cmd.wrapper is not None:
        return False
    if cmd.program.value not in EDIT_COMMANDS:
        return False
    return all(w.value is not None for w in cmd.words[1:]) and all(p.static for p in cmd.paths)


def _sub_and_rest(cmd: Cmd) -> tuple[str | None, list[str | None]]:
    vals = [w.deny_value for w in cmd.words[1:]]
    base = cmd.basename or ""
    spec = _shell._lazy("OPTIONS").get(base, {})
    gval = set(spec.get("global_value", []))
    glob_ = set(spec.get("global", []))
    i = 0
    while i < len(vals) and vals[i] is not None and vals[i].startswith("-"):
        v = vals[i]
        name = v.split("=", 1)[0]
        if name in gval and "=" not in v:
            i += 2
        elif name in glob_ or name in gval:
            i += 1
        else:
            break
    if i >= len(vals):
        return None, []
    return vals[i], vals[i + 1 :]


def _programs(entry: dict) -> list[str]:
    p = entry.get("program", [])
    return [p] if isinstance(p, str) else list(p)


_BY_PROGRAM: dict[str, tuple[list, dict[str, list[dict]]]] = {}  # table name -> (table, {program: entries})


def _entries_for(name: str, base: str, applies: Callable[[dict, str], bool]) -> list[dict]:
    """The entries of table `name` that apply to program `base`, in table order. Memoised per
    program for the table object in use (a table replaced in the module starts afresh)."""
    table = _lazy(name)
    memo = _BY_PROGRAM.get(name)
    if memo is None or memo[0] is not table:
        memo = _BY_PROGRAM[name] = (table, {})
    got = memo[1].get(base)
    if got is None:
        got = memo[1][base] = [e for e in table if applies(e, base)]
    return got


def _risky_for(base: str) -> list[dict]:
    """The RISKY features whose program (or program prefix) is `base`."""
    return _entries_for("RISKY", base, lambda f, b: b in _programs(f) or any(b.startswith(p) for p in f.get("prefix", [])))


def _routine_for(base: str) -> list[dict]:
    """The ROUTINE entries listing `base` as a program."""
    return _entries_for("ROUTINE", base, lambda e, b: b in _programs(e))


def risky_feature(cmd: Cmd) -> str | None:
    """The id of the first risky feature of a command, or None."""
    base = (cmd.basename or "").lower()
    if cmd.wrapper in ("sudo", "doas", "su", "pkexec", "runuser"):
        return "sudo"
    features = _risky_for(base)
    if not features:
        return None
    sub, rest = _sub_and_rest(cmd)
    all_vals = [w.deny_value for w in cmd.words[1:]]
    for f in features:
        if f.get("any"):
            return f["id"]
        if "sub" in f and sub not in f["sub"]:
            continue
        if "second" in f and (not rest or rest[0] not in f["second"]):
            continue
        if "words" in f and not any(v in f["words"] for v in all_vals):
            continue
        if "unless" in f and any(v in f["unless"] for v in all_vals):
            continue
        if f.get("remote_operand") and not any(v and ":" in v and not v.startswith("-") for v in all_vals):
            continue
        return f["id"]
    return None


def is_routine(cmd: Cmd) -> bool:
    """Auto mode's routine check: a routine-table entry, and not unprovable."""
    if not _clean(cmd) or cmd.wrapper is not None:
        return False
    prog = cmd.program.value
    base = prog.rsplit("/", 1)[-1]
    if "/" in prog and base != "gradlew":
        return False
    vals = _vals(cmd)
    if any(v is None for v in vals):
        return False
    for e in _routine_for(base):
        if "targets" in e:
            if not vals or (len(vals) == 1 and vals[0] in e["targets"]):
                return True
            continue
        if "sub" not in e:
            if e.get("any_after"):
                return True
            continue
        if not vals or vals[0] not in e["sub"]:
            continue
        rest = vals[1:]
        if any(v in e.get("forbid", []) for v in rest):
            continue
        if "require" in e and not all(r in rest for r in e["require"]):
            continue
        if e.get("branch_only"):
            ops = [v for v in rest if v != "-b"]
            if "--" in rest or "-f" in rest or len(ops) != 1 or ops[0].startswith("-") or ops[0] == ".":
                continue
            return True
        if "second" in e:
            if not rest:
                if e.get("allow_bare"):
                    return True
                continue
            if rest[0] not in e["second"]:
                continue
            return True
        if "max_words" in e and len(vals) > e["max_words"]:
            continue
        if e.get("any_after") or not rest or "max_words" in e:
            return True
    return False
