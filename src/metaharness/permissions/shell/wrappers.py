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

import functools
import re
import shlex
from typing import TYPE_CHECKING, Callable, NamedTuple

from . import _lazy
from .entries import entry_set
from .interpreters import analyse_code
from .model import Cmd
from .walk import GIT_CONFIG_VARIABLES, MAX_DEPTH, Env, State, assigned_command, recurse, unknown
from .words import DYNAMIC_ITEM, SAFE_ASSIGNMENTS, Word, parse_word, static_word

if TYPE_CHECKING:
    from .gitconfig import AliasTable

__all__ = ["unwrap", "KINDS", "STDIN_DEVICES"]

STDIN_DEVICES = {"/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"}
_SHELL_VALUE_OPTS = {"-o", "+o", "-O", "+O", "--rcfile", "--init-file"}


class Layer(NamedTuple):
    """One wrapper layer being unwrapped, as every kind handler receives it."""

    key: str
    spec: dict
    cmd: Cmd
    state: State
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


def unwrap(cmd: Cmd, state: State, env: Env, stdin_script: str | None, stdin_dynamic: bool, walker) -> list[Cmd]:
    chain = [cmd]
    current = cmd
    layer = 0
    while current.words:
        prog = current.words[0]
        if prog.deny_value is None:
            unknown(state, current, "dynamic program name")
            break
        if prog.value is None and current.opaque is None:
            # `$'\x72m'`: decoded for deny/ask, but the program is not a plain word.
            current.opaque = "dynamic program name"
            state.result.opaque.append("dynamic program name")
        base = prog.deny_value.rsplit("/", 1)[-1]
        wrappers = _lazy("WRAPPERS")
        key = base if base in wrappers else base.lower()
        spec = wrappers.get(key)
        if spec is None:
            _maybe_source(current, state, env, stdin_script, stdin_dynamic)
            analyse_code(current, state, env, stdin_script, stdin_dynamic)  # `python3 -c CODE`, `awk PROG`
            break
        produced = len(state.result.cmds)
        handler = KINDS.get(spec.get("kind", ""))
        if handler is None:
            unknown(state, current, f"wrapper kind {spec.get('kind')!r} has no handler")
            break
        inner_words, transparent, extra = handler(Layer(key, spec, current, state, env, stdin_script, stdin_dynamic))
        if current.env_marks:
            transparent = False  # BASH_ENV=…, PATH=…, LD_PRELOAD=… change what the layer runs
        if inner_words is None:
            if len(state.result.cmds) > produced:
                # The wrapper ran a string (sh -c, eval, watch, trap …) analysed recursively.
                current.wrapper = key
                current.transparent = transparent
            break
        if not inner_words:
            break
        layer += 1
        inner = Cmd(words=inner_words, group=cmd.group, layer=layer, in_body=current.in_body,
                    cwd=_inner_cwd(current, spec), deny_only=current.deny_only or bool(extra.get("deny_only")),
                    unprovable=list(cmd.unprovable))
        inner.assigns = extra.get("assigns", [])
        inner.alt_tails = extra.get("alt_tails", False)
        inner.stdin = current.stdin
        inner.env_marks = list(current.env_marks)
        for name, word in inner.assigns:
            if not SAFE_ASSIGNMENTS(name) or not word.static:
                inner.unprovable.append(f"assignment {name}=")
                inner.env_marks.append(f"runs under the assignment {name}=")
            assigned_command(name, word, state, env, current)  # `env GIT_SSH_COMMAND=S git …`
        current.wrapper = key
        current.transparent = transparent
        current.inner = inner
        chain.append(inner)
        current = inner
        for more in extra.get("more", []):
            more.group, more.layer, more.cwd, more.in_body = cmd.group, layer, current.cwd, current.in_body
            more.unprovable.extend(cmd.unprovable)
            chain.append(more)
    for layer_cmd in chain:
        layer_name = layer_cmd.basename
        if layer_name is not None and layer_name[:3].casefold() == "git" and (len(layer_name) == 3 or layer_name[3] == "-"):
            spelled = git_spellings(layer_cmd, state, env)
            if spelled:
                chain.extend(spelled)
                break
    return chain


def _inner_cwd(cmd: Cmd, spec: dict) -> str | None:
    """Where the inner command runs: the layer's directory, or its `chdir_opts` value
    (`env -C DIR`, `sudo -D DIR`); unknown when that value is dynamic."""
    names = spec.get("chdir_opts")
    if not names:
        return cmd.cwd
    opts, _, _ = split_options(cmd.words[1:], spec)
    for name in names:
        if name in opts:
            from .fileops import based

            return based(cmd.cwd, opts[name])
    return cmd.cwd


# -- option parsing shared by the kinds ---------------------------------------------------------


def static_texts(words: list[Word]) -> list[str] | None:
    """Every word's text as bash would pass it (its deny value), or None when one is dynamic."""
    texts = [word.deny_value for word in words]
    return None if None in texts else [text for text in texts if text is not None]


