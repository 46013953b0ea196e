"""Rule grammar, validation and matching (docs/reference/permissions.md).

What belongs here: parsing a rule string into a compiled `Rule`, the load-time validation
(an invalid rule is an error naming the rule, never silently dropped), and the two shell
matchers: strict allow matching and broad deny/ask matching that returns
`MATCH`, `MAYBE` or `NO` and may over-match but never under-match.

Rules this module keeps: the specifier kind is chosen by the tool, never guessed from the text;
allow matching is case-sensitive and never covers a dynamic word with a literal; deny/ask matching
is case-insensitive and tries every variant (as analysed, program basename, option-normalised).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from types import ModuleType
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from .shell import Cmd, Word

__all__ = [
    "Rule",
    "RuleError",
    "ShellPattern",
    "Token",
    "parse_rule",
    "canonical_tool",
    "shell_allow_match",
    "shell_broad_match",
    "MATCH",
    "MAYBE",
    "NO",
    "KNOWN_TOOLS",
]

MATCH, MAYBE, NO = 2, 1, 0
_shell: ModuleType | None = None  # the shell analyser module, bound by `_shell_module()` on first use


def _shell_module() -> ModuleType:
    """The shell analyser, imported when a Bash rule is first matched (a session opens before its
    first shell command); kept in a global because matchers run many times per decision."""
    global _shell
    if _shell is None:
        from . import shell

        _shell = shell
    return _shell



def _shell_names(name: str) -> object:
    # `rules.OPTIONS`, `Cmd`, `Word`, `SAFE_ASSIGNMENTS` and `static_word` were shell's names
    # re-exported; they still are. The shell analyser itself is imported by the matchers, when a
    # Bash rule is first matched, not at import: a session opens before its first shell command.
    if name in ("OPTIONS", "Cmd", "Word", "SAFE_ASSIGNMENTS", "static_word"):
        from . import shell

        return getattr(shell, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Bound by assignment, not `def __getattr__`: mypyc's module set-up asks the module for its
# `__file__` before the module's globals exist, and a compiled `def __getattr__` would run then.
__getattr__ = _shell_names

# Canonical rule tool names, keyed by their case-folded spelling.
_CANONICAL = {
    "bash": "Bash", "read": "Read", "write": "Write", "edit": "Write", "webfetch": "WebFetch",
    "websearch": "WebSearch", "agent": "Agent", "task": "Agent", "skill": "Skill", "glob": "Glob",
    "grep": "Grep",
}
KNOWN_TOOLS = set(_CANONICAL.values()) | {
    "TodoWrite", "update_plan", "request_user_input", "todo", "todo_write", "ask_user",
    "NotebookEdit", "MultiEdit", "write_stdin", "apply_patch", "view_image", "web_search",
}
_PRIMARY_FIELDS = {"command", "file_path", "path", "notebook_path", "url"}
_INTERPRETERS = {"python", "python3", "python2", "node", "deno", "perl", "ruby", "php", "lua", "bash",
                 "sh", "zsh", "dash", "ksh", "fish", "pwsh", "Rscript", "osascript", "npx", "uvx",
                 "env", "xargs", "sudo", "eval", "exec", "busybox"}
_ARBITRARY_SUBS = {("npm", "run"), ("npm", "exec"), ("pnpm", "run"), ("pnpm", "exec"), ("yarn", "run"),
                   ("bun", "run"), ("uv", "run"), ("poetry", "run"), ("cargo", "run"), ("go", "run"),
                   ("make", None)}


class RuleError(ValueError):
    """An invalid rule; the message names what is wrong (the caller adds file and list)."""


def canonical_tool(name: str) -> str:
    """Canonical spelling of a rule tool name; MCP and unknown names are returned unchanged."""
    return _CANONICAL.get(name.casefold(), name)


# --------------------------------------------------------------------------------------------
# Shell patterns

LITERAL, GLOB, STAR, TAIL = "literal", "glob", "star", "tail"


@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    text: str  # literal value (quote-removed) or glob source
    regex: re.Pattern[str] | None = None  # for GLOB/TAIL, case-sensitive
    iregex: re.Pattern[str] | None = None  # for GLOB/TAIL, case-insensitive
    prefix: str = ""  # literal text before the first unquoted `*`


@dataclass(frozen=True, slots=True)
class ShellPattern:
    source: str
    tokens: tuple[Token, ...]

    @property
    def exact(self) -> bool:
        return all(token.kind == LITERAL for token in self.tokens)


_OPERATOR_RE = ("&&", "||", ";", "|", "&", "\n", "$(", "`", "<", ">", "(", ")")


def _split_pattern(spec: str) -> list[list[tuple[str, bool]]]:
    """POSIX-style tokenisation remembering per character whether it was quoted."""
    tokens: list[list[tuple[str, bool]]] = []
    cur: list[tuple[str, bool]] | None = None
    pos = 0
    length = len(spec)
    while pos < length:
        char = spec[pos]
        if char in " \t":
            if cur is not None:
                tokens.append(cur)
                cur = None
            pos += 1
            continue
        if cur is None:
            cur = []
        if char == "\\":
            if pos + 1 >= length:
                raise RuleError("a trailing backslash")
            cur.append((spec[pos + 1], True))
            pos += 2
        elif char == "'":
            end = spec.find("'", pos + 1)
            if end == -1:
                raise RuleError("unbalanced quotes")
            cur.extend((quoted_char, True) for quoted_char in spec[pos + 1 : end])
            if end == pos + 1:
                cur.append(("", True))
            pos = end + 1
        elif char == '"':
            scan = pos + 1
            while scan < length and spec[scan] != '"':
                if spec[scan] == "\\" and scan + 1 < length and spec[scan + 1] in '"\\$`':
                    cur.append((spec[scan + 1], True))
                    scan += 2
                    continue
                if spec[scan] in "$`":
                    raise RuleError("an expansion inside a shell pattern")
                cur.append((spec[scan], True))
                scan += 1
            if scan >= length:
                raise RuleError("unbalanced quotes")
            if scan == pos + 1:
                cur.append(("", True))
            pos = scan + 1
        else:
            for operator in _OPERATOR_RE:
                if spec.startswith(operator, pos):
                    raise RuleError(f"an unquoted shell operator or expansion {operator!r}: a Bash rule describes one simple command")
            if char == "$":
                raise RuleError("an unquoted expansion '$'")
            cur.append((char, False))
            pos += 1
    if cur is not None:
        tokens.append(cur)
    return tokens


def _glob_regex(chars: list[tuple[str, bool]]) -> str:
    return "".join(".*" if (char == "*" and not quoted) else re.escape(char) for char, quoted in chars)


@lru_cache(maxsize=8192)
def compile_shell_pattern(spec: str) -> ShellPattern:
    source = spec
    if spec.endswith(":*"):
        spec = spec[:-2] + " *"
    raw = _split_pattern(spec)
    tokens: list[Token] = []
    for index, chars in enumerate(raw):
        text = "".join(char for char, _ in chars)
        stars = [position for position, (char, quoted) in enumerate(chars) if char == "*" and not quoted]
        if len(chars) == 1 and stars:
            tokens.append(Token(STAR, "*"))
            continue
        if not stars:
            tokens.append(Token(LITERAL, text))
            continue
        regex = _glob_regex(chars)
        prefix = "".join(char for char, _ in chars[: stars[0]])
        last = index == len(raw) - 1
        kind = TAIL if last and chars[-1] == ("*", False) else GLOB
        tokens.append(Token(kind, text, re.compile(regex, re.DOTALL), re.compile(regex, re.DOTALL | re.IGNORECASE), prefix))
    if not tokens:
        raise RuleError("an empty shell pattern")
    return ShellPattern(source, tuple(tokens))


# --------------------------------------------------------------------------------------------
# Rules


@dataclass(frozen=True, slots=True)
class Rule:
    text: str
    behavior: str  # allow | ask | deny
    scope: str  # builtin | user | project | local | file
    file: str | None
    tool: str  # canonical tool (Bash, Read, Write, …), MCP name/glob, or other name
    kind: str  # any | shell | path | domain | name | param | builtin-rm
    tool_regex: re.Pattern[str] | None = None  # for tool-part globs and MCP tool globs
    shell: ShellPattern | None = None
    path: str | None = None  # path specifier
    domain: str | None = None
    name_glob: str | None = None
    param: tuple[str, str] | None = None
    rm_flag: str | None = None  # builtin catastrophic removal: "-r" or "-f"
    rm_path: str | None = None
    warnings: tuple[str, ...] = field(default=())

    @property
    def broad(self) -> bool:
        return self.behavior != "allow"

    def tool_matches(self, rule_tool: str) -> bool:
        """Does the tool part cover a call whose canonical rule tool is `rule_tool`?"""
        if self.tool_regex is not None:
            return self.tool_regex.fullmatch(rule_tool) is not None
        if self.tool.startswith("mcp__"):
            if self.broad:
                return self.tool.casefold() == rule_tool.casefold()
            return self.tool == rule_tool
        if self.broad:
            return self.tool.casefold() == rule_tool.casefold()
        return self.tool == rule_tool


_TOOL_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_NAME_CHARS = r"[A-Za-z0-9_.-]"


def _split_rule(text: str) -> tuple[str, str | None]:
    if any(ord(char) < 32 or ord(char) == 127 for char in text):
        raise RuleError("a control character")
    if not text.strip():
        raise RuleError("an empty rule")
    if text != text.strip():
        raise RuleError("leading or trailing whitespace")
    if "(" not in text:
        if ")" in text:
            raise RuleError("unbalanced parentheses")
        return text, None
    open_at = text.index("(")
    if not text.endswith(")"):
        raise RuleError("unbalanced parentheses or text after the closing ')'")
    spec = text[open_at + 1 : -1]
    if spec == "":
        raise RuleError("an empty specifier '()'")
    return text[:open_at], spec


def parse_rule(text: str, behavior: str, scope: str = "builtin", file: str | None = None) -> Rule:
    """Parse and validate one rule string. Raises RuleError with the reason."""
    tool_part, spec = _split_rule(text)
    broad = behavior != "allow"
    warnings: list[str] = []
    tool_regex = None
    if "*" in tool_part:
        match = re.fullmatch(r"mcp__(" + _NAME_CHARS + r"+?)__((?:" + _NAME_CHARS + r"|\*)+)", tool_part)
        if match and "*" not in match.group(1) and "__" not in match.group(1):
            tool = tool_part
            tool_regex = re.compile("mcp__" + re.escape(match.group(1)) + "__" + ".*".join(re.escape(part) for part in match.group(2).split("*")),
                                    re.IGNORECASE if broad else 0)
        else:
            if not broad:
                raise RuleError("a glob in the tool part of an allow rule (allowed only after a literal mcp__<server>__)")
            if not re.fullmatch(r"(?:" + _NAME_CHARS + r"|\*)+", tool_part):
                raise RuleError(f"an invalid tool name {tool_part!r}")
            tool = tool_part
            tool_regex = re.compile(".*".join(re.escape(part) for part in tool_part.split("*")), re.IGNORECASE)
        if spec not in (None, "*"):
            if spec is not None and ":" in spec and not spec.startswith("domain:"):
                pname, _, pglob = spec.partition(":")
                if not broad:
                    raise RuleError("a parameter spec in an allow rule")
                return Rule(text, behavior, scope, file, tool, "param", tool_regex, param=(pname, pglob))
            raise RuleError("a specifier on a tool-name glob")
        return Rule(text, behavior, scope, file, tool, "any", tool_regex, warnings=tuple(warnings))
    if tool_part.startswith("mcp__"):
        match = re.fullmatch(r"mcp__(" + _NAME_CHARS + r"+?)(?:__(" + _NAME_CHARS + r"+))?", tool_part)
        if not match or "__" in match.group(1):
            raise RuleError(f"an invalid MCP name {tool_part!r}")
        if match.group(2) is None:
            tool_regex = re.compile("mcp__" + re.escape(match.group(1)) + "__.*", re.IGNORECASE if broad else 0)
        tool = tool_part
        if spec is None or spec == "*":
            return Rule(text, behavior, scope, file, tool, "any", tool_regex)
        return _param_rule(text, behavior, scope, file, tool, tool_regex, spec)
    if not _TOOL_NAME.fullmatch(tool_part):
        raise RuleError(f"an invalid tool name {tool_part!r}")
    tool = canonical_tool(tool_part)
    if tool not in KNOWN_TOOLS:
        if not broad:
            raise RuleError(f"an allow rule for a tool oharness does not know ({tool_part})")
        warnings.append(f"unknown tool {tool_part!r}")
    if spec is None or (spec == "*" and tool != "Bash"):
        if not broad and tool == "Bash":
            warnings.append("grants arbitrary execution")
        return Rule(text, behavior, scope, file, tool, "any", warnings=tuple(warnings))
    if tool == "Bash":
        if re.match(r"command:", spec):
            raise RuleError("a parameter spec on the primary field 'command'")
        try:
            pattern = compile_shell_pattern(spec)
        except RuleError:
            raise
        if not broad and _grants_arbitrary(pattern):
            warnings.append("grants arbitrary execution")
        return Rule(text, behavior, scope, file, tool, "shell", shell=pattern, warnings=tuple(warnings))
    if tool in ("Read", "Write"):
        if spec.startswith("!"):
            raise RuleError("a path pattern starting with '!' (there is no negation)")
        if ".." in spec.split("/"):
            raise RuleError("a '..' segment in a path pattern")
        if any(position in spec for position in ("file_path:", "path:", "notebook_path:")) and spec.split(":", 1)[0] in _PRIMARY_FIELDS:
            raise RuleError("a parameter spec on the primary field")
        return Rule(text, behavior, scope, file, tool, "path", path=spec, warnings=tuple(warnings))
    if tool == "WebFetch":
        if not spec.startswith("domain:"):
            raise RuleError("a WebFetch specifier that does not start with 'domain:'")
        host = spec[len("domain:") :].strip().lower().rstrip(".")
        if not host:
            raise RuleError("an empty host")
        return Rule(text, behavior, scope, file, tool, "domain", domain=host, warnings=tuple(warnings))
    if tool in ("Agent", "Skill"):
        return Rule(text, behavior, scope, file, tool, "name", name_glob=spec, warnings=tuple(warnings))
    if tool in ("Glob", "Grep"):
        raise RuleError(f"a specifier on {tool} (use Read(...) for its paths)")
    return _param_rule(text, behavior, scope, file, tool, None, spec, warnings)


def _param_rule(text, behavior, scope, file, tool, tool_regex, spec, warnings=()) -> Rule:
    if ":" not in spec:
        raise RuleError(f"a specifier {spec!r} that is not a 'param:value' spec")
    pname, _, pglob = spec.partition(":")
    if behavior == "allow":
        raise RuleError("a parameter spec in an allow rule")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", pname):
        raise RuleError(f"an invalid parameter name {pname!r}")
    if pname in _PRIMARY_FIELDS:
        raise RuleError(f"a parameter spec on the primary field {pname!r}")
    return Rule(text, behavior, scope, file, tool, "param", tool_regex, param=(pname, pglob), warnings=tuple(warnings))


def _grants_arbitrary(pattern: ShellPattern) -> bool:
    first = pattern.tokens[0]
    if first.kind != LITERAL:
        return True
    prog = first.text.rsplit("/", 1)[-1]
    rest = pattern.tokens[1:]
    wild = any(token.kind != LITERAL for token in rest)
    if prog in _INTERPRETERS and wild:
        return True
    second = rest[0] if rest else None
    if (prog, None) in _ARBITRARY_SUBS and wild:
        return True
    if second is not None and second.kind == LITERAL and (prog, second.text) in _ARBITRARY_SUBS and any(token.kind != LITERAL for token in rest[1:]):
        return True
    return False


# --------------------------------------------------------------------------------------------
# Shell matching


def _seq(tokens: tuple[Token, ...], words: list[Word], cmp, memo: dict, token_index: int = 0, word_index: int = 0) -> int:
    key = (token_index, word_index)
    if key in memo:
        return memo[key]
    if token_index == len(tokens):
        result = MATCH if word_index == len(words) else NO
    else:
        token = tokens[token_index]
        if token.kind == STAR:
            result = NO
            for split in range(word_index, len(words) + 1):
                result = max(result, _seq(tokens, words, cmp, memo, token_index + 1, split))
                if result == MATCH:
                    break
        elif word_index == len(words):
            result = NO
        elif token.kind == TAIL:
            result = cmp(token, words[word_index])
        else:
            first = cmp(token, words[word_index])
            result = NO if first == NO else min(first, _seq(tokens, words, cmp, memo, token_index + 1, word_index + 1))
    memo[key] = result
    return result


def _strict_cmp(token: Token, word: Word) -> int:
    if word.value is None:
        return NO
    if token.kind == LITERAL:
        return MATCH if word.value == token.text else NO
    assert token.regex is not None  # a GLOB or TAIL token is built with its regexes
    return MATCH if token.regex.fullmatch(word.value) else NO


def _broad_cmp(token: Token, word: Word) -> int:
    value = word.deny_value
    if value is not None:
        if token.kind == LITERAL:
            return MATCH if value.casefold() == token.text.casefold() else NO
        assert token.iregex is not None  # a GLOB or TAIL token is built with its regexes
        return MATCH if token.iregex.fullmatch(value) else NO
    if token.kind == LITERAL:
        return MAYBE if word.could_be(token.text) else NO
    word_prefix, token_prefix = word.shape_prefix().casefold(), token.prefix.casefold()
    return MAYBE if (word_prefix.startswith(token_prefix) or token_prefix.startswith(word_prefix)) else NO


def shell_allow_match(pattern: ShellPattern, cmd: Cmd) -> bool:
    """Strict allow matching of one simple command."""
    if cmd.program_unknown or cmd.opaque:
        return False
    if cmd.unprovable and not pattern.exact:
        return False
    return _seq(pattern.tokens, strict_words(cmd), _strict_cmp, {}) == MATCH


def strict_words(cmd: Cmd) -> list[Word]:
    """The word list allow matching sees: assignments not on the safe list (or not
    static) as `NAME=value` words, then the command's words. Cached on the Cmd (one analysis)."""
    words = cmd.norm_cache.get("strict_words")
    if words is None:
        shell = _shell_module()
        words = []
        for name, word in cmd.assigns:
            if shell.SAFE_ASSIGNMENTS(name) and word.static:
                continue
            words.append(shell.Word(f"{name}={word.text}", f"{name}={word.value}" if word.value is not None else None, None, ".*", False))
        words.extend(cmd.words)
        cmd.norm_cache["strict_words"] = words
    return words


