"""The rule index: for one subject, only the rules that can match it, in list order.

What belongs here: `RuleIndex` (one behavior's rules, filed by what a subject must have for the
rule to match), `index_of` (the index of a list, built once per context and list), and
`strongest_match` (the strongest deny or ask answer any rule gives one subject, through the
index). The matching itself is match.py's.

Rules it keeps: every list handed out keeps list order (the first matching rule is the one
reported) and leaves out only rules the matcher would answer `NO` for (a property test compares
each lookup with a scan of every rule):

* broad (deny/ask) shell rules are keyed by the basename of their first literal token
  (case-folded): every variant of broad deny/ask matching compares that token with the program or its
  basename, so a rule keyed `git` can never match a command whose program is `rm`. Within a
  program, a rule with required words (`rules.required_words`) is filed under one of them
  (the rarest): when every word of the command is static, `shell_broad_match` answers `NO`
  unless the command contains all of them, so only the buckets of its own words are read;
* allow shell rules are filed under one of their LITERAL tokens (the rarest): strict
  matching aligns each literal with a whole word of equal value (`rules.strict_values`,
  assignments included), so only the buckets of the command's own word values are read;
* path rules are keyed by anchor and first literal component; a path subject of unknown
  target meets every applicable path rule with the same answer, so that is precomputed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import match as _match
from .match import CALL_LEVEL_TOOLS, MATCH, MAYBE, NO, broad_match, path_rule_applies, tail_starts
from .paths import compile_path_pattern, is_directory
from .rules import LITERAL, Rule, ShellPattern, broad_wordset, literal_texts, required_words, strict_values

if TYPE_CHECKING:
    from .calls import Call
    from .context import Context
    from .shell import Cmd
    from .subjects import Subject

__all__ = ["RuleIndex", "index_of", "strongest_match"]


def _rarest(texts, frequency: dict[str, int]) -> str:
    return min(texts, key=lambda text: (frequency[text], text))


class RuleIndex:
    """One behavior's rules, indexed so a subject is compared only with rules that can match it."""

    def __init__(self, rules: list[Rule], ctx: "Context") -> None:
        self.rules = rules
        self.position = {id(rule): place for place, rule in enumerate(rules)}
        self.by_program: dict[str, list[Rule]] = {}
        self.unkeyed: list[Rule] = []
        self.rm: list[Rule] = []
        self.path: list[Rule] = []
        self.other: list[Rule] = []
        self.bash_all: list[Rule] = []
        self.bash_plain: list[Rule] = []  # Bash rules that are neither shell patterns nor builtin-rm
        self.path_always: list[Rule] = []
        self.path_by_first: dict[tuple[str, str], list[Rule]] = {}
        self._memo: dict[str | None, list[Rule]] = {}
        self._free_memo: dict[str | None, list[Rule]] = {}  # per program: the rules no required word files
        self._dynamic: dict[str, tuple[int, Rule | None]] = {}

        # Rules that can match at call level (`match.call_level_match`): tool-part globs, bare tool rules.
        # The input fields a parameter rule reads (`match._param_match`): all a verdict reads of the input.
        self.param_names = tuple(sorted({rule.param[0] for rule in rules if rule.kind == "param" and rule.param}))
        self.call_level = [rule for rule in rules if rule.kind in ("any", "param") and rule.tool_regex is not None
                           or (rule.kind == "any" and rule.tool in CALL_LEVEL_TOOLS)]
        shell_rules: list[Rule] = []
        for rule in rules:
            if rule.tool == "Bash" and rule.kind == "shell":
                first = _pattern(rule).tokens[0]
                if first.kind == LITERAL:
                    self.by_program.setdefault(first.text.rsplit("/", 1)[-1].casefold(), []).append(rule)
                else:
                    self.unkeyed.append(rule)
                self.bash_all.append(rule)
                shell_rules.append(rule)
            elif rule.kind == "builtin-rm":
                self.rm.append(rule)
                self.bash_all.append(rule)
            elif rule.tool == "Bash":
                self.unkeyed.append(rule)
                self.bash_all.append(rule)
                self.bash_plain.append(rule)
            elif rule.tool in ("Read", "Write") and rule.kind in ("path", "any"):
                self.path.append(rule)
                pattern = compile_path_pattern(rule.path, project_root=ctx.project_root, home=ctx.home, broad=True) \
                    if rule.kind == "path" else None
                if pattern is not None and pattern.first is not None and pattern.anchor not in (None, "/"):
                    self.path_by_first.setdefault((pattern.anchor, pattern.first), []).append(rule)
                else:
                    self.path_always.append(rule)
            else:
                self.other.append(rule)

        # Broad: within each program key, file a rule under its rarest required word.
        self.broad_free: dict[str, list[Rule]] = {}
        self.broad_by_word: dict[str, dict[str, list[Rule]]] = {}
        for program, group in self.by_program.items():
            required = {id(rule): required_words(_pattern(rule)) for rule in group}
            frequency: dict[str, int] = {}
            for words in required.values():
                for word in words:
                    frequency[word] = frequency.get(word, 0) + 1
            by_word = self.broad_by_word[program] = {}
            free = self.broad_free[program] = []
            for rule in group:
                words = required[id(rule)]
                if words:
                    by_word.setdefault(_rarest(words, frequency), []).append(rule)
                else:
                    free.append(rule)
        # Strict: every shell rule under its rarest LITERAL token (case-sensitive).
        literals = {id(rule): literal_texts(_pattern(rule)) for rule in shell_rules}
        literal_frequency: dict[str, int] = {}
        for texts in literals.values():
            for text in texts:
                literal_frequency[text] = literal_frequency.get(text, 0) + 1
        self.strict_free: list[Rule] = []
        self.strict_by_literal: dict[str, list[Rule]] = {}
        for rule in shell_rules:
            texts = literals[id(rule)]
            if texts:
                self.strict_by_literal.setdefault(_rarest(texts, literal_frequency), []).append(rule)
            else:
                self.strict_free.append(rule)
        self._strict_base = self._ordered(self.strict_free + self.bash_plain + self.rm)
        self.path_anchors = tuple(dict.fromkeys(anchor for anchor, _ in self.path_by_first))

    def _ordered(self, rules: list[Rule]) -> list[Rule]:
        position = self.position
        return sorted(rules, key=lambda rule: position[id(rule)])

    def for_cmd(self, cmd: "Cmd") -> list[Rule]:
        """Every rule whose broad (deny/ask) match of `cmd` — or of one of its tails, the
        backstop of `match.broad_match` — is not certainly `NO`, in list order."""
        if cmd.program_unknown:
            return self.bash_all
        program = cmd.basename.casefold() if cmd.basename is not None else None
        tail_programs = [key for key in tail_starts(cmd) if key != program and (key in self.by_program or key == "rm")]
        if not tail_programs:
            return self._for_program(cmd, program)
        found: dict[int, Rule] = {}
        for key in (program, *tail_programs):
            for rule in self._for_program(cmd, key):
                found[id(rule)] = rule
        return self._ordered(list(found.values()))

    def _for_program(self, cmd: "Cmd", program: str | None) -> list[Rule]:
        got = self._memo.get(program)
        if got is None:
            candidates = (self.by_program.get(program, []) if program is not None else []) + self.unkeyed + (self.rm if program == "rm" else [])
            got = self._memo[program] = self._ordered(candidates)
        by_word = self.broad_by_word.get(program) if program is not None else None
        if program is None or not by_word:
            return got
        wordset = broad_wordset(cmd)
        if wordset is False:
            return got  # a dynamic word: required words are not used (see shell_broad_match)
        hits: list[Rule] | None = None
        for word in wordset:
            hit = by_word.get(word)
            if hit is not None:
                hits = hit if hits is None else hits + hit
        base = self._free_memo.get(program)
        if base is None:
            base = self._free_memo[program] = self._ordered(
                self.broad_free[program] + self.unkeyed + (self.rm if program == "rm" else []))
        return base if hits is None else self._ordered(base + hits)

    def for_cmd_strict(self, cmd: "Cmd") -> list[Rule]:
        """Every rule whose allow match of `cmd` is not certainly false, in list order."""
        if cmd.program_unknown:
            return self.bash_all
        by_literal = self.strict_by_literal
        hits: list[Rule] | None = None
        for value in strict_values(cmd):
            hit = by_literal.get(value)
            if hit is not None:
                hits = hit if hits is None else hits + hit
        return self._strict_base if hits is None else self._ordered(self._strict_base + hits)

    def dynamic_path(self, access: str) -> tuple[int, Rule | None]:
        """`strongest_match` for a read/write subject of unknown target: a `Read`/`Write` rule with
        no specifier matches it, any other applicable path rule may."""
        got = self._dynamic.get(access)
        if got is None:
            applicable = [rule for rule in self.path if path_rule_applies(rule, access)]
            first_any = next((rule for rule in applicable if rule.kind == "any"), None)
            if first_any is not None:
                got = (MATCH, first_any)
            elif applicable:
                got = (MAYBE, applicable[0])
            else:
                got = (NO, None)
            self._dynamic[access] = got
        return got

    def first_any(self, tool: str) -> Rule | None:
        """The first `Read`/`Write` rule (of `tool`) with no specifier: the only allow rule that
        covers a path subject of unknown target."""
        return next((rule for rule in self.path if rule.tool == tool and rule.kind == "any"), None)

    def for_subject(self, subject: "Subject") -> list[Rule]:
        if subject.kind == "cmd":
            assert subject.cmd is not None  # a cmd subject carries its command
            return self.for_cmd(subject.cmd)
        if subject.kind in ("read", "write"):
            if subject.canon is None or not self.path_by_first:
                return self.path
            if subject.recursive and is_directory(subject.canon.real):
                return self.path  # a rule may match an entry anywhere under it (match._walk_for_denied)
            found: list[Rule] = list(self.path_always)
            for spelling in subject.canon.spellings:
                for anchor in self.path_anchors:
                    if spelling.startswith(anchor + "/"):
                        first = spelling[len(anchor) + 1:].split("/", 1)[0].casefold()
                        found.extend(self.path_by_first.get((anchor, first), ()))
            if len(found) > len(self.path_always):
                found = sorted(dict.fromkeys(found), key=lambda rule: self.position[id(rule)])
            return found
        return self.other


