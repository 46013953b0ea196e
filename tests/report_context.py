"""A stand-in for the run context an adapter's `start` reports through: it records the name of
every report and does nothing else (the tests that start an adapter without a run)."""

from __future__ import annotations


class ReportContext:
    def __init__(self, run_cwd: str) -> None:
        self.run_cwd = run_cwd
        self.reports: list[str] = []

    def __getattr__(self, name):
        return lambda *args, **kwargs: self.reports.append(name)