def split_options(words: list[Word], spec: dict, extra_value_opts: tuple[str, ...] = ()) -> tuple[dict, list[Word], bool]:
    """Parse leading options of a wrapper. Returns (options, rest, dynamic_option_seen)."""
    value_opts = set(spec.get("value_opts", [])) | set(extra_value_opts)
    numeric = spec.get("numeric_opts", False)
    opts: dict[str, Word | None] = {}
    index = 0
    dynamic = False
    while index < len(words):
        word = words[index]
        value = word.deny_value
        if value is None:
            if word.may_dash:
                dynamic = True
            break
        if value == "--":
            index += 1
            break
        if not value.startswith("-") or value == "-":
            break
        if "=" in value and value.startswith("--"):
            option, _, val = value.partition("=")
            opts[option] = static_word(val)
            index += 1
            continue
        if value in value_opts:
            opts[value] = words[index + 1] if index + 1 < len(words) else None
            index += 2
            continue
        if numeric and re.fullmatch(r"-\d+", value):
            index += 1
            continue
        if not value.startswith("--") and len(value) > 2:
            # A getopt cluster: `-qc STRING`, `-n1`, `-uroot`.
            letters = value[1:]
            consumed = 1
            for position, letter in enumerate(letters):
                if "-" + letter in value_opts:
                    rest_ = letters[position + 1 :]
                    if rest_:
                        opts["-" + letter] = static_word(rest_)
                    else:
                        opts["-" + letter] = words[index + 1] if index + 1 < len(words) else None
                        consumed = 2
                    break
                opts["-" + letter] = None
            index += consumed
            continue
        opts[value] = None
        index += 1
    return opts, words[index:], dynamic


def _string_of(opts: dict, *names: str) -> tuple[bool, Word | None]:
    for name in names:
        if name in opts:
            return True, opts[name]
    return False, None


def _run_string(script: Word | None, layer: Layer, what: str, *, deny_only: bool = False) -> None:
    """A command string the layer runs: analysed as a script when static, else the call is unknown."""
    if script is None or script.deny_value is None:
        unknown(layer.state, layer.cmd, what)
    else:
        recurse(script.deny_value, layer.state, layer.env, outer=layer.cmd, deny_only=deny_only)


def _run_stdin(layer: Layer, what: str, *, deny_only: bool = False) -> None:
    """A layer that reads its script from stdin: a static heredoc/here-string is analysed."""
    if layer.stdin_script is not None and not layer.stdin_dynamic:
        recurse(layer.stdin_script, layer.state, layer.env, outer=layer.cmd, deny_only=deny_only)
    else:
        unknown(layer.state, layer.cmd, what)


# -- the kinds ------------------------------------------------------------------------------


def _generic(layer: Layer) -> Result:
    """`timeout 5 CMD`, `nice -n 1 CMD`, `strace -f CMD`, `chroot DIR CMD`: options, positionals, inner."""
    opts, rest, dyn = split_options(layer.args, layer.spec)
    transparent = bool(layer.spec.get("transparent", False))
    if dyn:
        unknown(layer.state, layer.cmd, f"dynamic option of {layer.key}")
        return None, transparent, {}
    rest = rest[int(layer.spec.get("positionals", 0)) :]
    return rest, transparent, {}


def _command(layer: Layer) -> Result:
    if any(word.value in ("-v", "-V") for word in layer.args[:2]):
        return None, True, {}
    _, rest, _ = split_options(layer.args, layer.spec)
    return rest, True, {}


def _env(layer: Layer) -> Result:
    opts, rest, dyn = split_options(layer.args, layer.spec)
    if dyn:
        unknown(layer.state, layer.cmd, "dynamic option of env")
        return None, False, {}
    given, script = _string_of(opts, "-S", "--split-string")
    if given:
        if script is None or script.deny_value is None:
            unknown(layer.state, layer.cmd, "dynamic env -S string")
            return None, False, {}
        recurse(" ".join([script.deny_value] + [word.deny_value or word.text for word in rest]), layer.state, layer.env, outer=layer.cmd)
        return None, False, {}
    assigns: list[tuple[str, Word]] = []
    while rest and rest[0].deny_value is not None and re.match(r"[A-Za-z_][A-Za-z0-9_]*=", rest[0].deny_value):
        name, _, val = rest[0].text.partition("=")
        assigns.append((name, parse_word(val, layer.state.home)))
        rest = rest[1:]
    clean = not opts and all(SAFE_ASSIGNMENTS(assigned) and word.static for assigned, word in assigns)
    return rest, clean, {"assigns": assigns}


def _shell(layer: Layer) -> Result:
    """`sh -c STRING`, `bash -s`, `bash /dev/stdin`, `bash <<EOF`: the script, analysed."""
    key, cmd, state = layer.key, layer.cmd, layer.state
    args = layer.args
    index = 0
    has_c = False
    reads_stdin_flag = False
    while index < len(args):
        word = args[index]
        value = word.deny_value
        if value is None:
            if word.may_dash:
                unknown(state, cmd, f"dynamic option of {key}")
                return None, True, {}
            break
        if value == "--" or value == "-":
            index += 1
            if value == "-":
                reads_stdin_flag = True
            break
        if value in _SHELL_VALUE_OPTS:
            index += 2
            continue
        if value.startswith("--"):
            index += 1
            continue
        if value[:1] in "-+" and len(value) > 1:
            letters = value[1:]
            if "c" in letters:
                has_c = True
            if "s" in letters:
                reads_stdin_flag = True
            index += 1
            continue
        break
    operands = args[index:]
    if has_c:
        if not operands:
            unknown(state, cmd, f"{key} -c without a command string")
            return None, True, {}
        script = operands[0]
        if script.deny_value is None:
            unknown(state, cmd, f"{key} -c with a dynamic string")
            return None, True, {}
        recurse(script.deny_value, state, Env(layer.env.depth, layer.env.in_body, True, False, layer.env.deny_only), outer=cmd,
                unprovable=None if script.value is not None else "ANSI-C string in -c")
        return None, True, {}
    if operands and not reads_stdin_flag:
        first = operands[0].deny_value
        if first is None:
            unknown(state, cmd, f"{key} runs a script of a dynamic path")
            return None, False, {}
        if first not in STDIN_DEVICES:
            return None, False, {}  # `bash script.sh`: an ordinary program running a file
    _run_stdin(layer, f"{key} reads its script from a pipe or a non-static source")
    return None, True, {}


