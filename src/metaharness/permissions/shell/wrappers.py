"""Wrappers: programs that run another command (docs/reference/permissions.md), one handler per kind.

What belongs here: unwrapping a simple command through `data/wrappers.toml` — each entry names a
`kind`, and `KINDS` maps every kind to the function that finds what the layer runs (inner words,
or a script analysed recursively). Layers stay subjects of their own.

Rules this module keeps:
* a wrapper whose inner command cannot be read (a dynamic option, a dynamic `-c` string, a script
  from a pipe) makes the program unknown — maybe against every Bash deny rule — never "no inner";
* a layer is transparent only when it adds nothing to what runs: an unsafe leading assignment on
  it (`BASH_ENV=… sh -c …`) makes it non-transparent, and every command it runs unprovable;
* strings a wrapper runs later (`trap`, `alias`) or elsewhere (`ssh HOST CMD`) are analysed for
  deny/ask only;
* every kind named in the table has a handler (tests/permissions/test_data_tables.py checks it).
"""

from __future__ import annotations

import re
import shlex
from typing import Callable, NamedTuple

from . import _lazy
from .model import Cmd
from .walk import Env, State, recurse, unknown
from .words import DYNAMIC_ITEM, SAFE_ASSIGNMENTS, Word, parse_word, static_word

__all__ = ["unwrap", "KINDS", "STDIN_DEVICES"]

STDIN_DEVICES = {"/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"}
_SHELL_VALUE_OPTS = {"-o", "+o", "-O", "+O", "--rcfile", "--init-file"}


class Layer(NamedTuple):
    """One wrapper layer being unwrapped, as every kind handler receives it."""

    key: str
    spec: dict
    cmd: Cmd
    st: State
    env: Env
    stdin_script: str | None
    stdin_dynamic: bool

    @property
    def args(self) -> list[Word]:
        return self.cmd.words[1:]


# A handler answers (inner words or None, transparent, extra). None: no inner command to unwrap
# (either nothing runs, or a script was analysed recursively). extra may carry "assigns",
# "alt_tails" (xargs: the appended item may be absent) and "more" (find: several -exec commands).
Result = tuple[list[Word] | None, bool, dict]


def unwrap(cmd: Cmd, st: State, env: Env, stdin_script: str | None, stdin_dynamic: bool, walker) -> list[Cmd]:
    chain = [cmd]
    current = cmd
    layer = 0
    while current.words:
        prog = current.program
        if prog.deny_value is None:
            unknown(st, current, "dynamic program name")
            break
        if prog.value is None and current.opaque is None:
            # `$'\x72m'`: decoded for deny/ask, but the program is not a plain word.
            current.opaque = "dynamic program name"
            st.result.opaque.append("dynamic program name")
        base = prog.deny_value.rsplit("/", 1)[-1]
        wrappers = _lazy("WRAPPERS")
        key = base if base in wrappers else base.lower()
        spec = wrappers.get(key)
        if spec is None:
            _maybe_source(current, st, env, stdin_script, stdin_dynamic)
            break
        produced = len(st.result.cmds)
        handler = KINDS.get(spec.get("kind", ""))
        if handler is None:
            unknown(st, current, f"wrapper kind {spec.get('kind')!r} has no handler")
            break
        inner_words, transparent, extra = handler(Layer(key, spec, current, st, env, stdin_script, stdin_dynamic))
        if current.env_marks:
            transparent = False  # BASH_ENV=…, PATH=…, LD_PRELOAD=… change what the layer runs
        if inner_words is None:
            if len(st.result.cmds) > produced:
                # The wrapper ran a string (sh -c, eval, watch, trap …) analysed recursively.
                current.wrapper = key
                current.transparent = transparent
            break
        if not inner_words:
            break
        layer += 1
        inner = Cmd(words=inner_words, group=cmd.group, layer=layer, in_body=current.in_body,
                    cwd=current.cwd, deny_only=current.deny_only or bool(extra.get("deny_only")),
                    unprovable=list(cmd.unprovable))
        inner.assigns = extra.get("assigns", [])
        inner.alt_tails = extra.get("alt_tails", False)
        inner.stdin = current.stdin
        inner.env_marks = list(current.env_marks)
        for name, w in inner.assigns:
            if not SAFE_ASSIGNMENTS(name) or not w.static:
                inner.unprovable.append(f"assignment {name}=")
                inner.env_marks.append(f"runs under the assignment {name}=")
        current.wrapper = key
        current.transparent = transparent
        current.inner = inner
        chain.append(inner)
        current = inner
        for more in extra.get("more", []):
            more.group, more.layer, more.cwd, more.in_body = cmd.group, layer, current.cwd, current.in_body
            more.unprovable.extend(cmd.unprovable)
            chain.append(more)
    return chain


