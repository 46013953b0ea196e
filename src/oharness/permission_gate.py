"""The engine-backed gate: every tool call of a session goes through `metaharness.permissions.decide`.

What belongs here: turning a loop `ToolCall` into the engine's `Call` and handing the engine
metaharness's decision as stdio read it (the one `ExternalDecision`, unchanged; the engine's own
rules say how a replacement is decided — docs/reference/permissions.md), settling the verdict,
asking a person through an injected `Asker` when someone can answer, "always allow", the
decision trail, `set_mode`, and the two tool hooks the engine expects: `hidden` for glob/grep
and `admit_url` for fetch redirects.
`engine_gate_factory` builds it for `open_session` and refuses a start the settings forbid.

Rules it keeps:
* the engine stays pure; this module owns the side effects (prompt, settings write, trail);
* deny rules, the gate, Plan and forced asks are never skipped by an external allow: only the
  embedder's allow answers an ask, and only once; a call nobody can answer is refused
  fail-closed (`unavailable`) with a reason the model can read;
* settings are read once, at start; the only in-session rule change is "always allow";
* recording never delays or fails a call (TrailWriter is fire-and-forget).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Literal

from metaharness.permissions import (
    MODES, Context, ExternalDecision, PersistError, Settings, TrailWriter, Verdict, always_allow, decide,
    load_settings, oharness_call, reason_text, settle,
)
from metaharness.permissions.modes import BYPASS_NOTICE
from metaharness.permissions.reasons import ask_words

from .gate import GateResult
from .model import ToolCall

TRAIL_FILE = "decisions.jsonl"
SCOPES = ("local", "project", "user")


# -- asking a person -------------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    """What a person is shown for one ask."""

    tool: str
    principal: str
    reason: str  # the verdict's reason code
    rule: str | None
    scope: str | None
    file: str | None
    mode: str
    needs: list[str]  # each subject that needs approval, with its reason in words
    remember: dict[str, tuple[str, str]]  # scope -> (rule, file) "always allow" would write
    remember_why_not: str | None
    agent: str | None = None


@dataclass(frozen=True)
class Answer:
    choice: Literal["once", "always", "deny"]
    scope: str | None = None  # for "always": local | project | user
    note: str | None = None  # for "deny": passed to the model


Asker = Callable[[Question], Answer]
Notify = Callable[[str], None]


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def subject_words(subject: Any) -> str:
    """One subject's reason for asking, in words: the catalogue's ask words (permissions/reasons.py)."""
    return ask_words(subject)


# -- the gate --------------------------------------------------------------------------------


@dataclass
class _Approved:
    host: str | None = None  # the host of the last allowed webfetch (its first hop is already decided)


class EngineGate:
    """The `Gate` of a session run by the permission engine."""

    def __init__(self, settings: Settings, ctx: Context, trail: TrailWriter, *, asker: Asker | None = None,
                 notify: Notify = _stderr) -> None:
        self.settings = settings
        self.ctx = ctx
        self.trail = trail
        self.asker = asker
        self.notify = notify
        self.ctx.can_ask = asker is not None
        self._hints: dict[str, bool] = {}
        self._approved = _Approved()
        self._decided: dict[str, Any] = {}  # lexical -> CanonicalPath of the last allowed call

    # -- mode --------------------------------------------------------------------------------

    @property
    def mode(self) -> str:
        return self.ctx.mode

    def set_mode(self, mode: Any) -> None:
        """Change the mode from the next call on (what metaharness's `permission.set` does)."""
        if mode not in MODES:
            raise ValueError(f"unknown permission mode {mode!r} (one of {', '.join(MODES)})")
        if mode == "bypass" and self.settings.disable_bypass_file:
            raise ValueError(f"bypass mode is disabled by disableBypassMode in {self.settings.disable_bypass_file}")
        entering_bypass = mode == "bypass" and self.ctx.mode != "bypass"
        self.ctx.mode = mode
        self.ctx._cache.clear()
        if entering_bypass:
            self.notify(BYPASS_NOTICE)

    @property
    def can_ask(self) -> bool:
        return self.asker is not None

    # -- hooks for the tools -----------------------------------------------------------------

    def attach(self, tool_ctx: Any, tools: list[Any]) -> None:
        """Give the tools the engine's view: glob/grep skip unreadable paths; fetch vets redirects."""
        self._hints = {tool.name: bool(getattr(tool, "read_only_hint", False)) for tool in tools}
        tool_ctx.hidden = self.hidden
        tool_ctx.admit_url = self.admit_url
        tool_ctx.decided_path = self._decided.get

    def hidden(self, path: str) -> bool:
        """A path a listing or search must skip: one a Read deny or ask rule (or a secret path)
        keeps from being read without a question."""
        try:
            verdict = decide(oharness_call("read", {"path": path}, self.ctx.cwd), self.ctx)
        except Exception:  # noqa: BLE001 - a path the engine cannot read is not listed
            return True
        return verdict.behavior != "allow"

    async def admit_url(self, url: str) -> str | None:
        """None when the fetch may go to `url`; otherwise why not."""
        verdict = decide(oharness_call("webfetch", {"url": url}, self.ctx.cwd), self.ctx)
        host = next((subject.label for subject in verdict.subjects if subject.kind == "host"), None)
        if verdict.behavior == "allow" or (host is not None and host == self._approved.host and verdict.behavior == "ask"):
            return None
        if verdict.behavior == "deny":
            return reason_text(verdict)
        return f"`{verdict.principal}` would need approval ({verdict.reason})"

    # -- the check ---------------------------------------------------------------------------

    async def check(self, call: ToolCall, external: ExternalDecision | None) -> GateResult:
        try:
            engine_call = oharness_call(call.name, call.input if isinstance(call.input, dict) else {},
                                        call.cwd or self.ctx.cwd, read_only_hint=self._hints.get(call.name, False))
            verdict = decide(engine_call, self.ctx, external)
        except Exception as exc:  # noqa: BLE001 - a seam that fails must fail closed
            return GateResult(False, f"the permission engine could not decide this call ({type(exc).__name__}: "
                                     f"{exc}); refused fail-closed", call.input)
        run_input = external.replacement if external is not None and external.decision == "replace" else call.input
        settlement = settle(verdict, can_ask=self.can_ask, external=external)
        decided_by = external.decided_by if external is not None else None
        if settlement is not None:
            self.trail.record(verdict, settlement=settlement, call_id=call.id, agent=call.agent, decided_by=decided_by)
            if settlement.outcome == "allowed":
                self._note_allowed(verdict)
                return GateResult(True, None, run_input)
            return GateResult(False, self._refusal(verdict, settlement.outcome, settlement.by, external), run_input)
        return self._ask(call, verdict, run_input, decided_by)

    def _ask(self, call: ToolCall, verdict: Verdict, run_input: Any, decided_by: str | None) -> GateResult:
        assert self.asker is not None
        decision_id = self.trail.record(verdict, call_id=call.id, agent=call.agent, decided_by=decided_by)
        try:
            answer = self.asker(self._question(verdict, call.agent))
        except KeyboardInterrupt:
            answer = Answer("deny", note="interrupted")
        except EOFError:
            answer = Answer("deny", note="interrupted")
        if answer.choice == "deny":
            self.trail.answer(decision_id, "denied", "user", note=answer.note)
            reason = f"`{verdict.principal}` was denied by the user"
            if answer.note:
                reason += f": {answer.note}"
            return GateResult(False, reason, run_input)
        remembered = None
        if answer.choice == "always" and verdict.remember and answer.scope in verdict.remember:
            try:
                remembered = always_allow(self.ctx, verdict, answer.scope)
                self.ctx._cache.clear()
            except (PersistError, ValueError) as exc:
                self.notify(f"always allow was not written ({exc}); allowed once")
        self.trail.answer(decision_id, "allowed", "user", remembered=remembered)
        self._note_allowed(verdict)
        return GateResult(True, None, run_input)

    def _question(self, verdict: Verdict, agent: str | None) -> Question:
        from metaharness.permissions.settings import scope_files

        files = scope_files(self.ctx.project_root, self.ctx.home)
        remember = {scope: (verdict.remember[scope], files[scope]) for scope in SCOPES
                    if verdict.remember and scope in verdict.remember}
        needs = [subject_words(subject) for subject in verdict.subjects if subject.result == "ask"]
        return Question(verdict.tool, verdict.principal, verdict.reason, verdict.rule, verdict.scope, verdict.file,
                        verdict.mode, needs or [f"`{verdict.principal}` ({verdict.reason})"], remember,
                        verdict.remember_why_not, agent)

    def _note_allowed(self, verdict: Verdict) -> None:
        from metaharness.permissions.paths import CanonicalPath

        # Calls run one at a time: the paths of the call about to run are the ones decided last.
        self._decided.clear()
        for subject in verdict.subjects:
            if subject.kind in ("read", "write") and subject.path and subject.real:
                self._decided[subject.path] = CanonicalPath(subject.path, subject.real)
        host = next((subject.label for subject in verdict.subjects if subject.kind == "host"), None)
        if host is not None:
            self._approved.host = host

    def _refusal(self, verdict: Verdict, outcome: str, by: str, external: ExternalDecision | None) -> str:
        if outcome == "unavailable":
            return reason_text(verdict, unavailable=True)
        if verdict.reason == "hook-deny" or by == "embedder":
            return (external.reason if external is not None and external.reason else "denied by the decider")
        return reason_text(verdict)

    def close(self) -> None:
        self.trail.close()


# -- building it -----------------------------------------------------------------------------


def standalone_session_dir(home: str | None = None) -> str:
    """The session directory of a standalone `oharness -p` run: `~/.oharness/sessions/<id>`."""
    import datetime
    import secrets

    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    base = os.path.join(home or os.path.expanduser("~"), ".oharness", "sessions")
    return os.path.join(base, f"{stamp}-{secrets.token_hex(4)}")


def engine_gate_factory(*, asker: Asker | None = None, notify: Notify = _stderr, home: str | None = None):
    """A `GateFactory` for `open_session`. `asker` is None for a headless run (nobody to ask)."""

    def factory(*, mode: str | None, cwd: str, session_dir: str | None, decision_trail: bool) -> EngineGate:
        settings = load_settings(cwd, home=home, cli_mode=mode, no_trail=not decision_trail)
        if settings.errors:
            first = settings.errors[0]
            more = f" (and {len(settings.errors) - 1} more)" if len(settings.errors) > 1 else ""
            raise ValueError(f"the permission settings cannot be loaded: {first}{more}")
        if settings.bypass_refused:
            raise ValueError(settings.bypass_refused)
        for warning in settings.warnings:
            notify(f"permissions: {warning}")
        ctx = settings.context(can_ask=asker is not None)
        trail_path = os.path.join(os.path.abspath(session_dir), TRAIL_FILE) if session_dir else None
        trail = TrailWriter(trail_path, enabled=settings.trail_enabled)
        gate = EngineGate(settings, ctx, trail, asker=asker, notify=notify)
        if ctx.mode == "bypass":
            notify(BYPASS_NOTICE)
        return gate

    return factory


__all__ = ["Answer", "Asker", "EngineGate", "Question", "engine_gate_factory", "standalone_session_dir",
           "subject_words", "TRAIL_FILE"]
