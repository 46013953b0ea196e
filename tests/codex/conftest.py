"""Fixtures for the codex adapter tests (helpers live in codex_helpers.py)."""

from codex_helpers import scratch_home, stub_vendor  # noqa: F401  (fixtures)