_KEY_VALUE = re.compile(r"\s*[=\s]\s*")


def _keyed_string(spelled: Word | None, keys: frozenset[str]) -> tuple[bool, Word | None]:
    """An option value `KEY=S` (or `KEY S`, as ssh's `-o` takes it): (True, S) when KEY is one of
    `keys` (casefolded), a command string; (True, None) when the value is dynamic, so it may name
    one (toward denying); (False, None) for any other key."""
    if spelled is None or spelled.deny_value is None:
        return True, None
    key, _, string = _KEY_VALUE.sub("=", spelled.deny_value.strip(), count=1).partition("=")
    return (True, static_word(string)) if key.casefold() in keys else (False, None)


_KEYED_OPTIONS: dict[int, tuple[dict, dict[str, frozenset[str]]]] = {}


def _keyed_options(spec: dict) -> dict[str, frozenset[str]]:
    """A wrapper entry's `keyed_strings` as {option: its keys, case-folded}, built once per entry
    object (kept beside it, so its id is not reused)."""
    kept = _KEYED_OPTIONS.get(id(spec))
    if kept is None or kept[0] is not spec:
        table: dict[str, list[str]] = spec.get("keyed_strings", {})
        options = {name: frozenset(key.casefold() for key in keys) for name, keys in table.items()}
        kept = _KEYED_OPTIONS[id(spec)] = (spec, options)
    return kept[1]


def keyed_strings(layer: Layer) -> list[Word | None]:
    """The command strings a layer is given as the value of a key of an option (`keyed_strings`:
    `ssh -o ProxyCommand=S`, `tar --checkpoint-action=exec=S`), in every spelling: the option and
    its value as two words, joined by `=`, or a one-letter option with the value attached."""
    options = _keyed_options(layer.spec)
    if not options:
        return []
    found: list[Word | None] = []
    args = layer.args
    for index, word in enumerate(args):
        value = word.deny_value
        if value is None or not value.startswith("-"):
            continue
        name, equals, attached = value.partition("=")
        if value in options:
            hit, string = _keyed_string(args[index + 1] if index + 1 < len(args) else None, options[value])
        elif equals and name in options:
            hit, string = _keyed_string(static_word(attached), options[name])
        elif not value.startswith("--") and value[:2] in options and len(value) > 2:
            hit, string = _keyed_string(static_word(value[2:]), options[value[:2]])
        else:
            continue
        if hit:
            found.append(string)
    return found


def _strings_given(layer: Layer) -> tuple[list[Word | None], list[Word]]:
    """The scripts a `foreign`/`runner` layer is given through its `string_opts` (`-c S`, a
    cluster ending in the letter, `--run=S`), scanned over every word (options may follow
    operands), with its `keyed_strings`, and the words that are neither options nor their values
    (with `plus_strings`, a word `+S` is a string too: `vim +S`, `less +S`)."""
    names = entry_set(layer.spec, "string_opts")
    letters = {name[1] for name in names if len(name) == 2}
    value_opts = entry_set(layer.spec, "value_opts") | entry_set(layer.spec, "keyed_strings")
    plus = bool(layer.spec.get("plus_strings"))
    args = layer.args
    strings: list[Word | None] = keyed_strings(layer)
    rest: list[Word] = []
    index = 0
    while index < len(args):
        value = args[index].deny_value
        following = args[index + 1] if index + 1 < len(args) else None
        if plus and args[index].text.startswith("+"):
            strings.append(static_word(value[1:]) if value is not None else None)
        elif value is None or value == "-" or not value.startswith("-"):
            rest.append(args[index])
        elif value in names:
            strings.append(following)
            index += 1
        elif "=" in value and value.split("=", 1)[0] in names:
            strings.append(static_word(value.split("=", 1)[1]))
        elif value in value_opts:
            index += 1
        elif not value.startswith("--") and any(letter in letters for letter in value[1:]):
            strings.append(following)  # `-ic STRING`
            index += 1
        index += 1
    return strings, rest


def _foreign(layer: Layer) -> Result:
    """A shell whose language is not POSIX sh's (fish, tcsh, csh, …): whatever it runs from a
    string or from stdin is unreadable, so the program is unknown (maybe against every Bash deny
    rule); the string's words are still analysed as shell, for deny."""
    strings, rest = _strings_given(layer)
    prefixes = tuple(layer.spec.get("shell_prefixes", ()))
    for script in strings:
        unknown(layer.state, layer.cmd, f"{layer.key} runs a string in a language that is not sh")
        if script is not None and script.deny_value is not None:
            text = script.deny_value.lstrip(": \t")
            # `vim -c '!S'`, `gdb -ex 'shell S'`: the language's own way to hand S to a shell
            shell = next((text[len(p):] for p in prefixes if text.startswith(p)), None)
            recurse(shell if shell is not None else script.deny_value, layer.state, layer.env, outer=layer.cmd,
                    deny_only=True)
    if strings or layer.spec.get("script_operands") is False:
        return None, False, {}  # `vim FILE`, `git log | less`: what they read is data
    first = rest[0].deny_value if rest else None
    if rest and first is not None and first not in STDIN_DEVICES:
        return None, False, {}  # `fish script.fish`: an ordinary program running a file
    if rest or layer.stdin_script is not None or layer.stdin_dynamic:
        unknown(layer.state, layer.cmd, f"{layer.key} reads a script in a language that is not sh")
        if layer.stdin_script is not None:
            recurse(layer.stdin_script, layer.state, layer.env, outer=layer.cmd, deny_only=True)
    return None, False, {}


