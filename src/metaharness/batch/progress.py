"""Showing a batch as it runs: a live rich panel on a terminal, plain lines otherwise.

What belongs here: turning `runner.Progress` snapshots into what a person sees.
On a terminal: cells done / running / failed / skipped, the cost so far, and an
ETA (the mean wall time of the cells finished in this run, times the cells left,
over the slots). Anywhere else: one plain line per cell that ends, so a CI log
reads top to bottom. Nothing here decides anything.
"""

from __future__ import annotations

import time
from typing import Any

from metaharness.view.summarise import format_cost, format_duration

from .results import CellResult
from .runner import Progress


def result_line(result: CellResult) -> str:
    where = f"{result.task}/{result.harness}/{result.repeat}"
    if result.status == "skipped":
        return f"{where}: skipped: {result.skipped}"
    if result.status == "interrupted":
        return f"{where}: interrupted (a resume runs it again)"
    verdict = "pass" if result.passed else "FAIL"
    detail = [f"exit {result.exit_code}", f"closed {result.close_reason}", f"check {result.check}",
              f"{result.calls.denied} denied", f"cost {format_cost(result.cost_usd)}", format_duration(result.wall_ms)]
    if result.timed_out:
        detail.append("timed out")
    if result.attempts > 1:
        detail.append(f"attempt {result.attempts}")
    if result.infra:
        detail.append(result.infra)
    if result.refusal:
        detail.append(f"refused: {result.refusal}")
    return f"{where}: {verdict} ({', '.join(detail)})"


class Display:
    """Call `update(progress)` on every change; `close()` at the end."""

    def __init__(self, console: Any, *, live: bool, slots: int) -> None:
        self._console = console
        self._slots = max(1, slots)
        self._started = time.monotonic()
        self._live = None
        self._announced = False
        if live:
            from rich.live import Live

            self._live = Live(console=console, refresh_per_second=4, transient=False)
            self._live.start()

    def _eta(self, p: Progress) -> str:
        finished = p.done + p.skipped
        left = p.total - p.kept - finished
        if p.done == 0 or left <= 0:
            return "—"
        per_cell = (time.monotonic() - self._started) / p.done
        return format_duration(int(per_cell * left * 1000))

    def _panel(self, p: Progress) -> Any:
        from rich.table import Table

        table = Table.grid(padding=(0, 2))
        table.add_row("cells", f"{p.kept + p.done + p.skipped}/{p.total} done"
                      + (f" ({p.kept} kept from before)" if p.kept else ""))
        table.add_row("running", ", ".join(sorted(p.running)) or "—")
        table.add_row("passed / failed / skipped", f"{p.passed} / {p.failed} / {p.skipped}")
        table.add_row("cost so far", format_cost(p.cost_usd))
        table.add_row("eta", self._eta(p))
        if p.last is not None:
            table.add_row("last", result_line(p.last))
        return table

    def update(self, p: Progress) -> None:
        if not self._announced:
            self._announced = True
            if p.kept:  # a resume says once what it keeps and what it runs
                self._console.print(f"resumed: {p.kept} cell(s) kept from before, {p.total - p.kept} to run",
                                    markup=False, highlight=False)
        if self._live is not None:
            self._live.update(self._panel(p))

    def result(self, result: CellResult) -> None:
        """A cell ended: off a terminal, its own line."""
        if self._live is None:
            self._console.print(result_line(result), markup=False, highlight=False, soft_wrap=True)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
