"""`VendorAdapter` — what the adapters of vendor CLIs (Claude Code, Codex, the ACP agents) share
above the child's lifecycle: the plan's common refusals, the route to the run's model, and the
order of a start.

What belongs here, once for every vendor:
* a run that is not kept open needs a prompt, and its --cwd must exist (`plan_work`);
* the scratch base lies outside the working directory (`plan_scratch`);
* the binary is the registry's (`protocol/harnesses.py`: its launcher, package and pin), resolved
  on the child's PATH; with --strict-version a binary off its pin is refused (`plan_binary`), and
  so is a version the handshake reports off it, which is otherwise a warning (`reported`); the
  attestation says which version was seen (`pin_row`);
* the route to the model (`plan_model`, before anything is spawned; `serve_model`, at the start):
  `--script` is served by a per-run loopback that answers only the run's own key; credentials
  `loopback` put a per-run proxy holding the real key between the child and the endpoint; `none`
  needs an endpoint and gives the child a placeholder; `api-key` hands the caller's key over;
* a start goes scratch → model route → spawn and reading (`launch`, the vendor's) → handshake
  (`handshake`, the vendor's); a start refused in its handshake kills the child, writes nothing
  the child said, and is refused `VendorCapability` when the channel failed, naming the child's
  last words.

What does not: any vendor's protocol — how it is launched, what its handshake says, how its
records are read and its calls answered.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

from metaharness.adapters.base import Adapter, RunContext, StartRefusal, plan_loopback_script
from metaharness.adapters.process import (SCRATCH_ENV, Child, LaunchError, Scratch, binary_version, child_path,
                                          default_vendor_dir, inside, scratch_base)
from metaharness.adapters.process import resolve_binary as resolve_on_path
from metaharness.protocol.failures import ModelFailure, model_failure_warning
from metaharness.protocol.harnesses import REGISTRY
from metaharness.protocol.refusals import RefusalName, Sentence, WarningCode
from metaharness.protocol.spec import RunSpec
from metaharness.protocol.values import Decision, ImposedRow, UnavailableRow


@dataclass(frozen=True)
class ModelAccess:
    """How the child reaches its model, as planned: the scenario a loopback serves (`--script`), the
    key the child sees (None: the vendor's own placeholder, checked by nobody), the caller's key
    (a proxy holds it in credentials `loopback`; the child has it in `api-key`) and where it came from."""

    scenario: Any = None
    key: str | None = None
    real_key: str | None = None
    key_name: str | None = None


def plan_model(spec: RunSpec, key_names: tuple[str, ...], placeholder: str | None,
               per_run: Callable[[], str] | None = None) -> ModelAccess:
    """The route to the model for the run's credential mode, refused by name when it cannot be
    served. `key_names`: the variables the caller's key is read from, first set first (none: the
    vendor runs against a local model server only); `placeholder`: the fixed key a child sees
    under credentials `none`; `per_run`: a fresh key for one run, in the vendor's own shape."""
    from metaharness.loopback.proxy import new_placeholder

    per_run = per_run or new_placeholder
    if spec.script:
        return ModelAccess(scenario=plan_loopback_script(spec), key=per_run() if key_names else None)
    if spec.credentials != "none" and not key_names:
        raise StartRefusal(RefusalName.CredentialsUnsupported, (
            f"the {spec.kind} adapter runs against a local model server only: use --script FILE, or "
            "--credentials none with --model-endpoint URL"))
    if spec.credentials == "none":
        if not spec.model_endpoint:
            raise StartRefusal(RefusalName.NoModelEndpoint, Sentence.NO_MODEL_ENDPOINT)
        return ModelAccess(key=placeholder)
    if spec.credentials not in ("api-key", "loopback"):
        raise StartRefusal(RefusalName.CredentialsUnknown, f"unknown credential mode {spec.credentials!r}")
    name = next((name for name in key_names if os.environ.get(name)), None)
    if name is None:
        raise StartRefusal(RefusalName.NoApiKey, f"credentials {spec.credentials} needs {' or '.join(key_names)} "
                                                 "in metaharness's environment")
    real = os.environ[name]
    if spec.credentials == "api-key":
        return ModelAccess(key=real, real_key=real, key_name=name)
    return ModelAccess(key=per_run(), real_key=real, key_name=name)


