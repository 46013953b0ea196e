"""The static HTML page for one run or two side by side (`metaharness project --html`).

What belongs here: turning decoded streams into the page's bytes through the jinja2
template `templates/compare.html.j2`. The page is self-contained — inline CSS and JS,
no network, no external fonts — so it works from `file://`, and its bytes are a pure
function of the input streams (no clock, no random ids).

Rules: at most two streams (a third is refused by name, `TooManyStreams`); every
value reaches the page through jinja2's autoescaping, never string concatenation.
"""

from __future__ import annotations

from typing import Any

import jinja2

from .compare import RunView, align_runs, extract_run
from .stream import StreamLine
from .summarise import format_cost, format_duration, human_bytes, one_line

MAX_STREAMS = 2


class TooManyStreams(ValueError):
    def __init__(self, count: int) -> None:
        super().__init__(
            f"the side-by-side page compares one or two streams, and {count} were given; "
            "project each pair separately"
        )


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("metaharness.view", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["cost"] = format_cost
    env.filters["duration"] = format_duration
    env.filters["size"] = lambda n: human_bytes(n) or "size not reported"
    env.filters["oneline"] = one_line
    return env


def render_page(streams: list[tuple[str, list[StreamLine]]]) -> bytes:
    """The page for `[(source, lines), …]` (one or two streams), as UTF-8 bytes."""
    if not 1 <= len(streams) <= MAX_STREAMS:
        raise TooManyStreams(len(streams))
    labels = "AB"
    runs: list[RunView] = [extract_run(lines, source, labels[i]) for i, (source, lines) in enumerate(streams)]
    rows, alignment = align_runs(runs)
    divergences = sum(1 for row in rows if row.divergent)
    title = " vs ".join(_run_title(run) for run in runs)
    context: dict[str, Any] = {
        "title": title,
        "runs": runs,
        "rows": rows,
        "alignment": alignment,
        "divergences": divergences,
        "two": len(runs) == 2,
        "gap_rows": sum(1 for row in rows if row.status in ("only-left", "only-right") and row.kind == "call"),
    }
    text = _environment().get_template("compare.html.j2").render(context)
    return text.encode("utf-8")


def _run_title(run: RunView) -> str:
    who = run.adapter or "unknown harness"
    return f"{who} ({run.run})" if run.run else who
