"""Printing a conversation for a person (`oharness -p`): one readable block per record.

Rules it keeps: everything the model or a tool produced is escaped before it reaches
rich markup; long tool output is shortened on screen (the model still sees it whole).
The permission question (`TerminalAsker`) is asked here, outside the engine, through an
injectable prompt function.
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape

from .model import ToolCall
from .tools.base import ToolOutput

SCREEN_LINES = 20


class TerminalSink:
    def __init__(self, console: Console) -> None:
        self.console = console

    def header(self, model: str, session: Any) -> None:
        trail = getattr(getattr(session.gate, "trail", None), "path", None)
        enabled = getattr(getattr(session.gate, "trail", None), "enabled", False)
        where = f" · trail {escape(trail)}" if trail and enabled else ""
        self.console.print(
            f"[dim]oharness · {escape(model)} · {escape(session.cwd)} · mode {escape(session.gate.mode)}{where}[/dim]"
        )

    def _who(self, agent: str | None) -> str:
        return f"[magenta]{escape(agent)}[/magenta] " if agent else ""

    def text(self, text: str, request_id: str, agent: str | None) -> None:
        self.console.print(f"{self._who(agent)}[bold cyan]assistant[/bold cyan] {escape(text)}")

    def thinking(self, text: str, request_id: str, agent: str | None) -> None:
        self.console.print(f"{self._who(agent)}[dim italic]thinking {escape(text)}[/dim italic]")

    def injection(self, text: str, origin: str) -> None:
        self.console.print(f"[yellow]{escape(origin)}[/yellow] {escape(text)}")

    def tool_call(self, call: ToolCall) -> None:
        shown = json.dumps(call.input, ensure_ascii=False)
        if len(shown) > 300:
            shown = shown[:300] + "…"
        self.console.print(f"{self._who(call.agent)}[bold]→ {escape(call.name)}[/bold] {escape(shown)}")

    def tool_result(self, call: ToolCall, output: ToolOutput) -> None:
        lines = output.content.splitlines() or [""]
        more = len(lines) - SCREEN_LINES
        body = "\n".join("  " + line for line in lines[:SCREEN_LINES])
        if more > 0:
            body += f"\n  … {more} more lines"
        style = "red" if output.is_error else "green"
        code = f" exit {output.exit_code}" if output.exit_code is not None else ""
        mark = "✗" if output.is_error else "✓"
        self.console.print(f"[{style}]{mark} {escape(call.name)}{code}[/{style}]")
        self.console.print(escape(body), style="dim")

    def usage(self, request_id: str, model: str, usage: dict[str, int | None]) -> None:
        pass  # summed in the footer

    def model_failure(self, failure: Any, agent: str | None) -> None:
        pass  # the turn's error, in the footer, names it

    def footer(self, outcome: Any, usage: dict[str, int | None]) -> None:
        counts = ", ".join(f"{k.replace('_tokens', '')} {v}" for k, v in usage.items() if v is not None)
        status = outcome.stop_reason + (f": {outcome.error}" if outcome.error else "")
        style = "red" if outcome.stop_reason == "error" else "dim"
        self.console.print(f"[{style}]{escape(status)}{' · ' + escape(counts) if counts else ''}[/{style}]")


class TerminalAsker:
    """Asks a person in the terminal (docs/reference/permissions.md): allow once, always allow in a
    chosen scope (the exact rule and file shown), or deny with an optional note.

    `prompt(text, choices, default)` is injectable; the default is rich's `Prompt.ask`.
    Ctrl-C or end of input at the prompt is a deny (the gate records `note: interrupted`).
    """

    SCOPE_WORDS = {"local": "in this checkout", "project": "in this project", "user": "for all my projects"}

    def __init__(self, console: Console, prompt: Any = None) -> None:
        self.console = console
        self.prompt = prompt or self._rich_prompt

    def _rich_prompt(self, text: str, choices: list[str], default: str) -> str:
        from rich.prompt import Prompt

        return Prompt.ask(text, choices=choices or None, default=default, console=self.console,
                          show_default=bool(default))

    def confirm_trust(self, summary: str) -> bool:
        """The first-start question: trust this workspace? Anything but yes is no."""
        self.console.print("[bold yellow]this workspace is not trusted[/bold yellow]")
        for line in summary.splitlines():
            self.console.print(f"  {escape(line)}")
        try:
            return self.prompt("trust this workspace?", ["y", "n"], "n") == "y"
        except (KeyboardInterrupt, EOFError):
            return False

    def __call__(self, question: Any) -> Any:
        from .permission_gate import Answer

        c = self.console
        who = f"[magenta]{escape(question.agent)}[/magenta] " if question.agent else ""
        c.print(f"{who}[bold yellow]permission needed[/bold yellow] {escape(question.tool)} "
                f"[bold]{escape(question.principal)}[/bold]")
        cause = f"reason {escape(question.reason)} · mode {escape(question.mode)}"
        if question.rule:
            cause += f" · rule {escape(question.rule)} ({escape(question.scope or '')}"
            cause += f" {escape(question.file)})" if question.file else ")"
        c.print(f"  [dim]{cause}[/dim]")
        for need in question.needs:
            c.print(f"  • {escape(need)}")
        options: list[tuple[str, Any]] = [("allow once", Answer("once"))]
        for scope in ("local", "project", "user"):
            if scope in question.remember:
                rule, file = question.remember[scope]
                options.append((f"always allow {rule} {self.SCOPE_WORDS[scope]} ({file})", Answer("always", scope)))
        options.append(("deny", Answer("deny")))
        if not question.remember and question.remember_why_not:
            c.print(f"  [dim]always allow: not offered ({escape(question.remember_why_not)})[/dim]")
        for number, (label, _) in enumerate(options, 1):
            c.print(f"  {number}. {escape(label)}")
        choices = [str(n) for n in range(1, len(options) + 1)]
        default = "2" if len(options) > 2 else "1"  # "always allow in this checkout" when offered
        picked = options[int(self.prompt("choose", choices, default)) - 1][1]
        if picked.choice == "deny":
            note = self.prompt("note for the model (optional)", [], "")
            return Answer("deny", note=note or None)
        return picked