# -- option parsing shared by the kinds ---------------------------------------------------------


def split_options(words: list[Word], spec: dict, extra_value_opts: tuple[str, ...] = ()) -> tuple[dict, list[Word], bool]:
    """Parse leading options of a wrapper. Returns (options, rest, dynamic_option_seen)."""
    value_opts = set(spec.get("value_opts", [])) | set(extra_value_opts)
    numeric = spec.get("numeric_opts", False)
    opts: dict[str, Word | None] = {}
    i = 0
    dynamic = False
    while i < len(words):
        w = words[i]
        v = w.deny_value
        if v is None:
            if w.may_dash:
                dynamic = True
            break
        if v == "--":
            i += 1
            break
        if not v.startswith("-") or v == "-":
            break
        if "=" in v and v.startswith("--"):
            k, _, val = v.partition("=")
            opts[k] = static_word(val)
            i += 1
            continue
        if v in value_opts:
            opts[v] = words[i + 1] if i + 1 < len(words) else None
            i += 2
            continue
        if numeric and re.fullmatch(r"-\d+", v):
            i += 1
            continue
        if not v.startswith("--") and len(v) > 2:
            # A getopt cluster: `-qc STRING`, `-n1`, `-uroot`.
            letters = v[1:]
            consumed = 1
            for k, ch in enumerate(letters):
                if "-" + ch in value_opts:
                    rest_ = letters[k + 1 :]
                    if rest_:
                        opts["-" + ch] = static_word(rest_)
                    else:
                        opts["-" + ch] = words[i + 1] if i + 1 < len(words) else None
                        consumed = 2
                    break
                opts["-" + ch] = None
            i += consumed
            continue
        opts[v] = None
        i += 1
    return opts, words[i:], dynamic


def _string_of(opts: dict, *names: str) -> tuple[bool, Word | None]:
    for n in names:
        if n in opts:
            return True, opts[n]
    return False, None


def _run_string(s: Word | None, lay: Layer, what: str, *, deny_only: bool = False) -> None:
    """A command string the layer runs: analysed as a script when static, else the call is unknown."""
    if s is None or s.deny_value is None:
        unknown(lay.st, lay.cmd, what)
    else:
        recurse(s.deny_value, lay.st, lay.env, outer=lay.cmd, deny_only=deny_only)


def _run_stdin(lay: Layer, what: str, *, deny_only: bool = False) -> None:
    """A layer that reads its script from stdin: a static heredoc/here-string is analysed."""
    if lay.stdin_script is not None and not lay.stdin_dynamic:
        recurse(lay.stdin_script, lay.st, lay.env, outer=lay.cmd, deny_only=deny_only)
    else:
        unknown(lay.st, lay.cmd, what)


# -- the kinds ------------------------------------------------------------------------------


def _generic(lay: Layer) -> Result:
    """`timeout 5 CMD`, `nice -n 1 CMD`, `strace -f CMD`, `chroot DIR CMD`: options, positionals, inner."""
    opts, rest, dyn = split_options(lay.args, lay.spec)
    transparent = bool(lay.spec.get("transparent", False))
    if dyn:
        unknown(lay.st, lay.cmd, f"dynamic option of {lay.key}")
        return None, transparent, {}
    rest = rest[int(lay.spec.get("positionals", 0)) :]
    return rest, transparent, {}


