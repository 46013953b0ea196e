"""Start-time refusals: the checks that refuse a run before anything is spawned
(docs/reference/wire.md, "Refused starts").

What belongs here: `check_start`, which runs the checks in their fixed order and
returns what a started run needs (the launch frame, the policy decider), and
`RunRefused`, the one way a start is refused. Pure: no event loop, no child; the
adapter is reached only through `Harness` (its descriptor and its own `plan()`).

Rules it keeps:
* The order is fixed and the first failure wins: configuration (cassette flags, vendor
  options, posture, the policy settings), frame resolution, observe-with-frame, the
  decision mode, the required commands (every one refused is listed, each as a
  `start/<name>` command result), then the adapter's own launch planning.
* A refusal is one sentence on stderr (`metaharness: <sentence>`), the listed command
  results, and `stream.closed` — exit code 2 (`RunCore.refuse_start`).
"""

from __future__ import annotations

from msgspec import Struct
from typing import TYPE_CHECKING, Any

from metaharness.adapters.base import StartRefusal
from metaharness.export.otlp import otel_installed
from metaharness.loopback.pricing import PricesError, load_prices
from metaharness.protocol import frame as frames
from metaharness.protocol.commands import COMMAND_NAMES
from metaharness.protocol.refusals import CommandCode, RefusalName, Sentence
from metaharness.protocol.spec import RunSpec

from .harness import Harness
from .spec import cost_unseen

if TYPE_CHECKING:  # the policy engine is imported only by a policy-mode run
    from .policy import PolicyDecider


class RunRefused(Exception):
    """A refused start: `sentence` is `Name: why` (every refusal is named), `results` the
    `start/<command>` results it writes."""

    def __init__(self, sentence: str, results: list[tuple[str, str, str]] | None = None) -> None:
        super().__init__(sentence)
        self.sentence = sentence
        self.results = results or []  # (id, code, reason)


class StartPlan(Struct):
    """What the checks resolved for a run that may start."""

    launch_frame: frames.Frame | None = None  # a sealed frame, taking effect at the first boundary
    policy: PolicyDecider | None = None  # the PolicyDecider of a policy-mode run
    prices: Any = None  # the price table (shipped, with --prices / METAHARNESS_PRICES over it)


def launch_frame_given(spec: RunSpec) -> bool:
    return spec.frame is not None or spec.library_frame is not None


def required_commands(spec: RunSpec) -> list[str]:
    """The commands this run's configuration needs, in canonical order (then any unknown, sorted).
    `replace` is not a command: it is checked against the descriptor's `replace` on its own."""
    required = {"interrupt", "halt"}
    if spec.decisions in ("ask", "observe", "policy") or launch_frame_given(spec):
        required.add("tool.decide")
    required.update(c for c in spec.required_commands if c != "replace")
    return [c for c in COMMAND_NAMES if c in required] + sorted(c for c in required if c not in COMMAND_NAMES)


def check_start(spec: RunSpec, harness: Harness, run_cwd: str, *, priced_at_endpoint: bool = False) -> StartPlan:
    """Run every start check in order; raise RunRefused at the first that fails. `priced_at_endpoint`:
    a service the harness's model endpoint points at prices the traffic (a recording)."""
    plan = StartPlan()
    # step 2: configuration
    if spec.record or spec.replay:
        raise RunRefused(f"{RefusalName.CassetteUnhosted}: --record and --replay are served by the layer that hosts a run "
                         "(metaharness run, or metaharness.api's start_run and host_stdio), and this run was started "
                         "without it")
    if (sentence := harness.option_refusal()) is not None:
        raise RunRefused(f"{RefusalName.OptionForeign}: {sentence}")
    if spec.otel and not otel_installed():  # found, not imported
        raise RunRefused(f"{RefusalName.OtelUnavailable}: {Sentence.OTEL_MISSING}")
    if spec.posture is not None and not harness.accepts_posture(spec.posture):
        raise RunRefused(
            f"{RefusalName.PostureUnknown}: the {spec.kind} adapter does not accept the posture {spec.posture!r} "
            f"(it accepts {', '.join(harness.adapter.postures)})"
        )
    if spec.max_cost_usd is not None and not priced_at_endpoint and (sentence := cost_unseen(spec)) is not None:
        raise RunRefused(f"{RefusalName.CostNotSeen}: {sentence}")
    try:
        plan.prices = load_prices(spec.prices)
    except PricesError as exc:
        raise RunRefused(f"{RefusalName.PricesInvalid}: {exc}") from None
    if spec.decisions == "policy":
        plan.policy = load_policy(spec, run_cwd)
    # step 3: frame resolution
    plan.launch_frame = resolve_launch_frame(spec)
    # step 4
    if plan.launch_frame is not None and spec.decisions == "observe":
        raise RunRefused(f"{RefusalName.ObserveWithFrame}: observe mode records every call and cannot enforce a frame")
    # step 5
    if not harness.delivers_mode(spec.decisions):
        raise RunRefused(f"{RefusalName.DecisionModeUnavailable}: the {spec.kind} adapter does not deliver decision mode "
                         f"{spec.decisions!r}")
    # step 6: required commands
    results = []
    for name in required_commands(spec):
        if (code := harness.command_refusal(name)) is not None:
            results.append((f"start/{name}", code,
                            f"this run's configuration needs {name} and the {spec.kind} adapter refuses it"))
    if "replace" in spec.required_commands and not harness.delivers_replace:
        results.append(("start/replace", CommandCode.UNSUPPORTED_CONTROL,
                        f"this run's configuration needs replace and the {spec.kind} adapter cannot deliver it"))
    if results:
        names = ", ".join(r[0].removeprefix("start/") for r in results)
        hint = harness.adapter.replace_hint if results[-1][0] == "start/replace" else None
        raise RunRefused(f"{RefusalName.CommandUnavailable}: the {spec.kind} adapter cannot honour what this run requires: {names}"
                         + (f"; {hint}" if hint else ""), results)
    # step 7: the adapter's own launch planning
    try:
        harness.adapter.plan()
    except StartRefusal as exc:
        raise RunRefused(f"{exc.name}: {exc.sentence}") from None
    return plan


def resolve_launch_frame(spec: RunSpec) -> frames.Frame | None:
    """The frame given at launch (a file, or a library value), sealed; None when none was given."""
    if spec.frame is not None and spec.library_frame is not None:
        raise RunRefused(f"{RefusalName.FrameConflict}: a library frame and --frame were both given; give one")
    if spec.frame is not None:
        try:
            return frames.load_frame(spec.frame)
        except frames.FrameRefusal as exc:
            raise RunRefused(f"{exc.name}: {exc.sentence(spec.frame)}") from None
    launch_frame = spec.library_frame
    if launch_frame is not None and not isinstance(launch_frame, frames.Frame):
        try:
            return frames.seal(launch_frame)
        except frames.FrameRefusal as exc:
            raise RunRefused(f"{RefusalName.FrameInvalid}: the library frame is not a sealed frame: {exc.detail}") from None
    return launch_frame


def load_policy(spec: RunSpec, run_cwd: str) -> PolicyDecider:
    """The policy decider, reading the settings once; a bad setting refuses the run by name."""
    try:
        from metaharness.run.policy import PolicyDecider
    except ImportError:
        raise RunRefused(f"{RefusalName.PolicyUnavailable}: decision mode 'policy' is not available in this build") from None
    try:
        return PolicyDecider(spec, run_cwd)
    except ValueError as exc:
        raise RunRefused(f"{RefusalName.PolicyInvalid}: {exc}") from None
