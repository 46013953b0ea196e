"""Hosting a run whose model traffic is recorded to, or replayed from, a cassette.

What belongs here: the cassette flags' own refusals, starting the recording proxy (in front of the
live upstream, or of a scripted loopback for `--script`) or the replay server before the run,
handing the run a spec that points the harness at it (`--model-endpoint`, the one way every
adapter already takes a model server), the recording line (harness, model, working directory and
a manifest of its starting contents) and its checks at replay, turning a replay divergence into a
`warning REPLAY_DIVERGED` line of the run — and, strict, stopping the run — giving the recorder
the run's meter when nothing closer to the harness prices its traffic (`--max-cost-usd` is then
kept on a recording; a replay spends nothing and refuses it), and stopping the services after the
stream closed.

Used by the library API (`metaharness.api.start_run` and `host_stdio` host a `record`/`replay`
spec through `open_hosting`), so `metaharness run`, embedders and everything built on the API
record and replay the same way. Rules it keeps: the run loop never sees `record` or `replay` (it
refuses a spec that still carries them); a refusal here is written like any run-start refusal, before
anything is started or written (no cassette is created for a refused recording); the replay opens
no connection beyond 127.0.0.1; the recording keeps the credential route the caller chose (a
credential proxy forwards to the recorder, which forwards to the upstream) and the recorder never
writes a key; a scripted recording is the scripted loopback's traffic, so it needs no key either.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from metaharness.loopback.cassette import (CassetteError, Recording, first_workspace_difference, read_cassette,
                                           read_recording, workspace_manifest)
from metaharness.loopback.recorder import RecordingProxy
from metaharness.loopback.replayer import ReplayServer
from metaharness.protocol.refusals import RefusalName, WarningCode
from metaharness.protocol.spec import RunSpec
from metaharness.run.spec import cost_unseen

DIVERGED = WarningCode.REPLAY_DIVERGED
DIVERGED_EXIT = 1
# Where a harness's model requests go when no --model-endpoint is given (by provider for oharness).
DEFAULT_UPSTREAM = {"claude": "https://api.anthropic.com", "codex": "https://api.openai.com",
                    "anthropic": "https://api.anthropic.com", "openai": "https://api.openai.com"}
# The model oharness is given when a scripted run is recorded: its anthropic provider speaks to the
# scripted loopback, whose traffic is what the cassette holds (a `scripted:` model makes no requests).
SCRIPTED_OHARNESS_MODEL = "anthropic:claude-scripted"


def _provider(spec: RunSpec) -> str:
    return (spec.model or "scripted:default").partition(":")[0]


# The flags' own refusals, in the order they are checked: (the combination refused, its sentence).
# `spec` here is the spec as given, with the recording's model already filled in for a replay.
REFUSALS: list[tuple[Callable[[RunSpec], bool], Callable[[RunSpec], str]]] = [
    (lambda s: bool(s.record and s.replay),
     lambda s: f"{RefusalName.CassetteConflict}: a run either records (--record) or replays (--replay), not both"),
    (lambda s: bool(s.replay and s.script),
     lambda s: f"{RefusalName.CassetteConflict}: --replay answers the model from the cassette, and --script would answer it too"),
    (lambda s: bool(s.record and s.script and (s.model_endpoint or s.credentials != "none")),
     lambda s: (f"{RefusalName.CassetteConflict}: --script serves the model from a local loopback, which is what --record "
                "records; it takes neither --model-endpoint nor credentials other than none")),
    (lambda s: bool(s.redact_patterns and not s.record),
     lambda s: f"{RefusalName.CassetteConflict}: --redact masks what --record writes, and this run records nothing"),
    (lambda s: bool(s.replay and (s.model_endpoint or s.credentials != "none")),
     lambda s: (f"{RefusalName.CassetteConflict}: --replay answers the model from the cassette; it takes neither --model-endpoint "
                "nor credentials other than none")),
    (lambda s: bool(s.replay and s.max_cost_usd is not None),
     lambda s: f"{RefusalName.CostNotSeen}: {cost_unseen(s)}"),
    (lambda s: s.kind == "oharness" and not s.script and _provider(s) not in DEFAULT_UPSTREAM,
     lambda s: (f"{RefusalName.CassetteConflict}: the oharness model {s.model or 'scripted:default'!r} makes no HTTP requests, "
                "so there is nothing to record or replay; give an anthropic: or openai: model, or --script "
                "(its scripted loopback is recorded)")),
]


def refusal(spec: RunSpec) -> str | None:
    """The sentence refusing this combination of flags, or None."""
    return next((sentence(spec) for refused, sentence in REFUSALS if refused(spec)), None)


def upstream_of(spec: RunSpec) -> str:
    if spec.model_endpoint:
        return spec.model_endpoint
    return DEFAULT_UPSTREAM[_provider(spec) if spec.kind == "oharness" else spec.kind]


def run_cwd(spec: RunSpec) -> str:
    return spec.work_dir()


def recorded_model(spec: RunSpec) -> str | None:
    """The model the run is given while recording (oharness scripted: its anthropic provider)."""
    if spec.kind == "oharness" and spec.script:
        return SCRIPTED_OHARNESS_MODEL
    return spec.model


def run_spec(spec: RunSpec, url: str) -> RunSpec:
    """What the run loop is given: the harness pointed at the local service, the cassette flags gone."""
    cleared = dict(record=None, replay=None, replay_strict=True, redact_patterns=[])
    if spec.replay or spec.script:  # the replay server, or the recorder in front of the scripted loopback
        return dataclasses.replace(spec, model_endpoint=url, credentials="none", script=None,
                                   model=recorded_model(spec), **cleared)
    # oharness reads its key from the environment it inherits; keep it when recording a live model.
    credentials = "api-key" if spec.kind == "oharness" and spec.credentials == "none" else spec.credentials
    return dataclasses.replace(spec, model_endpoint=url, credentials=credentials, **cleared)


def replay_refusal(spec: RunSpec, recording: Recording) -> str | None:
    """A replay the recording says would diverge: another harness, another directory, other contents."""
    if spec.kind != recording.harness:
        return (f"{RefusalName.CassetteConflict}: the cassette {spec.replay} was recorded on {recording.harness}, "
                f"and this run is {spec.kind}")
    cwd = run_cwd(spec)
    if cwd != recording.cwd:
        return (f"{RefusalName.WorkspaceMoved}: the cassette {spec.replay} was recorded in {recording.cwd}, and this replay "
                f"would work in {cwd}; the harness's requests carry the working directory's path, so replay "
                f"there (leave out --cwd)")
    if not os.path.isdir(cwd):
        return f"{RefusalName.WorkspaceDiffers}: the recording's working directory {cwd} does not exist"
    difference = first_workspace_difference(recording.workspace, workspace_manifest(cwd))
    if difference is not None:
        path, how = difference
        return (f"{RefusalName.WorkspaceDiffers}: the replay's working directory {cwd} is not the workspace the recording "
                f"started from: {path} {how}; restore it before replaying")
    return None


@dataclass
class Hosting:
    """A cassette spec's services, as the library API hosts them (a `metaharness.api.RunService`):
    the loop's spec, the hook into the run, and how it ends."""

    spec: RunSpec  # what the run loop is given
    service: Any = None
    refusal: str | None = None  # a sentence: refuse the run instead of starting it
    strict: bool = True
    behind: list[Any] = field(default_factory=list)  # services the recorder forwards to (a scripted loopback)

    def attach(self, run: Any) -> None:
        """`run` is the `metaharness.api.RunControl` of the run served."""
        if isinstance(self.service, RecordingProxy) and cost_unseen(self.spec) is not None:
            # Nothing closer to the harness prices its traffic (oharness in-process, a credential
            # proxy): the recorder does, on the run's meter.
            self.service.meter = run.price_here()
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
        for service in [self.service, *self.behind]:
            if service is not None:
                await service.stop()
        if isinstance(self.service, ReplayServer) and self.service.unserved() and not self.service.divergences:
            left = self.service.unserved()
            stderr(f"metaharness: the replay ended with {len(left)} recorded exchanges never requested "
                   f"(the first is exchange {left[0].number})")