def _command(lay: Layer) -> Result:
    if any(w.value in ("-v", "-V") for w in lay.args[:2]):
        return None, True, {}
    _, rest, _ = split_options(lay.args, lay.spec)
    return rest, True, {}


def _env(lay: Layer) -> Result:
    opts, rest, dyn = split_options(lay.args, lay.spec)
    if dyn:
        unknown(lay.st, lay.cmd, "dynamic option of env")
        return None, False, {}
    given, s = _string_of(opts, "-S", "--split-string")
    if given:
        if s is None or s.deny_value is None:
            unknown(lay.st, lay.cmd, "dynamic env -S string")
            return None, False, {}
        recurse(" ".join([s.deny_value] + [w.deny_value or w.text for w in rest]), lay.st, lay.env, outer=lay.cmd)
        return None, False, {}
    assigns: list[tuple[str, Word]] = []
    while rest and rest[0].deny_value is not None and re.match(r"[A-Za-z_][A-Za-z0-9_]*=", rest[0].deny_value):
        name, _, val = rest[0].text.partition("=")
        assigns.append((name, parse_word(val, lay.st.home)))
        rest = rest[1:]
    clean = not opts and all(SAFE_ASSIGNMENTS(n) and w.static for n, w in assigns)
    return rest, clean, {"assigns": assigns}


def _shell(lay: Layer) -> Result:
    """`sh -c STRING`, `bash -s`, `bash /dev/stdin`, `bash <<EOF`: the script, analysed."""
    key, cmd, st = lay.key, lay.cmd, lay.st
    args = lay.args
    i = 0
    has_c = False
    reads_stdin_flag = False
    while i < len(args):
        w = args[i]
        v = w.deny_value
        if v is None:
            if w.may_dash:
                unknown(st, cmd, f"dynamic option of {key}")
                return None, True, {}
            break
        if v == "--" or v == "-":
            i += 1
            if v == "-":
                reads_stdin_flag = True
            break
        if v in _SHELL_VALUE_OPTS:
            i += 2
            continue
        if v.startswith("--"):
            i += 1
            continue
        if v[:1] in "-+" and len(v) > 1:
            letters = v[1:]
            if "c" in letters:
                has_c = True
            if "s" in letters:
                reads_stdin_flag = True
            i += 1
            continue
        break
    operands = args[i:]
    if has_c:
        if not operands:
            unknown(st, cmd, f"{key} -c without a command string")
            return None, True, {}
        script = operands[0]
        if script.deny_value is None:
            unknown(st, cmd, f"{key} -c with a dynamic string")
            return None, True, {}
        recurse(script.deny_value, st, Env(lay.env.depth, lay.env.in_body, True, False, lay.env.deny_only), outer=cmd,
                unprovable=None if script.value is not None else "ANSI-C string in -c")
        return None, True, {}
    if operands and not reads_stdin_flag:
        first = operands[0].deny_value
        if first is None:
            unknown(st, cmd, f"{key} runs a script of a dynamic path")
            return None, False, {}
        if first not in STDIN_DEVICES:
            return None, False, {}  # `bash script.sh`: an ordinary program running a file
    _run_stdin(lay, f"{key} reads its script from a pipe or a non-static source")
    return None, True, {}


def _eval(lay: Layer) -> Result:
    args = lay.args
    if args and args[0].deny_value == "--":
        args = args[1:]  # eval takes `--` as the end of (no) options
    if not args:
        return None, True, {}
    if any(w.deny_value is None for w in args):
        unknown(lay.st, lay.cmd, "eval of a dynamic string")
        return None, True, {}
    allow_dynamic = any(w.value is None for w in args)
    recurse(" ".join(w.deny_value for w in args), lay.st, lay.env, outer=lay.cmd,
            unprovable="ANSI-C string in eval" if allow_dynamic else None)
    return None, True, {}


def _coproc(lay: Layer) -> Result:
    unknown(lay.st, lay.cmd, "coproc is not modelled by the parser")
    return lay.args, False, {}