def pin_row(name: str, version: str | None, pin: str, how: str) -> tuple[list[ImposedRow], list[UnavailableRow]]:
    """The attestation's row h9 for the version a vendor reported: imposed (`how`) on its pin,
    else unavailable, naming the version. As (imposed, unavailable) rows."""
    if version == pin:
        return [ImposedRow(row="h9", how=how)], []
    return [], [UnavailableRow(row="h9", why=f"{name} reports {version}, off the pin {pin}")]


class VendorAdapter(Adapter):
    """An adapter whose harness is a vendor's CLI, spawned as a child on the shared lifecycle."""

    # From the kind's registry entry (set for each adapter class that names a kind).
    binary_name: ClassVar[str]
    package: ClassVar[str]
    pin: ClassVar[str]
    # The model wire its proxy forwards, and the provider's endpoint a proxy forwards to by default.
    model_wire: ClassVar[str | None] = None
    upstream: ClassVar[str | None] = None
    # The errors of a handshake whose channel failed (refused `VendorCapability`).
    handshake_errors: ClassVar[tuple[type[BaseException], ...]] = ()
    # True: the child's output is read as lines (`Child.lines`), kept in the transcript as read;
    # False: the vendor's channel keeps the transcript itself.
    reads_lines: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        entry = REGISTRY.get(getattr(cls, "kind", ""))
        if entry is not None and entry.binary:
            cls.binary_name, cls.package, cls.pin = entry.binary, entry.package, entry.pin

    def __init__(self, spec: RunSpec) -> None:
        super().__init__(spec)
        self.ctx: RunContext | None = None
        self.binary: str | None = None  # set by the plan
        self.version: str | None = None  # what `--version` said, when it was asked
        self.child_path = ""
        self.access = ModelAccess()
        self.model_url: str | None = None  # where the child's model requests go, from the start on
        self.seam: Any = None  # the vendor's call seam, from the start on: `deliver(call_id, decision, decided_by)`

    # --- planning ---------------------------------------------------------------------------
    def plan_work(self) -> None:
        """A run that is not kept open needs its first turn's prompt; its --cwd must exist."""
        spec = self.spec
        if not spec.prompt and not spec.keep_open:
            raise StartRefusal(RefusalName.NoPrompt, f"the {self.kind} adapter needs a prompt (-p) to start its first turn")
        if spec.cwd is not None and not os.path.isdir(spec.cwd):
            raise StartRefusal(RefusalName.WorkingDirectory, f"the working directory {spec.cwd} does not exist")

    def plan_scratch(self) -> None:
        """The scratch base must not lie inside the working directory, where the agent could write
        its own home (refused `ScratchInsideCwd`)."""
        cwd, base = self.spec.work_dir(), scratch_base()
        if inside(base, cwd):
            raise StartRefusal(RefusalName.ScratchInsideCwd, f"the scratch directory {base} would be inside the working "
                                                             f"directory {cwd}; set {SCRATCH_ENV} outside it, or run "
                                                             "from another directory")

    def plan_binary(self, *, probe: bool = False, needs_node: bool = True, probe_env: dict[str, str] | None = None,
                    probe_timeout: float = 60) -> None:
        """The binary on the child's PATH (VendorMissing when absent). Under --strict-version its
        `--version` is read and a binary off its pin refused; `probe` reads it in any run (for a
        vendor whose handshake may not name its version)."""
        spec = self.spec
        self.child_path = child_path(spec.vendor_dir or default_vendor_dir())
        try:
            self.binary = resolve_on_path(self.binary_name, self.child_path, package=self.package, pin=self.pin,
                                          needs_node=needs_node)
        except LaunchError as exc:
            raise StartRefusal(RefusalName.VendorMissing, str(exc)) from None
        if probe or spec.strict_version:
            self.version = binary_version(self.binary, self.child_path, env=probe_env, timeout=probe_timeout)
        if spec.strict_version and self.version != self.pin:
            raise StartRefusal(RefusalName.VersionOffPin, f"{self.binary_name} at {self.binary} is version "
                                                          f"{self.version or 'unknown'}, not the pin {self.pin}")

    # --- start ------------------------------------------------------------------------------
    def make_scratch(self) -> Scratch:
        """The run's scratch root (LaunchError, by name, for one that cannot be made)."""
        raise NotImplementedError

    async def launch(self) -> None:
        """Spawn the child (`self.child.spawn`) pointed at `self.model_url`, and start reading it."""
        raise NotImplementedError

    async def handshake(self) -> None:
        """The vendor's capability checks, before any user line; StartRefusal by name."""

    def handshake_failed(self, exc: BaseException) -> str:
        """The sentence of a start whose handshake channel failed (`handshake_errors`)."""
        return f"{self.binary_name} did not complete its handshake: {exc or type(exc).__name__}{self.stderr_detail()}"

    def start_refused(self) -> None:
        """A refused start writes only the refusal: drop what the vendor's reading holds back."""

    async def start(self, ctx: RunContext) -> None:
        if self.binary is None:
            self.plan()
        self.ctx = ctx
        try:
            scratch = self.make_scratch()
        except LaunchError as exc:
            raise StartRefusal(RefusalName.ScratchRefused, str(exc)) from None
        self.child = Child(scratch, transcript=scratch.transcript if self.reads_lines else None)
        self.model_url = await self.serve_model()
        await self.launch()
        try:
            await self.handshake()
        except StartRefusal:
            await self._refuse_start()
            raise
        except self.handshake_errors as exc:
            await self._refuse_start()
            raise StartRefusal(RefusalName.VendorCapability, self.handshake_failed(exc)) from None

    async def _refuse_start(self) -> None:
        self.start_refused()
        assert self.child is not None
        self.child.close_stdin()
        await self.child.kill()

    async def serve_model(self) -> str | None:
        """Start the run's route to its model (a loopback or a proxy, stopped with the child); the
        URL the child is pointed at (None: the vendor's default endpoint, under `api-key`)."""
        spec, child, access = self.spec, self.child, self.access
        assert child is not None
        meter = getattr(self.ctx, "meter", None)
        if access.scenario is not None:
            return await child.loopback(access.scenario, workdir=self.spec.work_dir(), on_failure=self.model_failed,
                                        meter=meter, expect_key=access.key)
        if spec.credentials == "loopback":
            proxy = await child.proxy(spec.model_endpoint or self.upstream, access.real_key, placeholder=access.key,
                                      wire=self.model_wire, on_refused=self.proxy_refused,
                                      on_failure=self.model_failed, meter=meter)
            return proxy.url
        return spec.model_endpoint

    def deliver(self, call_id: str, decision: Decision, decided_by: str) -> None:
        """The decision, as decided, to the vendor's seam: it makes the vendor's answer."""
        if self.seam is not None:
            self.seam.deliver(call_id, decision, decided_by)

    def model_failed(self, failure: ModelFailure) -> None:
        """A failed model request the loopback or the credential proxy served this harness (their
        `on_failure`): written as a MODEL_REQUEST_FAILED warning through the run context."""
        if self.ctx is not None:
            self.ctx.emit(model_failure_warning(failure))

    def proxy_refused(self, method: str, target: str) -> None:
        """A request the credential proxy would not forward (its `on_refused`): a PROXY_REFUSED warning."""
        from metaharness.loopback.proxy import refused_message

        if self.ctx is not None:
            self.ctx.warn(WarningCode.PROXY_REFUSED, refused_message(method, target))

    def reported(self, version: str | None) -> None:
        """The version the vendor reported in its handshake: off its pin, a VERSION_OFF_PIN warning,
        or under --strict-version the start refused by name."""
        if version == self.pin:
            return
        if self.spec.strict_version:
            raise StartRefusal(RefusalName.VersionOffPin, f"{self.binary_name} reports version {version}, not the pin "
                                                          f"{self.pin} (--strict-version)")
        assert self.ctx is not None
        self.ctx.warn(WarningCode.VERSION_OFF_PIN, f"{self.binary_name} reports version {version}, outside the pin {self.pin}")

    def stderr_detail(self) -> str:
        """`; stderr: <tail>` for a refusal's sentence, or "" when the child said nothing."""
        tail = self.child.stderr_tail() if self.child is not None else ""
        return f"; stderr: {tail}" if tail else ""

    def record_sent(self, message: dict) -> None:
        """Keep a line written to the child among the run's evidence (`Child.record_sent`)."""
        if self.child is not None:
            self.child.record_sent(message)


__all__ = ["ModelAccess", "VendorAdapter", "plan_model"]
