"""What every tool shares: the `Tool` base, its output, its context, input checking.

Rules it keeps: a tool never raises for a bad call — it returns an error `ToolOutput`
whose content is one sentence the model can act on (`ToolFailure` is the shortcut for
that inside a tool). Paths are resolved against the session's working directory.
Cancellation (an interrupt) is the only exception that leaves a tool, and a tool that
owns a process kills it before letting the cancellation through.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, ClassVar

from ..model import ToolSpec

if TYPE_CHECKING:
    from ..loop import Agent

OUTPUT_CAP_CHARS = 30_000


@dataclass
class ToolOutput:
    content: str
    is_error: bool = False
    exit_code: int | None = None  # measured, for bash
    cwd: str | None = None  # bash: the working directory the shell ended in, when it reported one
    refused: bool = False  # oharness's own permission gate refused the call (not an external deny)


class ToolFailure(Exception):
    """Raised inside a tool to end the call with an error result (one sentence)."""


@dataclass
class ToolContext:
    """What a running tool may use. `hidden(path)` says whether a listing or search must
    skip a path (the permission engine sets it from its Read deny/ask rules; see
    docs/reference/permissions.md); `admit_url(url)` vets each redirect target of a fetch;
    `decided_path(p)` is the path as the engine decided it for the running call."""

    cwd: str
    skills_dirs: list[str] = field(default_factory=list)
    todos: list[dict[str, Any]] = field(default_factory=list)
    hidden: Callable[[str], bool] = lambda path: False
    admit_url: Callable[[str], Awaitable[str | None]] | None = None  # None → every URL admitted
    # The canonical path (lexical, real) the permission engine decided for a lexical path of the
    # call being run, or None (the executor opens what was decided).
    decided_path: Callable[[str], Any] = lambda lexical: None
    spawn_agent: Callable[[str, str | None], Awaitable[str]] | None = None
    agent: "Agent | None" = None
    # The bash tool's working directory, carried from one bash call to the next (see the shell
    # analysis in docs/reference/permissions.md); None = `cwd`. The agent loop sets it from what
    # each call reports and decides the next call with it, so the analysis and the shell agree on
    # where relative paths point.
    shell_cwd: str | None = None
    # Where a tool keeps its own scratch files (the bash tool's directory report): the session
    # directory when there is one — under metaharness, a directory the run removes, so an oharness
    # killed mid-command leaves nothing in the temp directory. None: the temp directory.
    scratch_dir: str | None = None

    def resolve(self, path: str) -> str:
        return os.path.normpath(os.path.join(self.cwd, os.path.expanduser(path)))

    def bash_cwd(self) -> str:
        """Where the next bash call starts: the carried directory, or `cwd` once it is gone."""
        if self.shell_cwd is not None and not os.path.isdir(self.shell_cwd):
            self.shell_cwd = None
        return self.shell_cwd or self.cwd


class Tool:
    """A tool offered to the model. Subclasses set the class attributes and `run`."""

    name: ClassVar[str]
    description: ClassVar[str]
    input_schema: ClassVar[dict[str, Any]]

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.input_schema)

    async def call(self, raw_input: Any, ctx: ToolContext) -> ToolOutput:
        """Check the input against the schema's required keys and types, then run."""
        problem = check_input(self.name, self.input_schema, raw_input)
        if problem:
            return ToolOutput(problem, is_error=True)
        try:
            return await self.run(raw_input, ctx)
        except ToolFailure as failure:
            return ToolOutput(str(failure), is_error=True)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:  # pragma: no cover
        raise NotImplementedError


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def check_input(tool: str, schema: dict[str, Any], value: Any) -> str | None:
    """One sentence naming the first problem with a call's input, or None."""
    if not isinstance(value, dict):
        return f"the {tool} tool takes an object as input"
    props = schema.get("properties", {})
    for key in schema.get("required", []):
        if key not in value:
            return f"the {tool} tool needs `{key}` ({props.get(key, {}).get('type', 'a value')})"
    for key, item in value.items():
        expected = props.get(key, {}).get("type")
        if expected is None or item is None and key not in schema.get("required", []):
            continue
        kinds = _JSON_TYPES.get(expected)
        if kinds and (not isinstance(item, kinds) or (expected in ("integer", "number") and isinstance(item, bool))):
            return f"the {tool} tool's `{key}` must be a{'n' if expected[0] in 'aeiou' else ''} {expected}"
    return None


def cap_text(text: str, cap: int = OUTPUT_CAP_CHARS) -> str:
    if len(text) <= cap:
        return text
    return text[:cap] + f"\n[output truncated: {len(text) - cap} more characters]"