def strict_values(cmd: Cmd) -> frozenset[str]:
    """The static values of `strict_words(cmd)`: a LITERAL token of an allow pattern can only be
    aligned with a word whose value equals it, so a pattern with a literal outside this set
    cannot match (used to index allow rules)."""
    values = cmd.norm_cache.get("strict_values")
    if values is None:
        values = cmd.norm_cache["strict_values"] = frozenset(
            word.value for word in strict_words(cmd) if word.value is not None)
    return values


def literal_texts(pattern: ShellPattern) -> frozenset[str]:
    """The texts of a pattern's LITERAL tokens (each must equal a whole word for an allow match)."""
    return frozenset(token.text for token in pattern.tokens if token.kind == LITERAL)


# -- option normalisation ---------------------------------------------------


def _normalise(base: str, words: list[Word]) -> tuple[frozenset[str], list[Word], bool]:
    spec = _shell_module()._lazy("OPTIONS").get(base, {})
    glob_ = set(spec.get("global", []))
    gval = set(spec.get("global_value", []))
    aliases = spec.get("aliases", {})
    value_opts = set(spec.get("value_opts", []))
    split = spec.get("split_clusters", False)
    index = 0
    while index < len(words):
        value = words[index].deny_value
        if value is None or not value.startswith("-") or value in ("-", "--"):
            break
        name = value.split("=", 1)[0] if value.startswith("--") else value
        if name in glob_:
            index += 1
        elif name in gval:
            index += 1 if "=" in value else 2
        elif not value.startswith("--") and value[:2] in gval and len(value) > 2:
            index += 1
        else:
            break
    options: set[str] = set()
    operands: list[Word] = []
    dash = False
    after = False
    rest = words[index:]
    index_in_rest = 0
    while index_in_rest < len(rest):
        word = rest[index_in_rest]
        value = word.deny_value
        index_in_rest += 1
        if after:
            operands.append(word)
            continue
        if value is None:
            if word.may_dash:
                dash = True
            operands.append(word)
            continue
        if value == "--":
            after = True
            continue
        if not value.startswith("-") or value == "-":
            operands.append(word)
            continue
        if value.startswith("--"):
            name, equals, val = value.partition("=")
            if name not in aliases and len(name) >= 3:
                # GNU getopt takes any unambiguous prefix (`--recur` for `--recursive`); an
                # ambiguous one is refused and nothing runs, so mapping it to every option it
                # abbreviates only over-matches.
                for long_name, canon in aliases.items():
                    if long_name.startswith(name) and long_name != name and long_name.startswith("--"):
                        options.add(canon.casefold())
            name = aliases.get(name, name)
            options.add(name.casefold())
            if equals:
                options.add(f"{name}={val}".casefold())
            elif name in value_opts and index_in_rest < len(rest):
                nxt = rest[index_in_rest].deny_value
                if nxt is not None:
                    options.add(f"{name}={nxt}".casefold())
                index_in_rest += 1
            continue
        if split and len(value) > 2:
            letters = value[1:]
            for idx, quoted_char in enumerate(letters):
                option = aliases.get("-" + quoted_char, "-" + quoted_char)
                options.add(option.casefold())
                if "-" + quoted_char in value_opts:
                    val = letters[idx + 1 :]
                    if not val and index_in_rest < len(rest):
                        val = rest[index_in_rest].deny_value or ""
                        index_in_rest += 1
                    options.add(f"{option}={val}".casefold())
                    break
            continue
        option = aliases.get(value, value)
        options.add(option.casefold())
        if value in value_opts and index_in_rest < len(rest):
            nxt = rest[index_in_rest].deny_value
            if nxt is not None:
                options.add(f"{option}={nxt}".casefold())
            index_in_rest += 1
    return frozenset(options), operands, dash


