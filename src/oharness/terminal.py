"""Printing a conversation for a person (`oharness -p`): one readable block per record.

Rules it keeps: everything the model or a tool produced is escaped before it reaches
rich markup; long tool output is shortened on screen (the model still sees it whole).
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
        self.console.print(
            f"[dim]oharness · {escape(model)} · {escape(session.cwd)} · mode {escape(session.gate.mode)}[/dim]"
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

    def footer(self, outcome: Any, usage: dict[str, int | None]) -> None:
        counts = ", ".join(f"{k.replace('_tokens', '')} {v}" for k, v in usage.items() if v is not None)
        status = outcome.stop_reason + (f": {outcome.error}" if outcome.error else "")
        style = "red" if outcome.stop_reason == "error" else "dim"
        self.console.print(f"[{style}]{escape(status)}{' · ' + escape(counts) if counts else ''}[/{style}]")
