"""Seeing a run: the terminal view, the `trace-ir/1` projection and the HTML page.

Public API (small on purpose):

* `EventRenderer(console)` — `.feed(line_bytes)`, `.feed_event(envelope, event)`,
  `.summary()`; one readable line per event on a rich console (`terminal.py`).
* `project_stream(data, source)` → the `trace-ir/1` document; `dump_document(doc)` → its bytes
  (`project.py`).
* `render_page([(source, lines), …])` → the self-contained HTML page for one or two runs
  (`html.py`, aligned by `compare.py`).
* `decode_stream(data)` → decoded `StreamLine`s, raising `BadLine` naming the first
  invalid line (`stream.py`).

Modules import lazily from here so `metaharness view` does not pay for jinja2.
"""

from __future__ import annotations

from typing import Any

__all__ = ["EventRenderer", "project_stream", "dump_document", "render_page", "decode_stream", "BadLine"]

_WHERE = {
    "EventRenderer": "terminal",
    "project_stream": "project",
    "dump_document": "project",
    "render_page": "html",
    "decode_stream": "stream",
    "BadLine": "stream",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(name)
