"""Short, deterministic summaries of event values for people to read.

What belongs here: turning a call's input, a result's content, a byte count, a cost
or a digest into a short string. Shared by the terminal view and the HTML page, so
both say the same thing about the same call.

Rules: pure functions of their arguments (no clock, no locale); never invent a
figure — an unknown value is said to be unknown, not shown as zero.
"""

from __future__ import annotations

import json
from typing import Any

# Keys that name what a call acts on, most telling first (vendor spellings included).
_SUBJECT_KEYS = (
    "command",
    "cmd",
    "file_path",
    "path",
    "notebook_path",
    "pattern",
    "url",
    "query",
    "prompt",
    "name",
    "server",
    "tool",
    "description",
)


def one_line(text: str, limit: int | None = None) -> str:
    """Collapse whitespace runs (newlines included) to single spaces; cut at `limit` with `…`."""
    flat = " ".join(text.split())
    if limit is not None and len(flat) > limit:
        return flat[: max(limit - 1, 0)] + "…"
    return flat


def compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        # argv form, e.g. ["bash", "-lc", "cargo test"]: the script is what a person reads
        if len(value) >= 3 and value[-2] in ("-c", "-lc") :
            return value[-1]
        return " ".join(value)
    return compact_json(value)


def input_summary(value: Any, limit: int | None = 120) -> str:
    """What a call acts on: `command=…`, `path=…`, or the compact input when nothing stands out."""
    if isinstance(value, dict):
        parts = []
        for key in _SUBJECT_KEYS:
            if key in value and value[key] not in (None, "", [], {}):
                parts.append(f"{key}={_as_text(value[key])}")
                if len(parts) == 2 or key in ("command", "cmd"):
                    break
        if parts:
            return one_line("  ".join(parts), limit)
        return one_line(compact_json(value), limit) if value else "{}"
    if value is None:
        return "null"
    return one_line(_as_text(value), limit)


def signature_text(value: Any) -> str:
    """The input reduced to what two harnesses would agree on (the main subject, no decoration)."""
    if isinstance(value, dict):
        for key in _SUBJECT_KEYS[:9]:
            if key in value and value[key] not in (None, "", [], {}):
                return one_line(_as_text(value[key]))
        return compact_json(value)
    if value is None:
        return ""
    return one_line(_as_text(value))


def content_text(content: Any) -> str | None:
    """The readable text of a tool result's content (string, text blocks, or compact JSON)."""
    if content is None:
        return None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            block["text"]
            for block in content
            if isinstance(block, dict) and isinstance(block.get("text"), str)
        ]
        if texts and len(texts) == len(content):
            return "\n".join(texts)
    if isinstance(content, dict) and isinstance(content.get("text"), str):
        return content["text"]
    return compact_json(content)


def human_bytes(count: int | None) -> str | None:
    if count is None:
        return None
    if count < 1024:
        return f"{count} B"
    if count < 1024 * 1024:
        return f"{count / 1024:.1f} KiB"
    return f"{count / (1024 * 1024):.1f} MiB"


def format_cost(cost: float | None) -> str:
    if cost is None:
        return "not reported"
    if cost == 0:
        return "$0"
    return f"${cost:.2f}" if cost >= 1 else f"${cost:.4f}"


def format_duration(ms: int | None) -> str:
    if ms is None:
        return "not reported"
    if ms < 1000:
        return f"{ms} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(round(seconds)), 60)
    return f"{minutes} min {rest:02d} s"


def short_digest(digest: str | None, width: int = 12) -> str:
    return digest[:width] if digest else "none"


def step_label(step: Any) -> str:
    """`workflow/state #index` with the attempt shown when it is a retry."""
    label = f"{step.workflow} · {step.state} #{step.index}"
    if step.attempt != 1:
        label += f" (attempt {step.attempt})"
    return label


def thousands(value: int | None) -> str:
    return "?" if value is None else f"{value:,}"
