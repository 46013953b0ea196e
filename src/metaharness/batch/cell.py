"""One cell: a full `metaharness run` in a fresh workspace and a scratch home.

What belongs here: `run_cell(job)`, the one function both backends run (the local
pool calls it directly, a Ray worker calls it inside a task). It copies the task's
workspace template into a new directory, gives the run a home of its own (HOME,
TMPDIR, the XDG dirs and the vendor scratch bases all point inside it), runs
`metaharness run` as a subprocess exactly as an embedder would (the argv comes from
`metaharness.api.spec_to_argv`), runs the task's check in the workspace, and
returns the cell's result. Files land in `job.out_dir`: `events.jsonl`,
`stderr.txt`, `check.txt`.

Rules kept:
* a time limit, a cancellation or a `Halt` (the batch's budget spent) halts the run with a
  `halt` command, so its stream still ends with `stream.closed`; only a run that ignores the halt is
  signalled (SIGTERM, then SIGKILL);
* the run dies with whoever started it (PDEATHSIG), so a killed batch or a lost
  Ray worker leaves no run behind;
* the scratch directory (workspace and home) is removed when the cell ends, unless
  the plan asks to keep the workspace, which is then moved beside the events.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import shutil
import signal
import sys
import tempfile
import time

import msgspec
from msgspec import Struct

from .plan import RUN_OPTIONS, Harness, Task
from .results import CellResult, infrastructure_failure, one_line, summarise_stream

CHECK_TAIL_LINES = 3  # lines of a failed check's output kept in its result
HALT_GRACE_S = 15.0  # how long a halted run has to close its stream before it is signalled
TERM_GRACE_S = 10.0


class Halt:
    """A running cell's stop from outside (the local pool's, once the batch's budget is spent):
    `stop(reason)` halts the cell's run as its time limit does, and its result says `reason`."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.reason: str | None = None

    def stop(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
            self.event.set()


class CellJob(Struct, kw_only=True):
    task: Task
    harness: Harness
    repeat: int
    out_dir: str
    scratch_root: str
    timeout_s: float | None = None
    keep_workspace: bool = False
    attempt: int = 1
    atif: bool = False  # write trajectory.json (ATIF) beside a complete events.jsonl
    max_cost_usd: float | None = None  # the cell's run's --max-cost-usd (its own cap, or what is left of the batch's)
    otel: str | None = None  # the cell's run's --otel (the batch's)
    trace: dict[str, str] = {}  # the cell span's W3C env carrier (TRACEPARENT…): the run's span joins the batch's tree
    prices: str | None = None  # the batch's --prices file, laid over the shipped price table in every cell
    live_spend: bool = False  # the batch reads this cell's spend while it runs (its budget is kept live)


def _options(harness: Harness) -> dict:
    return {name: getattr(harness, name) for name in RUN_OPTIONS if getattr(harness, name) is not None}


def cell_spec(task: Task, harness: Harness, cwd: str, *, prices: str | None = None):
    """The RunSpec a cell of `task` on `harness` starts with — for a workflow task, the run options
    `metaharness workflow run` is given (its budgets among them; the workflow brings the frames and
    the prompts); what `batch check` checks and what the cell runs are this one value."""
    from metaharness.protocol.spec import RunSpec

    options = {**_options(harness), **({"prices": prices} if prices is not None else {})}
    if task.workflow is not None:
        return RunSpec(kind=harness.kind, script=task.script, cwd=cwd, policy_files=list(task.policy), **options)
    return RunSpec(kind=harness.kind, prompt=task.prompt, script=task.script, frame=task.frame, cwd=cwd,
                   policy_files=list(task.policy), **options)


def run_argv(job: CellJob, workspace: str, events: str) -> list[str]:
    """The `metaharness …` argv of the cell: `run <kind> …`, or `workflow run FILE …` for a workflow task."""
    import dataclasses

    from metaharness.api import spec_to_argv

    task, harness = job.task, job.harness
    extra = {name: value for name, value in (("max_cost_usd", job.max_cost_usd), ("otel", job.otel))
             if value is not None}
    spec = dataclasses.replace(cell_spec(task, harness, workspace, prices=job.prices), **extra)
    if task.workflow is None:
        return spec_to_argv(dataclasses.replace(spec, events=events))
    # The workflow brings its own frames; its stream lands in its --out directory (see workflow_events).
    argv = ["workflow", "run", task.workflow, "--harness", harness.kind, "--out", workflow_dir(job),
            "--cwd", workspace, *spec_to_argv(dataclasses.replace(spec, cwd=None))[2:]]
    return argv + (["-p", task.prompt] if task.prompt else [])


def workflow_dir(job: CellJob) -> str:
    return os.path.join(job.out_dir, "workflow")


def live_events(out_dir: str, task: Task) -> str:
    """Where a running cell's stream grows: its events.jsonl, or its workflow run's (copied
    beside it when the cell ends)."""
    return os.path.join(out_dir, "workflow" if task.workflow is not None else "", "events.jsonl")


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _scratch_env(home: str) -> dict[str, str]:
    env = dict(os.environ)
    for name, sub in (("HOME", "home"), ("TMPDIR", "tmp"), ("XDG_CACHE_HOME", "cache"),
                      ("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"),
                      ("METAHARNESS_SCRATCH_DIR", "vendor")):
        path = os.path.join(home, sub)
        os.makedirs(path, mode=0o700, exist_ok=True)
        env[name] = path
    env["METAHARNESS_HARD_EXIT"] = "1"
    return env


async def _stop(proc: asyncio.subprocess.Process, reason: str, *, by_command: bool = True) -> None:
    """Halt the run through its command channel; signal it only if it does not close.

    A workflow run reads no commands: SIGTERM is its clean stop."""
    steps = ((None, HALT_GRACE_S), (signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, None))
    if by_command:
        line = {"format": "metaharness.command/1", "id": "batch-halt", "command": "halt", "reason": reason}
        try:
            assert proc.stdin is not None
            proc.stdin.write((json.dumps(line) + "\n").encode())
            await proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError, AssertionError):
            pass
    else:
        steps = steps[1:]
    for sig, grace in steps:
        if sig is not None and proc.returncode is None:
            try:
                proc.send_signal(sig)
            except ProcessLookupError:
                pass
        try:
            await asyncio.wait_for(proc.wait(), grace)
            return
        except asyncio.TimeoutError:
            continue


