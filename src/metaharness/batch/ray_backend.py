"""The Ray backend: the same cells, each run as a Ray task on a cluster.

What belongs here: packing the plan's files into a bundle that Ray ships to the
workers (`runtime_env` working_dir), the remote function (which runs the very same
`cell.run_cell` in a scratch directory on the worker and returns the cell's files as
bytes), writing those files into DIR on the driver, and treating a lost worker
node as a reason to run the cell again.

Rules kept:
* `ray` is an optional extra; without it the backend is refused by name with the
  install command, before anything runs;
* paths inside a job are rewritten to the bundle's relative paths, so a worker
  never reads the driver's filesystem; it resolves them against its working_dir;
* Ray's own task retries are off (max_retries=0): a cell that died with its node
  is run again here, so the retry is counted and recorded in the cell's result
  (up to NODE_LOSS_RETRIES times, apart from `--retries`, which is the plan's).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from typing import Any

import msgspec

from .cell import CellJob, job_bytes, job_from_bytes, run_cell
from .plan import Plan, PlanError, plan_files
from .results import CellResult

INSTALL = "pip install 'metaharness[ray]'"
NODE_LOSS_RETRIES = 3
_OUT_FILES = ("events.jsonl", "stderr.txt", "check.txt", "trajectory.json")


class RayUnavailable(PlanError):
    def __init__(self) -> None:
        super().__init__(f"RayUnavailable: --backend ray needs the ray extra, which is not installed; "
                         f"install it with `{INSTALL}`")


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayUnavailable() from None
    return ray


def _bundle(plan: Plan) -> tuple[str, dict[str, str]]:
    """Copy every file the plan names into a fresh directory; map each original path to its bundle path."""
    root = tempfile.mkdtemp(prefix="metaharness-batch-bundle-")
    mapping: dict[str, str] = {}
    for index, path in enumerate(plan_files(plan)):
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


def _run_on_worker(data: bytes) -> dict[str, Any]:
    """The body of the Ray task: run the cell where we are, hand its files back."""
    job = job_from_bytes(data)
    base = os.getcwd()  # the unpacked bundle (Ray's working_dir)
    task = job.task
    resolve = lambda p: None if p is None else os.path.join(base, p)  # noqa: E731
    task = msgspec.structs.replace(task, script=resolve(task.script), frame=resolve(task.frame),
                                   workflow=resolve(task.workflow), workspace=resolve(task.workspace),
                                   policy=[resolve(p) for p in task.policy])
    scratch = _worker_scratch()
    os.makedirs(scratch, exist_ok=True)
    out_dir = tempfile.mkdtemp(prefix="out-", dir=scratch)
    try:
        job = msgspec.structs.replace(job, task=task, out_dir=out_dir, scratch_root=os.path.join(scratch, "cells"))
        result = asyncio.run(run_cell(job))
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
    def __init__(self, plan: Plan, *, address: str | None, jobs: int | None) -> None:
        self._ray = ray = _import_ray()
        self._bundle, self._mapping = _bundle(plan)
        self._owns = not ray.is_initialized()
        if self._owns:
            ray.init(address=address, include_dashboard=False, log_to_driver=False,
                     runtime_env={"working_dir": self._bundle}, configure_logging=False)
            self._env = None
        else:
            self._env = {"working_dir": self._bundle}
        self.slots = jobs or max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._remote = ray.remote(num_cpus=1, max_retries=0)(_run_on_worker)
        self.nodes_seen: list[str] = []

    def _ship(self, job: CellJob) -> CellJob:
        task = job.task
        where = lambda p: None if p is None else self._mapping[p]  # noqa: E731
        task = msgspec.structs.replace(task, script=where(task.script), frame=where(task.frame),
                                       workflow=where(task.workflow), workspace=where(task.workspace),
                                       policy=[where(p) for p in task.policy])
        return msgspec.structs.replace(job, task=task)

    async def execute(self, job: CellJob) -> CellResult:
        ray = self._ray
        lost: list[str] = []
        while True:
            options = {"runtime_env": self._env} if self._env else {}
            ref = self._remote.options(**options).remote(job_bytes(self._ship(job)))
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

    def close(self) -> None:
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()
        shutil.rmtree(self._bundle, ignore_errors=True)
