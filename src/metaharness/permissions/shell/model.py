"""What the shell analysis produces: simple commands (`Cmd`), path references (`PathRef`) and the
call's `Analysis` (docs/reference/permissions.md).

Rules this module keeps: these are plain values, built by the walk and read by the matchers; a
mark once set (opaque, program unknown, unprovable) is never cleared by a later step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from .words import DYNAMIC_ITEM, Word

__all__ = ["PathRef", "Cmd", "Analysis"]



@dataclass(slots=True)
class PathRef:
    """A file the call reads or writes, as the analysis sees it."""

    access: str  # "read" | "write"
    word: Word
    cwd: str | None  # directory relative paths resolve against; None = unknown
    via: str  # "redirect" | "operand" | "tool" | "code" (a literal of interpreter code)
    owner: "Cmd | None" = None
    recursive: bool = False
    removal: bool = False
    deny_only: bool = False
    guess: bool = False  # a literal that may never be opened: a deny match is only `maybe`
    # A git operation's reach over a recursive read (data/wrappers.toml `git.reads`): "tracked",
    # "added" (tracked, or untracked and not ignored), "all"; "" = every entry, like any reader.
    reach: str = ""
    repo_wide: bool = False  # the read covers the repository's whole work tree, not just this directory

    @property
    def static(self) -> bool:
        return self.word.deny_value is not None and (self.cwd is not None or self.is_absolute)

    @property
    def is_absolute(self) -> bool:
        value = self.word.deny_value
        return value is not None and value.startswith("/")


class Cmd:
    """One simple command (a layer of a wrapped command, or an inner command) — a `cmd` subject.

    A plain slotted class with a hand-written constructor: a command line makes one or more per
    simple command on every decision, and a dataclass constructor is several times slower."""

    __slots__ = ("words", "basename", "assigns", "group", "layer", "wrapper", "transparent", "inner", "alt_tails",
                 "unprovable", "opaque", "program_unknown", "deny_only", "in_body", "cwd", "paths",
                 "norm_cache", "env_marks", "stdin", "data_operands", "read_disk", "spelling")

    def __init__(self, words: list[Word], assigns: list[tuple[str, Word]] | None = None, group: int = 0,
                 layer: int = 0, in_body: bool = False, cwd: str | None = None, deny_only: bool = False,
                 unprovable: list[str] | None = None, program_unknown: bool = False,
                 opaque: str | None = None) -> None:
        self.words = words  # never rebound: `basename` is worked out once, here
        program = words[0].deny_value if words else None
        self.basename = program.rsplit("/", 1)[-1] if program is not None else None
        self.assigns = assigns if assigns is not None else []
        self.group = group  # id of the outermost simple command this layer belongs to
        self.layer = layer  # 0 = outermost
        self.wrapper: str | None = None  # wrapper kind when this layer wraps an inner command
        self.transparent = False
        self.inner: Cmd | None = None
        self.alt_tails = False  # xargs: matching also tries the words without the appended item
        self.unprovable = unprovable if unprovable is not None else []
        self.opaque = opaque
        self.program_unknown = program_unknown
        self.deny_only = deny_only
        self.in_body = in_body
        self.cwd = cwd
        self.paths: list[PathRef] = []
        self.norm_cache: dict = {}  # rules.py / match.py memo, per analysis
        self.env_marks: list[str] = []  # unsafe assignments every inner layer runs under
        self.stdin: str | None = None  # "pipe" (dynamic stdin), "script" (a static heredoc/here-string)
        self.data_operands = False  # data/dataoperands.toml: its words are never run (no tail backstop)
        self.read_disk = False  # its paths depend on the disk now (a directory destination): never memoised
        self.spelling: str | None = None  # another spelling of the command named here (`git send-pack`): a match is only `maybe`

    def __repr__(self) -> str:
        return f"Cmd({self.display()!r}, group={self.group}, layer={self.layer})"

    @property
    def program(self) -> Word | None:
        return self.words[0] if self.words else None

    def display(self) -> str:
        parts = [f"{key}={word.text}" for key, word in self.assigns] + [word.text for word in self.words]
        return " ".join(parts)

    def word_variants(self) -> list[list[Word]]:
        # Built once and kept: the matchers memoise per variant by the list's id, which must
        # therefore stay alive (a fresh slice per call could reuse a freed list's id).
        variants = self.norm_cache.get("variants")
        if variants is None:
            if self.alt_tails and self.words and self.words[-1] is DYNAMIC_ITEM:
                variants = [self.words, self.words[:-1]]
            else:
                variants = [self.words]
            self.norm_cache["variants"] = variants
        return variants


@dataclass(slots=True)
class Analysis:
    cmds: list[Cmd] = field(default_factory=list)
    paths: list[PathRef] = field(default_factory=list)  # redirects (commands' operands live on them)
    opaque: list[str] = field(default_factory=list)  # why the call is opaque
    program_unknown: list[str] = field(default_factory=list)  # maybe against every Bash rule
    too_large: bool = False

    def all_paths(self) -> Iterable[PathRef]:
        yield from self.paths
        for cmd in self.cmds:
            yield from cmd.paths