def _su(lay: Layer) -> Result:
    """`su [-] [USER] -c STRING`, `runuser -u USER -- CMD`, `runuser -l USER -c STRING`."""
    args = lay.args
    opts, rest, _ = split_options(args, {"value_opts": lay.spec.get("value_opts", []) + ["-c", "--command"]})
    # su accepts options after the user name too (`su - root -c '…'`): scan every word.
    for k, w in enumerate(args):
        v = w.deny_value
        if v is None:
            continue
        if v in ("-c", "--command") or (re.fullmatch(r"-[a-z]*c", v) and not v.startswith("--")):
            opts["-c"] = args[k + 1] if k + 1 < len(args) else None
        elif v.startswith("--command="):
            opts["-c"] = static_word(v.split("=", 1)[1])
    given, s = _string_of(opts, "-c", "--command")
    if given:
        _run_string(s, lay, f"dynamic {lay.key} -c string")
        return None, False, {}
    if "-u" in opts or "--user" in opts:
        return rest, False, {}
    return None, False, {}


def _sg(lay: Layer) -> Result:
    """`sg [-] GROUP [-c] COMMAND`: the command is a string run by /bin/sh."""
    args = [w for w in lay.args]
    if args and args[0].deny_value == "-":
        args = args[1:]
    if not args:
        return None, False, {}
    rest = args[1:]
    if rest and rest[0].deny_value == "-c":
        rest = rest[1:]
    if not rest:
        _run_stdin(lay, "sg reads its command from stdin")
        return None, False, {}
    if any(w.deny_value is None for w in rest):
        unknown(lay.st, lay.cmd, "dynamic sg command")
        return None, False, {}
    recurse(" ".join(w.deny_value for w in rest), lay.st, lay.env, outer=lay.cmd)
    return None, False, {}


def _xargs(lay: Layer) -> Result:
    opts, rest, dyn = split_options(lay.args, lay.spec)
    if dyn:
        unknown(lay.st, lay.cmd, "dynamic option of xargs")
        return None, False, {}
    replace = None
    for k in ("-I", "-i", "--replace"):
        if k in opts:
            replace = opts[k].deny_value if opts[k] is not None else "{}"
    inner = rest or [static_word("echo")]
    if replace:
        inner = [DYNAMIC_ITEM if (w.deny_value and replace in w.deny_value) else w for w in inner]
    return inner + [DYNAMIC_ITEM], False, {"alt_tails": True}


_PARALLEL_SEPARATORS = {":::", "::::", ":::+", "::::+"}
_PARALLEL_PLACEHOLDER = re.compile(r"\{(?:\d*[./#%]*|//|/\.|\.)\}|\{\d+\}")


def _parallel(lay: Layer) -> Result:
    """GNU parallel: the words before `:::` are a command template run by a shell; `{}` and its
    variants are the items; without a placeholder the items are appended."""
    opts, rest, dyn = split_options(lay.args, lay.spec)
    if dyn:
        unknown(lay.st, lay.cmd, "dynamic option of parallel")
        return None, False, {}
    template: list[Word] = []
    items: list[Word] = []
    seen_sep = False
    for w in rest:
        if w.deny_value in _PARALLEL_SEPARATORS:
            seen_sep = True
            continue
        (items if seen_sep else template).append(w)
    if not template:
        _run_stdin(lay, "parallel reads its commands from stdin")
        return None, False, {}
    if any(w.deny_value is None for w in template):
        unknown(lay.st, lay.cmd, "dynamic parallel command")
        return None, False, {}
    text = " ".join(w.deny_value for w in template)
    if _PARALLEL_PLACEHOLDER.search(text):
        text = _PARALLEL_PLACEHOLDER.sub('"$PARALLEL_ITEM"', text)
    elif items and all(w.deny_value is not None for w in items):
        text += " " + " ".join(shlex.quote(w.deny_value) for w in items)
    else:
        text += ' "$PARALLEL_ITEM"'
    recurse(text, lay.st, lay.env, outer=lay.cmd)
    return None, False, {}