async def _run_check(task: Task, workspace: str, env: dict[str, str], out_dir: str) -> tuple[str, int | None]:
    assert task.check is not None
    with open(os.path.join(out_dir, "check.txt"), "wb") as output:
        proc = await asyncio.create_subprocess_exec(
            "sh", "-c", task.check.command, cwd=workspace, env=env, stdin=asyncio.subprocess.DEVNULL,
            stdout=output, stderr=asyncio.subprocess.STDOUT, start_new_session=True, preexec_fn=_die_with_parent)
        try:
            code = await asyncio.wait_for(proc.wait(), task.check.timeout_s)
        except asyncio.TimeoutError:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            output.write(f"\n[metaharness batch: the check exceeded {task.check.timeout_s:g} s and was killed]\n".encode())
            return "timeout", None
        except asyncio.CancelledError:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            raise
    return ("pass" if code == 0 else "fail"), code


def _check_tail(out_dir: str) -> str | None:
    """The last lines of check.txt, on one line (what a failed check said last)."""
    try:
        with open(os.path.join(out_dir, "check.txt"), "rb") as handle:
            text = handle.read()[-8192:].decode("utf-8", "replace")
    except OSError:
        return None
    lines = [line.strip() for line in text.splitlines() if line.strip()][-CHECK_TAIL_LINES:]
    return one_line(" | ".join(lines)) if lines else None


def _refusal(stderr_path: str) -> str | None:
    """Why the run refused to start: its refusal sentence (`metaharness: Name: sentence`), or a
    usage error of its command line (`Error: …`)."""
    try:
        with open(stderr_path, "rb") as handle:
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return None
    lines = text.splitlines()
    for line in lines:
        if line.startswith("metaharness: "):
            return line[len("metaharness: "):]
    return next((line for line in lines if line.startswith("Error: ")), None)


TRAJECTORY = "trajectory.json"


def _write_trajectory(events: str, path: str) -> None:
    """The cell's run as ATIF; a stream the exporter refuses gets no trajectory (the report
    shows none), and the reason goes where the cell's other diagnostics go."""
    from metaharness.export.atif import dumps, trajectory
    from metaharness.export.source import ExportError, read_streams

    try:
        text = dumps(trajectory(read_streams(events)))
    except ExportError as exc:
        with open(os.path.join(os.path.dirname(path), "stderr.txt"), "a") as handle:
            handle.write(f"metaharness: export atif: {exc}\n")
        return
    with open(path, "w") as handle:
        handle.write(text)


