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


_NO_OPTIONS: list[str] = []
_FORBIDDEN: dict[int, tuple[list[str], frozenset[str], tuple[str, ...]]] = {}


def _forbidden_of(forbidden: list[str]) -> tuple[frozenset[str], tuple[str, ...]]:
    """A table's forbidden options as a set, and the `--long=` prefixes of its long ones, worked
    out once per list (the list is kept with them, so its id is not reused)."""
    kept = _FORBIDDEN.get(id(forbidden))
    if kept is None or kept[0] is not forbidden:
        kept = _FORBIDDEN[id(forbidden)] = (
            forbidden, frozenset(forbidden), tuple(features + "=" for features in forbidden if features.startswith("--")))
    return kept[1], kept[2]


def _vals(cmd: Cmd) -> list[str | None]:
    return [word.value for word in cmd.words[1:]]


def _all_static(vals: list[str | None]) -> list[str] | None:
    """The values when every one is static, else None."""
    texts = [value for value in vals if value is not None]
    return texts if len(texts) == len(vals) else None


def _clean_program(cmd: Cmd) -> str | None:
    """The program word's text when the command is clean (no unprovable, opaque or unknown-program
    mark, only safe static assignments, a static program word), else None."""
    if cmd.unprovable or cmd.opaque or cmd.program_unknown:
        return None
    if any(not (SAFE_ASSIGNMENTS(name) and word.static) for name, word in cmd.assigns):
        return None
    return cmd.words[0].value if cmd.words else None


def is_read_only(cmd: Cmd, *, trusted: bool) -> bool:
    """The read-only set: listed program, no write-capable option, no dynamic option word, only reads."""
    prog = _clean_program(cmd)
    if prog is None:
        return False
    if cmd.inner is not None:
        # A transparent wrapper is read-only when its inner command is; other wrappers never.
        return cmd.transparent and is_read_only(cmd.inner, trusted=trusted)
    if cmd.wrapper is not None:
        return False
    if "/" in prog:
        return False  # `./ls` is not the listed program
    if any(program.access == "write" for program in cmd.paths):
        return False
    vals = _vals(cmd)
    if prog == "command":
        return len(vals) >= 1 and vals[0] in _lazy("READONLY")["command"]["lookup_options"]
    if prog == "git":
        return trusted and _git_read_only(vals)
    entry = _lazy("READONLY")["programs"].get(prog)
    if entry is None:
        return False
    forbidden = entry.get("forbidden", _NO_OPTIONS)
    forbidden_set, forbidden_long = _forbidden_of(forbidden)
    for value in vals:
        if value is None:
            return False if prog != "echo" else True
        if value in forbidden_set or value.startswith(forbidden_long):
            return False
        if prog in ("sort", "date", "tree", "printf") and any(
            value.startswith(features) and not features.startswith("--") and len(value) > len(features) and value[1:2] == features[1] for features in forbidden
        ):
            return False
    operands = [value for value in vals if value is not None and not value.startswith("-")]
    if "max_operands" in entry and len(operands) > entry["max_operands"]:
        return False
    if entry.get("static_operands") and any(value is None for value in vals):
        return False
    return True


def _git_read_only(words: list[str | None]) -> bool:
    spec = _lazy("READONLY")["git"]
    vals = _all_static(words)
    if vals is None:
        return False
    forbidden_set, forbidden_long = _forbidden_of(spec["forbidden"])
    if any(value in forbidden_set or value.startswith(forbidden_long) for value in vals):
        return False
    if not vals or vals[0] not in spec["subcommands"]:
        return False
    sub, rest = vals[0], vals[1:]
    if sub == "branch":
        return all(value in spec["branch_allowed"] for value in rest)
    if sub == "remote":
        return all(value in spec["remote_allowed"] for value in rest)
    return True


def is_edit_command(cmd: Cmd) -> bool:
    """`mkdir`/`touch`/`cp`/`mv` with every operand static (write targets are checked by the engine)."""
    prog = _clean_program(cmd)
    if prog is None or cmd.inner is not None or cmd.wrapper is not None:
        return False
    if prog not in EDIT_COMMANDS:
        return False
    return all(word.value is not None for word in cmd.words[1:]) and all(program.static for program in cmd.paths)


_GLOBAL_OPTIONS: dict[int, tuple[dict, frozenset[str], frozenset[str]]] = {}
_NO_SPEC: dict = {}


