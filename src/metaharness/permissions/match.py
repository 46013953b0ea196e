"""Matching one rule against one subject: broad for deny and ask rules, strict for allow rules.

What belongs here: the answer (`MATCH`, `MAYBE`, `NO`) of one deny or ask rule for one subject
(`broad_match`) or for the call as a whole (`call_level_match`), and whether one allow rule
covers one subject (`allow_covers`, `covers`). Which rules are tried for a subject is the rule
index's business (index.py); shell patterns themselves are compiled and matched in rules.py.

Rules it keeps:
* broad matching over-matches on purpose: a word whose value is only known when it runs, a
  program we do not know that may run its arguments (the backstop over the command's tails), a
  recursive reader over a tree that holds a denied entry, another spelling of a denied git
  subcommand (`git send-pack` for `git push`) — each gives `MAYBE`, never `NO`;
* strict (allow) matching must hold for every spelling: both the lexical and the real path, and
  never for a command that cannot be proven (unprovable, opaque, program unknown);
* a `Read` deny or ask rule also covers writes of the same paths; a `Write` rule covers writes only.
"""

from __future__ import annotations

import itertools
import os
import re
from typing import TYPE_CHECKING, Any, Mapping

from .paths import PathError, PathPattern, canonical, compile_path_pattern, is_directory, unwitnessed_read
from .rules import LITERAL, MATCH, MAYBE, NO, Rule, _normalise, shell_allow_match, shell_broad_match

if TYPE_CHECKING:
    from .calls import Call
    from .context import Context
    from .shell import Cmd, Word
    from .subjects import Subject

__all__ = ["MATCH", "MAYBE", "NO", "broad_match", "call_level_match", "allow_covers", "covers",
           "exact_path_allow", "path_rule_applies", "tail_starts", "CALL_LEVEL_TOOLS"]

#: Tools whose bare rule (no specifier) matches every call of the tool at call level.
CALL_LEVEL_TOOLS = ("Bash", "WebFetch", "WebSearch", "Agent", "Skill", "Glob", "Grep")
#: A recursive reader's walk for a denied entry stops here, and counts as a possible match.
WALK_LIMIT = 20_000


def path_rule_applies(rule: Rule, access: str) -> bool:
    if rule.tool == "Read":
        return True  # a Read deny/ask also covers writes of the same paths
    if rule.tool == "Write":
        return access == "write"
    return False


def _path_match(rule: Rule, subject: "Subject", ctx: "Context", *, broad: bool) -> int:
    if rule.kind == "any":
        return MATCH
    pattern = compile_path_pattern(rule.path, project_root=ctx.project_root, home=ctx.home, broad=broad)
    if subject.dynamic or subject.canon is None:
        return MAYBE if broad else NO
    hits = [pattern.matches(path) for path in (subject.canon.lexical, subject.canon.real)]
    if broad:
        return MATCH if any(hits) else NO
    return MATCH if all(hits) else NO


def _walk_for_denied(root: str, rule: Rule, ctx: "Context", reach: str = "", repo_wide: bool = False,
                     limit: int = WALK_LIMIT) -> bool:
    """A recursive reader over `root`: does it hold an entry a Read deny rule matches? A git
    operation (`reach` "tracked" or "added", data/wrappers.toml `git.reads`) reaches only the
    entries git's own files say it does (gitreach.py), over the whole work tree when `repo_wide`;
    where those files say nothing certain, every entry counts."""
    if not is_directory(root):
        return False
    pattern = compile_path_pattern(rule.path, project_root=ctx.project_root, home=ctx.home, broad=True)
    unwitnessed_read()  # what the tree holds now (a decision that walked it is not kept)
    if reach or repo_wide:
        from . import gitreach  # pure Python, imported on a git reader's first walk

        top, view = gitreach.view_of(root)
        if view is not None and reach in ("tracked", "added"):
            return view.reaches_denied(top if repo_wide else root, reach, pattern.matches, limit,
                                       lambda path: _walk_every_entry(path, pattern, limit))
        if repo_wide:
            root = top
    return _walk_every_entry(root, pattern, limit)


def _walk_every_entry(root: str, pattern: PathPattern, limit: int) -> bool:
    """Does any entry under `root` (or its real path) match `pattern`? Past `limit` entries: yes."""
    seen = 0
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    seen += 1
                    if seen > limit:
                        return True
                    if pattern.matches(entry.path) or pattern.matches(os.path.realpath(entry.path)):
                        return True
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
        except OSError:
            continue
    return False