def _runner(layer: Layer) -> Result:
    """A program that hands a string to a POSIX shell (`nix-shell --run S`, `entr -s S`): the
    string is analysed like `sh -c`; with `argv`, the operands without a string are the command."""
    strings, rest = _strings_given(layer)
    for script in strings:
        _run_string(script, layer, f"dynamic {layer.key} command string")
    if strings or not layer.spec.get("argv"):
        return None, False, {}
    _, inner, dyn = split_options(layer.args, layer.spec)
    if dyn:
        unknown(layer.state, layer.cmd, f"dynamic option of {layer.key}")
        return None, False, {}
    return inner, False, {}


def _eval(layer: Layer) -> Result:
    args = layer.args
    if args and args[0].deny_value == "--":
        args = args[1:]  # eval takes `--` as the end of (no) options
    if not args:
        return None, True, {}
    texts = static_texts(args)
    if texts is None:
        unknown(layer.state, layer.cmd, "eval of a dynamic string")
        return None, True, {}
    allow_dynamic = any(word.value is None for word in args)
    recurse(" ".join(texts), layer.state, layer.env, outer=layer.cmd, same_process=True,
            unprovable="ANSI-C string in eval" if allow_dynamic else None)
    return None, True, {}


def _coproc(layer: Layer) -> Result:
    unknown(layer.state, layer.cmd, "coproc is not modelled by the parser")
    return layer.args, False, {}


def _su(layer: Layer) -> Result:
    """`su [-] [USER] -c STRING`, `runuser -u USER -- CMD`, `runuser -l USER -c STRING`."""
    args = layer.args
    opts, rest, _ = split_options(args, {"value_opts": layer.spec.get("value_opts", []) + ["-c", "--command"]})
    # su accepts options after the user name too (`su - root -c '…'`): scan every word.
    for key, word in enumerate(args):
        value = word.deny_value
        if value is None:
            continue
        if value in ("-c", "--command") or (re.fullmatch(r"-[a-z]*c", value) and not value.startswith("--")):
            opts["-c"] = args[key + 1] if key + 1 < len(args) else None
        elif value.startswith("--command="):
            opts["-c"] = static_word(value.split("=", 1)[1])
    given, script = _string_of(opts, "-c", "--command")
    if given:
        shell = opts.get("-s") or opts.get("--shell")
        if shell is not None:
            spec = _lazy("WRAPPERS").get((shell.deny_value or "").rsplit("/", 1)[-1])
            if shell.deny_value is None or spec is None or spec.get("kind") not in ("shell",):
                # `su -s /usr/bin/fish -c S`: a shell we cannot read (or a dynamic one) runs S.
                unknown(layer.state, layer.cmd, f"{layer.key} runs its string in a shell that is not sh")
                _run_string(script, layer, f"dynamic {layer.key} -c string", deny_only=True)
                return None, False, {}
        _run_string(script, layer, f"dynamic {layer.key} -c string")
        return None, False, {}
    if "-u" in opts or "--user" in opts:
        return rest, False, {}
    return None, False, {}


def _sg(layer: Layer) -> Result:
    """`sg [-] GROUP [-c] COMMAND`: the command is a string run by /bin/sh."""
    args = [word for word in layer.args]
    if args and args[0].deny_value == "-":
        args = args[1:]
    if not args:
        return None, False, {}
    rest = args[1:]
    if rest and rest[0].deny_value == "-c":
        rest = rest[1:]
    if not rest:
        _run_stdin(layer, "sg reads its command from stdin")
        return None, False, {}
    texts = static_texts(rest)
    if texts is None:
        unknown(layer.state, layer.cmd, "dynamic sg command")
        return None, False, {}
    recurse(" ".join(texts), layer.state, layer.env, outer=layer.cmd)
    return None, False, {}


def _xargs(layer: Layer) -> Result:
    opts, rest, dyn = split_options(layer.args, layer.spec)
    if dyn:
        unknown(layer.state, layer.cmd, "dynamic option of xargs")
        return None, False, {}
    replace = None
    for option in ("-I", "-i", "--replace"):
        if option in opts:
            replace = opts[option].deny_value if opts[option] is not None else "{}"
    inner = rest or [static_word("echo")]
    if replace:
        inner = [DYNAMIC_ITEM if (word.deny_value and replace in word.deny_value) else word for word in inner]
    return inner + [DYNAMIC_ITEM], False, {"alt_tails": True}


_PARALLEL_SEPARATORS = {":::", "::::", ":::+", "::::+"}
_PARALLEL_PLACEHOLDER = re.compile(r"\{(?:\d*[./#%]*|//|/\.|\.)\}|\{\d+\}")


def _parallel(layer: Layer) -> Result:
    """GNU parallel: the words before `:::` are a command template run by a shell; `{}` and its
    variants are the items; without a placeholder the items are appended."""
    opts, rest, dyn = split_options(layer.args, layer.spec)
    if dyn:
        unknown(layer.state, layer.cmd, "dynamic option of parallel")
        return None, False, {}
    template: list[Word] = []
    items: list[Word] = []
    seen_sep = False
    for word in rest:
        if word.deny_value in _PARALLEL_SEPARATORS:
            seen_sep = True
            continue
        (items if seen_sep else template).append(word)
    if not template:
        _run_stdin(layer, "parallel reads its commands from stdin")
        return None, False, {}
    template_texts = static_texts(template)
    if template_texts is None:
        unknown(layer.state, layer.cmd, "dynamic parallel command")
        return None, False, {}
    text = " ".join(template_texts)
    if _PARALLEL_PLACEHOLDER.search(text):
        text = _PARALLEL_PLACEHOLDER.sub('"$PARALLEL_ITEM"', text)
    elif items and (item_texts := static_texts(items)) is not None:
        text += " " + " ".join(shlex.quote(item) for item in item_texts)
    else:
        text += ' "$PARALLEL_ITEM"'
    recurse(text, layer.state, layer.env, outer=layer.cmd)
    return None, False, {}