def _global_options(spec: dict | None) -> tuple[frozenset[str], frozenset[str]]:
    """A program's global options that take a value, and those that do not (data/options.toml),
    as sets worked out once per table entry (the entry is kept with them)."""
    spec = _NO_SPEC if spec is None else spec
    kept = _GLOBAL_OPTIONS.get(id(spec))
    if kept is None or kept[0] is not spec:
        kept = _GLOBAL_OPTIONS[id(spec)] = (
            spec, frozenset(spec.get("global_value", ())), frozenset(spec.get("global", ())))
    return kept[1], kept[2]


def _sub_and_rest(cmd: Cmd) -> tuple[str | None, list[str | None]]:
    vals = [word.deny_value for word in cmd.words[1:]]
    base = cmd.basename or ""
    gval, glob_ = _global_options(_shell._lazy("OPTIONS").get(base))
    index = 0
    while index < len(vals):
        value = vals[index]
        if value is None or not value.startswith("-"):
            break
        name = value.split("=", 1)[0]
        if name in gval and "=" not in value:
            index += 2
        elif name in glob_ or name in gval:
            index += 1
        else:
            break
    if index >= len(vals):
        return None, []
    return vals[index], vals[index + 1 :]


def _programs(entry: dict) -> list[str]:
    program = entry.get("program", [])
    return [program] if isinstance(program, str) else list(program)


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
        got = memo[1][base] = [entry for entry in table if applies(entry, base)]
    return got


def _risky_for(base: str) -> list[dict]:
    """The RISKY features whose program (or program prefix) is `base`."""
    return _entries_for("RISKY", base, lambda feature, program: program in _programs(feature) or any(program.startswith(prefix) for prefix in feature.get("prefix", [])))


def _routine_for(base: str) -> list[dict]:
    """The ROUTINE entries listing `base` as a program."""
    return _entries_for("ROUTINE", base, lambda entry, program: program in _programs(entry))


def risky_feature(cmd: Cmd) -> str | None:
    """The id of the first risky feature of a command, or None."""
    base = (cmd.basename or "").lower()
    if cmd.wrapper in ("sudo", "doas", "su", "pkexec", "runuser"):
        return "sudo"
    features = _risky_for(base)
    if not features:
        return None
    sub, rest = _sub_and_rest(cmd)
    all_vals = [word.deny_value for word in cmd.words[1:]]
    for feature in features:
        if feature.get("any"):
            return feature["id"]
        if "sub" in feature and sub not in feature["sub"]:
            continue
        if "second" in feature and (not rest or rest[0] not in feature["second"]):
            continue
        if "words" in feature and not any(value in feature["words"] for value in all_vals):
            continue
        if "unless" in feature and any(value in feature["unless"] for value in all_vals):
            continue
        if feature.get("remote_operand") and not any(value and ":" in value and not value.startswith("-") for value in all_vals):
            continue
        return feature["id"]
    return None


def is_routine(cmd: Cmd) -> bool:
    """Auto mode's routine check: a routine-table entry, and not unprovable."""
    prog = _clean_program(cmd)
    if prog is None or cmd.wrapper is not None:
        return False
    base = prog.rsplit("/", 1)[-1]
    if "/" in prog and base != "gradlew":
        return False
    vals = _all_static(_vals(cmd))
    if vals is None:
        return False
    for entry in _routine_for(base):
        if "targets" in entry:
            if not vals or (len(vals) == 1 and vals[0] in entry["targets"]):
                return True
            continue
        if "sub" not in entry:
            if entry.get("any_after"):
                return True
            continue
        if not vals or vals[0] not in entry["sub"]:
            continue
        rest = vals[1:]
        if any(value in entry.get("forbid", []) for value in rest):
            continue
        if "require" in entry and not all(routine in rest for routine in entry["require"]):
            continue
        if entry.get("branch_only"):
            ops = [value for value in rest if value != "-b"]
            if "--" in rest or "-f" in rest or len(ops) != 1 or ops[0].startswith("-") or ops[0] == ".":
                continue
            return True
        if "second" in entry:
            if not rest:
                if entry.get("allow_bare"):
                    return True
                continue
            if rest[0] not in entry["second"]:
                continue
            return True
        if "max_words" in entry and len(vals) > entry["max_words"]:
            continue
        if entry.get("any_after") or not rest or "max_words" in entry:
            return True
    return False