_NORMALISED: dict[int, tuple[ShellPattern, tuple[str, frozenset[str], tuple[Token, ...]] | None]] = {}


def _pattern_normalised(pattern: ShellPattern) -> tuple[str, frozenset[str], tuple[Token, ...]] | None:
    # Keyed by identity (hashing a pattern's token tuple on every call is the hot path's cost);
    # the entry keeps the pattern alive, so the id cannot be reused.
    hit = _NORMALISED.get(id(pattern))
    if hit is not None and hit[0] is pattern:
        return hit[1]
    result = _pattern_normalised_uncached(pattern)
    _NORMALISED[id(pattern)] = (pattern, result)
    return result


def _required_words(pattern: ShellPattern) -> frozenset[str]:
    """Words (case-folded) every matching command must contain, whatever the variant.

    These are the pattern's literal *operands* after option normalisation (options, their values
    and the program's global options excluded): in every variant of broad deny/ask matching such a token is
    aligned with one whole word and compared for equality, so a command lacking the word can
    only give `NO` — unless it has a dynamic word, in which case this prefilter is not used.
    """
    norm = _pattern_normalised(pattern)
    if norm is None:
        return frozenset()
    return frozenset(token.text.casefold() for token in norm[2] if token.kind == LITERAL)


_REQUIRED: dict[int, tuple[ShellPattern, frozenset[str]]] = {}


