"""The decision procedure: `decide(call, ctx) -> Verdict` (docs/reference/permissions.md).

What belongs here: calls and their subjects, the decision steps in their normative order,
reason precedence, the principal, what "always allow" would write, and how a
verdict is settled when nobody (or an embedder) answers.

Rules this module keeps:
* `decide` is pure: it writes nothing, prompts nobody and never reads a settings file;
* deny rules are evaluated over every subject before anything else, limits and parse errors
  included, and nothing after step 1 can turn a deny match into anything but deny;
* anything not understood asks; in Bypass, an unreadable call under a deny rule is denied.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import urllib.parse
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Iterable, Literal, Mapping, Sequence

from .modes import MODES, WORKSPACE_MODES
from .paths import CanonicalPath, PathError, PathPattern, canonical, compile_path_pattern, escape_glob, is_inside
from .rules import (
    LITERAL, MATCH, MAYBE, NO, Rule, _normalise, broad_wordset, literal_texts, parse_rule, required_words,
    shell_allow_match, shell_broad_match, strict_values,
)
from .tables import lazy_attributes, load_table

if TYPE_CHECKING:
    # The shell analyser and the classifier are imported where a call needs them, not at import:
    # a session opens (and answers `init`) before its first tool call.
    from .shell import Analysis, Cmd, PathRef, Word

__all__ = [
    "Call", "Context", "Verdict", "SubjectResult", "ExternalDecision", "Settlement", "RuleSet",
    "decide", "settle", "oharness_call", "builtin_rules", "subagent_context", "replace_input", "MODES", "WORKSPACE_MODES",
]

Behavior = Literal["allow", "ask", "deny"]
#: What the UI must say when entering Bypass.
BYPASS_NOTICE = ("Bypass: every call runs unless a deny rule or workspaceMode stops it, "
                 "or a deny rule cannot be ruled out")
FORCED_ORDER = ("ask-rule", "maybe-deny", "ask-rule-maybe", "protected-path", "secret-path", "critical-removal", "dynamic-write", "opaque")
GRANT_ORDER = ("bypass", "hook-allow", "allow-rule", "auto-routine", "edit-grant", "read-only", "inert")
DANGEROUS_ASSIGNMENT_PREFIXES = ("LD_", "DYLD_", "GIT_")
DANGEROUS_ASSIGNMENTS = {"PATH", "PYTHONPATH", "PYTHONSTARTUP", "NODE_OPTIONS", "NODE_PATH", "BASH_ENV", "ENV",
                         "IFS", "PS4", "PROMPT_COMMAND", "SHELLOPTS", "BASHOPTS", "PERL5OPT", "PERL5LIB",
                         "RUBYOPT", "RUBYLIB", "JAVA_TOOL_OPTIONS", "HOME"}


def _load_inert() -> frozenset[str]:
    tools = frozenset(t.casefold() for t in load_table("inert.toml")["tools"])
    return tools | {"todowrite", "update_plan", "request_user_input"}


def _load_protected() -> dict:
    return load_table("protected.toml")


# `INERT_TOOLS` (data/inert.toml) and `PROTECTED` (data/protected.toml) are built on first use,
# not at import (see tables.py); they stay module attributes; read them here through `_lazy`.
__getattr__, _lazy = lazy_attributes(globals(), {"INERT_TOOLS": _load_inert, "PROTECTED": _load_protected})


# --------------------------------------------------------------------------------------------
# Calls


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call, normalised to what the engine needs (build with `oharness_call`,
    `vendor.vendor_call` or `explain_call`)."""

    tool: str  # the tool name as called (trail `tool`)
    rule_tool: str  # canonical rule tool: Bash, Read, Write, WebFetch, WebSearch, Agent, Skill, mcp__…, or a bare name
    input: Mapping[str, Any] = field(default_factory=dict)
    command: str | None = None
    argv: tuple[str, ...] | None = None
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    recursive_read: bool = False
    url: str | None = None
    name: str | None = None
    cwd: str | None = None
    opaque: str | None = None
    inert: bool = False
    read_only_hint: bool = False
    origin: str = "oharness"  # which mapper built it (used to re-map a replacement input)


def oharness_call(tool: str, input: Mapping[str, Any], cwd: str | None = None, *, read_only_hint: bool = False) -> Call:
    """Map an oharness native tool call to a Call."""
    t = tool.casefold()
    inp = dict(input) if isinstance(input, Mapping) else {}

    def field_str(*names: str) -> str | None:
        for n in names:
            v = inp.get(n)
            if isinstance(v, str):
                return v
        return None

    if t == "bash":
        cmd = inp.get("command")
        if isinstance(cmd, list) and all(isinstance(x, str) for x in cmd):
            return Call(tool, "Bash", inp, argv=tuple(cmd), cwd=cwd)
        if not isinstance(cmd, str):
            return Call(tool, "Bash", inp, cwd=cwd, opaque="input lacks a string 'command'")
        return Call(tool, "Bash", inp, command=cmd, cwd=cwd)
    if t == "read":
        p = field_str("path", "file_path")
        return Call(tool, "Read", inp, reads=(p,) if p else (), cwd=cwd, opaque=None if p else "input lacks 'path'")
    if t in ("glob", "grep"):
        p = field_str("path") or "."
        return Call(tool, "Read", inp, reads=(p,), cwd=cwd)
    if t in ("write", "edit", "multiedit", "notebookedit"):
        p = field_str("path", "file_path", "notebook_path")
        return Call(tool, "Write", inp, writes=(p,) if p else (), cwd=cwd, opaque=None if p else "input lacks 'path'")
    if t in ("apply_patch", "patch"):
        from .vendor import patch_paths

        text = field_str("patch", "input", "command")
        paths = patch_paths(text) if text is not None else None
        if paths is None:
            return Call(tool, "Write", inp, cwd=cwd, opaque="patch does not parse")
        return Call(tool, "Write", inp, writes=tuple(paths), cwd=cwd)
    if t == "webfetch":
        return Call(tool, "WebFetch", inp, url=field_str("url") or "", cwd=cwd)
    if t == "websearch":
        return Call(tool, "WebSearch", inp, cwd=cwd)
    if t in ("agent", "task"):
        return Call(tool, "Agent", inp, name=field_str("type", "subagent_type") or "", cwd=cwd)
    if t == "skill":
        return Call(tool, "Skill", inp, name=field_str("name", "skill") or "", cwd=cwd)
    if tool.startswith("mcp__"):
        return Call(tool, tool, inp, cwd=cwd, read_only_hint=read_only_hint)
    if t in _lazy("INERT_TOOLS"):
        return Call(tool, tool, inp, cwd=cwd, inert=True)
    return Call(tool, tool, inp, cwd=cwd)


# --------------------------------------------------------------------------------------------
# Context


@dataclass(slots=True)
class RuleSet:
    """The merged rules of a session: builtin first, then user, project, local, file."""

    deny: list[Rule] = field(default_factory=list)
    ask: list[Rule] = field(default_factory=list)
    allow: list[Rule] = field(default_factory=list)

    def add(self, rule: Rule) -> None:
        getattr(self, rule.behavior).append(rule)

    def all(self) -> list[Rule]:
        return self.deny + self.ask + self.allow

    def copy_with(self, *more: Rule) -> "RuleSet":
        rs = RuleSet(list(self.deny), list(self.ask), list(self.allow))
        for r in more:
            rs.add(r)
        return rs