async def _wait(proc: asyncio.subprocess.Process, timeout_s: float | None, halt: Halt | None) -> str | None:
    """Wait for the run to end: None; or "timeout" at its time limit, "halt" when `halt` is set."""
    ended = asyncio.ensure_future(proc.wait())
    waits = [ended] + ([asyncio.ensure_future(halt.event.wait())] if halt is not None else [])
    try:
        done, _ = await asyncio.wait(waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in waits:
            if not waiting.done():
                waiting.cancel()
    if ended in done:
        return None
    return "halt" if halt is not None and halt.event.is_set() else "timeout"


async def run_cell(job: CellJob, halt: Halt | None = None) -> CellResult:
    """Run one cell to its end (or its time limit, or `halt`) and return its result."""
    os.makedirs(job.out_dir, exist_ok=True)
    for stale in ("events.jsonl", "stderr.txt", "check.txt", TRAJECTORY):
        try:
            os.unlink(os.path.join(job.out_dir, stale))
        except FileNotFoundError:
            pass
    os.makedirs(job.scratch_root, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="cell-", dir=job.scratch_root)
    workspace = os.path.join(scratch, "workspace")
    events = os.path.join(job.out_dir, "events.jsonl")
    stderr_path = os.path.join(job.out_dir, "stderr.txt")
    started = time.monotonic()
    started_at = round(time.time(), 3)
    timed_out = halted = False
    try:
        if job.task.workspace is not None:
            shutil.copytree(job.task.workspace, workspace, symlinks=True)
        else:
            os.makedirs(workspace)
        env = {**_scratch_env(os.path.join(scratch, "home")), **job.trace}
        by_command = job.task.workflow is None
        shutil.rmtree(workflow_dir(job), ignore_errors=True)
        with open(stderr_path, "wb") as stderr:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "metaharness", *run_argv(job, workspace, events),
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL, stderr=stderr,
                cwd=workspace, env=env, start_new_session=True, preexec_fn=_die_with_parent)
            try:
                stopped = await _wait(proc, job.timeout_s, halt)
                if stopped == "timeout":
                    timed_out = True
                    await _stop(proc, f"the cell's time limit of {job.timeout_s:g} s was reached", by_command=by_command)
                elif stopped == "halt":
                    halted = True
                    await _stop(proc, halt.reason or "halted by the batch", by_command=by_command)
            except asyncio.CancelledError:
                await asyncio.shield(_stop(proc, "the batch was interrupted", by_command=by_command))
                raise
            finally:
                if proc.stdin is not None:
                    proc.stdin.close()
        wall_ms = int((time.monotonic() - started) * 1000)
        if not by_command and os.path.exists(os.path.join(workflow_dir(job), "events.jsonl")):
            shutil.copyfile(os.path.join(workflow_dir(job), "events.jsonl"), events)
        try:
            with open(events, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            data = b""
        summary = summarise_stream(data)
        if job.atif and summary["stream"] == "complete":
            _write_trajectory(events, os.path.join(job.out_dir, TRAJECTORY))
        refusal = _refusal(stderr_path) if proc.returncode == 2 else None
        verdict, check_code = "none", None
        if job.task.check is not None and not (timed_out or halted) and summary["stream"] == "complete" and refusal is None:
            verdict, check_code = await _run_check(job.task, workspace, env, job.out_dir)
        check_tail = _check_tail(job.out_dir) if verdict in ("fail", "timeout") else None
        infra = infrastructure_failure(proc.returncode, summary["stream"], refusal, timed_out, summary["close_reason"],
                                       halted_for_budget=halted)
        if halted:  # the batch's budget, spent while this cell ran: said where a run's own stop is said
            summary["budget"] = summary["budget"] or halt.reason
        if job.task.check is not None:
            passed = verdict == "pass"
        else:
            passed = proc.returncode == 0 and summary["close_reason"] == "completed"
        # A run stopped at its spend cap did not finish its task, whatever its check says.
        stopped_at_budget = summary["close_reason"] == "budget"
        if job.keep_workspace:
            kept = os.path.join(job.out_dir, "workspace")
            shutil.rmtree(kept, ignore_errors=True)
            shutil.move(workspace, kept)
        return CellResult(
            task=job.task.id, harness=job.harness.name, kind=job.harness.kind, repeat=job.repeat,
            exit_code=proc.returncode, check=verdict, check_exit_code=check_code, check_tail=check_tail,
            passed=passed and infra is None and not stopped_at_budget and not halted, timed_out=timed_out, refusal=refusal, wall_ms=wall_ms, started_at=started_at,
            attempts=job.attempt, infra=infra, **summary)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def job_bytes(job: CellJob) -> bytes:
    return msgspec.json.encode(job)


def job_from_bytes(data: bytes) -> CellJob:
    return msgspec.json.decode(data, type=CellJob)