def from_recording(spec: RunSpec) -> RunSpec:
    """A replay's spec with what its recording says filled in where the caller left it out (the
    model, the working directory); as given when the cassette has no recording or cannot be read."""
    try:
        recording = read_recording(spec.replay) if spec.replay else None
    except CassetteError:
        return spec  # refused by name when the cassette is read
    if recording is None:
        return spec
    return dataclasses.replace(spec, model=spec.model or recording.model, cwd=spec.cwd or recording.cwd)


def _replayed(spec: RunSpec) -> ReplayServer:
    """The replay server for a spec already filled by `from_recording`; raises CassetteError, or
    ValueError with the refusal's sentence when the recording says the replay would diverge."""
    exchanges = read_cassette(spec.replay)
    recording = read_recording(spec.replay)
    if recording is not None and (sentence := replay_refusal(spec, recording)) is not None:
        raise ValueError(sentence)
    return ReplayServer(exchanges, strict=spec.replay_strict)


async def _recorder(spec: RunSpec) -> tuple[RecordingProxy, list[Any]]:
    cwd = run_cwd(spec)
    recording = Recording(harness=spec.kind, model=recorded_model(spec), cwd=cwd,
                          workspace=workspace_manifest(cwd) if os.path.isdir(cwd) else {})
    behind: list[Any] = []
    upstream = None
    if spec.script:
        from metaharness.loopback.server import LoopbackServer
        from metaharness.protocol.scenario import load_scenario

        loopback = LoopbackServer(load_scenario(spec.script), workdir=cwd, stderr=None)
        upstream = await loopback.start()
        behind.append(loopback)
    try:
        proxy = RecordingProxy(upstream or upstream_of(spec), spec.record, redact=spec.redact_patterns,
                               recording=recording)
        await proxy.start()
    except BaseException:
        for service in behind:
            await service.stop()
        raise
    return proxy, behind