@dataclass(slots=True)
class Context:
    rules: RuleSet
    project_root: str
    home: str
    cwd: str | None = None
    mode: str = "manual"
    workspace_mode: str = "workspace-write"
    writable_roots: tuple[str, ...] = ()  # extra roots; the project root and tmp are always added
    tmp_roots: tuple[str, ...] = ("/tmp",)
    trusted: bool = True
    can_ask: bool = True
    child_allow: tuple[tuple[Rule, ...], ...] = ()  # subagent definitions' own allow lists, each must hold
    _roots: tuple[str, ...] = ()
    _cache: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.project_root = os.path.realpath(self.project_root)
        if self.cwd is None:
            self.cwd = self.project_root
        roots = [self.project_root, *self.writable_roots, *self.tmp_roots]
        seen: list[str] = []
        for r in roots:
            for spelled in (os.path.normpath(r), os.path.realpath(r)):
                if spelled not in seen:
                    seen.append(spelled)
        self._roots = tuple(seen)

    @property
    def roots(self) -> tuple[str, ...]:
        return self._roots


def builtin_rules(project_root: str, home: str) -> list[Rule]:
    """The built-in deny rules, in the order `permissions list` shows them."""
    root = os.path.realpath(project_root)
    home = os.path.normpath(home)
    out = [parse_rule("Write(/.oharness)", "deny", "builtin"), parse_rule("Write(~/.oharness)", "deny", "builtin")]
    paths = {"/", home, root}
    for p in (home, root):
        cur = p
        while cur != "/":
            cur = os.path.dirname(cur)
            paths.add(cur)
    for p in sorted(paths, key=lambda s: s.encode()):
        for flag in ("-r", "-f"):
            out.append(Rule(f"Bash(rm {flag} {p})", "deny", "builtin", None, "Bash", "builtin-rm", rm_flag=flag, rm_path=p))
    return out


# --------------------------------------------------------------------------------------------
# Verdicts


@dataclass(slots=True)
class SubjectResult:
    kind: str  # cmd | read | write | host | mcp | tool | agent | skill | opaque
    label: str
    result: Behavior = "allow"
    reason: str = ""
    rule: str | None = None
    scope: str | None = None
    file: str | None = None
    words: list[str] | None = None
    path: str | None = None
    real: str | None = None
    why: str | None = None  # opaque: why

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind}
        if self.words is not None:
            d["words"] = self.words
        if self.path is not None:
            d["path"] = self.path
        if self.real is not None:
            d["real"] = self.real
        if self.kind in ("host",):
            d["host"] = self.label
        if self.kind in ("mcp", "tool", "agent", "skill"):
            d["name"] = self.label
        if self.why is not None:
            d["why"] = self.why
        d.update({"result": self.result, "reason": self.reason})
        if self.rule is not None:
            d["rule"] = self.rule
            d["scope"] = self.scope
        return d


@dataclass(slots=True)
class Verdict:
    behavior: Behavior
    reason: str
    principal: str
    subjects: list[SubjectResult]
    rule: str | None = None
    scope: str | None = None
    file: str | None = None
    mode: str = "manual"
    workspace_mode: str = "workspace-write"
    tool: str = ""
    matched: str | None = None  # for deny/maybe-deny: the subject text that matched
    remember: dict[str, str] | None = None  # scope -> rule "always allow" would write
    remember_why_not: str | None = None
    replaced: bool = False  # decided on an embedder's replacement input
    call: Call | None = None
    principal_truncated: bool = False
    input_sha256: str | None = None
    opaque_why: list[str] = field(default_factory=list)

    @property
    def rememberable(self) -> bool:
        return self.remember is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.behavior, "reason": self.reason, "rule": self.rule, "scope": self.scope,
            "file": self.file, "mode": self.mode, "workspace_mode": self.workspace_mode,
            "principal": self.principal, "subjects": [s.to_json() for s in self.subjects],
            "remember": (self.remember or {}).get("local"),
        }


@dataclass(frozen=True, slots=True)
class ExternalDecision:
    """A metaharness decision for this call, given to the engine as an external decider.

    The one class for it: oharness's stdio reads a `decision` line into it and its gates pass it on.
    """

    decision: Literal["allow", "deny", "abstain", "replace"]
    _: KW_ONLY  # the rest by name: two classes of this name once took them in two orders
    decided_by: str | None = None  # frame | observe | policy | embedder | ask | deadline; None: not named
    reason: str | None = None
    replacement: Any = None  # the input a `replace` runs with, as delivered (the engine re-decides a mapping)


@dataclass(frozen=True, slots=True)
class Settlement:
    """What finally happened when the verdict did not need a person: trail `outcome` and `by`."""

    outcome: Literal["allowed", "denied", "unavailable"]
    by: str
    note: str | None = None


_BY_REASON = {
    "allow-rule": "rule", "deny-rule": "rule", "read-only": "read-only", "inert": "read-only",
    "edit-grant": "mode", "bypass": "mode", "plan-mode": "mode", "auto-routine": "classifier",
    "workspace-gate": "gate", "hook-allow": "hook", "hook-deny": "hook", "too-large": "engine",
    "maybe-deny": "engine", "opaque": "engine",
}


def settle(verdict: Verdict, *, can_ask: bool, external: ExternalDecision | None = None) -> Settlement | None:
    """Settle a verdict without a prompt; None means "ask a person now"."""
    if verdict.behavior == "allow":
        return Settlement("allowed", _BY_REASON.get(verdict.reason, "rule"))
    if verdict.behavior == "deny":
        return Settlement("denied", _BY_REASON.get(verdict.reason, "engine"))
    if external is not None and external.decision == "allow" and external.decided_by == "embedder":
        return Settlement("allowed", "embedder")  # the embedder's allow answers the ask, once
    if external is not None and external.decision == "deny" and external.decided_by == "embedder":
        return Settlement("denied", "embedder", external.reason)
    if can_ask:
        return None
    return Settlement("unavailable", "none")


# --------------------------------------------------------------------------------------------
# Subjects


@dataclass(slots=True)
class _Subj:
    kind: str
    label: str
    cmd: Cmd | None = None
    ref: PathRef | None = None
    canon: CanonicalPath | None = None
    dynamic: bool = False
    host: str | None = None
    opaque_why: str | None = None
    deny_only: bool = False
    recursive: bool = False
    out: SubjectResult | None = None


def _path_label(ref: PathRef) -> str:
    return ref.word.deny_value if ref.word.deny_value is not None else ref.word.text


def _mk_path_subject(access: str, ref: PathRef, ctx: Context) -> _Subj:
    s = _Subj(access, _path_label(ref), ref=ref, deny_only=ref.deny_only, recursive=ref.recursive)
    v = ref.word.deny_value
    cwd = ref.cwd
    if v is None or (cwd is None and not v.startswith("/")):
        s.dynamic = True
        return s
    try:
        s.canon = canonical(v, cwd or "/", ctx.home)
    except PathError:
        s.dynamic = True
    return s


def _host_of(url: str) -> str | None:
    try:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            return None
        host = parts.hostname.rstrip(".").lower()
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            return None
        return host
    except ValueError:
        return None