def _find(layer: Layer) -> Result:
    args = layer.args
    inners: list[list[Word]] = []
    index = 0
    while index < len(args):
        value = args[index].deny_value
        if value in ("-exec", "-execdir", "-ok", "-okdir"):
            end = index + 1
            argv: list[Word] = []
            while end < len(args) and args[end].deny_value not in (";", "+"):
                word = args[end]
                argv.append(DYNAMIC_ITEM if word.deny_value == "{}" else word)
                end += 1
            if argv:
                inners.append(argv)
            index = end + 1
            continue
        if value is None and args[index].may_dash:
            unknown(layer.state, layer.cmd, "dynamic find expression")
        index += 1
    if not inners:
        return None, False, {}
    return inners[0], False, {"more": [Cmd(words=word) for word in inners[1:]]}


def _watch(layer: Layer) -> Result:
    opts, rest, dyn = split_options(layer.args, layer.spec)
    texts = static_texts(rest)
    if dyn or texts is None:
        unknown(layer.state, layer.cmd, "dynamic watch command")
        return None, False, {}
    if "-x" in opts or "--exec" in opts:
        return rest, False, {}
    if texts:
        recurse(" ".join(texts), layer.state, layer.env, outer=layer.cmd)
    return None, False, {}


def _script(layer: Layer) -> Result:
    opts, _, _ = split_options(layer.args, layer.spec, ("-c", "--command"))
    given, script = _string_of(opts, "-c", "--command")
    if given:
        _run_string(script, layer, "dynamic script -c string")
    return None, False, {}


def _flock(layer: Layer) -> Result:
    opts, rest, _ = split_options(layer.args, layer.spec, ("-c", "--command"))
    given, script = _string_of(opts, "-c", "--command")
    if given:
        _run_string(script, layer, "dynamic flock -c string")
        return None, False, {}
    if rest and rest[0].deny_value is not None and rest[1:2] and rest[1].deny_value in ("-c", "--command"):
        _run_string(rest[2] if len(rest) > 2 else None, layer, "dynamic flock -c string")
        return None, False, {}
    return rest[1:], False, {}


def _later(layer: Layer) -> Result:
    """`trap STRING SIG…`, `alias NAME=STRING`: strings that run later, analysed for deny/ask."""
    for word in layer.args:
        value = word.deny_value
        if value is not None and value.startswith("-"):
            continue
        if layer.key == "alias":
            if value is None:
                unknown(layer.state, layer.cmd, "dynamic alias value")
                continue
            if "=" in value:
                recurse(value.partition("=")[2], layer.state, layer.env, outer=layer.cmd, deny_only=True)
            continue
        if value is None:
            unknown(layer.state, layer.cmd, "dynamic trap action")
        else:
            recurse(value, layer.state, layer.env, outer=layer.cmd, deny_only=True)
        break
    layer.state.tainted = True
    return None, False, {}


def _rebind(layer: Layer) -> Result:
    """`hash -p PATH NAME`, `enable -f LIB NAME`: a later command named NAME runs something the
    call does not show, so the program is unknown; the shell is changed for what follows."""
    rebinds = set(layer.spec.get("rebind_opts", ()))
    for word in layer.args:
        value = word.deny_value
        if value is None or (value.startswith("-") and not value.startswith("--") and rebinds & {f"-{c}" for c in value[1:]}):
            unknown(layer.state, layer.cmd, f"{layer.key} changes what a later command name runs")
            layer.state.tainted = True
            break
    return None, False, {}


def _at(layer: Layer) -> Result:
    """`at TIME`, `batch`: the job's script is read from stdin (or `-f FILE`, outside the reach of
    argument inspection); it runs later, so it is analysed for deny/ask."""
    opts, _, dyn = split_options(layer.args, layer.spec)
    if any(option in opts for option in ("-l", "-r", "-d", "-c")):
        return None, False, {}  # list, remove or print jobs: nothing is scheduled
    if "-f" in opts:
        return None, False, {}
    _run_stdin(layer, f"{layer.key} reads its job from a pipe or a non-static source", deny_only=True)
    return None, False, {}


def _ssh(layer: Layer) -> Result:
    """`ssh [opts] HOST [CMD…]`: the words after the host are a command line for the remote shell,
    analysed for deny/ask; without them, a script on stdin runs there."""
    for string in keyed_strings(layer):  # `-o ProxyCommand=S`: run here, by a shell
        _run_string(string, layer, "dynamic ssh -o value may name a command")
    opts, rest, dyn = split_options(layer.args, layer.spec)
    if dyn:
        unknown(layer.state, layer.cmd, "dynamic option of ssh")
        return None, False, {}
    if not rest:
        return None, False, {}
    remote = rest[1:]
    if remote and remote[0].deny_value == "--":
        remote = remote[1:]
    if not remote:
        if layer.stdin_script is not None or layer.stdin_dynamic:
            _run_stdin(layer, "ssh runs a script from a pipe", deny_only=True)
        return None, False, {}
    texts = static_texts(remote)
    if texts is None:
        unknown(layer.state, layer.cmd, "dynamic ssh remote command")
        return None, False, {}
    recurse(" ".join(texts), layer.state, layer.env, outer=layer.cmd, deny_only=True)
    return None, False, {}