# The operands' canonical spellings read the filesystem (symlinks), and an analysis outlives one
# decision (subjects.analysis_of memoises it): the rm facts are kept for one decision only.
_decision = [0]
_decisions = itertools.count(1)


#: How many times a command's match consulted the filesystem (the rm facts): a caller keeping a
#: command's answer beyond this decision (index.strongest_match) keeps only answers that did not.
fs_reads = [0]


def new_decision() -> None:
    """Start a decision: facts read from the filesystem by an earlier one are not reused."""
    _decision[0] = next(_decisions)


def _rm_builtin(rule: Rule, cmd: "Cmd", ctx: "Context") -> int:
    """A built-in `rm` rule (`Bash(rm -r <path>)`, `-f` likewise) against one command."""
    if cmd.program_unknown:
        return MAYBE
    base = cmd.basename
    if base is None or base.casefold() != "rm":
        return NO
    best = NO
    rm_path = rule.rm_path
    assert rm_path is not None  # every built-in rm rule names its path
    for options, dash, unknown_cwd, dynamic, any_root, paths, could_be in _rm_facts(cmd, ctx):
        strength = MATCH if rule.rm_flag in options else (MAYBE if dash else NO)
        if strength == NO:
            continue
        if best < MAYBE and (unknown_cwd or any_root or any(
                could_be(word, rm_path) or could_be(word, rm_path + "/") for word in dynamic)):
            best = MAYBE  # a dynamic operand may spell the path (or `.`, `..`, `/`); a cwd unknown
        if rm_path in paths and strength > best:
            best = strength
            if best == MATCH:
                break
    return best


def _rm_facts(cmd: "Cmd", ctx: "Context") -> list:
    """What every built-in rm rule asks of one `rm` command, worked out once per command (one
    analysis) instead of once per rule: per word variant, its options, whether a dynamic word
    may be an option, whether an operand is relative to an unknown directory, its dynamic
    operands, whether one of them may spell `.`, `..` or `/` (whatever the rule's path), and the
    lexical and real paths of its static operands — an operand that cannot be canonicalised is
    left out.

    Facts that canonicalised an operand read the disk: they last one decision, and count as a
    filesystem read (`fs_reads`: a rule's answer built on them is not kept). Facts of a command
    whose operands are all dynamic or under an unknown directory read nothing: they are kept."""
    key = ("rm-facts", ctx.home)
    cached = cmd.norm_cache.get(key)
    if cached is not None and (cached[0] is None or cached[0] == _decision[0]):
        if cached[0] is not None:
            fs_reads[0] += 1
        return cached[1]
    read_disk = False
    shapes: dict[tuple[int, str], bool] = {}

    def could_be(word: "Word", literal: str) -> bool:
        shape_key = (id(word), literal)
        hit = shapes.get(shape_key)
        if hit is None:
            hit = shapes[shape_key] = word.could_be(literal)
        return hit

    facts = []
    for words in cmd.word_variants():
        memo_key = (id(words), "rm")  # shared with shell_broad_match's option normalisation
        normalised = cmd.norm_cache.get(memo_key)
        if normalised is None:
            normalised = cmd.norm_cache[memo_key] = _normalise("rm", words[1:])
        options, operand_words, dash = normalised
        unknown_cwd = False
        dynamic: list[Word] = []
        paths: set[str] = set()
        for word in operand_words:
            value = word.deny_value
            if value is None:
                dynamic.append(word)
                continue
            if cmd.cwd is None and not value.startswith("/"):
                unknown_cwd = True
                continue
            read_disk = True
            try:
                canon = canonical(value, cmd.cwd or "/", ctx.home)
            except PathError:
                continue
            paths.add(canon.lexical)
            paths.add(canon.real)
        any_root = any(could_be(word, spelled) for word in dynamic for spelled in (".", "..", "/"))
        facts.append((options, dash, unknown_cwd, dynamic, any_root, paths, could_be))
    if read_disk:
        fs_reads[0] += 1
    cmd.norm_cache[key] = (_decision[0] if read_disk else None, facts)
    return facts


def _name_match(glob: str, name: str, *, broad: bool) -> bool:
    regex = ".*".join(re.escape(part) for part in glob.split("*"))
    return re.fullmatch(regex, name, re.IGNORECASE if broad else 0) is not None


def _domain(rule: Rule) -> str:
    assert rule.domain is not None  # a domain rule carries its domain
    return rule.domain


def _name_glob(rule: Rule) -> str:
    assert rule.name_glob is not None  # a name rule carries its glob
    return rule.name_glob


def _path_spec(rule: Rule) -> str:
    assert rule.path is not None  # a path rule carries its specifier
    return rule.path


