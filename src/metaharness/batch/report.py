"""The batch report: the tasks × harnesses matrix, as text and as a page.

What belongs here: folding a DIR's results into matrix entries (pass rate over
repeats, median cost and wall time, denied calls, calls the harness refused), the one-line
reason of every cell that did not pass (`why`, the one rule all three views use),
the terminal table, the matrix as JSON (`batch report --json`), and the HTML
report — one self-contained page (inline CSS, no network) whose cells link to each
run's own page and, per task, to a side-by-side of two harnesses. Those pages are
the existing views (`metaharness.view.html.render_page`), written into a folder
beside the report.

Rules kept: figures come from results.jsonl only; a figure no run reported is shown
as unknown, never as 0; the bytes written are a pure function of DIR (no clock).
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass, field
from typing import Any

import jinja2
import msgspec

from metaharness.view.summarise import format_cost, format_duration

from .plan import Plan
from .results import CellResult, cell_dir, one_line, read_results
from .runner import PLAN_COPY, RESULTS


@dataclass
class Entry:
    task: str
    harness: str
    results: list[CellResult] = field(default_factory=list)

    @property
    def ran(self) -> list[CellResult]:
        return [r for r in self.results if r.status == "ran"]

    @property
    def passes(self) -> int:
        return sum(1 for r in self.ran if r.passed)

    @property
    def skipped(self) -> int:
        return sum(1 for r in self.results if r.status == "skipped")

    @property
    def pass_rate(self) -> str:
        return f"{self.passes}/{len(self.ran)}" if self.ran else "—"

    @property
    def median_cost(self) -> float | None:
        costs = [r.cost_usd for r in self.ran if r.cost_usd is not None]
        return statistics.median(costs) if costs else None

    @property
    def median_wall_ms(self) -> int | None:
        times = [r.wall_ms for r in self.ran if r.wall_ms is not None]
        return int(statistics.median(times)) if times else None

    @property
    def denied(self) -> int:
        return sum(r.calls.denied for r in self.ran)

    @property
    def harness_refused(self) -> int:
        return sum(r.harness_refused for r in self.ran)

    @property
    def failures(self) -> list[tuple[int, str]]:
        """(repeat, why) of every repeat that ran and did not pass."""
        return [(r.repeat, why(r)) for r in sorted(self.ran, key=lambda r: r.repeat) if not r.passed]

    @property
    def refused(self) -> list[tuple[str, str, str, int]]:
        """Distinct refused calls over the repeats: (tool, subject, reason, how many times)."""
        counts: dict[tuple[str, str, str], int] = {}
        for result in self.ran:
            for call in result.refused:
                key = (call.name, call.subject, call.reason or "no reason given")
                counts[key] = counts.get(key, 0) + 1
        return [(*key, n) for key, n in counts.items()]


@dataclass
class Matrix:
    tasks: list[str]
    harnesses: list[str]
    entries: dict[tuple[str, str], Entry]
    missing: int  # cells of the plan with no result line yet

    def entry(self, task: str, harness: str) -> Entry:
        return self.entries[(task, harness)]


class ReportError(ValueError):
    pass


def load_dir(out: str) -> tuple[Plan, dict[tuple[str, str, int], CellResult]]:
    try:
        with open(os.path.join(out, PLAN_COPY), "rb") as handle:
            plan = msgspec.json.decode(handle.read(), type=Plan)
    except FileNotFoundError:
        raise ReportError(f"{out} is not a batch directory (it has no {PLAN_COPY}); "
                          "`metaharness batch run PLAN --out DIR` makes one") from None
    except msgspec.DecodeError as exc:
        raise ReportError(f"{os.path.join(out, PLAN_COPY)} is damaged: {exc}") from None
    return plan, read_results(os.path.join(out, RESULTS))


def build_matrix(plan: Plan, results: dict[tuple[str, str, int], CellResult]) -> Matrix:
    tasks = [t.id for t in plan.tasks]
    harnesses = [h.name for h in plan.harnesses]
    entries = {(t, h): Entry(t, h) for t in tasks for h in harnesses}
    missing = 0
    for t in tasks:
        for h in harnesses:
            for repeat in range(1, plan.repeats + 1):
                result = results.get((t, h, repeat))
                if result is None or result.status == "interrupted":
                    missing += 1
                else:
                    entries[(t, h)].results.append(result)
    return Matrix(tasks, harnesses, entries, missing)


def cell_text(entry: Entry) -> str:
    parts = [f"pass {entry.pass_rate}"]
    if entry.ran:
        parts.append(f"cost {format_cost(entry.median_cost)}")
        parts.append(format_duration(entry.median_wall_ms))
        parts.append(f"{entry.denied} denied")
        if entry.harness_refused:
            parts.append(f"{entry.harness_refused} refused by the harness")
    if entry.skipped:
        parts.append(f"{entry.skipped} skipped")
    return " · ".join(parts)


def _first_cause(result: CellResult) -> str:
    if result.refusal:
        return f"refused at start: {result.refusal}"
    if result.infra:
        return f"infrastructure: {result.infra}"
    if result.timed_out:
        return "timed out"
    if result.close_reason == "budget" or result.budget:  # its own cap, or the batch's (which halted it)
        return f"stopped at its budget: {result.budget or 'close reason budget'}"
    if result.model_failure:
        return f"a model request failed: {result.model_failure}"
    if result.check == "timeout":
        return "the check timed out" + (f": {result.check_tail}" if result.check_tail else "")
    if result.check == "fail":
        return f"the check exited {result.check_exit_code}" + (f": {result.check_tail}" if result.check_tail else "")
    if result.calls.denied or result.harness_refused:
        return ""
    return f"the run exited {result.exit_code}, closed {result.close_reason}, stream {result.stream}"


def why(result: CellResult) -> str:
    """Why a cell that ran did not pass, in one line: what stopped it first, then the calls that
    were refused — by metaharness (denied) and by the harness's own permission system.

    The one rule for it: the terminal matrix, the page and `batch report --json` all say this."""
    calls = []
    if result.calls.denied:
        calls.append(f"{result.calls.denied} call(s) denied")
    if result.harness_refused:
        calls.append(f"{result.harness_refused} call(s) refused by the harness itself")
    return one_line("; ".join(part for part in (_first_cause(result), ", ".join(calls)) if part))


def render_text(matrix: Matrix, console: Any) -> None:
    from rich.table import Table

    table = Table(title="pass rate over repeats · median cost · median time · calls denied (and refused by the harness)", show_lines=True)
    table.add_column("task")
    for harness in matrix.harnesses:
        table.add_column(harness)
    for task in matrix.tasks:
        table.add_row(task, *[cell_text(matrix.entry(task, h)) for h in matrix.harnesses])
    console.print(table)
    for task in matrix.tasks:
        for harness in matrix.harnesses:
            for tool, subject, reason, count in matrix.entry(task, harness).refused:
                times = f" (×{count})" if count > 1 else ""
                console.print(f"refused in {task} on {harness}{times}: {tool} {subject} — {reason}",
                              markup=False, highlight=False, soft_wrap=True)
    for task in matrix.tasks:
        for harness in matrix.harnesses:
            for repeat, reason in matrix.entry(task, harness).failures:
                console.print(f"failed: {task} on {harness} #{repeat}: {reason}",
                              markup=False, highlight=False, soft_wrap=True)
    if matrix.missing:
        console.print(f"{matrix.missing} cell(s) have no result yet; `metaharness batch run` on this DIR runs them")


REPORT_FORMAT = "metaharness.batch-report/1"


def report_json(matrix: Matrix) -> dict[str, Any]:
    """The matrix as data (`batch report --json`): one entry per task × harness, the same
    figures and the same one-line reasons as the terminal and the page."""
    cells = []
    for task in matrix.tasks:
        for harness in matrix.harnesses:
            entry = matrix.entry(task, harness)
            cells.append({
                "task": task, "harness": harness, "runs": len(entry.ran), "passed": entry.passes,
                "skipped": entry.skipped, "median_cost_usd": entry.median_cost, "median_wall_ms": entry.median_wall_ms,
                "denied": entry.denied, "harness_refused": entry.harness_refused,
                "failures": [{"repeat": repeat, "why": reason} for repeat, reason in entry.failures],
                "refused": [{"name": tool, "subject": subject, "reason": reason, "count": count}
                            for tool, subject, reason, count in entry.refused],
            })
    return {"format": REPORT_FORMAT, "tasks": matrix.tasks, "harnesses": matrix.harnesses,
            "missing": matrix.missing, "cells": cells}


# --- the page --------------------------------------------------------------------------

def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("metaharness.batch", "templates"), autoescape=True,
                             trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    env.filters["cost"] = format_cost
    env.filters["duration"] = format_duration
    return env


def _stream_lines(path: str):
    from metaharness.view.stream import BadLine, decode_stream

    try:
        with open(path, "rb") as handle:
            return decode_stream(handle.read())
    except (OSError, BadLine):
        return None


def write_html(out: str, page: str, pair: tuple[str, str] | None = None) -> list[str]:
    """Write the report page and its run and side-by-side pages; returns every path written."""
    from metaharness.view.html import render_page

    plan, results = load_dir(out)
    matrix = build_matrix(plan, results)
    if pair is None and len(matrix.harnesses) >= 2:
        pair = (matrix.harnesses[0], matrix.harnesses[1])
    if pair is not None:
        for name in pair:
            if name not in matrix.harnesses:
                raise ReportError(f"--pair names harness {name!r}, which the plan does not have "
                                  f"(it has {', '.join(matrix.harnesses)})")
    page = os.path.abspath(page)
    stem = os.path.splitext(os.path.basename(page))[0]
    folder_name = f"{stem}-runs"
    folder = os.path.join(os.path.dirname(page), folder_name)
    written: list[str] = []

    def emit(relative: str, data: bytes) -> str:
        path = os.path.join(folder, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(data)
        written.append(path)
        return f"{folder_name}/{relative}"

    links: dict[tuple[str, str, int], str] = {}
    trajectories: dict[tuple[str, str, int], str] = {}
    for entry in matrix.entries.values():
        for result in entry.ran:
            events = os.path.join(cell_dir(out, result.key), "events.jsonl")
            atif = os.path.join(cell_dir(out, result.key), "trajectory.json")
            if os.path.isfile(atif):  # written by `batch run --atif`; copied so the folder stands alone
                with open(atif, "rb") as handle:
                    trajectories[result.key] = emit(f"{result.task}/{result.harness}/{result.repeat}.trajectory.json",
                                                    handle.read())
            lines = _stream_lines(events)
            if lines:
                links[result.key] = emit(f"{result.task}/{result.harness}/{result.repeat}.html",
                                         render_page([(events, lines)]))
    compares: dict[str, str] = {}
    if pair is not None:
        for task in matrix.tasks:
            chosen = []
            for harness in pair:
                ran = sorted(matrix.entry(task, harness).ran, key=lambda r: r.repeat)
                events = os.path.join(cell_dir(out, ran[0].key), "events.jsonl") if ran else None
                lines = _stream_lines(events) if events else None
                if lines:
                    chosen.append((events, lines))
            if len(chosen) == 2:
                compares[task] = emit(f"{task}/{pair[0]}-vs-{pair[1]}.html", render_page(chosen))
    html = _environment().get_template("report.html.j2").render(
        matrix=matrix, links=links, trajectories=trajectories, compares=compares, pair=pair, out=out)
    with open(page, "wb") as handle:
        handle.write(html.encode("utf-8"))
    written.insert(0, page)
    return written