async def open_hosting(spec: RunSpec) -> Hosting:
    """Refuse the flags, or start the recorder or the replay server and point the run at it."""
    from metaharness.protocol.scenario import ScenarioError

    if spec.replay and not spec.record:
        spec = from_recording(spec)
    plain = dataclasses.replace(spec, record=None, replay=None)
    sentence = refusal(spec)
    if sentence is not None:
        return Hosting(plain, refusal=sentence)
    behind: list[Any] = []
    try:
        if spec.replay:
            service: Any = _replayed(spec)
            await service.start()
        else:
            re.compile("|".join(f"(?:{p})" for p in spec.redact_patterns))  # refused before the file is made
            service, behind = await _recorder(spec)
    except CassetteError as exc:
        return Hosting(plain, refusal=f"{RefusalName.CassetteInvalid}: {exc}")
    except ScenarioError as exc:
        return Hosting(plain, refusal=f"{RefusalName.ScenarioInvalid}: {exc}")
    except re.error as exc:
        return Hosting(plain, refusal=f"{RefusalName.RedactInvalid}: a --redact pattern is not a regular expression: {exc}")
    except ValueError as exc:
        return Hosting(plain, refusal=str(exc))
    except OSError as exc:
        return Hosting(plain, refusal=f"{RefusalName.CassetteUnwritable}: the cassette {spec.record} cannot be written: "
                                      f"{exc.strerror or exc}")
    return Hosting(run_spec(spec, service.url), service=service, strict=spec.replay_strict, behind=behind)


__all__ = ["DIVERGED", "Hosting", "from_recording", "open_hosting", "refusal", "replay_refusal", "run_spec", "upstream_of"]