def _host(subject: "Subject") -> str:
    assert subject.host is not None  # a host subject carries its host
    return subject.host


def _domain_match(pattern: str, host: str) -> bool:
    if pattern.startswith("*."):
        return host.endswith(pattern[1:]) and host != pattern[2:]
    if "*" in pattern:
        regex = "[^.]*".join(re.escape(part) for part in pattern.split("*"))
        return re.fullmatch(regex, host) is not None
    return host == pattern


def _param_match(rule: Rule, call: "Call") -> int:
    assert rule.param is not None  # a param rule carries its (name, glob)
    name, glob = rule.param
    value = call.input.get(name) if isinstance(call.input, Mapping) else None
    if not isinstance(value, str):
        return NO
    regex = ".*".join(re.escape(part) for part in glob.split("*"))
    return MATCH if re.fullmatch(regex, value, re.IGNORECASE | re.DOTALL) else NO


def tail_starts(cmd: "Cmd") -> dict[str, list[tuple[int, int]]]:
    """The backstop for wrappers the table does not know (programs that run their arguments):
    every contiguous tail of a word variant that starts at a static word not spelled as an
    option, by the case-folded basename of that word, as (variant index, start). Worked out once
    per command."""
    starts = cmd.norm_cache.get("tail-starts")
    if starts is None:
        starts = {}
        # A wrapper layer that was unwrapped needs no tails of its own: its inner command is
        # built from the layer's own words, so the inner's tails are the layer's (past the
        # options the wrapper's parser read, which are never a tail's start anyway).
        # A program whose operands are data (`echo`, `which`: data/dataoperands.toml) runs none.
        variants = cmd.word_variants() if cmd.inner is None and not cmd.data_operands else ()
        for variant_index, words in enumerate(variants):
            for start in range(1, len(words)):
                word = words[start]
                value = word.deny_value
                if value and word.value is not None and value[0] != "-":
                    starts.setdefault(value.rsplit("/", 1)[-1].casefold(), []).append((variant_index, start))
        cmd.norm_cache["tail-starts"] = starts
    return starts


def _tails(cmd: "Cmd", key: str | None) -> list["Cmd"]:
    """The tails of `cmd` whose program's basename is `key` (None: every tail), as commands of
    their own, built on first use and kept (matchers memoise by the word list's id)."""
    cache = cmd.norm_cache.setdefault("tails", {})
    got = cache.get(key)
    if got is None:
        from .shell import Cmd

        starts = tail_starts(cmd)
        picks = starts.get(key, []) if key is not None else [pick for picked in starts.values() for pick in picked]
        variants = cmd.word_variants()
        got = cache[key] = [Cmd(variants[variant_index][start:], cwd=cmd.cwd) for variant_index, start in picks]
    return got


def _program_key(rule: Rule) -> str | None:
    """The program a shell or built-in rm rule names (case-folded basename), or None."""
    if rule.kind == "builtin-rm":
        return "rm"
    assert rule.shell is not None  # a shell rule carries its pattern
    first = rule.shell.tokens[0]
    return first.text.rsplit("/", 1)[-1].casefold() if first.kind == LITERAL else None


def _cmd_broad(rule: Rule, cmd: "Cmd", ctx: "Context") -> int:
    if rule.kind == "builtin-rm":
        return _rm_builtin(rule, cmd, ctx)
    if rule.tool != "Bash":
        return NO
    if rule.kind == "any":
        return MATCH
    if rule.kind == "shell":
        assert rule.shell is not None  # a shell rule carries its pattern
        return shell_broad_match(rule.shell, cmd)
    return NO