def _pattern(rule: Rule) -> ShellPattern:
    assert rule.shell is not None  # a shell rule carries its pattern
    return rule.shell


def index_of(rules: list[Rule], ctx: "Context") -> RuleIndex:
    """The index of `rules`, built once per context (and rebuilt when the list grows)."""
    key = (id(rules), len(rules))
    index = ctx._cache.get(key)
    if index is None or index.rules is not rules:
        index = ctx._cache[key] = RuleIndex(rules, ctx)
    return index


def strongest_match(rules: list[Rule], subject: "Subject", call: "Call", ctx: "Context",
                    index: RuleIndex | None = None) -> tuple[int, Rule | None]:
    """The strongest answer (`MATCH` > `MAYBE` > `NO`) any of `rules` gives `subject`, and the
    first rule in list order that gives it.

    A command's answer is kept on the command, for this index: it depends only on the command's
    words and the rules, and a memoised analysis (subjects.analysis_of) hands the same command
    to the next decision of the same string. An answer that read the filesystem (a built-in rm
    rule canonicalising operands) is not kept. `index`: `index_of(rules, ctx)`, when the caller
    has it (a decision asks once per subject)."""
    if index is None:
        index = index_of(rules, ctx)
    if subject.kind == "cmd":
        assert subject.cmd is not None  # a cmd subject carries its command
        memo = subject.cmd.norm_cache
        key = ("strongest", id(index))
        kept = memo.get(key)
        if kept is not None and kept[0] is index:
            return kept[1], kept[2]
        reads = _match.fs_reads[0]
        best, best_rule = _strongest(index, subject, call, ctx)
        if _match.fs_reads[0] == reads:
            memo[key] = (index, best, best_rule)
        return best, best_rule
    if subject.canon is None and subject.kind in ("read", "write"):
        return index.dynamic_path(subject.kind)  # what the loop below would find, precomputed
    return _strongest(index, subject, call, ctx)


def _strongest(index: RuleIndex, subject: "Subject", call: "Call", ctx: "Context") -> tuple[int, Rule | None]:
    best, best_rule = NO, None
    for rule in index.for_subject(subject):
        result = broad_match(rule, subject, call, ctx)
        if result > best:
            best, best_rule = result, rule
            if result == MATCH:
                break
    return best, best_rule