def _find(lay: Layer) -> Result:
    args = lay.args
    inners: list[list[Word]] = []
    i = 0
    while i < len(args):
        v = args[i].deny_value
        if v in ("-exec", "-execdir", "-ok", "-okdir"):
            j = i + 1
            argv: list[Word] = []
            while j < len(args) and args[j].deny_value not in (";", "+"):
                w = args[j]
                argv.append(DYNAMIC_ITEM if w.deny_value == "{}" else w)
                j += 1
            if argv:
                inners.append(argv)
            i = j + 1
            continue
        if v is None and args[i].may_dash:
            unknown(lay.st, lay.cmd, "dynamic find expression")
        i += 1
    if not inners:
        return None, False, {}
    return inners[0], False, {"more": [Cmd(words=w) for w in inners[1:]]}


def _watch(lay: Layer) -> Result:
    opts, rest, dyn = split_options(lay.args, lay.spec)
    if dyn or any(w.deny_value is None for w in rest):
        unknown(lay.st, lay.cmd, "dynamic watch command")
        return None, False, {}
    if "-x" in opts or "--exec" in opts:
        return rest, False, {}
    if rest:
        recurse(" ".join(w.deny_value for w in rest), lay.st, lay.env, outer=lay.cmd)
    return None, False, {}


def _script(lay: Layer) -> Result:
    opts, _, _ = split_options(lay.args, lay.spec, ("-c", "--command"))
    given, s = _string_of(opts, "-c", "--command")
    if given:
        _run_string(s, lay, "dynamic script -c string")
    return None, False, {}


def _flock(lay: Layer) -> Result:
    opts, rest, _ = split_options(lay.args, lay.spec, ("-c", "--command"))
    given, s = _string_of(opts, "-c", "--command")
    if given:
        _run_string(s, lay, "dynamic flock -c string")
        return None, False, {}
    if rest and rest[0].deny_value is not None and rest[1:2] and rest[1].deny_value in ("-c", "--command"):
        _run_string(rest[2] if len(rest) > 2 else None, lay, "dynamic flock -c string")
        return None, False, {}
    return rest[1:], False, {}


def _later(lay: Layer) -> Result:
    """`trap STRING SIG…`, `alias NAME=STRING`: strings that run later, analysed for deny/ask."""
    for w in lay.args:
        v = w.deny_value
        if v is not None and v.startswith("-"):
            continue
        if lay.key == "alias":
            if v is None:
                unknown(lay.st, lay.cmd, "dynamic alias value")
                continue
            if "=" in v:
                recurse(v.partition("=")[2], lay.st, lay.env, outer=lay.cmd, deny_only=True)
            continue
        if v is None:
            unknown(lay.st, lay.cmd, "dynamic trap action")
        else:
            recurse(v, lay.st, lay.env, outer=lay.cmd, deny_only=True)
        break
    lay.st.tainted = True
    return None, False, {}


def _at(lay: Layer) -> Result:
    """`at TIME`, `batch`: the job's script is read from stdin (or `-f FILE`, outside the reach of
    argument inspection); it runs later, so it is analysed for deny/ask."""
    opts, _, dyn = split_options(lay.args, lay.spec)
    if any(k in opts for k in ("-l", "-r", "-d", "-c")):
        return None, False, {}  # list, remove or print jobs: nothing is scheduled
    if "-f" in opts:
        return None, False, {}
    _run_stdin(lay, f"{lay.key} reads its job from a pipe or a non-static source", deny_only=True)
    return None, False, {}


def _ssh(lay: Layer) -> Result:
    """`ssh [opts] HOST [CMD…]`: the words after the host are a command line for the remote shell,
    analysed for deny/ask; without them, a script on stdin runs there."""
    opts, rest, dyn = split_options(lay.args, lay.spec)
    if dyn:
        unknown(lay.st, lay.cmd, "dynamic option of ssh")
        return None, False, {}
    if not rest:
        return None, False, {}
    remote = rest[1:]
    if remote and remote[0].deny_value == "--":
        remote = remote[1:]
    if not remote:
        if lay.stdin_script is not None or lay.stdin_dynamic:
            _run_stdin(lay, "ssh runs a script from a pipe", deny_only=True)
        return None, False, {}
    if any(w.deny_value is None for w in remote):
        unknown(lay.st, lay.cmd, "dynamic ssh remote command")
        return None, False, {}
    recurse(" ".join(w.deny_value for w in remote), lay.st, lay.env, outer=lay.cmd, deny_only=True)
    return None, False, {}