def _git(layer: Layer) -> Result:
    """`git [GLOBAL…] NAME …` where NAME is an alias: the alias is what runs (`!…` through a shell,
    otherwise the git command it names, unwrapped again: an alias of an alias is followed).

    The alias comes from `-c alias.NAME=VALUE` (which wins), then the configuration files git reads
    in the directory it runs in (gitconfig.py). A built-in subcommand is never an alias (git ignores
    one of the same name: the `builtins` of the git entry), and is decided without reading a file."""
    args = layer.args
    global_value_options = entry_set(_lazy("OPTIONS")["git"], "global_value")
    aliases: dict[str, tuple[int, Word]] = {}
    directories: list[Word] = []  # -C DIR, in order
    git_dir: Word | None = None
    work_tree: Word | None = None
    index = 0
    while index < len(args):
        word = args[index]
        spelled = word.deny_value
        if spelled is None:
            break
        if not spelled.startswith("-") or spelled == "--":
            break
        value: Word | None = None
        width = 1
        operand = args[index + 1] if index + 1 < len(args) else None
        if spelled in ("-c", "--config-env"):
            value, width = operand, 2
        elif spelled.startswith("-c") and len(spelled) > 2:
            value = static_word(spelled[2:])
        elif spelled.startswith("--config-env="):
            value = static_word(spelled.split("=", 1)[1])
        elif spelled.startswith("--git-dir="):
            git_dir = static_word(spelled.split("=", 1)[1])
        elif spelled.startswith("--work-tree="):
            work_tree = static_word(spelled.split("=", 1)[1])
        elif spelled in global_value_options:
            width = 2
            if spelled == "-C" and operand is not None:
                directories.append(operand)
            elif spelled == "--git-dir":
                git_dir = operand
            elif spelled == "--work-tree":
                work_tree = operand
        if value is not None:
            if spelled.startswith("--config-env"):
                if (value.deny_value or "alias.").casefold().startswith("alias."):
                    unknown(layer.state, layer.cmd, "git alias from the environment")
                    return None, False, {}
            elif value.deny_value is None:
                prefix = value.shape_prefix().casefold()
                if prefix.startswith("alias.") or "alias.".startswith(prefix):
                    unknown(layer.state, layer.cmd, "dynamic git -c value may define an alias")
                    return None, False, {}
                if _git_command_key(prefix.partition("=")[0], layer.spec, prefix="=" not in prefix):
                    unknown(layer.state, layer.cmd, "dynamic git -c value may name a command")
                    return None, False, {}
            else:
                key, equals, val = value.deny_value.partition("=")
                if equals and key.casefold().startswith("alias."):
                    aliases[key[len("alias."):].casefold()] = (index, static_word(val))
                elif _git_command_key(key, layer.spec):
                    # what git hands to a shell when it needs it: analysed for deny/ask
                    recurse(val.removeprefix("!"), layer.state, layer.env, outer=layer.cmd, deny_only=True)
        index += width
    if index >= len(args):
        return None, False, {}
    sub_text = args[index].deny_value
    if sub_text is not None and sub_text in entry_set(layer.spec, "builtins"):
        return None, False, {}
    hit = aliases.get(sub_text.casefold()) if sub_text is not None else None
    where = (directories, git_dir, work_tree)
    if hit is not None:
        at_index, value = hit
        width = 1 if args[at_index].deny_value not in ("-c",) else 2
        globals_kept = args[:at_index] + args[at_index + width : index]
        return _git_alias(layer, value.deny_value or "", globals_kept, args[index + 1 :], where)
    table = _git_alias_table(layer, where)
    if table is None:
        return None, False, {}
    if sub_text is None:
        if aliases or table.values or table.uncertain or table.unknown:
            unknown(layer.state, layer.cmd, "dynamic git subcommand may name an alias")
        return None, False, {}
    name = sub_text.casefold()
    if table.unknown is not None or name in table.uncertain:
        unknown(layer.state, layer.cmd, f"git alias table unreadable: {table.unknown or 'a conditional include'}")
        return None, False, {}
    if name not in table.values:
        return None, False, {}  # `git-NAME` from PATH, a program of its own
    text = table.values[name]
    if text is None:
        unknown(layer.state, layer.cmd, "git alias without a value")
        return None, False, {}
    return _git_alias(layer, text, args[:index], args[index + 1 :], where, table)


MAX_GIT_ALIAS_LAYERS = 16  # git stops an alias loop with an error; the analysis stops here, unknown


def _git_alias(layer: Layer, text: str, globals_kept: list[Word], rest: list[Word], where: "_GitWhere",
               table: "AliasTable | None" = None) -> Result:
    """What an alias runs: `!TEXT ARGS…` through a shell, in the top of the working tree (as git
    runs it: relative paths in it are the tree's), or `git GLOBALS TEXT ARGS…` (unwrapped again by
    `unwrap`, so an alias naming an alias is expanded in turn)."""
    if layer.cmd.layer >= MAX_GIT_ALIAS_LAYERS or layer.env.depth >= MAX_DEPTH:
        unknown(layer.state, layer.cmd, "git alias loop")
        return None, False, {}
    if text.startswith("!"):
        texts = static_texts(rest)
        if texts is None:
            unknown(layer.state, layer.cmd, "git shell alias with dynamic arguments")
            return None, False, {}
        if table is None:
            table = _git_alias_table(layer, where)
            if table is None:
                return None, False, {}
        cmd = layer.cmd
        cwd, cmd.cwd = cmd.cwd, table.top
        try:
            recurse(" ".join([text[1:]] + [shlex.quote(item) for item in texts]), layer.state, layer.env, outer=cmd)
        finally:
            cmd.cwd = cwd
        return None, False, {}
    try:
        expansion = [static_word(token) for token in shlex.split(text)]
    except ValueError:
        unknown(layer.state, layer.cmd, "git alias does not parse")
        return None, False, {}
    return [layer.cmd.words[0]] + globals_kept + expansion + rest, False, {}


