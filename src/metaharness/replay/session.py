"""Hosting a run whose model traffic is recorded to, or replayed from, a cassette.

What belongs here: the flags' own refusals, starting the recording proxy or the replay server
before the run, handing the run a spec that points the harness at it (`--model-endpoint`, the
one way every adapter already takes a model server), turning a replay divergence into a
`warning REPLAY_DIVERGED` line of the run — and, strict, stopping the run — and stopping the
service after the stream closed.

Used by `metaharness run` (`host_with_cassette`) and by embedders (`start_run`), both through
the library API as any embedder would: the cassette's service is a `metaharness.api.RunService`,
hosted by `api.host_stdio` or `api.start_run`. Rules it keeps: the run loop never sees `--record` or `--replay` (it refuses a
spec that still carries them); a refusal here is written like any run-start refusal (one sentence on stderr,
then `stream.closed`), before anything is started; the replay opens no connection beyond
127.0.0.1; the recording keeps the credential route the caller chose (a credential proxy
forwards to the recorder, which forwards to the upstream) and the recorder never writes a key.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, BinaryIO, Callable

from metaharness import api
from metaharness.loopback.cassette import CassetteError, read_cassette
from metaharness.loopback.recorder import RecordingProxy
from metaharness.loopback.replayer import ReplayServer
from metaharness.run.spec import RunSpec

DIVERGED = "REPLAY_DIVERGED"
DIVERGED_EXIT = 1
# Where a harness's model requests go when no --model-endpoint is given (by provider for oharness).
DEFAULT_UPSTREAM = {"claude": "https://api.anthropic.com", "codex": "https://api.openai.com",
                    "anthropic": "https://api.anthropic.com", "openai": "https://api.openai.com"}


# The flags' own refusals, in the order they are checked: (the combination refused, its sentence).
REFUSALS: list[tuple[Callable[[RunSpec], bool], Callable[[RunSpec], str]]] = [
    (lambda s: bool(s.record and s.replay),
     lambda s: "CassetteConflict: a run either records (--record) or replays (--replay), not both"),
    (lambda s: bool(s.script),
     lambda s: ("CassetteConflict: --script already scripts the model; --record and --replay take the model's part "
                "from a live upstream or from a cassette instead")),
    (lambda s: bool(s.redact_patterns and not s.record),
     lambda s: "CassetteConflict: --redact masks what --record writes, and this run records nothing"),
    (lambda s: bool(s.replay and (s.model_endpoint or s.credentials != "none")),
     lambda s: ("CassetteConflict: --replay answers the model from the cassette; it takes neither --model-endpoint "
                "nor credentials other than none")),
    (lambda s: s.kind == "oharness" and _provider(s) not in DEFAULT_UPSTREAM,
     lambda s: (f"CassetteConflict: the oharness model {s.model or 'scripted:default'!r} makes no HTTP requests, "
                "so there is nothing to record or replay; give an anthropic: or openai: model")),
]


def refusal(spec: RunSpec) -> str | None:
    """The sentence refusing this combination of flags, or None."""
    return next((sentence(spec) for refused, sentence in REFUSALS if refused(spec)), None)


def _provider(spec: RunSpec) -> str:
    return (spec.model or "scripted:default").partition(":")[0]


def upstream_of(spec: RunSpec) -> str:
    if spec.model_endpoint:
        return spec.model_endpoint
    return DEFAULT_UPSTREAM[_provider(spec) if spec.kind == "oharness" else spec.kind]


def run_spec(spec: RunSpec, url: str) -> RunSpec:
    """What the run loop is given: the harness pointed at the local service, the cassette flags gone."""
    cleared = dict(record=None, replay=None, replay_strict=True, redact_patterns=[])
    if spec.replay:
        return dataclasses.replace(spec, model_endpoint=url, credentials="none", **cleared)
    # oharness reads its key from the environment it inherits; keep it when recording a live model.
    credentials = "api-key" if spec.kind == "oharness" and spec.credentials == "none" else spec.credentials
    return dataclasses.replace(spec, model_endpoint=url, credentials=credentials, **cleared)


def _service(spec: RunSpec) -> Any:
    if spec.replay:
        return ReplayServer(read_cassette(spec.replay), strict=spec.replay_strict)
    return RecordingProxy(upstream_of(spec), spec.record, redact=spec.redact_patterns)


@dataclass
class Hosting:
    """A cassette spec's service, as the library API hosts it (a `metaharness.api.RunService`):
    the loop's spec, the hook into the run, and how it ends."""

    spec: RunSpec  # what the run loop is given
    service: Any = None
    refusal: str | None = None  # a sentence: refuse the run instead of starting it
    strict: bool = True

    def attach(self, run: api.RunControl) -> None:
        if not isinstance(self.service, ReplayServer):
            return

        def diverged(message: str) -> None:
            run.warn(DIVERGED, message)
            if self.strict:
                run.stop()

        self.service.on_divergence = diverged

    def exit_code(self, code: int) -> int:
        """A replay that diverged is a verdict against the run (1), unless metaharness itself failed (2)."""
        diverged = isinstance(self.service, ReplayServer) and self.service.divergences
        return DIVERGED_EXIT if diverged and code != 2 else code

    async def close(self, stderr: Callable[[str], None]) -> None:
        if self.service is None:
            return
        await self.service.stop()
        if isinstance(self.service, ReplayServer) and self.service.unserved() and not self.service.divergences:
            left = self.service.unserved()
            stderr(f"metaharness: the replay ended with {len(left)} recorded exchanges never requested "
                   f"(the first is exchange {left[0].number})")


async def open_hosting(spec: RunSpec) -> Hosting:
    """Refuse the flags, or start the recorder or the replay server and point the run at it."""
    plain = dataclasses.replace(spec, record=None, replay=None)
    sentence = refusal(spec)
    if sentence is not None:
        return Hosting(plain, refusal=sentence)
    try:
        service = _service(spec)
        await service.start()
    except CassetteError as exc:
        return Hosting(plain, refusal=f"CassetteInvalid: {exc}")
    except OSError as exc:
        return Hosting(plain, refusal=f"CassetteUnwritable: the cassette {spec.record} cannot be written: "
                                      f"{exc.strerror or exc}")
    except re.error as exc:
        return Hosting(plain, refusal=f"RedactInvalid: a --redact pattern is not a regular expression: {exc}")
    return Hosting(run_spec(spec, service.url), service=service, strict=spec.replay_strict)


async def host_with_cassette(spec: RunSpec, *, stdin: BinaryIO | None, stdout: BinaryIO,
                             stderr: Callable[[str], None]) -> int:
    """`metaharness run … --record FILE | --replay FILE`: host the run behind the cassette's service."""
    return await api.host_stdio(spec, stdin=stdin, stdout=stdout, stderr=stderr, service=await open_hosting(spec))


async def start_run(spec: RunSpec) -> api.RunHandle:
    """`metaharness.api.start_run` for a `record`/`replay` spec: the run in this process, behind the
    cassette's service (a refused combination of flags is written as the run's start refusal)."""
    return await api.start_run(spec, service=await open_hosting(spec))


__all__ = ["DIVERGED", "Hosting", "host_with_cassette", "open_hosting", "refusal", "run_spec", "start_run",
           "upstream_of"]
