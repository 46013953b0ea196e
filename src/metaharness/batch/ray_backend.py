"""The Ray backend: the same cells, each run as a Ray task on a cluster.

What belongs here: packing the plan's files into a bundle that Ray ships to the
workers (`runtime_env` working_dir), the remote function (which runs the very same
`cell.run_cell` in a scratch directory on the worker and returns the cell's files as
bytes), writing those files into DIR on the driver, and treating a lost worker
node as a reason to run the cell again.

Rules kept:
* `ray` is an optional extra; without it the backend is refused by name with the
  install command, before anything runs;
* the batch's --prices file travels in the bundle beside the plan's files;
* paths inside a job are rewritten to the bundle's relative paths, so a worker
  never reads the driver's filesystem; it resolves them against its working_dir;
* without `--ray-address` the batch starts a Ray of its own (`ray.init(address="local")`): it never
  attaches to whatever a `RAY_ADDRESS` or a stale `ray_current_cluster` file of an earlier `ray
  start` names; `--ray-address` is the one way to join an existing cluster, and one that does not
  answer within CONNECT_TIMEOUT_S is refused by name (`RayUnreachable`) instead of retried for
  minutes; `where` says which cluster the batch runs on;
* a batch budget is kept live as on the local backend: a `live_spend` cell's worker reads its
  stream as it grows (`results.LiveSpend`, priced with the batch's table) and every LIVE_POLL_S
  reports the figure to a small actor of the batch (`SpendBoard`, no CPU of its own), whose answer
  is the halt the driver asked for, if any; the driver reads the figures from it and halts through
  it. The actor is made with the first such cell: a batch without a budget has none;
* Ray's own task retries are off (max_retries=0): a cell that died with its node
  is run again here, so the retry is counted and recorded in the cell's result
  (up to NODE_LOSS_RETRIES times, apart from `--retries`, which is the plan's).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import sys
import tempfile
import uuid
from typing import Any

import msgspec

from metaharness.protocol.refusals import RefusalName

from .cell import CellJob, Halt, job_bytes, job_from_bytes, live_events, run_cell
from .plan import Plan, PlanError, plan_files
from .results import LIVE_POLL_S, CellResult, LiveSpend

INSTALL = "pip install 'metaharness[ray]'"
NODE_LOSS_RETRIES = 3
CONNECT_TIMEOUT_S = 5.0  # how long an existing cluster's address has to accept a connection
JOIN_RETRIES = 5  # how many times (about a second apart) the driver asks that address's GCS
_OUT_FILES = ("events.jsonl", "stderr.txt", "check.txt", "trajectory.json")


class RayUnavailable(PlanError):
    def __init__(self) -> None:
        super().__init__(f"{RefusalName.RayUnavailable}: --backend ray needs the ray extra, which is not installed; "
                         f"install it with `{INSTALL}`")


class RayUnreachable(PlanError):
    def __init__(self, address: str, why: str) -> None:
        super().__init__(f"{RefusalName.RayUnreachable}: --ray-address {address} {why}; check the address "
                         "(the head node's GCS port, 6379 by default), or leave --ray-address out and the batch "
                         "starts a Ray of its own")


def _host_port(address: str) -> tuple[str, int] | None:
    """The host and port an address names (`host:port`, `ray://host:port`), or None when it names
    none (`auto`: Ray's own discovery, which the user asked for by name)."""
    rest = address.split("://", 1)[-1].rstrip("/")
    host, colon, port = rest.rpartition(":")
    if not colon or not port.isdigit():
        return None
    return host.strip("[]") or "127.0.0.1", int(port)


_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # + empty SETTINGS
_SETTINGS = 0x04


def check_reachable(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Refuse (RayUnreachable) an address that does not answer as a Ray cluster within `timeout_s`.

    A Ray head's GCS (and a Ray Client server) is a gRPC server: it answers the HTTP/2 preface with
    a SETTINGS frame at once. A dead port, a host that drops packets and a port that accepts and
    says nothing (where Ray's own connect would wait without end) all fail this in seconds."""
    target = _host_port(address)
    if target is None or os.environ.get("RAY_USE_TLS", "0") not in ("", "0"):  # TLS: Ray's own connect decides
        return
    deadline_words = f"did not answer as a Ray cluster within {timeout_s:g} s"
    try:
        with socket.create_connection(target, timeout=timeout_s) as conn:
            conn.settimeout(timeout_s)
            conn.sendall(_HTTP2_PREFACE)
            head = conn.recv(9)
    except socket.timeout:
        raise RayUnreachable(address, deadline_words) from None
    except OSError as exc:
        raise RayUnreachable(address, f"cannot be reached ({exc.strerror or exc})") from None
    if len(head) < 4 or head[3] != _SETTINGS:
        raise RayUnreachable(address, "accepts connections but does not speak Ray's protocol (gRPC)")


@contextlib.contextmanager
def _bounded_join(joining: bool):
    """While joining an existing cluster, the driver asks its GCS JOIN_RETRIES times (about a second
    each) instead of Ray's default twenty: an address that accepts connections and is no GCS (a
    proxy, another service) is refused in seconds. Ray reads the count from its constants module
    at each connect (the `RAY_NUM_REDIS_GET_RETRIES` knob); it is put back afterwards."""
    constants = sys.modules.get("ray._private.ray_constants")
    saved = getattr(constants, "NUM_REDIS_GET_RETRIES", None)
    if joining and isinstance(saved, int) and "RAY_NUM_REDIS_GET_RETRIES" not in os.environ:
        constants.NUM_REDIS_GET_RETRIES = min(saved, JOIN_RETRIES)
        try:
            yield
        finally:
            constants.NUM_REDIS_GET_RETRIES = saved
    else:
        yield


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayUnavailable() from None
    return ray


def _bundle(plan: Plan, files: list[str]) -> tuple[str, dict[str, str]]:
    """Copy every file the plan names (and `files`, the batch's own: its --prices) into a fresh
    directory; map each original path to its bundle path."""
    root = tempfile.mkdtemp(prefix="metaharness-batch-bundle-")
    mapping: dict[str, str] = {}
    for index, path in enumerate([*plan_files(plan), *(f for f in files if f not in plan_files(plan))]):
        relative = os.path.join("files", f"{index}-{os.path.basename(path.rstrip(os.sep)) or 'root'}")
        target = os.path.join(root, relative)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.isdir(path):
            shutil.copytree(path, target, symlinks=True)
        else:
            shutil.copy2(path, target)
        mapping[path] = relative
    return root, mapping


def _worker_scratch() -> str:
    # Not under /tmp: a vendor sandbox lets the agent's commands write anywhere there.
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "metaharness", "batch-cells")


class SpendBoard:
    """The batch's actor (a live budget only): what each running cell's worker last reported it had
    spent, and the halt the driver asked of it — by the token of one submission of a cell."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self.halts: dict[str, str] = {}

    def report(self, token: str, spent: float) -> str | None:
        self.spent[token] = spent
        return self.halts.get(token)

    def halt(self, token: str, reason: str) -> None:
        self.halts.setdefault(token, reason)

    def read(self, tokens: list[str]) -> dict[str, float]:
        return {token: self.spent[token] for token in tokens if token in self.spent}

    def forget(self, token: str) -> None:
        self.spent.pop(token, None)
        self.halts.pop(token, None)


async def _run_reporting(job: CellJob, board: Any, token: str) -> Any:
    """Run the cell, reporting its spend to `board` every LIVE_POLL_S and halting it when the answer
    says so; the last report is in before the cell's result is handed back."""
    from metaharness.loopback.pricing import load_prices

    import ray

    halt = Halt()
    reader = LiveSpend(load_prices(job.prices))
    cell = asyncio.ensure_future(run_cell(job, halt))
    while True:
        await asyncio.wait([cell], timeout=LIVE_POLL_S)
        with contextlib.suppress(OSError):  # not written yet
            reader.read(live_events(job.out_dir, job.task))
        try:
            reason = await board.report.remote(token, reader.spent)
        except ray.exceptions.RayError:  # the batch's actor is gone (its driver with it): run on
            reason = None
        if reason is not None:
            halt.stop(reason)
        if cell.done():
            return cell.result()


def _run_on_worker(data: bytes, board: Any = None, token: str | None = None) -> dict[str, Any]:
    """The body of the Ray task: run the cell where we are (reporting its spend to `board`, when
    the batch keeps its budget live), hand its files back."""
    job = job_from_bytes(data)
    base = os.getcwd()  # the unpacked bundle (Ray's working_dir)
    task = job.task
    resolve = lambda p: None if p is None else os.path.join(base, p)  # noqa: E731
    task = msgspec.structs.replace(task, script=resolve(task.script), frame=resolve(task.frame),
                                   workflow=resolve(task.workflow), workspace=resolve(task.workspace),
                                   policy=[resolve(p) for p in task.policy])
    job = msgspec.structs.replace(job, prices=resolve(job.prices))
    scratch = _worker_scratch()
    os.makedirs(scratch, exist_ok=True)
    out_dir = tempfile.mkdtemp(prefix="out-", dir=scratch)
    try:
        job = msgspec.structs.replace(job, task=task, out_dir=out_dir, scratch_root=os.path.join(scratch, "cells"))
        result = asyncio.run(run_cell(job) if board is None else _run_reporting(job, board, token or ""))
        files = {}
        for name in _OUT_FILES:
            path = os.path.join(out_dir, name)
            if os.path.exists(path):
                with open(path, "rb") as handle:
                    files[name] = handle.read()
        return {"result": msgspec.json.encode(result), "files": files, "node": _node_id()}
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


def _node_id() -> str:
    import ray

    return ray.get_runtime_context().get_node_id()


class RayBackend:
    def __init__(self, plan: Plan, *, address: str | None, jobs: int | None, files: list[str] | None = None) -> None:
        self._ray = ray = _import_ray()
        self._owns = not ray.is_initialized()
        if self._owns and address is not None:
            check_reachable(address)  # before the bundle: nothing to clean up
        self._bundle, self._mapping = _bundle(plan, [os.path.abspath(f) for f in files or []])
        # A Ray of our own keeps its session (logs, sockets, spilled objects) in a directory of
        # ours, removed at close: by default it would stay in the temp directory's ray/ for good.
        self._temp = tempfile.mkdtemp(prefix="mh-ray-") if self._owns and address is None else None
        if self._owns:
            try:
                with _bounded_join(address is not None):
                    # "local": a Ray of our own, never one RAY_ADDRESS or ray_current_cluster names
                    ray.init(address=address or "local", include_dashboard=False, log_to_driver=False,
                             runtime_env={"working_dir": self._bundle}, configure_logging=False,
                             **({"_temp_dir": self._temp} if self._temp else {}))
            except (ConnectionError, RuntimeError, ValueError) as exc:
                shutil.rmtree(self._bundle, ignore_errors=True)
                if self._temp:
                    shutil.rmtree(self._temp, ignore_errors=True)
                if address is None:
                    raise PlanError(f"{RefusalName.RayStartFailed}: the batch's own Ray did not start: {exc}") from None
                raise RayUnreachable(address, f"did not answer as a Ray cluster ({exc})") from None
            self._env = None
        else:
            self._env = {"working_dir": self._bundle}
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.slots = jobs or max(1, cpus)
        try:
            gcs = ray.get_runtime_context().gcs_address
        except Exception:  # noqa: BLE001 - a Ray Client connection (ray://) may not say
            gcs = "address not reported"
        if not self._owns:
            self.where = f"ray: on the Ray this process had already joined ({gcs}, {cpus} CPU(s))"
        elif address is None:
            self.where = f"ray: on a Ray of its own, started for this batch ({gcs}, {cpus} CPU(s))"
        else:
            self.where = f"ray: on the Ray cluster at {address} ({gcs}, {cpus} CPU(s))"
        self._remote = ray.remote(num_cpus=1, max_retries=0)(_run_on_worker)
        self.nodes_seen: list[str] = []
        self._board: Any = None  # the SpendBoard actor, made with the first live_spend job
        self._tokens: dict[str, str] = {}  # a running live_spend cell's out_dir → its submission's token

    def _ship(self, job: CellJob) -> CellJob:
        task = job.task
        where = lambda p: None if p is None else self._mapping[p]  # noqa: E731
        task = msgspec.structs.replace(task, script=where(task.script), frame=where(task.frame),
                                       workflow=where(task.workflow), workspace=where(task.workspace),
                                       policy=[where(p) for p in task.policy])
        return msgspec.structs.replace(job, task=task, prices=where(job.prices))

    async def execute(self, job: CellJob) -> CellResult:
        ray = self._ray
        lost: list[str] = []
        while True:
            options = {"runtime_env": self._env} if self._env else {}
            live = ()
            if job.live_spend:
                if self._board is None:
                    self._board = ray.remote(num_cpus=0)(SpendBoard).options(**options).remote()
                self._tokens[job.out_dir] = token = uuid.uuid4().hex
                live = (self._board, token)
            ref = self._remote.options(**options).remote(job_bytes(self._ship(job)), *live)
            try:
                answer = await ref
            except asyncio.CancelledError:
                ray.cancel(ref, force=False)
                raise
            except ray.exceptions.RayTaskError:
                raise  # an error inside the cell function is a bug, not a lost node
            except ray.exceptions.RayError as exc:
                lost.append(f"the Ray worker was lost mid-cell ({type(exc).__name__})")
                if len(lost) > NODE_LOSS_RETRIES:
                    return CellResult(task=job.task.id, harness=job.harness.name, kind=job.harness.kind,
                                      repeat=job.repeat, attempts=job.attempt, retried_for=lost[:-1],
                                      infra=lost[-1])
                continue
            finally:
                if live and self._tokens.get(job.out_dir) == live[1]:
                    del self._tokens[job.out_dir]
                    live[0].forget.remote(live[1])
            self.nodes_seen.append(answer["node"])
            os.makedirs(job.out_dir, exist_ok=True)
            for name in _OUT_FILES:
                path = os.path.join(job.out_dir, name)
                if name in answer["files"]:
                    with open(path, "wb") as handle:
                        handle.write(answer["files"][name])
                elif os.path.exists(path):
                    os.unlink(path)
            result = msgspec.json.decode(answer["result"], type=CellResult)
            return msgspec.structs.replace(result, retried_for=lost + result.retried_for)

    async def spend(self) -> dict[str, float]:
        """What each running live_spend cell's worker last reported, by its out_dir."""
        if self._board is None or not self._tokens:
            return {}
        asked = dict(self._tokens)
        try:
            spent = await self._board.read.remote(list(asked.values()))
        except self._ray.exceptions.RayError:
            return {}
        # a cell that ended (or was submitted again) while the board answered is not this figure's
        return {out_dir: spent[token] for out_dir, token in asked.items()
                if token in spent and self._tokens.get(out_dir) == token}

    def halt(self, out_dir: str, reason: str) -> None:
        if (token := self._tokens.get(out_dir)) is not None:
            self._board.halt.remote(token, reason)

    def close(self) -> None:
        if self._board is not None and self._ray.is_initialized():
            with contextlib.suppress(Exception):
                self._ray.kill(self._board)
            self._board = None
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()
        shutil.rmtree(self._bundle, ignore_errors=True)
        if self._temp:
            shutil.rmtree(self._temp, ignore_errors=True)