# Where a git command runs and what repository it names: its `-C DIR`s, `--git-dir`, `--work-tree`.
_GitWhere = tuple[list[Word], Word | None, Word | None]


def _git_alias_table(layer: Layer, where: _GitWhere) -> "AliasTable | None":
    """The alias table of the configuration files git reads for this command (gitconfig.py), or
    None with the command made unknown when where git runs or what it reads cannot be told: an
    unknown or dynamic directory, a dynamic `--git-dir`, a variable git reads set elsewhere in the
    call (`export GIT_DIR=…; git x`) or dynamically. The table depends on the disk now: the
    command's analysis is not kept; the decision is, while every file and variable the table was
    read from stays the same (gitconfig.py witnesses them)."""
    from .fileops import based
    from .gitconfig import aliases as read_aliases

    state, cmd = layer.state, layer.cmd
    directories, git_dir, work_tree = where
    cwd = cmd.cwd
    for directory in directories:
        cwd = based(cwd, directory)
    if cwd is None:
        unknown(state, cmd, "git runs in an unknown directory: its aliases cannot be read")
        return None
    for option, word in (("--git-dir", git_dir), ("--work-tree", work_tree)):
        if word is not None and (word.deny_value is None or word.value is None):
            unknown(state, cmd, f"dynamic {option}: git's aliases cannot be read")
            return None
    assigned: dict[str, str] = {}
    home = state.home
    own: set[str] = set()
    for name, word in cmd.assigns:
        if name in GIT_CONFIG_VARIABLES or name.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_")) or name == "HOME":
            if word.deny_value is None or word.value is None:
                unknown(state, cmd, f"dynamic {name}: git's aliases cannot be read")
                return None
            own.add(name)
            assigned[name] = word.value
            if name == "HOME":
                home = word.value
    elsewhere = sorted(state.git_env - own) + (["HOME"] if state.home_assigned and "HOME" not in own else [])
    if elsewhere:
        unknown(state, cmd, f"{elsewhere[0]} set elsewhere in the call: git's aliases cannot be read")
        return None
    cmd.read_disk = True
    return read_aliases(cwd, home, assigned, git_dir.value if git_dir is not None else None,
                        work_tree.value if work_tree is not None else None)


def git_spellings(cmd: Cmd, state: State, env: Env) -> list[Cmd]:
    """Git by another name (issue 24): what a git command also is, for deny and ask only.

    * `git-push …`, `/usr/lib/git-core/git-send-pack …`: the dashed program is `git push …`,
      `git send-pack …` (a deny-only layer of its own);
    * a subcommand of the `spellings` table (`send-pack`, `subtree push`, `remote-https`, `pull`) is
      also the subcommand it names (`git push …`, `git fetch …`): a deny-only layer whose match is
      only `maybe`, for it may not be one (`git send-pack` of nothing);
    * `submodule foreach CMD`, `bisect run CMD`, `rebase -x CMD`, `filter-branch --tree-filter CMD`
      run CMD, and `git config alias.NAME VALUE` (or a command key: `core.pager`, …) stores a command
      a later `git NAME` runs: analysed for deny and ask, like `alias NAME=VALUE`. A dynamic one
      cannot be read: the program is unknown."""
    spec = _lazy("WRAPPERS")["git"]
    base = cmd.basename or ""
    words = cmd.words
    if len(base) > 4:  # `git-send-pack ARGS`: `git send-pack ARGS`
        globals_: list[Word] = []
        sub_word = static_word(base[4:])
        rest = words[1:]
    else:
        global_value_options = entry_set(_lazy("OPTIONS")["git"], "global_value")
        index = 1
        while index < len(words):
            spelled = words[index].deny_value
            if spelled is None or not spelled.startswith("-") or spelled == "--":
                break
            index += 2 if spelled in global_value_options else 1
        if index >= len(words) or words[index].deny_value is None:
            return []
        globals_, sub_word, rest = words[1:index], words[index], words[index + 1 :]
    sub = (sub_word.deny_value or "").casefold()
    made: list[Cmd] = []

    def layer(sub_words: list[Word], spelling: str | None) -> None:
        extra = Cmd([words[0] if len(base) == 3 else static_word("git"), *globals_, *sub_words, *rest],
                    group=cmd.group, layer=cmd.layer + 1, in_body=cmd.in_body, cwd=cmd.cwd, deny_only=True,
                    unprovable=list(cmd.unprovable))
        extra.spelling = spelling
        made.append(extra)

    if len(base) > 4:
        layer([sub_word], None)
    later = {word.deny_value.casefold() for word in rest if word.deny_value and not word.deny_value.startswith("-")}
    spellings = spec.get("spellings", {})
    for key, names in spellings.items():
        first, _, second = key.partition(" ")
        if first == sub or (first.endswith("*") and sub.startswith(first[:-1])):
            if not second or second in later:
                for name in names:
                    layer([static_word(name)], f"git {key}")
    for key in spec.get("runs_rest", ()):
        first, _, second = key.partition(" ")
        if first == sub:
            _git_runs_rest(cmd, rest, second, state, env)
    opts = spec.get("runs_opts", {}).get(sub)
    if opts:
        _git_runs_opts(cmd, rest, opts, state, env)
    if sub == "config":
        _git_config_command(cmd, rest, spec, state, env)
    return made