def _git(lay: Layer) -> Result:
    """`git -c alias.NAME=VALUE … NAME …`: the alias is what runs (`!…` through a shell)."""
    args = lay.args
    gv = set(_lazy("OPTIONS")["git"]["global_value"])
    aliases: dict[str, tuple[int, Word]] = {}
    i = 0
    while i < len(args):
        w = args[i]
        v = w.deny_value
        if v is None:
            break
        if not v.startswith("-") or v == "--":
            break
        value: Word | None = None
        width = 1
        if v in ("-c", "--config-env"):
            value, width = (args[i + 1] if i + 1 < len(args) else None), 2
        elif v.startswith("-c") and len(v) > 2:
            value = static_word(v[2:])
        elif v.startswith("--config-env="):
            value = static_word(v.split("=", 1)[1])
        elif v in gv:
            width = 2
        if value is not None:
            if v.startswith("--config-env"):
                if (value.deny_value or "alias.").casefold().startswith("alias."):
                    unknown(lay.st, lay.cmd, "git alias from the environment")
                    return None, False, {}
            elif value.deny_value is None:
                prefix = value.shape_prefix().casefold()
                if prefix.startswith("alias.") or "alias.".startswith(prefix):
                    unknown(lay.st, lay.cmd, "dynamic git -c value may define an alias")
                    return None, False, {}
            else:
                key, eq, val = value.deny_value.partition("=")
                if eq and key.casefold().startswith("alias."):
                    aliases[key[len("alias."):].casefold()] = (i, static_word(val))
        i += width
    if not aliases or i >= len(args) or args[i].deny_value is None:
        return None, False, {}
    sub = args[i].deny_value.casefold()
    hit = aliases.get(sub)
    if hit is None:
        return None, False, {}
    at, value = hit
    text = value.deny_value or ""
    rest = args[i + 1 :]
    if text.startswith("!"):
        if any(w.deny_value is None for w in rest):
            unknown(lay.st, lay.cmd, "git shell alias with dynamic arguments")
            return None, False, {}
        recurse(" ".join([text[1:]] + [shlex.quote(w.deny_value) for w in rest]), lay.st, lay.env, outer=lay.cmd)
        return None, False, {}
    try:
        expansion = [static_word(t) for t in shlex.split(text)]
    except ValueError:
        unknown(lay.st, lay.cmd, "git alias does not parse")
        return None, False, {}
    width = 1 if args[at].deny_value not in ("-c",) else 2
    globals_kept = args[:at] + args[at + width : i]
    return [lay.cmd.words[0]] + globals_kept + expansion + rest, False, {}


#: Every `kind` of data/wrappers.toml and its handler.
KINDS: dict[str, Callable[[Layer], Result]] = {
    "generic": _generic, "command": _command, "env": _env, "shell": _shell, "eval": _eval,
    "coproc": _coproc, "su": _su, "sg": _sg, "xargs": _xargs, "parallel": _parallel, "find": _find,
    "watch": _watch, "script": _script, "flock": _flock, "trap": _later, "alias": _later, "at": _at,
    "ssh": _ssh, "git": _git,
}


def _maybe_source(cmd: Cmd, st: State, env: Env, stdin_script: str | None, stdin_dynamic: bool) -> None:
    """`source FILE`/`. FILE`: taints what follows; a dynamic path or stdin cannot be read."""
    if cmd.basename not in ("source", "."):
        return
    st.tainted = True
    target = cmd.words[1] if len(cmd.words) > 1 else None
    if target is None or target.deny_value is None:
        unknown(st, cmd, "source of a dynamic path")
        return
    if target.deny_value in STDIN_DEVICES:
        st.result.opaque.append("source reads its script from stdin")
        if stdin_script is not None and not stdin_dynamic:
            recurse(stdin_script, st, env, outer=cmd, deny_only=True)
        else:
            unknown(st, cmd, "source reads its script from a pipe")
