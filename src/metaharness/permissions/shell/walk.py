"""The tree walk: from a tree-sitter-bash tree to simple commands (docs/reference/permissions.md).

What belongs here: parsing each variant the pre-pass gives, the walk over every node, and what a
node contributes — a simple command, an assignment, a redirect, a nested script — through one
dispatch table, `HANDLERS`, keyed by node type.

Rules this module keeps:
* fail-closed by construction: every node type of the pinned grammar is named in `HANDLERS` or in
  `OPAQUE_BY_DEFAULT`; a node whose type the table does not handle makes the call opaque (and
  program-unknown: maybe against every Bash deny rule) and its children are still walked;
* the walk never stops early: limits (64 commands, depth 8) and parse errors mark the call opaque
  but extraction continues, so deny is evaluated over everything;
* text the grammar keeps unparsed but bash runs — parameter-expansion operands, subscripts,
  unquoted here-document bodies, backquotes escaped inside backquotes — is scanned lexically
  (`lexical.substitutions`) and analysed as commands;
* no knowledge of rules or modes: the walk only describes the command.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Callable, NamedTuple

from . import _lazy
from .lexical import SURROGATE, blank_time_keyword, has_unquoted_cr, prepass, substitutions
from .model import Analysis, Cmd, PathRef
from .words import SAFE_ASSIGNMENTS, Word, _PLAIN, parse_word, static_word

if TYPE_CHECKING:
    import tree_sitter

MAX_COMMANDS = 64
MAX_DEPTH = 8
EXEMPT_TARGETS = {"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/fd/1", "/dev/fd/2"}


@lru_cache(maxsize=1)
def _parser() -> "tree_sitter.Parser":
    import tree_sitter

    return tree_sitter.Parser(_lazy("_LANGUAGE"))


@dataclass(slots=True)
class State:
    """What one analysis carries across commands: the working directory, taint, counters."""

    home: str | None
    cwd: str | None
    result: Analysis
    tainted: bool = False
    home_assigned: bool = False
    git_env: frozenset[str] = frozenset()  # GIT_CONFIG_VARIABLES the call names (git's aliases depend on them)
    groups: int = 0
    commands: int = 0
    limit_hit: bool = False


class Env(NamedTuple):  # a tuple: the walk makes one per nesting level
    depth: int = 0
    in_body: bool = False
    top_level: bool = True
    piped: bool = False  # stdin comes from a pipe
    deny_only: bool = False


_MAY_NEST = re.compile(rb"[$`(]")  # every substitution opener has one of these
_SUBST_OPENERS = ("$(", "`", "<(", ">(")


def analyse_text(text: str, state: State, env: Env) -> None:
    """Pre-pass, parse and walk one script (the call itself, or a `-c` string, eval, heredoc …)."""
    if env.depth > MAX_DEPTH:
        state.limit_hit = True
    variants: list[str] = []
    if SURROGATE.search(text):
        state.result.opaque.append("invalid UTF-8 in command")
    if "\x00" in text:
        state.result.opaque.append("NUL byte in command")
        text = text.replace("\x00", " ")
    joined, modelled = prepass(text)
    variants.append(blank_time_keyword(joined))
    if not modelled:
        state.result.opaque.append("line continuation in an unmodelled construct")
        variants.append(blank_time_keyword(text))
    if has_unquoted_cr(joined):
        state.result.opaque.append("carriage return outside quotes")
        variants.append(blank_time_keyword(joined.replace("\r", "\n")))
    if "shopt" in joined and re.search(r"shopt\s+(-[a-z]*s[a-z]*\s+)?[^;&|\n]*expand_aliases", joined):
        state.result.opaque.append("alias expansion enabled")
    cwd_before, taint_before = state.cwd, state.tainted
    variant_index = 0
    while variant_index < len(variants):
        variant = variants[variant_index]
        if variant_index:
            state.cwd, state.tainted = cwd_before, taint_before
        variant_index += 1
        source = variant.encode("utf-8", "surrogatepass")
        tree = _parser().parse(source)
        if variant_index == 1 and "\n" in variant and _word_spans_newline(tree.root_node):
            # tree-sitter-bash reads `ls⏎\rm` as one command where bash runs two: the parser and
            # bash disagree, so the call is unreadable; deny also runs over a variant bash would see.
            state.result.opaque.append("parser disagrees with bash (newline inside a word)")
            state.result.program_unknown.append("parser disagrees with bash (newline inside a word)")
            variants.append(_split_newline_words(variant))
        if tree.root_node.has_error:
            where = _first_error(tree.root_node)
            state.result.opaque.append(f"parse error at {where}")
            state.result.program_unknown.append(f"parse error at {where}")
        Walker(source, state).walk(tree.root_node, env)


# Variables that change which configuration git reads, and so which aliases it has, or where it
# runs a `!` alias (gitconfig.py);
# GIT_CONFIG_KEY_n and GIT_CONFIG_VALUE_n are GIT_CONFIG_COUNT's. `analyse` notes which the call names.
GIT_CONFIG_VARIABLES = frozenset({
    "GIT_DIR", "GIT_COMMON_DIR", "GIT_WORK_TREE", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_COUNT",
    "GIT_CONFIG_PARAMETERS", "XDG_CONFIG_HOME",
})
_GIT_ENV_NAMES = re.compile(r"(?<![$\w{])(GIT_DIR|GIT_COMMON_DIR|GIT_WORK_TREE|GIT_CONFIG\w*|XDG_CONFIG_HOME)\b")


def git_env_named(command: str) -> frozenset[str]:
    """The variables of GIT_CONFIG_VARIABLES (and GIT_CONFIG_KEY_n, GIT_CONFIG_VALUE_n) `command`
    names other than as an expansion: ones it may set."""
    if "GIT_" not in command and "XDG_" not in command:
        return frozenset()
    return frozenset(_GIT_ENV_NAMES.findall(command))


# Variables whose value a program hands to a shell when it needs one: git's ssh, editor, pager and
# helpers, man's and less's pagers and preprocessors, rsync's remote shell, the editors and pagers
# of every program that reads EDITOR, VISUAL and PAGER.
COMMAND_VARIABLES = frozenset({
    "GIT_SSH_COMMAND", "GIT_SSH", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_PAGER", "GIT_ASKPASS",
    "GIT_EXTERNAL_DIFF", "GIT_PROXY_COMMAND", "SSH_ASKPASS", "SUDO_ASKPASS", "EDITOR", "VISUAL", "PAGER",
    "MANPAGER", "SYSTEMD_PAGER", "LESSOPEN", "LESSCLOSE", "RSYNC_RSH", "BROWSER", "DIFF_VIEWER",
})


def assigned_command(name: str, value: Word, state: State, env: Env, outer: Cmd | None) -> None:
    """A value given to a COMMAND_VARIABLES name (`GIT_SSH_COMMAND=S git fetch`, `export PAGER=S`)
    is a command a program may run later, or never: analysed as shell for deny/ask; a dynamic one
    makes the call unknown (toward denying)."""
    if name not in COMMAND_VARIABLES:
        return
    if value.deny_value is None:
        if outer is not None:
            unknown(state, outer, f"dynamic {name}, a command a program runs")
        else:
            state.result.opaque.append(f"dynamic {name}, a command a program runs")
        return
    recurse(value.deny_value.removeprefix("|"), state, env, outer=outer, deny_only=True)


def recurse(text: str, state: State, env: Env, *, deny_only: bool = False, unprovable: str | None = None,
            outer: Cmd | None = None, top_level: bool | None = None, same_process: bool = False) -> None:
    """Analyse a script found inside the call (a `-c` string, eval's words, a substitution …).

    The script starts in the directory its wrapper runs it in (`env -C DIR sh -c …`: DIR). A `cd`
    in it lasts after it only when the same shell runs it (`eval`, `same_process`): a child
    process's `cd` (`sh -c 'cd src'`) leaves the caller where it was."""
    before = len(state.result.cmds)
    saved_cwd = state.cwd
    if outer is not None:
        state.cwd = outer.cwd
    top = env.top_level if top_level is None else top_level
    analyse_text(text, state, Env(env.depth + 1, env.in_body, top, False, env.deny_only or deny_only))
    if env.depth + 1 > MAX_DEPTH:
        state.limit_hit = True
    state.cwd = state.cwd if same_process and not deny_only else saved_cwd
    for cmd in state.result.cmds[before:]:
        if outer is not None:
            # Everything a wrapper's string runs belongs to the wrapper's command.
            cmd.group, cmd.layer = outer.group, outer.layer + 1 + cmd.layer
            if outer.in_body:
                cmd.in_body = True
                cmd.unprovable.append("inside a loop, case, function, test or arithmetic")
            for mark in outer.env_marks:
                cmd.unprovable.append(mark)
        if unprovable:
            cmd.unprovable.append(unprovable)
        if deny_only:
            cmd.deny_only = True


def _misread_body(part: "tree_sitter.Node", redirect_node: "tree_sitter.Node") -> bool:
    """Whether `part`, a child of a here-document's redirect, is its body misread as a word:
    tree-sitter-bash files a body whose first line starts with `\\` under the redirect as words,
    the first of them reaching past the operator's line."""
    return (part.is_named and part.end_point[0] > redirect_node.start_point[0]
            and part.type not in ("heredoc_start", "heredoc_body", "heredoc_end", "comment")
            and part.type not in _REDIRECTS and part.type not in _STATEMENTS)  # never a body: stays a disagreement


def _body_span(src: bytes, redirect_node: "tree_sitter.Node") -> tuple[int, int] | None:
    """Where the body of a here-document the grammar misread (`_misread_body`) lies in the source:
    the lines after the operator's, up to the terminator. None when it read the body right."""
    if not any(_misread_body(part, redirect_node) for part in redirect_node.children):
        return None
    start = next((child for child in redirect_node.children if child.type == "heredoc_start"), None)
    if start is None:
        return None
    end = next((child for child in redirect_node.children if child.type == "heredoc_end"), None)
    first = src.find(b"\n", start.end_byte) + 1
    stop = end.start_byte if end is not None else redirect_node.end_byte
    return (first, stop) if 0 < first <= stop else None


def unknown(state: State, cmd: Cmd, why: str) -> None:
    """The program that will run cannot be read: maybe against every Bash deny/ask rule."""
    cmd.program_unknown = True
    cmd.opaque = why
    state.result.opaque.append(why)
    state.result.program_unknown.append(why)


def _word_spans_newline(node: "tree_sitter.Node") -> bool:
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type == "word" and b"\n" in (current.text or b""):  # a node of a parsed source has its text
            return True
        if current.type == "heredoc_redirect":
            # a body misread as words is no disagreement: the walker reads it as the body (`_body_span`)
            stack.extend(child for child in current.children if not _misread_body(child, current))
        elif current.type not in ("heredoc_body", "string", "raw_string", "comment"):
            stack.extend(current.children)
    return False


def _split_newline_words(text: str) -> str:
    """A variant for deny evaluation: a line starting with a backslash-escape loses the backslash."""
    return re.sub(r"\n\\(?=[^\n])", "\n", text)


def _first_error(node: "tree_sitter.Node") -> str:
    stack = [node]
    while stack:
        current = stack.pop(0)
        if current.type == "ERROR" or current.is_missing:
            row, column = current.start_point
            return f"{row + 1}:{column + 1}"
        stack.extend(current.children)
    row, column = node.start_point
    return f"{row + 1}:{column + 1}"


# Children of a heredoc redirect that are the rest of the owner's line (the grammar files them
# under the redirect): statements run after the owner; words are more of its arguments.
_STATEMENTS = {"command", "pipeline", "list", "redirected_statement", "subshell", "compound_statement",
               "negated_command", "if_statement", "while_statement", "for_statement", "c_style_for_statement",
               "case_statement", "function_definition", "variable_assignment", "variable_assignments",
               "declaration_command", "unset_command", "test_command"}
_REDIRECTS = {"file_redirect", "heredoc_redirect", "herestring_redirect"}


class Walker:
    def __init__(self, source: bytes, state: State) -> None:
        self.src = source
        self.state = state

    def text(self, node: "tree_sitter.Node") -> str:
        return self.src[node.start_byte : node.end_byte].decode("utf-8", "replace")

    def walk(self, node: "tree_sitter.Node", env: Env) -> None:
        if not node.is_named:
            return  # punctuation and keywords: no fact of their own, nothing below
        if not node.child_count and not _MAY_NEST.search(self.src, node.start_byte, node.end_byte):
            if node.type in _PLAIN_LEAVES:
                return  # a word with no substitution opener: nothing runs, nothing to record
        handler = HANDLERS.get(node.type)
        if handler is None:
            # A type the table does not handle (a grammar upgrade, or one of OPAQUE_BY_DEFAULT):
            # the call cannot be read fully; its children are still walked for deny.
            why = f"unhandled shell construct ({node.type})"
            self.state.result.opaque.append(why)
            self.state.result.program_unknown.append(why)
            self.descend(node, env)
            return
        handler(self, node, env)

    # -- structure -------------------------------------------------------------------------
    def sequence(self, node, env: Env) -> None:
        for child in node.children:
            self.walk(child, env)

    def descend(self, node, env: Env) -> None:
        child_env = env if not env.top_level else Env(env.depth, env.in_body, False, env.piped, env.deny_only)
        for child in node.children:
            self.walk(child, child_env)

    def keep_top(self, node, env: Env) -> None:
        for child in node.children:
            self.walk(child, env)

    def body(self, node, env: Env) -> None:
        child_env = Env(env.depth, True, False, env.piped, env.deny_only)
        for child in node.children:
            self.walk(child, child_env)

    def compound(self, node, env: Env) -> None:
        if self.src.startswith(b"((", node.start_byte):
            self.body(node, env)  # `(( … ))`: arithmetic
        else:
            self.keep_top(node, env)

    def subshell(self, node, env: Env) -> None:
        child_env = Env(env.depth, env.in_body, False, env.piped, env.deny_only)
        for child in node.children:
            self.walk(child, child_env)

    def function(self, node, env: Env) -> None:
        self.state.tainted = True
        self.body(node, env)

    def pipeline(self, node, env: Env, *, first_piped: bool = False) -> None:
        index = 0
        for child in node.children:
            if not child.is_named:
                continue
            self.walk(child, Env(env.depth, env.in_body, False, first_piped or index > 0, env.deny_only))
            index += 1

    def nested(self, node, env: Env) -> None:
        """`$(…)`, backquotes, `<(…)`, `>(…)`: a script of its own, one level deeper."""
        child_env = Env(env.depth + 1, env.in_body, False, False, env.deny_only)
        if env.depth + 1 > MAX_DEPTH:
            self.state.limit_hit = True
        if node.children and node.children[0].type == "`":
            # Inside backquotes `\``, `\\` and `\$` lose their backslash before the text is parsed
            # again: the grammar's reading of the inside is not bash's, the text is.
            for inner in substitutions(self.text(node)):
                recurse(inner, self.state, Env(env.depth, env.in_body, False, False, env.deny_only), top_level=False)
            return
        for child in node.children:
            self.walk(child, child_env)

    def leaf(self, node, env: Env) -> None:
        """A word-like node: walk what the grammar found inside; scan text it left unparsed."""
        if node.child_count:
            child_env = env if not env.top_level else Env(env.depth, env.in_body, False, env.piped, env.deny_only)
            for child in node.children:
                self.walk(child, child_env)
            return
        self.scan(node, env, quotes=True)

    def scan(self, node, env: Env, *, quotes: bool) -> None:
        self.scan_span(node.start_byte, node.end_byte, env, quotes=quotes)

    def scan_span(self, start: int, end: int, env: Env, *, quotes: bool) -> None:
        """The substitutions in the source from `start` to `end`, read as text."""
        if not _MAY_NEST.search(self.src, start, end):
            return
        text = self.src[start:end].decode("utf-8", "replace")
        if not any(opener in text for opener in _SUBST_OPENERS):
            return
        for inner in substitutions(text, quotes=quotes):
            recurse(inner, self.state, Env(env.depth, env.in_body, False, False, env.deny_only), top_level=False)

    def inert(self, node, env: Env) -> None:
        return

    def heredoc_body(self, node, env: Env) -> None:
        start = next((child for child in node.parent.children if child.type == "heredoc_start"), None) if node.parent else None
        if start is not None and re.search(r"['\"\\]", self.text(start)):
            return  # a quoted delimiter: the body is literal text
        # Unquoted: every substitution in it runs. Scanned as text (quotes are ordinary there),
        # not through the grammar's children, which miss `<<-` bodies; a body the grammar misread
        # as words (`_body_span`) from its first line.
        span = _body_span(self.src, node.parent) if node.parent is not None else None
        self.scan_span(node.start_byte if span is None else span[0], node.end_byte, env, quotes=False)

    # -- statements ------------------------------------------------------------------------
    def redirected(self, node, env: Env) -> None:
        body = node.child_by_field_name("body")
        redirects = [child for child in node.children if child.type in _REDIRECTS]
        if body is None:
            kids = [child for child in node.children if child.is_named and child.type not in _REDIRECTS]
            body = kids[0] if kids else None
        if body is not None and body.type == "command":
            self.command(body, env, redirects)
            return
        last = next((child for child in reversed(body.children) if child.is_named), None) if body is not None else None
        if body is not None and body.type == "list" and last is not None and last.type == "command":
            # `true && sh <<'EOF' …`: the grammar hangs the here-document on the whole list; bash
            # gives it to the list's last command (a list takes no redirect of its own).
            for child in body.children:
                if child is not last:
                    self.walk(child, env)
            self.command(last, env, redirects)
            return
        if body is not None:
            self.walk(body, env)
        after: list = []
        for redirect_node in redirects:
            self.redirect(redirect_node, env, None, after)
        self._run_after(after, env)

    def standalone_assignment(self, node, env: Env) -> None:
        name = self._assignment_name(node)
        if name == "HOME":
            self.state.home_assigned = True
        if not SAFE_ASSIGNMENTS(name):
            self.state.tainted = True
        if name in COMMAND_VARIABLES:
            full = self.text(node)
            assigned_command(name, parse_word(full[full.find("=") + 1:], self._home()), self.state, env, None)
        self.descend(node, env)

    def _assignment_name(self, node) -> str:
        name_node = node.child_by_field_name("name") or (node.children[0] if node.children else None)
        name = self.text(name_node) if name_node is not None else ""
        return name.split("[", 1)[0]

    def declaration(self, node, env: Env) -> None:
        words: list[Word] = []
        child_env = Env(env.depth, env.in_body, False, False, env.deny_only)
        for child in node.children:
            if child.type == "variable_assignment":
                if self._assignment_name(child) == "HOME":
                    self.state.home_assigned = True
            self.walk(child, child_env)
            if child.type != "comment":
                words.append(parse_word(self.text(child), self._home()))
        self.state.groups += 1
        cmd = Cmd(words=words, group=self.state.groups, in_body=env.in_body, cwd=self.state.cwd,
                  deny_only=env.deny_only)
        self._register(cmd, env, [])
        # A declaration (`export PATH=…`, `unset`, `local`) changes the shell for later commands.
        names = [word.deny_value.split("=", 1)[0] for word in words[1:] if word.deny_value and not word.deny_value.startswith("-")]
        for word in words[1:]:  # `export GIT_SSH_COMMAND=S`
            name, equals, _ = word.text.partition("=")
            if equals and name in COMMAND_VARIABLES:
                assigned_command(name, parse_word(word.text[len(name) + 1:], self._home()), self.state, env, cmd)
        if (words and words[0].value == "unset") or any(not SAFE_ASSIGNMENTS(name) for name in names):
            self.state.tainted = True

    # -- commands --------------------------------------------------------------------------
    def _home(self) -> str | None:
        return None if self.state.home_assigned else self.state.home

    def command(self, node, env: Env, outer_redirects: list | None = None) -> None:
        assigns: list[tuple[str, Word]] = []
        arg_nodes: list = []
        redirects: list = []
        seen_name = False
        nested_env = Env(env.depth, env.in_body, False, False, env.deny_only)
        may_nest = _MAY_NEST.search(self.src, node.start_byte, node.end_byte) is not None
        for child in node.children:
            child_type = child.type
            if child_type == "variable_assignment" and not seen_name:
                name = self._assignment_name(child)
                full = self.text(child)
                equals = full.find("=")
                value_text = full[equals + 1 :] if equals != -1 else ""
                if name == "HOME":
                    self.state.home_assigned = True
                if may_nest:
                    for sub in child.children:  # the subscript and the value both run first
                        self.walk(sub, nested_env)
                assigns.append((name, parse_word(value_text, self._home())))
            elif child_type in _REDIRECTS:
                redirects.append(child)
            elif child_type == "command_name":
                seen_name = True
                arg_nodes.append(child)
            elif child_type != "comment" and child.is_named:
                arg_nodes.append(child)
            elif child_type != "comment" and child_type not in ("&&", "||", ";", "|", "&"):
                arg_nodes.append(child)
        # The grammar files the rest of a heredoc's line under the redirect: its words are more
        # arguments of this command, its redirects are this command's, its statements run after.
        after: list = []
        heredoc_words = False
        for redirect_node in list(redirects) + list(outer_redirects or ()):
            if redirect_node.type == "heredoc_redirect":
                for part in redirect_node.children:
                    if part.type in _REDIRECTS:
                        redirects.append(part)
                    elif part.type in _STATEMENTS:
                        after.append(part)
                    elif _misread_body(part, redirect_node):
                        continue  # the body, misread as words: read as the body (`_body_span`)
                    elif part.is_named and part.type not in ("heredoc_start", "heredoc_body", "heredoc_end", "comment"):
                        arg_nodes.append(part)
                        heredoc_words = True
        if may_nest:
            search = _MAY_NEST.search
            for arg_node in arg_nodes:
                if search(self.src, arg_node.start_byte, arg_node.end_byte):  # no opener: nothing runs inside
                    self.walk(arg_node, nested_env)
        home = self._home()
        plain = _PLAIN.fullmatch
        texts = self._group_words(arg_nodes, ordered=not heredoc_words)
        while texts and texts[0] in ("{", "}", "!"):
            # `! { …; }`, `! ! cmd`: the grammar reads these reserved words as program words (a
            # program cannot be named `{`, `}` or `!` unquoted), so they are unwrapped.
            texts = texts[1:]
        if not texts and not assigns and not redirects:
            self._run_after(after, env)
            return
        words = [static_word(text) if plain(text) else parse_word(text, home) for text in texts]
        self.state.groups += 1
        cmd = Cmd(words, assigns, self.state.groups, 0, env.in_body, self.state.cwd, env.deny_only)
        self._register(cmd, env, redirects + list(outer_redirects) if outer_redirects else redirects)
        self._track_cd(cmd, env)
        self._run_after(after, env)

    def _track_cd(self, cmd: Cmd, env: Env) -> None:
        """A static `cd` at the top level of a list moves the directory for what follows — also
        through `command` and `builtin` (`command cd src`), which run the same builtin."""
        if cmd.layer != 0:
            return
        while cmd.basename in ("command", "builtin") and cmd.inner is not None:
            cmd = cmd.inner
        if cmd.basename not in ("cd", "pushd", "popd"):
            return
        args = [word for word in cmd.words[1:] if not (word.value or "").startswith("-") or word.value == "-"]
        target = args[0].deny_value if len(args) == 1 and args[0].value != "-" else None
        if cmd.basename == "popd" or target is None or not env.top_level or env.in_body:
            self.state.cwd = None
            if target is None:
                self.state.tainted = True
            return
        if self.state.cwd is None and not target.startswith("/"):
            return
        self.state.cwd = os.path.normpath(os.path.join(self.state.cwd or "/", target))

    def _run_after(self, after: list, env: Env) -> None:
        for stmt in after:
            if stmt.type == "pipeline" and stmt.children and stmt.children[0].type in ("|", "|&"):
                self.pipeline(stmt, env, first_piped=True)  # `cat <<EOF | sh`: sh reads the pipe
            else:
                self.walk(stmt, Env(env.depth, env.in_body, False, False, env.deny_only))

    def _group_words(self, nodes: list, ordered: bool = True) -> list[str]:
        """Adjacent nodes with no space between them form one word (`$"x"`, `a"b"`)."""
        out: list[str] = []
        last_end = -1
        src = self.src
        if not ordered:
            nodes = sorted(nodes, key=lambda node: node.start_byte)  # heredoc-line words come last
        for node in nodes:
            start, end = node.start_byte, node.end_byte
            if start == end:
                continue
            txt = src[start:end].decode("utf-8", "replace")
            if start == last_end and out:
                out[-1] += txt
            else:
                out.append(txt)
            last_end = end
        return out

    def _register(self, cmd: Cmd, env: Env, redirect_nodes: list) -> None:
        unwrap, file_operands, mark_unprovable = _steps()
        state = self.state
        state.commands += 1
        if state.commands > MAX_COMMANDS or env.depth > MAX_DEPTH:
            state.limit_hit = True
        if state.tainted and cmd.words and not cmd.unprovable:
            cmd.unprovable.append("follows a change to the shell environment")
        for name, word in cmd.assigns:
            if not SAFE_ASSIGNMENTS(name) or not word.static:
                cmd.unprovable.append(f"assignment {name}=")
                cmd.env_marks.append(f"runs under the assignment {name}=")
            assigned_command(name, word, state, env, cmd)
        if env.in_body:
            cmd.unprovable.append("inside a loop, case, function, test or arithmetic")
        stdin_script: str | None = None
        stdin_dynamic = env.piped
        for redirect_node in redirect_nodes:
            kind, payload = self._stdin_of(redirect_node)
            if kind == "static":
                stdin_script = payload
            elif kind == "dynamic":
                stdin_dynamic = True
        cmd.stdin = "pipe" if stdin_dynamic else ("script" if stdin_script is not None else None)
        chain = unwrap(cmd, state, env, stdin_script, stdin_dynamic, self)
        for layer in chain:
            state.result.cmds.append(layer)
            file_operands(layer, state)
            mark_unprovable(layer)
        after: list = []
        for redirect_node in redirect_nodes:
            self.redirect(redirect_node, env, cmd, after)

    def _stdin_of(self, redirect_node) -> tuple[str, str | None]:
        """What a redirect feeds to stdin: ("static", text), ("dynamic", None) or ("none", None)."""
        if redirect_node.type == "herestring_redirect":
            kids = [child for child in redirect_node.children if child.is_named]
            word = parse_word(" ".join(self.text(kid) for kid in kids), self._home()) if kids else None
            if word is not None and word.deny_value is not None:
                return "static", word.deny_value
            return "dynamic", None
        if redirect_node.type == "heredoc_redirect":
            start = next((child for child in redirect_node.children if child.type == "heredoc_start"), None)
            body = next((child for child in redirect_node.children if child.type == "heredoc_body"), None)
            quoted = start is not None and re.search(r"['\"\\]", self.text(start)) is not None
            text = self.text(body) if body is not None else ""
            span = _body_span(self.src, redirect_node)
            if span is not None:  # `bash <<'EOF'\n\\rm -rf build\nEOF`: the body misread as words
                text = self.src[span[0]:span[1]].decode("utf-8", "replace")
            if quoted or not re.search(r"[$`]", text):
                return "static", text
            return "dynamic", None
        if redirect_node.type == "file_redirect":
            operator = "".join(self.text(child) for child in redirect_node.children if not child.is_named)
            if operator in ("<", "<>"):
                return "dynamic", None
        return "none", None

    def redirect(self, redirect_node, env: Env, owner: Cmd | None, after: list | None = None) -> None:
        nested_env = Env(env.depth, env.in_body, False, False, env.deny_only)
        for child in redirect_node.children:
            if child.type == "heredoc_body":
                self.heredoc_body(child, nested_env)
            elif child.type in _STATEMENTS and redirect_node.type == "heredoc_redirect":
                if owner is None and after is not None:
                    after.append(child)  # walked after the statement (when no command owns it)
            elif child.type in _REDIRECTS:
                if owner is None:
                    self.redirect(child, env, None, after)
            elif redirect_node.type == "heredoc_redirect" and _misread_body(child, redirect_node):
                continue  # the body, misread as words: its heredoc_body child reads it (`_body_span`)
            elif child.is_named and child.type not in ("heredoc_start", "heredoc_end", "file_descriptor"):
                if owner is None or redirect_node.type != "heredoc_redirect":
                    self.walk(child, nested_env)
        if redirect_node.type != "file_redirect":
            return
        operator = "".join(self.text(part) for part in redirect_node.children if not part.is_named and part.type != "file_descriptor")
        targets = [part for part in redirect_node.children if part.is_named and part.type not in ("file_descriptor",)]
        if not targets:
            return
        if any(target.type == "process_substitution" for target in targets):
            return  # the substituted commands were walked; no file is written
        text = self._group_words(targets)
        if not text:
            return
        word = parse_word(text[0], self._home())
        if operator in (">&", "<&", "&>") and word.value is not None and (word.value.isdigit() or word.value == "-"):
            return
        if word.value in EXEMPT_TARGETS:
            return
        access = "read" if operator in ("<", "<&") else "write"
        self.state.result.paths.append(PathRef(access, word, self.state.cwd, "redirect", deny_only=env.deny_only))


_STEPS: tuple | None = None


def _steps() -> tuple:
    """The later steps (wrappers, file operands), which import this module: bound on first use."""
    global _STEPS
    if _STEPS is None:
        from .fileops import file_operands, mark_unprovable
        from .wrappers import unwrap

        _STEPS = (unwrap, file_operands, mark_unprovable)
    return _STEPS


#: Every node type of tree-sitter-bash 0.25 and what the walk does with it. A type missing here
#: makes the call opaque (see `Walker.walk`); tests/permissions/test_node_table.py enumerates the
#: grammar's types from the language object and fails if one is in neither table.
HANDLERS: dict[str, Callable] = {
    # scripts and lists keep the top level (a static `cd` there moves the working directory)
    "program": Walker.sequence, "list": Walker.sequence,
    "if_statement": Walker.keep_top, "elif_clause": Walker.keep_top, "else_clause": Walker.keep_top,
    "negated_command": Walker.keep_top, "compound_statement": Walker.compound,
    "subshell": Walker.subshell, "do_group": Walker.descend,
    "pipeline": Walker.pipeline, "redirected_statement": Walker.redirected,
    # bodies: what runs there is unprovable (loops, case, functions, tests, arithmetic)
    "for_statement": Walker.body, "c_style_for_statement": Walker.body, "while_statement": Walker.body,
    "case_statement": Walker.body, "case_item": Walker.body, "test_command": Walker.body,
    "arithmetic_expansion": Walker.body, "function_definition": Walker.function,
    # commands and what changes the shell
    "command": lambda walker, node, env: walker.command(node, env, None), "variable_assignment": Walker.standalone_assignment,
    "variable_assignments": Walker.descend, "declaration_command": Walker.declaration,
    "unset_command": Walker.declaration,
    # scripts inside scripts
    "command_substitution": Walker.nested, "process_substitution": Walker.nested,
    # redirects of a statement that no command owns
    "file_redirect": lambda walker, node, env: walker.redirect(node, env, None),
    "heredoc_redirect": lambda walker, node, env: walker.redirect(node, env, None),
    "herestring_redirect": lambda walker, node, env: walker.redirect(node, env, None),
    "heredoc_body": Walker.heredoc_body,
    # words and their parts: walk the parsed parts, scan unparsed text for substitutions
    "command_name": Walker.leaf, "word": Walker.leaf, "string": Walker.leaf, "concatenation": Walker.leaf,
    "expansion": Walker.leaf, "simple_expansion": Walker.leaf, "string_content": Walker.leaf,
    "regex": Walker.leaf, "extglob_pattern": Walker.leaf, "translated_string": Walker.leaf,
    "brace_expression": Walker.leaf, "subscript": Walker.leaf, "array": Walker.leaf,
    "binary_expression": Walker.leaf, "unary_expression": Walker.leaf, "ternary_expression": Walker.leaf,
    "postfix_expression": Walker.leaf, "parenthesized_expression": Walker.leaf, "heredoc_content": Walker.leaf,
    "ERROR": Walker.leaf,
    # literal text: nothing runs
    "raw_string": Walker.inert, "ansi_c_string": Walker.inert, "number": Walker.inert, "comment": Walker.inert,
    "variable_name": Walker.inert, "special_variable_name": Walker.inert, "file_descriptor": Walker.inert,
    "heredoc_start": Walker.inert, "heredoc_end": Walker.inert, "test_operator": Walker.inert,
}

# Leaf types whose handler is `leaf` or `inert`: without a substitution opener they add nothing.
_PLAIN_LEAVES = frozenset(node_type for node_type, handler in HANDLERS.items() if handler in (Walker.leaf, Walker.inert))

#: Node types deliberately left out of HANDLERS: meeting one makes the call opaque. Empty in
#: this grammar version: every type is modelled. A grammar upgrade adds its new types here (or
#: to HANDLERS) before the pin moves; the test refuses a type in neither.
OPAQUE_BY_DEFAULT: frozenset[str] = frozenset()