def broad_match(rule: Rule, subject: "Subject", call: "Call", ctx: "Context") -> int:
    """Deny/ask matching of one rule against one subject."""
    kind = subject.kind
    if kind == "cmd":
        cmd = subject.cmd
        assert cmd is not None  # a cmd subject carries its command
        result = _cmd_broad(rule, cmd, ctx)
        if result == MATCH and cmd.spelling is not None:
            return MAYBE  # `git send-pack` spelled as the `git push` it may be: it may not be one
        if result == NO and rule.kind in ("shell", "builtin-rm") and not cmd.program_unknown:
            # The backstop: a pattern met by a tail of the words gives `maybe` (a program we do
            # not know may run its arguments as a command; over-matching is the intended side).
            key = _program_key(rule)
            if key is not None and key not in tail_starts(cmd):
                return result
            for tail in _tails(cmd, key):
                if _cmd_broad(rule, tail, ctx) != NO:
                    return MAYBE
        return result
    if kind in ("read", "write"):
        if rule.kind not in ("path", "any") or not path_rule_applies(rule, kind):
            return NO
        result = _path_match(rule, subject, ctx, broad=True)
        if result == MATCH and subject.ref is not None and subject.ref.guess:
            return MAYBE  # a literal of interpreter code: it may never be opened
        if (result == NO and subject.recursive and rule.behavior == "deny" and rule.tool == "Read"
                and rule.kind == "path" and subject.canon):
            if _walk_for_denied(subject.canon.real, rule, ctx, subject.reach, subject.repo_wide):
                return MAYBE
        return result
    if kind == "opaque":
        return NO
    if kind == "host":
        if rule.tool != "WebFetch":
            return NO
        if rule.kind == "any":
            return MATCH
        return MATCH if rule.kind == "domain" and _domain_match(_domain(rule), _host(subject)) else NO
    if kind in ("agent", "skill"):
        if rule.tool != ("Agent" if kind == "agent" else "Skill"):
            return NO
        if rule.kind == "any":
            return MATCH
        return MATCH if rule.kind == "name" and _name_match(_name_glob(rule), subject.label, broad=True) else NO
    if kind in ("mcp", "tool"):
        if not rule.tool_matches(call.rule_tool):
            return NO
        if rule.kind == "any":
            return MATCH
        if rule.kind == "param":
            return _param_match(rule, call)
        return NO
    return NO


def call_level_match(rule: Rule, call: "Call") -> int:
    """Tool-part globs (`*`, `mcp__*`) and bare tool rules match every call of the tool."""
    if rule.kind == "any" and rule.tool_regex is not None and not rule.tool.startswith("mcp__"):
        return MATCH if rule.tool_matches(call.rule_tool) else NO
    if rule.kind == "any" and call.rule_tool == rule.tool and rule.tool in CALL_LEVEL_TOOLS:
        return MATCH
    if rule.kind == "any" and call.tool.casefold() in ("glob", "grep") and rule.tool.casefold() == call.tool.casefold():
        return MATCH
    if (rule.kind == "param" and rule.tool_regex is not None and not rule.tool.startswith("mcp__")
            and rule.tool_matches(call.rule_tool)):
        return _param_match(rule, call)
    return NO


def allow_covers(rule: Rule, subject: "Subject", call: "Call", ctx: "Context") -> bool:
    """Whether one allow rule covers one subject that is not a command (strict matching)."""
    kind = subject.kind
    if kind == "write":
        return rule.tool == "Write" and rule.kind in ("path", "any") and _path_match(rule, subject, ctx, broad=False) == MATCH
    if kind == "read":
        return rule.tool == "Read" and rule.kind in ("path", "any") and _path_match(rule, subject, ctx, broad=False) == MATCH
    if kind == "host":
        return rule.tool == "WebFetch" and (
            rule.kind == "any" or (rule.kind == "domain" and _domain_match(_domain(rule), _host(subject))))
    if kind in ("mcp", "tool"):
        return rule.kind == "any" and rule.tool_matches(call.rule_tool)
    if kind in ("agent", "skill"):
        return rule.tool == ("Agent" if kind == "agent" else "Skill") and (
            rule.kind == "any" or _name_match(_name_glob(rule), subject.label, broad=False))
    return False


def command_allowed(rule: Rule, cmd: "Cmd") -> bool:
    """Whether one allow rule covers one command: a bare `Bash` rule only a provable command."""
    if rule.tool != "Bash":
        return False
    if rule.kind == "any":
        return not (cmd.unprovable or cmd.opaque or cmd.program_unknown)
    if rule.kind != "shell":
        return False
    assert rule.shell is not None  # a shell rule carries its pattern
    return shell_allow_match(rule.shell, cmd)


def covers(rule: Rule, subject: "Subject", call: "Call", ctx: "Context") -> bool:
    """Whether one allow rule covers one subject of any kind."""
    if subject.kind == "cmd":
        assert subject.cmd is not None  # a cmd subject carries its command
        return command_allowed(rule, subject.cmd)
    return allow_covers(rule, subject, call, ctx)


def exact_path_allow(subject: "Subject", ctx: "Context") -> bool:
    """An allow rule names this read's path exactly (no glob): the one exception to a secret path."""
    for rule in ctx.rules.allow:
        if (rule.kind == "path" and rule.tool == "Read" and not any(char in _path_spec(rule) for char in "*?[")
                and _path_match(rule, subject, ctx, broad=False) == MATCH):
            return True
    return False