def required_words(pattern: ShellPattern) -> frozenset[str]:
    """`_required_words`, memoised by pattern identity (the entry keeps the pattern alive)."""
    hit = _REQUIRED.get(id(pattern))
    if hit is None or hit[0] is not pattern:
        hit = _REQUIRED[id(pattern)] = (pattern, _required_words(pattern))
    return hit[1]


def broad_wordset(cmd: Cmd) -> frozenset[str] | Literal[False]:
    """Case-folded deny values of every word of every variant of `cmd`, or False when a word is
    dynamic (then no word is required). Cached on the Cmd (one analysis)."""
    wordset: frozenset[str] | Literal[False] | None = cmd.norm_cache.get("wordset")
    if wordset is None:
        values = [word.deny_value for found in cmd.word_variants() for word in found]
        texts = [value.casefold() for value in values if value is not None]
        wordset = frozenset(texts) if len(texts) == len(values) else False
        cmd.norm_cache["wordset"] = wordset
    return wordset


def _pattern_normalised_uncached(pattern: ShellPattern) -> tuple[str, frozenset[str], tuple[Token, ...]] | None:
    word_type, static_word = _shell_module().Word, _shell_module().static_word
    first = pattern.tokens[0]
    if first.kind != LITERAL:
        return None
    base = first.text.rsplit("/", 1)[-1].casefold()
    # Options of the pattern: literal tokens; operands: everything else, in order.
    lit_words: list[Word] = []
    positions: list[Token] = []
    for token in pattern.tokens[1:]:
        if token.kind == LITERAL:
            lit_words.append(static_word(token.text))
        else:
            lit_words.append(word_type(token.text, None, None, ".*", False))
        positions.append(token)
    options, operands, _ = _normalise(base, lit_words)
    # Map normalised operands back to tokens (static words become LITERAL tokens again).
    tok_by_id = {id(word): token for word, token in zip(lit_words, positions)}
    out: list[Token] = []
    for word in operands:
        kept = tok_by_id.get(id(word))
        out.append(kept if kept is not None else Token(LITERAL, word.deny_value or ""))
    return base, options, tuple(out)


