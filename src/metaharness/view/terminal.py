"""The live terminal view of an event stream (rich).

What belongs here: `EventRenderer`, which turns events into one readable line each on
a rich `Console`, a header panel from `session.started`, and a closing summary. It
holds no I/O of its own beyond the console it is given, so `metaharness view` feeds
it lines read from a file or stdin and `metaharness demo` feeds it the events of a
live run (`feed_event`).

Rules: one line per event (long text is cut with `…`, never wrapped); decisions are
coloured by verdict and always name their decider and seam; figures are the vendor's
and an unknown one is said to be unknown; a line that does not decode is shown by
number with the decoder's words and counted, never dropped silently.
"""

from __future__ import annotations

import re
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .stream import BadLine, CensusCounter, decode_line, decision_word, envelope_at
from .summarise import (
    compact_json,
    content_text,
    format_cost,
    format_duration,
    human_bytes,
    input_summary,
    one_line,
    short_digest,
    step_label,
    thousands,
)
from metaharness.protocol.census import census_dict
from metaharness.protocol.events import event_name

VERDICT_STYLE = {
    "allow": "bold green",
    "deny": "bold red",
    "replace": "bold yellow",
    "abstain": "bold blue",
}
_LABEL_WIDTH = 9
# seq (4) · clock (8) · label: where an event line's content starts; a long line wraps under it
_INDENT = 4 + 1 + 8 + 1 + _LABEL_WIDTH + 1