def _git_runs_rest(cmd: Cmd, rest: list[Word], second: str, state: State, env: Env) -> None:
    """`git submodule foreach [--recursive] CMD …`, `git bisect run CMD …`: CMD runs."""
    for position, word in enumerate(rest):
        if word.deny_value is None:
            unknown(state, cmd, f"dynamic git {second} argument")
            return
        if word.deny_value.casefold() == second:
            tail = rest[position + 1 :]
            while tail and (tail[0].deny_value or "").startswith("-") and tail[0].deny_value not in ("-",):
                tail = tail[1:]  # `--recursive`, `--quiet`
            texts = static_texts(tail)
            if texts is None:
                unknown(state, cmd, f"dynamic git {second} command")
            elif texts:
                recurse(texts[0] if len(texts) == 1 else shlex.join(texts), state, env, outer=cmd, deny_only=True)
            return


def _git_runs_opts(cmd: Cmd, rest: list[Word], opts: list[str], state: State, env: Env) -> None:
    """`git rebase -x CMD`, `--exec=CMD`, `-xCMD`, `git filter-branch --tree-filter CMD`: CMD runs."""
    for position, word in enumerate(rest):
        spelled = word.deny_value
        if spelled is None:
            continue
        value: Word | None = None
        found = False
        for opt in opts:
            if spelled == opt:
                found, value = True, rest[position + 1] if position + 1 < len(rest) else None
            elif opt.startswith("--") and spelled.startswith(opt + "="):
                found, value = True, static_word(spelled[len(opt) + 1 :])
            elif not opt.startswith("--") and spelled.startswith(opt) and len(spelled) > len(opt):
                found, value = True, static_word(spelled[len(opt) :])
        if not found:
            continue
        if value is None:
            continue
        if value.deny_value is None:
            unknown(state, cmd, "dynamic git command option")
            return
        recurse(value.deny_value, state, env, outer=cmd, deny_only=True)


_GIT_CONFIG_VERBS = {"set", "get", "unset", "list", "edit", "rename-section", "remove-section"}
_GIT_CONFIG_VALUE_OPTS = {"-f", "--file", "--blob", "--type", "--default", "--comment", "--value", "--url"}


def _git_config_command(cmd: Cmd, rest: list[Word], spec: dict, state: State, env: Env) -> None:
    """`git config [set] alias.NAME VALUE`: a later `git NAME` runs `git VALUE` (`!VALUE` through a
    shell); `git config core.pager VALUE` (a command key) stores a command git runs. A dynamic word
    before the key may be the key: unknown."""
    index = 0
    while index < len(rest):
        spelled = rest[index].deny_value
        if spelled is None:
            unknown(state, cmd, "dynamic git config key may define an alias")
            return
        if spelled.startswith("-"):
            index += 2 if spelled in _GIT_CONFIG_VALUE_OPTS else 1
        elif spelled.casefold() in _GIT_CONFIG_VERBS:
            index += 1
        else:
            break
    if index + 1 >= len(rest):
        return  # no key, or a read of it
    key = (rest[index].deny_value or "").casefold()
    is_alias = key.startswith("alias.")
    if not is_alias and not _git_command_key(key, spec):
        return
    value = rest[index + 1]
    if value.deny_value is None:
        unknown(state, cmd, "dynamic git config value may name a command")
        return
    text = value.deny_value
    if text.startswith("!") or not is_alias:
        recurse(text.removeprefix("!"), state, env, outer=cmd, deny_only=True)
    else:
        recurse("git " + text, state, env, outer=cmd, deny_only=True)


def _git_command_key(key: str, spec: dict, *, prefix: bool = False) -> bool:
    """Whether git config KEY (casefolded) names a command git runs through a shell (the entry's
    `command_keys`, `*` one dotted name); with `prefix`, whether a key that begins so may."""
    key = key.casefold()
    for pattern in spec.get("command_keys", ()):
        regex = _git_key_pattern(pattern)
        if regex.fullmatch(key) or (prefix and _could_begin(pattern, key)):
            return True
    return False


@functools.cache
def _git_key_pattern(pattern: str) -> re.Pattern[str]:
    return re.compile(r"[^.]+".join(re.escape(part) for part in pattern.split("*")))


def _could_begin(pattern: str, prefix: str) -> bool:
    """A dynamic key's static beginning that a key of `pattern` could start with."""
    head = pattern.split("*", 1)[0]
    return head.startswith(prefix) or prefix.startswith(head)


#: Every `kind` of data/wrappers.toml and its handler.
KINDS: dict[str, Callable[[Layer], Result]] = {
    "generic": _generic, "command": _command, "env": _env, "shell": _shell, "eval": _eval,
    "coproc": _coproc, "su": _su, "sg": _sg, "xargs": _xargs, "parallel": _parallel, "find": _find,
    "watch": _watch, "script": _script, "flock": _flock, "trap": _later, "alias": _later, "at": _at,
    "ssh": _ssh, "git": _git, "foreign": _foreign, "runner": _runner, "rebind": _rebind,
}


def _maybe_source(cmd: Cmd, state: State, env: Env, stdin_script: str | None, stdin_dynamic: bool) -> None:
    """`source FILE`/`. FILE`: taints what follows; a dynamic path or stdin cannot be read."""
    if cmd.basename not in ("source", "."):
        return
    state.tainted = True
    target = cmd.words[1] if len(cmd.words) > 1 else None
    if target is None or target.deny_value is None:
        unknown(state, cmd, "source of a dynamic path")
        return
    if target.deny_value in STDIN_DEVICES:
        state.result.opaque.append("source reads its script from stdin")
        if stdin_script is not None and not stdin_dynamic:
            recurse(stdin_script, state, env, outer=cmd, deny_only=True)
        else:
            unknown(state, cmd, "source reads its script from a pipe")