def shell_broad_match(pattern: ShellPattern, cmd: Cmd) -> int:
    """Broad deny/ask matching: the best of all variants."""
    if cmd.program_unknown:
        return MAYBE
    wordset = broad_wordset(cmd)
    if wordset is not False and not required_words(pattern) <= wordset:
        return NO
    best = NO
    for words in cmd.word_variants():
        if not words:
            continue
        best = max(best, _seq(pattern.tokens, words, _broad_cmp, {}))
        if best == MATCH:
            return best
        prog = words[0]
        if prog.deny_value is not None and "/" in prog.deny_value:
            based = [_shell_module().static_word(prog.deny_value.rsplit("/", 1)[-1])] + words[1:]
            best = max(best, _seq(pattern.tokens, based, _broad_cmp, {}))
            if best == MATCH:
                return best
        norm = _pattern_normalised(pattern)
        if norm is None or prog.deny_value is None:
            continue
        base, p_opts, p_operands = norm
        if prog.deny_value.rsplit("/", 1)[-1].casefold() != base:
            continue
        memo_key = (id(words), base)
        normed = cmd.norm_cache.get(memo_key)
        if normed is None:
            normed = cmd.norm_cache[memo_key] = _normalise(base, words[1:])
        c_opts, c_operands, dash = normed
        if p_opts <= c_opts:
            best = max(best, _seq(p_operands, c_operands, _broad_cmp, {}))
        elif dash:
            result = max(_seq(p_operands, c_operands, _broad_cmp, {}),
                    _seq(p_operands, [word for word in c_operands if not (word.deny_value is None and word.may_dash)], _broad_cmp, {}))
            best = max(best, min(result, MAYBE))
        if best == MATCH:
            return best
    return best