def _subjects(call: Call, ctx: Context) -> tuple[list[_Subj], Analysis | None]:
    from .shell import Cmd, PathRef, Word, analyse, static_word

    cwd = call.cwd or ctx.cwd
    subs: list[_Subj] = []
    analysis: Analysis | None = None
    if call.opaque:
        subs.append(_Subj("opaque", call.opaque, opaque_why=call.opaque))
    if call.rule_tool == "Bash" and (call.command is not None or call.argv is not None):
        text = call.command if call.command is not None else shlex.join(call.argv or ())
        analysis = analyse(text, cwd, ctx.home)
        if analysis.too_large:
            return subs, analysis
        for c in analysis.cmds:
            subs.append(_Subj("cmd", c.display(), cmd=c, deny_only=c.deny_only))
            for ref in c.paths:
                subs.append(_mk_path_subject(ref.access, ref, ctx))
        for ref in analysis.paths:
            subs.append(_mk_path_subject(ref.access, ref, ctx))
        carried = {c.opaque for c in analysis.cmds if c.program_unknown}
        for why in dict.fromkeys(analysis.program_unknown):
            if why not in carried:
                # A parse error: the program that will run cannot be determined.
                subs.append(_Subj("cmd", why, cmd=Cmd(words=[], program_unknown=True, opaque=why)))
        for why in dict.fromkeys(analysis.opaque):
            subs.append(_Subj("opaque", why, opaque_why=why))
        return subs, analysis
    for p in call.writes:
        subs.append(_mk_path_subject("write", PathRef("write", static_word(p) if "\x00" not in p else Word(p, None, None, ".*", False), cwd, "tool"), ctx))
    for p in call.reads:
        ref = PathRef("read", static_word(p), cwd, "tool", recursive=call.recursive_read)
        subs.append(_mk_path_subject("read", ref, ctx))
    if call.rule_tool == "WebFetch":
        host = _host_of(call.url or "")
        if host is None:
            subs.append(_Subj("opaque", "URL does not parse or is not http(s)", opaque_why="URL does not parse or is not http(s)"))
        else:
            subs.append(_Subj("host", host, host=host))
    elif call.rule_tool.startswith("mcp__"):
        subs.append(_Subj("mcp", call.rule_tool))
    elif call.rule_tool == "Agent":
        subs.append(_Subj("agent", call.name or ""))
    elif call.rule_tool == "Skill":
        subs.append(_Subj("skill", call.name or ""))
    elif call.rule_tool not in ("Read", "Write", "Bash"):
        subs.append(_Subj("tool", call.rule_tool))
    return subs, analysis


# --------------------------------------------------------------------------------------------
# Matching subjects against rules