class EventRenderer:
    """Render events to `console`, one line each; call `summary()` at the end."""

    def __init__(self, console: Console, *, text_limit: int = 400) -> None:
        self.console = console
        self.text_limit = text_limit
        self.lines_seen = 0
        self.bad_lines: list[BadLine] = []
        self.names: list[str] = []
        self.run: str | None = None
        self.started: Any = None
        self.ended: Any = None
        self.closed: Any = None
        self.turns_started = 0
        self.census = CensusCounter()
        self.reported_cost = 0.0
        self.cost_reports = 0
        self._call_names: dict[str, str] = {}

    # --- input ----------------------------------------------------------------------

    def feed(self, raw: bytes) -> None:
        """One stream line (its `\\n` optional). A line that does not decode is shown and counted."""
        self.lines_seen += 1
        raw = raw[:-1] if raw.endswith(b"\n") else raw
        try:
            line = decode_line(self.lines_seen, raw)
        except BadLine as bad:
            self.bad_lines.append(bad)
            text = Text()
            text.append(f"{'?':>4} {'':<8} ", style="dim")
            text.append(f"{'bad line':<{_LABEL_WIDTH}}", style="bold white on red")
            text.append(" ")
            text.append(f"line {bad.number}: {bad.message}", style="red")
            self._print(text)
            return
        self.feed_event(line.envelope, line.event)

    def feed_event(self, envelope: Any, event: Any) -> None:
        name = event_name(event)
        self.names.append(name)
        if self.run is None:
            self.run = envelope.run
        handler = getattr(self, "_on_" + name.replace(".", "_"))
        if name == "session.started":
            handler(envelope, event)
            return
        text = Text()
        text.append(f"{envelope.seq:>4} ", style="dim")
        text.append(f"{_clock(envelope_at(envelope)):<8} ", style="dim")
        handler(text, event)
        self._print(text)

    # --- output ---------------------------------------------------------------------

    def _print(self, text: Text) -> None:
        # A long line (a deny reason, a refusal sentence) wraps under its content column rather
        # than being cut at the console's edge: the reason is what a reader came for.
        if text.cell_len <= self.console.width or self.console.width < _INDENT + 20:
            self.console.print(text, overflow="fold", highlight=False)
            return
        grid = Table.grid()
        grid.add_column(width=_INDENT, no_wrap=True)
        grid.add_column(overflow="fold")
        grid.add_row(text[:_INDENT], text[_INDENT:])
        self.console.print(grid, highlight=False)

    @staticmethod
    def _label(text: Text, label: str, style: str) -> None:
        text.append(f"{label:<{_LABEL_WIDTH}}", style=style)
        text.append(" ")

    def _said(self, value: str) -> str:
        return one_line(value, self.text_limit)

    def _call(self, call_id: str) -> str:
        name = self._call_names.get(call_id)
        return f"{call_id} ({name})" if name else call_id

    # --- one handler per event ---------------------------------------------------------

    def _on_session_started(self, envelope: Any, e: Any) -> None:
        self.started = e
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column()
        harness = e.adapter + (f" {e.harness_version}" if e.harness_version else "")
        grid.add_row("harness", f"{harness} ({e.adapter_class})")
        grid.add_row("run", f"{envelope.run}   session {e.session_id or 'not reported'}")
        grid.add_row("model", e.model or "not reported")
        hermetic = e.hermetic
        mode = f"decisions {hermetic.decisions}"
        if hermetic.deny_only:
            mode += " · deny-only"
        mode += f" · hermetic {hermetic.mode} · permission mode {e.permission_mode or 'not reported'}"
        grid.add_row("control", mode)
        grid.add_row("cwd", e.cwd or "not reported")
        if e.offered_tools is not None:
            grid.add_row("tools", one_line(", ".join(e.offered_tools), 200) or "none")
        ops = getattr(e, "available_operations", None)
        if isinstance(ops, list):
            grid.add_row("operations", ", ".join(ops) or "none")
        if e.withheld:
            grid.add_row("withheld", "; ".join(f"{w.tool}: {w.reason}" for w in e.withheld))
        if e.mcp_servers:
            grid.add_row("mcp", ", ".join(f"{s.name} ({s.status})" for s in e.mcp_servers))
        title = f"[bold]session started[/] · seq {envelope.seq}"
        at = envelope_at(envelope)
        if at:
            title += f" · {at}"
        self.console.print(Panel(grid, title=title, title_align="left", border_style="cyan", expand=False))

    def _on_session_ended(self, text: Text, e: Any) -> None:
        self.ended = e
        if e.is_error:
            self._label(text, "ended", "bold white on red")
        else:
            self._label(text, "ended", "bold cyan")
        parts = []
        for label, value in (("subtype", e.subtype), ("stop", e.stop_reason), ("terminal", e.terminal_reason)):
            if value is not None:
                parts.append(f"{label} {value}")
        if e.is_error is not None:
            parts.append("error" if e.is_error else "no error")
        if e.api_error_status is not None:
            parts.append(f"api error {e.api_error_status}")
        parts.append(f"turns {e.num_turns if e.num_turns is not None else 'not reported'}")
        parts.append(f"cost {format_cost(e.total_cost_usd)}")
        text.append(" · ".join(parts))
        if e.final_answer is not None:
            text.append("  answer: ", style="dim")
            text.append(self._said(e.final_answer.text))

    def _on_step_entered(self, text: Text, e: Any) -> None:
        self._label(text, "step ▸", "bold magenta")
        text.append(step_label(e.step), style="magenta")
        text.append(f"  frame {short_digest(e.frame_digest)}", style="dim")

    def _on_step_left(self, text: Text, e: Any) -> None:
        self._label(text, "step ◂", "bold magenta")
        text.append(step_label(e.step), style="magenta")
        outcome = type(e.outcome).__struct_config__.tag
        style = "green" if outcome == "completed" else "red"
        text.append(f"  {outcome}", style=style)
        if hasattr(e.outcome, "reason"):
            text.append(f": {self._said(e.outcome.reason)}")

    def _on_turn_started(self, text: Text, e: Any) -> None:
        self.turns_started += 1
        self._label(text, f"turn {e.turn} ▸", "bold")
        if e.frame_digest:
            text.append(f"frame {short_digest(e.frame_digest)}", style="dim")
        else:
            text.append("no frame", style="dim")

    def _on_turn_ended(self, text: Text, e: Any) -> None:
        self._label(text, f"turn {e.turn} ◂", "bold")
        text.append(e.stop_reason or "stop reason not reported", style="dim")

    def _on_text(self, text: Text, e: Any) -> None:
        self._label(text, "text", "bold white")
        text.append(self._said(e.text))

    def _on_thinking(self, text: Text, e: Any) -> None:
        self._label(text, "thinking", "dim")
        text.append(self._said(e.text), style="dim italic")

    def _on_thinking_estimate(self, text: Text, e: Any) -> None:
        self._label(text, "thinking", "dim")
        delta = f" ({e.delta:+d})" if e.delta is not None else ""
        text.append(f"~{thousands(e.estimate)} tokens so far{delta}", style="dim")

    def _on_injection(self, text: Text, e: Any) -> None:
        self._label(text, "inject", "bold magenta")
        text.append(f"[{e.origin or 'origin not reported'}] ", style="magenta")
        text.append(self._said(e.text))

    def _on_tool_requested(self, text: Text, e: Any) -> None:
        self._call_names[e.call_id] = e.name
        self._label(text, "call", "bold cyan")
        text.append(e.name, style="bold")
        text.append(f" {e.call_id}", style="dim")
        ops = e.operations if isinstance(e.operations, list) else []
        if ops:
            text.append(f" [{' '.join(ops)}]", style="cyan")
        text.append("  ")
        text.append(input_summary(e.input, 160))
        subjects = e.subjects if isinstance(e.subjects, list) else []
        if subjects:
            text.append(f"  → {', '.join(subjects)}", style="dim")
        if e.decision_required:
            text.append(f"  awaiting decision ({e.deadline_ms} ms)", style="yellow")
        text.append(f"  via {e.seam}", style="dim")
        policy = getattr(e, "policy", None)
        if hasattr(policy, "reason"):
            text.append(f"  policy asks the embedder: {self._said(policy.reason)}", style="yellow")

    def _on_tool_decided(self, text: Text, e: Any) -> None:
        self.census.add(e)
        verdict = decision_word(e.decision)
        self._label(text, verdict, VERDICT_STYLE[verdict])
        text.append(self._call(e.call_id))
        text.append(f"  by {e.decided_by} via {e.seam}", style="bold" if verdict == "deny" else "")
        if e.latency_ms is not None:
            text.append(f"  {e.latency_ms} ms", style="dim")
        if verdict == "deny":
            text.append(f"  {self._said(e.decision.reason)}", style="red")
        elif verdict == "replace":
            text.append(f"  runs instead with {compact_json(e.decision.input)}", style="yellow")

    def _on_tool_result(self, text: Text, e: Any) -> None:
        failed = e.is_error is True or (e.exit_code not in (None, 0))
        self._label(text, "result", "bold red" if failed else "bold green")
        text.append(self._call(e.call_id))
        facts = []
        if e.exit_code is not None:
            facts.append(f"exit {e.exit_code}")
        if e.is_error is not None:
            facts.append("error" if e.is_error else "ok")
        size = human_bytes(e.bytes)
        if size:
            facts.append(size)
        if facts:
            text.append("  " + " · ".join(facts), style="red" if failed else "green")
        body = content_text(e.content)
        if body:
            text.append(f"  {self._said(body)}", style="dim")

    def _on_usage(self, text: Text, e: Any) -> None:
        u = e.usage
        self._label(text, "usage", "dim bold")
        if u.input_tokens is None and u.output_tokens is None:
            parts = ["tokens not reported"]
        else:
            parts = [f"in {thousands(u.input_tokens)}", f"out {thousands(u.output_tokens)}"]
        if u.cache_read_input_tokens is not None or u.cache_creation_input_tokens is not None:
            parts.append(
                f"cache read {thousands(u.cache_read_input_tokens)} / write {thousands(u.cache_creation_input_tokens)}"
            )
        if u.thinking_tokens is not None:
            parts.append(f"thinking {thousands(u.thinking_tokens)}")
        if u.cost_usd is not None:
            self.reported_cost += u.cost_usd
            self.cost_reports += 1
            parts.append(f"cost {format_cost(u.cost_usd)}")
        text.append(" · ".join(parts))
        tail = " ".join(x for x in (e.model, e.request_id) if x)
        if tail:
            text.append(f"  {tail}", style="dim")

    def _on_rate_limit(self, text: Text, e: Any) -> None:
        info = e.info
        self._label(text, "ratelimit", "yellow")
        parts = [info.status or "status not reported"]
        if info.window:
            parts.append(f"window {info.window}")
        if info.utilization is not None:
            parts.append(f"{info.utilization:.0%} used")
        if info.resets_at is not None:
            parts.append(f"resets at {info.resets_at}")
        if info.using_overage:
            parts.append("using overage")
        text.append(" · ".join(parts))

    def _on_command_result(self, text: Text, e: Any) -> None:
        outcome = e.outcome
        if type(outcome).__struct_config__.tag == "ok":
            self._label(text, "command", "bold green")
            text.append(f"{e.id} ok")
            if outcome.applies_at:
                text.append(f", applies at the {outcome.applies_at}", style="dim")
        else:
            self._label(text, "command", "bold red")
            text.append(f"{e.id} refused ")
            text.append(outcome.refused.code, style="bold red")
            text.append(f": {self._said(outcome.refused.reason)}")

    def _on_warning(self, text: Text, e: Any) -> None:
        self._label(text, "warning", "bold yellow")
        text.append(e.code, style="yellow")
        text.append(f"  {self._said(e.message)}")

    def _on_opaque(self, text: Text, e: Any) -> None:
        self._label(text, "opaque", "dim")
        kind = "/".join(x for x in (e.vendor_type, e.vendor_subtype) if x) or "unnamed record"
        where = f" transcript line {e.source_line}" if e.source_line is not None else ""
        text.append(f"{kind}{where} sha256 {short_digest(e.digest)}", style="dim")

    def _on_auth_expired(self, text: Text, e: Any) -> None:
        self._label(text, "auth", "bold white on red")
        text.append(f"credentials expired ({e.credential_source or 'source not reported'})")
        if e.detail:
            text.append(f"  {self._said(e.detail)}", style="red")

    def _on_stream_closed(self, text: Text, e: Any) -> None:
        self.closed = e
        self._label(text, "closed", "bold cyan")
        text.append(f"{e.reason} · process {_process(e.process)} · {e.events} lines before this one")

    # --- summary ------------------------------------------------------------------------

    def verdict(self) -> str:
        """Completeness, as `metaharness check` judges it, over what was fed: complete,
        truncated or inconsistent."""
        closed_at = [i for i, name in enumerate(self.names) if name == "stream.closed"]
        if not closed_at:
            return "truncated"
        if len(closed_at) > 1 or closed_at[0] != len(self.names) - 1:
            return "inconsistent"
        if self.closed.events != len(self.names) - 1:
            return "inconsistent"
        return "complete"

    def summary(self) -> None:
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column()
        ended = self.ended
        if ended is not None and ended.num_turns is not None:
            turns = f"{ended.num_turns} (reported)"
        else:
            turns = f"{self.turns_started} (counted from turn.started)"
        grid.add_row("turns", turns)
        grid.add_row("duration", format_duration(ended.duration_ms if ended else None))
        if ended is not None and ended.total_cost_usd is not None:
            cost = f"{format_cost(ended.total_cost_usd)} (session total as reported)"
        elif self.cost_reports:
            cost = f"{format_cost(self.reported_cost)} (sum of {self.cost_reports} usage reports)"
        else:
            cost = "not reported"
        grid.add_row("cost", cost)
        counted = self.census.as_dict()
        grid.add_row("census", _census_text(counted))
        if ended is not None:
            reported = _census_dict(ended.census)
            if reported != counted:
                grid.add_row(
                    "",
                    Text(f"session.ended reports a different census: {_census_text(reported)}", style="bold red"),
                )
        verdict = self.verdict()
        style = {"complete": "bold green", "truncated": "bold yellow", "inconsistent": "bold red"}[verdict]
        line = Text(verdict, style=style)
        if self.closed is not None:
            line.append(f" · close reason {self.closed.reason} · process {_process(self.closed.process)}")
        if ended is None:
            line.append(" · no session.ended", style="yellow")
        grid.add_row("stream", line)
        grid.add_row("lines", f"{self.lines_seen or len(self.names)} read, {len(self.bad_lines)} not valid")
        title = f"[bold]summary[/] · run {self.run or 'unknown'}"
        self.console.print(Panel(grid, title=title, title_align="left", border_style=style.split()[-1], expand=False))


_CLOCK = re.compile(r"[Tt ]([0-9]{2}:[0-9]{2}:[0-9]{2})")


def _clock(at: str | None) -> str:
    """The time of day of a vendor timestamp (`at`), blank when the line has none."""
    if at is None:
        return ""
    match = _CLOCK.search(at)
    return match.group(1) if match else ""


def _process(process: Any) -> str:
    kind = type(process).__struct_config__.tag
    if kind == "exited":
        return f"exited {process.code}"
    if kind == "signaled":
        return f"signal {process.signal}"
    return "unknown"


_census_dict = census_dict


def _census_text(c: dict[str, Any]) -> str:
    head = f"{c['allowed']} allowed · {c['denied']} denied · {c['replaced']} replaced · {c['abstained']} abstained"
    seams = ", ".join(f"{k} {v}" for k, v in c["by_seam"].items()) or "none"
    deciders = ", ".join(f"{k} {v}" for k, v in c["by_decider"].items()) or "none"
    return f"{head}  (seam: {seams}; decider: {deciders})"