class _RuleIndex:
    """One behavior's rules, indexed so a subject is compared only with rules that can match it.

    Every list handed out keeps list order (the first matching rule is the one reported), and
    leaves out only rules the matcher would answer `NO` for:

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

    def __init__(self, rules: list[Rule], ctx: "Context") -> None:
        self.rules = rules
        self.pos = {id(r): i for i, r in enumerate(rules)}
        self.by_key: dict[str, list[Rule]] = {}
        self.unkeyed: list[Rule] = []
        self.rm: list[Rule] = []
        self.path: list[Rule] = []
        self.other: list[Rule] = []
        self.bash_all: list[Rule] = []
        self.bash_plain: list[Rule] = []  # Bash rules that are neither shell patterns nor builtin-rm
        self.path_always: list[Rule] = []
        self.path_by_first: dict[tuple[str, str], list[Rule]] = {}
        self.patterns: dict[tuple[int, bool], object] = {}
        self._memo: dict[str | None, list[Rule]] = {}
        self._dynamic: dict[str, tuple[int, Rule | None]] = {}
        self.ctx = ctx

        # Rules that can match at call level (`_call_level`): tool-part globs, bare tool rules.
        self.call_level = [r for r in rules if r.kind in ("any", "param") and r.tool_regex is not None
                           or (r.kind == "any" and r.tool in ("Bash", "WebFetch", "WebSearch", "Agent", "Skill", "Glob", "Grep"))]
        shell_rules: list[Rule] = []
        for r in rules:
            if r.tool == "Bash" and r.kind == "shell":
                first = r.shell.tokens[0]
                if first.kind == LITERAL:
                    self.by_key.setdefault(first.text.rsplit("/", 1)[-1].casefold(), []).append(r)
                else:
                    self.unkeyed.append(r)
                self.bash_all.append(r)
                shell_rules.append(r)
            elif r.kind == "builtin-rm":
                self.rm.append(r)
                self.bash_all.append(r)
            elif r.tool == "Bash":
                self.unkeyed.append(r)
                self.bash_all.append(r)
                self.bash_plain.append(r)
            elif r.tool in ("Read", "Write") and r.kind in ("path", "any"):
                self.path.append(r)
                pat = compile_path_pattern(r.path, project_root=ctx.project_root, home=ctx.home, broad=True) \
                    if r.kind == "path" else None
                if pat is not None and pat.first is not None and pat.anchor not in (None, "/"):
                    self.path_by_first.setdefault((pat.anchor, pat.first), []).append(r)
                else:
                    self.path_always.append(r)
            else:
                self.other.append(r)

        # Broad: within each program key, file a rule under its rarest required word.
        self.broad_free: dict[str, list[Rule]] = {}
        self.broad_by_word: dict[str, dict[str, list[Rule]]] = {}
        for key, group in self.by_key.items():
            req = {id(r): required_words(r.shell) for r in group}
            freq: dict[str, int] = {}
            for words in req.values():
                for w in words:
                    freq[w] = freq.get(w, 0) + 1
            by_word = self.broad_by_word[key] = {}
            free = self.broad_free[key] = []
            for r in group:
                words = req[id(r)]
                if words:
                    by_word.setdefault(min(words, key=lambda w: (freq[w], w)), []).append(r)
                else:
                    free.append(r)
        # Strict: every shell rule under its rarest LITERAL token (case-sensitive).
        lits = {id(r): literal_texts(r.shell) for r in shell_rules}
        lfreq: dict[str, int] = {}
        for texts in lits.values():
            for t in texts:
                lfreq[t] = lfreq.get(t, 0) + 1
        self.strict_free: list[Rule] = []
        self.strict_by_lit: dict[str, list[Rule]] = {}
        for r in shell_rules:
            texts = lits[id(r)]
            if texts:
                self.strict_by_lit.setdefault(min(texts, key=lambda t: (lfreq[t], t)), []).append(r)
            else:
                self.strict_free.append(r)
        self._strict_base = self.strict_free + self.bash_plain + self.rm

    def pattern(self, rule: Rule, broad: bool):
        key = (id(rule), broad)
        pat = self.patterns.get(key)
        if pat is None:
            pat = self.patterns[key] = compile_path_pattern(rule.path, project_root=self.ctx.project_root,
                                                            home=self.ctx.home, broad=broad)
        return pat

    def _ordered(self, rules: list[Rule]) -> list[Rule]:
        pos = self.pos
        return sorted(rules, key=lambda r: pos[id(r)])

    def for_cmd(self, cmd: Cmd) -> list[Rule]:
        """Every rule whose broad (deny/ask) match of `cmd` — or of one of its tails, the
        backstop of `_broad` — is not certainly `NO`, in list order."""
        if cmd.program_unknown:
            return self.bash_all
        key = cmd.basename.casefold() if cmd.basename is not None else None
        tail_keys = [k for k in _tail_starts(cmd) if k != key and (k in self.by_key or k == "rm")]
        if not tail_keys:
            return self._for_key(cmd, key)
        found: dict[int, Rule] = {}
        for key in (key, *tail_keys):
            for r in self._for_key(cmd, key):
                found[id(r)] = r
        return self._ordered(list(found.values()))

    def _for_key(self, cmd: Cmd, key: str | None) -> list[Rule]:
        got = self._memo.get(key)
        if got is None:
            cands = self.by_key.get(key, []) + self.unkeyed + (self.rm if key == "rm" else [])
            got = self._memo[key] = self._ordered(cands)
        by_word = self.broad_by_word.get(key)
        if not by_word:
            return got
        wordset = broad_wordset(cmd)
        if wordset is False:
            return got  # a dynamic word: required words are not used (see shell_broad_match)
        cands = self.broad_free[key] + self.unkeyed + (self.rm if key == "rm" else [])
        for w in wordset:
            hit = by_word.get(w)
            if hit is not None:
                cands += hit
        return self._ordered(cands)

    def for_cmd_strict(self, cmd: Cmd) -> list[Rule]:
        """Every rule whose allow match of `cmd` is not certainly false, in list order."""
        if cmd.program_unknown:
            return self.bash_all
        cands = list(self._strict_base)
        by_lit = self.strict_by_lit
        for v in strict_values(cmd):
            hit = by_lit.get(v)
            if hit is not None:
                cands += hit
        return self._ordered(cands)

    def dynamic_path(self, access: str) -> tuple[int, Rule | None]:
        """`_per_subject` for a read/write subject of unknown target: a `Read`/`Write` rule with no
        specifier matches it, any other applicable path rule may."""
        got = self._dynamic.get(access)
        if got is None:
            applicable = [r for r in self.path if _path_rule_applies(r, access)]
            first_any = next((r for r in applicable if r.kind == "any"), None)
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
        return next((r for r in self.path if r.tool == tool and r.kind == "any"), None)

    def for_subject(self, s: "_Subj") -> list[Rule]:
        if s.kind == "cmd":
            return self.for_cmd(s.cmd)
        if s.kind in ("read", "write"):
            if s.canon is None or s.recursive or not self.path_by_first:
                return self.path
            found: list[Rule] = list(self.path_always)
            anchors = {a for a, _ in self.path_by_first}
            for p in s.canon.spellings:
                for a in anchors:
                    if p.startswith(a + "/"):
                        found.extend(self.path_by_first.get((a, p[len(a) + 1 :].split("/", 1)[0].casefold()), ()))
            if len(found) > len(self.path_always):
                found = sorted(dict.fromkeys(found), key=lambda r: self.pos[id(r)])
            return found
        return self.other


def _index_of(rules: list[Rule], ctx: "Context") -> _RuleIndex:
    key = (id(rules), len(rules))
    idx = ctx._cache.get(key)
    if idx is None or idx.rules is not rules:
        idx = ctx._cache[key] = _RuleIndex(rules, ctx)
    return idx


def _path_rule_applies(rule: Rule, access: str) -> bool:
    if rule.tool == "Read":
        return True  # a Read deny/ask also covers writes of the same paths
    if rule.tool == "Write":
        return access == "write"
    return False


def _path_match(rule: Rule, s: _Subj, ctx: Context, *, broad: bool) -> int:
    if rule.kind == "any":
        return MATCH
    pat = compile_path_pattern(rule.path, project_root=ctx.project_root, home=ctx.home, broad=broad)
    if s.dynamic or s.canon is None:
        return MAYBE if broad else NO
    hits = [pat.matches(p) for p in (s.canon.lexical, s.canon.real)]
    if broad:
        return MATCH if any(hits) else NO
    return MATCH if all(hits) else NO


def _walk_for_denied(root: str, rule: Rule, ctx: Context, limit: int = 20_000) -> bool:
    """A recursive reader over `root`: does it hold an entry a Read deny rule matches?"""
    pat = compile_path_pattern(rule.path, project_root=ctx.project_root, home=ctx.home, broad=True)
    if not os.path.isdir(root):
        return False
    seen = 0
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                for e in it:
                    seen += 1
                    if seen > limit:
                        return True
                    if pat.matches(e.path) or pat.matches(os.path.realpath(e.path)):
                        return True
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
        except OSError:
            continue
    return False


def _rm_builtin(rule: Rule, cmd: Cmd, ctx: Context) -> int:
    if cmd.program_unknown:
        return MAYBE
    base = cmd.basename
    if base is None or base.casefold() != "rm":
        return NO
    best = NO
    for opts, dash, operands, could_be in _rm_facts(cmd, ctx):
        cap = MATCH if rule.rm_flag in opts else (MAYBE if dash else NO)
        if cap == NO:
            continue
        for what, w in operands:
            if what == "dynamic":
                if any(could_be(w, x) for x in (rule.rm_path, rule.rm_path + "/", ".", "..", "/")):
                    best = max(best, MAYBE)
            elif what == "unknown-cwd":
                best = max(best, MAYBE)
            elif rule.rm_path in w:
                best = max(best, cap)
    return best


def _rm_facts(cmd: Cmd, ctx: Context) -> list:
    """What every built-in rm rule asks of one `rm` command, worked out once per command (one
    analysis) instead of once per rule: per word variant, its options, whether a dynamic word
    may be an option, and its operands as ("dynamic", word), ("unknown-cwd", None) or
    ("path", (lexical, real)) — an operand that cannot be canonicalised is left out."""
    key = ("rm-facts", ctx.home)
    facts = cmd.norm_cache.get(key)
    if facts is not None:
        return facts
    shapes: dict[tuple[int, str], bool] = {}

    def could_be(w: Word, literal: str) -> bool:
        k = (id(w), literal)
        hit = shapes.get(k)
        if hit is None:
            hit = shapes[k] = w.could_be(literal)
        return hit

    facts = []
    for words in cmd.word_variants():
        memo_key = (id(words), "rm")  # shared with shell_broad_match's option normalisation
        normed = cmd.norm_cache.get(memo_key)
        if normed is None:
            normed = cmd.norm_cache[memo_key] = _normalise("rm", words[1:])
        opts, operands, dash = normed
        ops: list[tuple[str, Any]] = []
        for w in operands:
            v = w.deny_value
            if v is None:
                ops.append(("dynamic", w))
                continue
            if cmd.cwd is None and not v.startswith("/"):
                ops.append(("unknown-cwd", None))
                continue
            try:
                c = canonical(v, cmd.cwd or "/", ctx.home)
            except PathError:
                continue
            ops.append(("path", (c.lexical, c.real)))
        facts.append((opts, dash, ops, could_be))
    cmd.norm_cache[key] = facts
    return facts


def _name_match(glob: str, name: str, *, broad: bool) -> bool:
    import re as _re

    rx = ".*".join(_re.escape(p) for p in glob.split("*"))
    return _re.fullmatch(rx, name, _re.IGNORECASE if broad else 0) is not None


def _domain_match(pattern: str, host: str) -> bool:
    if pattern.startswith("*."):
        return host.endswith(pattern[1:]) and host != pattern[2:]
    if "*" in pattern:
        import re as _re

        rx = "[^.]*".join(_re.escape(p) for p in pattern.split("*"))
        return _re.fullmatch(rx, host) is not None
    return host == pattern


def _param_match(rule: Rule, call: Call) -> int:
    import re as _re

    name, glob = rule.param
    v = call.input.get(name) if isinstance(call.input, Mapping) else None
    if not isinstance(v, str):
        return NO
    rx = ".*".join(_re.escape(p) for p in glob.split("*"))
    return MATCH if _re.fullmatch(rx, v, _re.IGNORECASE | _re.DOTALL) else NO


def _tail_starts(cmd: Cmd) -> dict[str, list[tuple[int, int]]]:
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
        variants = cmd.word_variants() if cmd.inner is None else ()
        for vi, words in enumerate(variants):
            for k in range(1, len(words)):
                w = words[k]
                v = w.deny_value
                if v and w.value is not None and v[0] != "-":
                    starts.setdefault(v.rsplit("/", 1)[-1].casefold(), []).append((vi, k))
        cmd.norm_cache["tail-starts"] = starts
    return starts


def _tails(cmd: Cmd, key: str | None) -> list[Cmd]:
    """The tails of `cmd` whose program's basename is `key` (None: every tail), as commands of
    their own, built on first use and kept (matchers memoise by the word list's id)."""
    cache = cmd.norm_cache.setdefault("tails", {})
    got = cache.get(key)
    if got is None:
        from .shell import Cmd as _Cmd

        starts = _tail_starts(cmd)
        picks = starts.get(key, []) if key is not None else [p for ps in starts.values() for p in ps]
        variants = cmd.word_variants()
        got = cache[key] = [_Cmd(variants[vi][k:], cwd=cmd.cwd) for vi, k in picks]
    return got


def _rule_key(rule: Rule) -> str | None:
    if rule.kind == "builtin-rm":
        return "rm"
    first = rule.shell.tokens[0]
    return first.text.rsplit("/", 1)[-1].casefold() if first.kind == LITERAL else None


def _cmd_broad(rule: Rule, cmd: Cmd, ctx: Context) -> int:
    if rule.kind == "builtin-rm":
        return _rm_builtin(rule, cmd, ctx)
    if rule.tool != "Bash":
        return NO
    if rule.kind == "any":
        return MATCH
    if rule.kind == "shell":
        return shell_broad_match(rule.shell, cmd)
    return NO


def _broad(rule: Rule, s: _Subj, call: Call, ctx: Context) -> int:
    """Deny/ask matching of one rule against one subject."""
    if s.kind == "cmd":
        r = _cmd_broad(rule, s.cmd, ctx)
        if r == NO and rule.kind in ("shell", "builtin-rm") and not s.cmd.program_unknown:
            # The backstop: a pattern met by a tail of the words gives `maybe` (a program we do
            # not know may run its arguments as a command; over-matching is the intended side).
            key = _rule_key(rule)
            if key is not None and key not in _tail_starts(s.cmd):
                return r
            for tail in _tails(s.cmd, key):
                if _cmd_broad(rule, tail, ctx) != NO:
                    return MAYBE
        return r
    if s.kind in ("read", "write"):
        if rule.kind not in ("path", "any") or not _path_rule_applies(rule, s.kind):
            return NO
        r = _path_match(rule, s, ctx, broad=True)
        if r == NO and s.recursive and rule.behavior == "deny" and rule.tool == "Read" and rule.kind == "path" and s.canon:
            if _walk_for_denied(s.canon.real, rule, ctx):
                return MAYBE
        return r
    if s.kind == "opaque":
        return NO
    if s.kind == "host":
        if rule.tool != "WebFetch":
            return NO
        if rule.kind == "any":
            return MATCH
        return MATCH if rule.kind == "domain" and _domain_match(rule.domain, s.host) else NO
    if s.kind in ("agent", "skill"):
        if rule.tool != ("Agent" if s.kind == "agent" else "Skill"):
            return NO
        if rule.kind == "any":
            return MATCH
        return MATCH if rule.kind == "name" and _name_match(rule.name_glob, s.label, broad=True) else NO
    if s.kind in ("mcp", "tool"):
        if not rule.tool_matches(call.rule_tool):
            return NO
        if rule.kind == "any":
            return MATCH
        if rule.kind == "param":
            return _param_match(rule, call)
        return NO
    return NO


def _call_level(rule: Rule, call: Call) -> int:
    """Tool-part globs (`*`, `mcp__*`) and bare tool rules match every call of the tool."""
    if rule.kind == "any" and rule.tool_regex is not None and not rule.tool.startswith("mcp__"):
        return MATCH if rule.tool_matches(call.rule_tool) else NO
    if rule.kind == "any" and call.rule_tool == rule.tool and rule.tool in ("Bash", "WebFetch", "WebSearch", "Agent", "Skill", "Glob", "Grep"):
        return MATCH
    if rule.kind == "any" and call.tool.casefold() in ("glob", "grep") and rule.tool.casefold() == call.tool.casefold():
        return MATCH
    if rule.kind == "param" and rule.tool_regex is not None and not rule.tool.startswith("mcp__") and rule.tool_matches(call.rule_tool):
        return _param_match(rule, call)
    return NO


def _best(rules: Iterable[Rule], subs: Sequence[_Subj], call: Call, ctx: Context) -> tuple[int, Rule | None, _Subj | None]:
    best, best_rule, best_sub = NO, None, None
    for rule in rules:
        r = _call_level(rule, call)
        if r > best:
            best, best_rule, best_sub = r, rule, None
        if best == MATCH:
            return best, best_rule, best_sub
    for s in subs:
        for rule in rules:
            r = _broad(rule, s, call, ctx)
            if r > best:
                best, best_rule, best_sub = r, rule, s
                if best == MATCH:
                    return best, best_rule, best_sub
    return best, best_rule, best_sub


def _per_subject(rules: list[Rule], s: _Subj, call: Call, ctx: Context) -> tuple[int, Rule | None]:
    idx = _index_of(rules, ctx)
    if s.canon is None and s.kind in ("read", "write"):
        return idx.dynamic_path(s.kind)  # what the loop below would find, precomputed
    best, best_rule = NO, None
    for rule in idx.for_subject(s):
        r = _broad(rule, s, call, ctx)
        if r > best:
            best, best_rule = r, rule
            if r == MATCH:
                break
    return best, best_rule


# --------------------------------------------------------------------------------------------
# Paths: writable set, protected, secret, critical


def _under(path: str, root: str) -> bool:
    """Component-wise containment of normalised absolute paths (`/w/proj-evil` is not under `/w/proj`)."""
    return path == root or root == "/" or path.startswith(root + "/")


def _inside_roots(c: CanonicalPath, ctx: Context) -> bool:
    return all(any(_under(p, r) for r in ctx.roots) for p in (c.lexical, c.real))


def _inside_workspace_or_tmp(c: CanonicalPath, ctx: Context) -> bool:
    return _inside_roots(c, ctx)


class _PatternSet:
    """Broad path patterns (the protected and secret lists) compiled to answer "does any of them
    match?" with few regex calls: the any-depth names are one alternation over the path's
    components; an anchored pattern with a literal first component is tried only on paths under
    its anchor with that component (the same necessary condition `PathPattern.matches` checks
    first); the rest are tried one by one."""

    def __init__(self, patterns: Sequence[str], ctx: Context) -> None:
        compiled = [compile_path_pattern(p, project_root=ctx.project_root, home=ctx.home, broad=True) for p in patterns]
        names = [pat.regex.pattern for pat in compiled if pat.anchor is None]
        self.names = re.compile("|".join(f"(?:{n})" for n in names), re.IGNORECASE) if names else None
        self.by_first: dict[str, dict[str, list[PathPattern]]] = {}
        self.rest: list[PathPattern] = []
        for pat in compiled:
            if pat.anchor is None:
                continue
            if pat.first is not None and pat.anchor != "/":
                self.by_first.setdefault(pat.anchor + "/", {}).setdefault(pat.first, []).append(pat)
            else:
                self.rest.append(pat)

    def matches(self, path: str) -> bool:
        if self.names is not None and any(self.names.fullmatch(part) for part in path.split("/") if part):
            return True
        for prefix, by_first in self.by_first.items():
            if path.startswith(prefix):
                head = path[len(prefix):].split("/", 1)[0].casefold()
                if any(pat.matches(path) for pat in by_first.get(head, ())):
                    return True
        return any(pat.matches(path) for pat in self.rest)


def _matches_any(patterns: Sequence[str], c: CanonicalPath, ctx: Context) -> bool:
    key = ("patterns", id(patterns))
    compiled = ctx._cache.get(key)
    if compiled is None:
        compiled = ctx._cache[key] = _PatternSet(patterns, ctx)
    return compiled.matches(c.lexical) or (c.real != c.lexical and compiled.matches(c.real))


def _critical(c: CanonicalPath, ctx: Context, cwd: str | None) -> bool:
    anchors = {os.path.normpath(ctx.home), ctx.project_root}
    if cwd:
        anchors.add(os.path.normpath(cwd))
    for p in (c.lexical, c.real):
        if p == "/" or os.path.dirname(p) == "/":
            return True
        if any(_under(a, p) for a in anchors):
            return True
    return False


# --------------------------------------------------------------------------------------------
# The procedure


def decide(call: Call, ctx: Context, external: ExternalDecision | None = None) -> Verdict:
    """Decide one call. Pure: writes nothing, prompts nobody."""
    if external is not None and external.decision == "replace" and external.replacement is not None:
        v = decide(replace_input(call, external.replacement), ctx, None)
        v.replaced = True
        return v
    subs, analysis = _subjects(call, ctx)
    principal, truncated, sha = _principal(call, subs, ctx)
    base = dict(mode=ctx.mode, workspace_mode=ctx.workspace_mode, tool=call.tool, call=call,
                principal_truncated=truncated, input_sha256=sha)
    for s in subs:
        s.out = SubjectResult(s.kind, s.label)
        _fill_subject(s)
    results = [s.out for s in subs]
    opaque_why = [s.opaque_why for s in subs if s.opaque_why]

    def verdict(behavior: Behavior, reason: str, rule: "Rule | tuple | None" = None, matched: str | None = None) -> Verdict:
        text, scope, file = (rule.text, rule.scope, rule.file) if isinstance(rule, Rule) else (rule or (None, None, None))
        if any(not s.out.reason for s in subs if not s.deny_only and s.kind != "opaque"):
            _fill_grants(subs, call, ctx, only_display=True)  # every subject is listed with its own result
        for s in subs:
            if not s.out.reason:
                _mark(s, "ask" if s.kind == "opaque" else s.out.result, "opaque" if s.kind == "opaque" else "deny-only", None)
        return Verdict(behavior, reason, principal, results, text, scope, file, matched=matched,
                       opaque_why=opaque_why, **base)

    # 0 — too large
    if analysis is not None and analysis.too_large:
        return verdict("deny", "too-large")

    # 1 — deny rules over everything extracted
    deny_results: list[tuple[int, Rule | None]] = []
    first_deny: tuple[Rule, _Subj | None] | None = None
    for rule in _index_of(ctx.rules.deny, ctx).call_level:
        if _call_level(rule, call) == MATCH and first_deny is None:
            first_deny = (rule, None)
    for s in subs:
        r, rule = _per_subject(ctx.rules.deny, s, call, ctx)
        deny_results.append((r, rule))
        if r == MATCH:
            _mark(s, "deny", "deny-rule", rule)
            # Report the earliest rule in list order (built-in rules first), whatever the subject.
            if first_deny is None or _index(ctx.rules.deny, rule) < _index(ctx.rules.deny, first_deny[0]):
                first_deny = (rule, s)
    if first_deny is not None:
        rule, s = first_deny
        return verdict("deny", "deny-rule", rule, s.label if s else None)
    call_maybe = None
    for rule in _index_of(ctx.rules.deny, ctx).call_level:
        if _call_level(rule, call) == MAYBE:
            call_maybe = rule
            break

    # 2 — the workspace gate
    for s in subs:
        if _gate_refuses(s, ctx):
            _mark(s, "deny", "workspace-gate", None)
            return verdict("deny", "workspace-gate", matched=s.label)

    # 3 — plan mode
    if ctx.mode == "plan":
        for s in subs:
            if not _plan_admits(s, call, ctx):
                _mark(s, "deny", "plan-mode", None)
                return verdict("deny", "plan-mode", matched=s.label)

    # 4 — the external decider's deny
    h = external.decision if external is not None else "abstain"
    if h == "deny":
        return verdict("deny", "hook-deny")

    # 5 — bypass, forced asks
    maybe_deny = [(s, rule) for s, (r, rule) in zip(subs, deny_results) if r == MAYBE]
    if call_maybe is not None:
        maybe_deny.insert(0, (None, call_maybe))
    opaque = [s for s in subs if s.kind == "opaque" or (s.cmd is not None and s.cmd.opaque)]
    if ctx.mode == "bypass":
        if maybe_deny:
            s, rule = maybe_deny[0]
            if s is not None:
                _mark(s, "deny", "maybe-deny", rule)
            return verdict("deny", "maybe-deny", rule, s.label if s else None)
        if opaque and _deny_rules_for(call, ctx):
            rule = _deny_rules_for(call, ctx)
            for s in opaque:
                _mark(s, "deny", "opaque", None)
            return verdict("deny", "opaque", rule, opaque[0].label)
        for s in subs:
            if not s.deny_only:
                _mark(s, "allow", "bypass", None)
        return verdict("allow", "bypass")

    forced: list[tuple[str, _Subj | None, Rule | None]] = []
    for s in subs:
        r, rule = _per_subject(ctx.rules.ask, s, call, ctx)
        if r != NO:
            # A certain ask match outranks a possible deny; a possible ask match does not.
            forced.append(("ask-rule" if r == MATCH else "ask-rule-maybe", s, rule))
    for rule in _index_of(ctx.rules.ask, ctx).call_level:
        if _call_level(rule, call) != NO:
            forced.append(("ask-rule", None, rule))
            break
    for s, rule in maybe_deny:
        forced.append(("maybe-deny", s, rule))
    for s in subs:
        if s.deny_only:
            continue
        if s.kind == "write" and s.canon is not None and _matches_any(_lazy("PROTECTED")["paths"], s.canon, ctx):
            forced.append(("protected-path", s, None))
        if s.kind == "read" and s.canon is not None and _matches_any(_lazy("PROTECTED")["secret"], s.canon, ctx):
            if not _exact_path_allow(s, ctx):
                forced.append(("secret-path", s, None))
        if s.kind == "write" and s.ref is not None and s.ref.removal:
            if s.dynamic or (s.canon is not None and _critical(s.canon, ctx, s.ref.cwd)):
                forced.append(("critical-removal", s, None))
        if s.kind == "write" and s.dynamic:
            forced.append(("dynamic-write", s, None))
    for s in opaque:
        forced.append(("opaque", s, None))
    if forced:
        forced.sort(key=lambda f: FORCED_ORDER.index(f[0]))
        forced = [("ask-rule" if r == "ask-rule-maybe" else r, sk, rk) for r, sk, rk in forced]
        reason, s, rule = forced[0]
        for reason_k, sk, rule_k in forced:
            if sk is not None and sk.out.result != "ask":
                _mark(sk, "ask", reason_k, rule_k)
        v = verdict("ask", reason, rule, s.label if s else None)
        v.remember_why_not = _forced_why(reason)
        return v

    # 6 — grants
    pending = _fill_grants(subs, call, ctx)
    if h == "allow" and pending:
        for s in pending:
            _mark(s, "allow", "hook-allow", None)
        return verdict("allow", "hook-allow")
    if not pending:
        reason, rule = _grant_reason(subs)
        return verdict("allow", reason, rule)
    # Among pending subjects, call order — except that a risky feature is reported before
    # "not recognised" (the cmd of `cp x /usr/bin/x` is unknown only because its target is risky).
    first = next((p for p in pending if p.out.reason.startswith("auto-risky:")), pending[0])
    v = verdict("ask", first.out.reason)
    _remember(v, pending, subs, call, ctx)
    return v


def _index(rules: list[Rule], rule: Rule) -> int:
    for i, r in enumerate(rules):
        if r is rule:
            return i
    return len(rules)


def replace_input(call: Call, new_input: Mapping[str, Any]) -> Call:
    """The same tool called with an embedder's replacement input (mapped by the call's own mapper)."""
    if call.origin == "vendor":
        from .vendor import vendor_call

        return vendor_call(call.tool, new_input, call.cwd)
    return oharness_call(call.tool, new_input, call.cwd, read_only_hint=call.read_only_hint)


def _fill_subject(s: _Subj) -> None:
    o = s.out
    if s.kind == "cmd":
        o.words = [w.deny_value if w.deny_value is not None else w.text for w in s.cmd.words]
        if not s.cmd.words:
            o.label = s.cmd.display()  # the stand-in for a program that cannot be determined
        if s.cmd.opaque:
            o.why = s.cmd.opaque
    elif s.kind in ("read", "write"):
        if s.canon is not None:
            o.path, o.real = s.canon.lexical, s.canon.real
        else:
            o.path = s.label
            o.why = "unknown target"
    elif s.kind == "opaque":
        o.why = s.opaque_why


def _mark(s: _Subj, result: Behavior, reason: str, rule: Rule | None) -> None:
    s.out.result, s.out.reason = result, reason
    if rule is not None:
        s.out.rule, s.out.scope, s.out.file = rule.text, rule.scope, rule.file


def _forced_why(reason: str) -> str:
    return {
        "ask-rule": "explicit ask rule", "maybe-deny": "a deny rule may match",
        "protected-path": "protected path", "secret-path": "secret path",
        "critical-removal": "critical removal", "dynamic-write": "unknown write target",
        "opaque": "the call cannot be read fully",
    }[reason]


def _deny_rules_for(call: Call, ctx: Context) -> Rule | None:
    """A deny rule that could apply to this call's subjects (`deny_rules_for`)."""
    for rule in ctx.rules.deny:
        if call.rule_tool == "Bash" and rule.tool in ("Bash", "Read", "Write"):
            return rule
        if call.rule_tool in ("Read", "Write") and rule.tool in ("Read", "Write"):
            return rule
        if rule.tool_matches(call.rule_tool):
            return rule
    return None


_classifier = None  # bound by `_cls()` on first use, like the shell analyser (see the imports)


def _cls():
    global _classifier
    if _classifier is None:
        from . import classifier

        _classifier = classifier
    return _classifier


def _cmd_read_only(s: _Subj, ctx: Context) -> bool:
    return s.cmd is not None and _cls().is_read_only(s.cmd, trusted=ctx.trusted)


def _gate_refuses(s: _Subj, ctx: Context) -> bool:
    wm = ctx.workspace_mode
    if wm == "full-access" or s.deny_only:
        return False
    if wm == "read-only":
        if s.kind == "write":
            return True
        if s.kind == "cmd":
            return not _cmd_read_only(s, ctx) and not _transparent_ok(s, ctx)
        return False
    if s.kind == "write" and s.canon is not None:
        return not _inside_roots(s.canon, ctx)
    return False


def _transparent_ok(s: _Subj, ctx: Context) -> bool:
    """A transparent wrapper whose string was analysed recursively adds nothing itself."""
    c = s.cmd
    return c is not None and c.wrapper is not None and c.inner is None and c.transparent and not c.opaque and not c.program_unknown


def _plan_admits(s: _Subj, call: Call, ctx: Context) -> bool:
    if s.deny_only:
        return True
    if s.kind == "read" or s.kind in ("agent", "skill", "host", "opaque"):
        return True
    if s.kind == "write":
        return False
    if s.kind == "cmd":
        return _cmd_read_only(s, ctx) or _transparent_ok(s, ctx)
    if s.kind == "mcp":
        return call.read_only_hint and any(_allow_covers(r, s, call, ctx) for r in ctx.rules.allow)
    if s.kind == "tool":
        return call.inert or call.rule_tool == "WebSearch"
    return False


def _exact_path_allow(s: _Subj, ctx: Context) -> bool:
    for rule in ctx.rules.allow:
        if rule.kind == "path" and rule.tool == "Read" and not any(ch in rule.path for ch in "*?[") and _path_match(rule, s, ctx, broad=False) == MATCH:
            return True
    return False


def _allow_covers(rule: Rule, s: _Subj, call: Call, ctx: Context) -> bool:
    if s.kind == "write":
        return rule.tool == "Write" and rule.kind in ("path", "any") and _path_match(rule, s, ctx, broad=False) == MATCH
    if s.kind == "read":
        return rule.tool == "Read" and rule.kind in ("path", "any") and _path_match(rule, s, ctx, broad=False) == MATCH
    if s.kind == "host":
        return rule.tool == "WebFetch" and (rule.kind == "any" or (rule.kind == "domain" and _domain_match(rule.domain, s.host)))
    if s.kind in ("mcp", "tool"):
        return rule.kind == "any" and rule.tool_matches(call.rule_tool)
    if s.kind in ("agent", "skill"):
        return rule.tool == ("Agent" if s.kind == "agent" else "Skill") and (
            rule.kind == "any" or _name_match(rule.name_glob, s.label, broad=False))
    return False


def _child_allows(s: _Subj, call: Call, ctx: Context) -> bool:
    """A subagent's own allow list narrows the parent's grants by rule (intersection)."""
    return all(any(_covers(rule, s, call, ctx) for rule in allow_list) for allow_list in ctx.child_allow)


def _covers(rule: Rule, s: _Subj, call: Call, ctx: Context) -> bool:
    if s.kind == "cmd":
        if rule.tool != "Bash":
            return False
        if rule.kind == "any":
            return not (s.cmd.unprovable or s.cmd.opaque or s.cmd.program_unknown)
        return rule.kind == "shell" and shell_allow_match(rule.shell, s.cmd)
    return _allow_covers(rule, s, call, ctx)


def subagent_context(parent: Context, *, child_mode: str | None = None, child_allow: Sequence[Rule] | None = None,
                     child_deny: Sequence[Rule] = (), child_ask: Sequence[Rule] = (),
                     child_workspace_mode: str | None = None) -> Context:
    """The effective context of a subagent: deny/ask united, allow intersected, the less
    permissive mode and the more restrictive workspaceMode."""
    order = {m: i for i, m in enumerate(MODES)}
    mode = parent.mode if child_mode is None else min(parent.mode, child_mode, key=order.__getitem__)
    ws_order = {m: i for i, m in enumerate(WORKSPACE_MODES)}
    ws = parent.workspace_mode if child_workspace_mode is None else min(parent.workspace_mode, child_workspace_mode, key=ws_order.__getitem__)
    rules = RuleSet(parent.rules.deny + list(child_deny), parent.rules.ask + list(child_ask), list(parent.rules.allow))
    child = parent.child_allow + ((tuple(child_allow),) if child_allow is not None else ())
    return Context(rules=rules, project_root=parent.project_root, home=parent.home, cwd=parent.cwd, mode=mode,
                   workspace_mode=ws, writable_roots=parent.writable_roots, tmp_roots=parent.tmp_roots,
                   trusted=parent.trusted, can_ask=parent.can_ask, child_allow=child)


def _fill_grants(subs: list[_Subj], call: Call, ctx: Context, only_display: bool = False) -> list[_Subj]:
    """Step 6: mark each subject granted or pending; returns the pending ones in call order."""
    classifier = _cls()
    mode = ctx.mode
    pending: list[_Subj] = []
    group_exact: set[int] = set()
    allowed_cmds: dict[int, Rule] = {}
    cmd_rule: dict[int, Rule] = {}
    idx = _index_of(ctx.rules.allow, ctx)
    for s in subs:
        if s.kind == "cmd":
            for rule in idx.for_cmd_strict(s.cmd):
                if rule.tool != "Bash":
                    continue
                if rule.kind == "any":
                    ok = not s.cmd.unprovable and not s.cmd.opaque and not s.cmd.program_unknown
                else:
                    ok = rule.kind == "shell" and shell_allow_match(rule.shell, s.cmd)
                if ok:
                    cmd_rule[id(s.cmd)] = rule
                    if rule.kind == "shell" and rule.shell.exact and s.cmd.layer == 0:
                        group_exact.add(s.cmd.group)
                        allowed_cmds[s.cmd.group] = rule
                    break
    for s in subs:
        if s.out.result == "deny" or (only_display and s.out.reason):
            continue
        if s.deny_only or s.kind == "opaque":
            continue
        grant: tuple[str, Rule | None] | None = None
        risky: str | None = None
        if s.kind == "cmd":
            c = s.cmd
            if c.group in group_exact:
                grant = ("allow-rule", allowed_cmds[c.group])
            elif id(c) in cmd_rule:
                grant = ("allow-rule", cmd_rule[id(c)])
            elif (c.inner is not None and c.transparent) or _transparent_ok(s, ctx):
                grant = ("read-only", None)  # adds nothing; its inner commands are subjects of their own
            elif classifier.is_read_only(c, trusted=ctx.trusted):
                grant = ("read-only", None)
            elif mode in ("accept-edits", "auto") and classifier.is_edit_command(c) and all(
                p.access == "read" or (_edit_ok(p, ctx)) for p in c.paths):
                grant = ("edit-grant", None)
            elif mode == "auto":
                risky = classifier.risky_feature(c)
                if risky is None and classifier.is_routine(c):
                    grant = ("auto-routine", None)
        elif s.kind == "read":
            grant = ("read-only", None)
        elif s.kind == "write":
            if s.canon is None:
                rule = idx.first_any("Write")  # an unknown target: only `Write` with no specifier covers it
            else:
                rule = next((r for r in idx.for_subject(s) if _allow_covers(r, s, call, ctx)), None)
            owner = s.ref.owner if s.ref is not None else None
            if rule is not None:
                grant = ("allow-rule", rule)
            elif owner is not None and (owner.group in group_exact or id(owner) in cmd_rule):
                grant = ("allow-rule", allowed_cmds.get(owner.group) or cmd_rule.get(id(owner)))
            elif mode in ("accept-edits", "auto") and s.canon is not None and _edit_ok_subject(s, ctx):
                grant = ("edit-grant", None)
            elif mode == "auto" and s.canon is not None and not _inside_workspace_or_tmp(s.canon, ctx):
                risky = "write-outside-roots"
        elif s.kind in ("agent", "skill"):
            grant = ("inert", None)
        elif s.kind == "tool" and call.inert:
            rule = next((r for r in ctx.rules.allow if _allow_covers(r, s, call, ctx)), None)
            grant = ("allow-rule", rule) if rule else ("inert", None)
        else:
            rule = next((r for r in ctx.rules.allow if _allow_covers(r, s, call, ctx)), None)
            if rule is not None:
                grant = ("allow-rule", rule)
        if grant is not None and ctx.child_allow and grant[0] == "allow-rule" and not _child_allows(s, call, ctx):
            grant = None
        if grant is not None:
            _mark(s, "allow", grant[0], grant[1])
            continue
        reason = "no-rule"
        if mode == "auto":
            reason = f"auto-risky:{risky}" if risky else "auto-unknown"
        _mark(s, "ask", reason, None)
        pending.append(s)
    return pending


def _edit_ok(p: PathRef, ctx: Context) -> bool:
    v = p.word.value
    if v is None or p.cwd is None and not v.startswith("/"):
        return False
    try:
        c = canonical(v, p.cwd or "/", ctx.home)
    except PathError:
        return False
    return _inside_roots(c, ctx) and not _matches_any(_lazy("PROTECTED")["paths"], c, ctx)


def _edit_ok_subject(s: _Subj, ctx: Context) -> bool:
    return _inside_roots(s.canon, ctx) and not _matches_any(_lazy("PROTECTED")["paths"], s.canon, ctx)


def _grant_reason(subs: list[_Subj]) -> tuple[str, tuple | None]:
    best: str | None = None
    rule_ref: tuple | None = None
    for s in subs:
        if s.out.result != "allow" or s.deny_only or not s.out.reason:
            continue  # a deny-only subject (a link target, a possible path) grants nothing
        r = s.out.reason
        if best is None or GRANT_ORDER.index(r) < GRANT_ORDER.index(best):
            best = r
            rule_ref = (s.out.rule, s.out.scope, s.out.file) if s.out.rule is not None else None
    return (best or "read-only"), rule_ref


# --------------------------------------------------------------------------------------------
# Principal and "always allow"


def _principal(call: Call, subs: list[_Subj], ctx: Context) -> tuple[str, bool, str | None]:
    if call.rule_tool == "Bash":
        text = call.command.strip() if call.command is not None else shlex.join(call.argv or ())
        p = f"Bash({text})"
    elif call.rule_tool in ("Read", "Write"):
        first = next((s for s in subs if s.kind in ("write", "read")), None)
        if first is not None and first.canon is not None:
            p = f"{'Write' if first.kind == 'write' else 'Read'}(//{escape_glob(first.canon.lexical.lstrip('/'))})"
        else:
            p = call.rule_tool
    elif call.rule_tool == "WebFetch":
        host = next((s.host for s in subs if s.kind == "host"), None)
        p = f"WebFetch(domain:{host})" if host else "WebFetch"
    elif call.rule_tool in ("Agent", "Skill"):
        p = f"{call.rule_tool}({call.name})"
    else:
        p = call.rule_tool
    if len(p) > 4096:
        import json

        sha = hashlib.sha256(json.dumps(dict(call.input), sort_keys=True, default=str).encode()).hexdigest()
        return p[:4096], True, sha
    return p, False, None


def _dangerous(name: str) -> bool:
    return name in DANGEROUS_ASSIGNMENTS or name.startswith(DANGEROUS_ASSIGNMENT_PREFIXES)


def _remember(v: Verdict, pending: list[_Subj], subs: list[_Subj], call: Call, ctx: Context) -> None:
    """What "always allow" would write, per scope; or why it is not offered."""
    def no(why: str) -> None:
        v.remember, v.remember_why_not = None, why

    kinds = {s.kind for s in pending}
    if kinds <= {"cmd", "write", "read"} and "cmd" in kinds:
        groups = {s.cmd.group for s in pending if s.kind == "cmd"}
        owners_ok = all(s.kind == "cmd" or (s.ref is not None and s.ref.owner is not None and s.ref.owner.group in groups) for s in pending)
        if len(groups) != 1 or not owners_ok:
            return no("more than one pending subject")
        group = groups.pop()
        cmds = [s.cmd for s in subs if s.kind == "cmd" and s.cmd.group == group]
        outer = next((c for c in cmds if c.layer == 0), None)
        if outer is None or any(c.in_body for c in cmds):
            return no("inside a loop, case or function")
        if any(w.value is None for c in cmds for w in c.words) or any(not w.static for c in cmds for _, w in c.assigns):
            return no("a dynamic word")
        if any(_dangerous(n) for c in cmds for n, _ in c.assigns):
            return no("an assignment that can change what runs")
        words = [f"{n}={w.value}" for n, w in outer.assigns if not (n in ("LANG", "TZ", "NO_COLOR", "FORCE_COLOR", "CLICOLOR", "TERM", "CI", "COLUMNS") or n.startswith("LC_"))]
        rule = "Bash(" + shlex.join(words + [w.value for w in outer.words]) + ")"
        v.remember = {"local": rule, "project": rule, "user": rule}
        return
    if len(pending) != 1:
        return no("more than one pending subject")
    s = pending[0]
    if s.kind == "write":
        if s.canon is None:
            return no("unknown write target")
        if s.canon.lexical != s.canon.real:
            return no("a symlinked path")
        p = s.canon.lexical
        absolute = f"Write(//{escape_glob(p.lstrip('/'))})"
        if is_inside(p, ctx.project_root) and p != ctx.project_root:
            rel = f"Write(/{escape_glob(os.path.relpath(p, ctx.project_root))})"
            v.remember = {"local": rel, "project": rel, "user": absolute}
        else:
            v.remember = {"local": absolute, "project": absolute, "user": absolute}
        return
    if s.kind == "host":
        r = f"WebFetch(domain:{s.host})"
        v.remember = {"local": r, "project": r, "user": r}
        return
    if s.kind in ("mcp", "tool"):
        v.remember = {"local": call.rule_tool, "project": call.rule_tool, "user": call.rule_tool}
        return
    return no("not rememberable")
