"""The Ray backend on a simulated two-node cluster on this machine (127.0.0.1, no dashboard,
one CPU per node): the plan's files shipped to the workers by Ray, results gathered back,
the same table as the local pool, and a node removed mid-batch with its cells run again."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import subprocess
import threading
import time
import uuid

import pytest

# The test extra installs ray; under the test command a missing ray is a failure, not a skip.
ray = __import__("ray") if os.environ.get("METAHARNESS_REQUIRE_VENDOR") == "1" else pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

from metaharness.batch import PlanError, load_plan, run_batch  # noqa: E402
from metaharness.batch.ray_backend import RayBackend  # noqa: E402
from metaharness.protocol.stream import check_stream  # noqa: E402

from .conftest import METAHARNESS, last_by_cell, runs_matching, table, write_plan, write_scenario  # noqa: E402

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # The workers' scratch (XDG_CACHE_HOME, inherited by every Ray process) lives in this test's
    # own directory, so a node removed mid-cell leaves nothing behind in the user's cache. Its
    # sessions too, in a directory of its own (short: Ray's socket paths must fit 107 bytes), and
    # the address file the cluster writes beside them (RAY_TMPDIR: by default /tmp/ray, which a
    # fresh machine does not have), removed after.
    temp = tempfile.mkdtemp(prefix="r", dir="/tmp")
    os.makedirs(os.path.join(temp, "ray"))
    environment = {"XDG_CACHE_HOME": str(tmp_path_factory.mktemp("ray-cache")), "RAY_TMPDIR": temp}
    saved = {name: os.environ.get(name) for name in environment}
    os.environ.update(environment)
    try:
        cluster = Cluster(initialize_head=True, connect=False,
                          head_node_args={"num_cpus": 1, "include_dashboard": False, "node_ip_address": "127.0.0.1",
                                          "temp_dir": temp})
        try:
            worker = cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
            cluster.wait_for_nodes()
            yield cluster, worker
        finally:
            cluster.shutdown()
    finally:
        for _ in range(50):  # Ray's processes, going, may still write their last files there
            shutil.rmtree(temp, ignore_errors=True)
            if not os.path.exists(temp):
                break
            time.sleep(0.1)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _gather(plan, out, backend=None, **options):
    async def go():
        return [r async for r in run_batch(plan, str(out), backend=backend, **options)]

    return asyncio.run(go())


def test_the_same_plan_gives_the_same_table_on_ray_and_locally(cluster, suite, monkeypatch):
    monkeypatch.setenv("REAL_HOME", os.path.expanduser("~"))
    head, _ = cluster
    tmp = suite["tmp"]
    plan = load_plan(write_plan(tmp / "plan.json", suite["tasks"], suite["harnesses"]))
    _gather(plan, tmp / "local", jobs=2)
    backend = RayBackend(plan, address=head.address, jobs=None)
    assert backend.slots == 2  # one CPU on each node
    _gather(plan, tmp / "ray", backend=backend)
    assert table(tmp / "ray") == table(tmp / "local")
    assert len(set(backend.nodes_seen)) == 2  # both nodes ran cells: the plan really travelled
    for (task, harness, repeat) in last_by_cell(tmp / "ray"):
        cell = tmp / "ray" / task / harness / str(repeat)
        assert check_stream((cell / "events.jsonl").read_bytes()).status == "complete"
        assert (cell / "check.txt").exists()
    passed = {k: v["passed"] for k, v in last_by_cell(tmp / "ray").items()}
    assert passed[("notes", "oh-frame", 1)] and not passed[("fails", "oh-frame", 1)]
    # the worker never read the driver's paths: the shipped copies are what ran
    events = (tmp / "ray" / "notes" / "oh-frame" / "1" / "events.jsonl").read_text()
    assert str(tmp) not in events


def test_a_vendor_cli_missing_on_the_worker_is_refused_there_by_name(cluster, tmp_path):
    head, _ = cluster
    script = write_scenario(tmp_path / "s.json", {"text": "done"})
    empty = tmp_path / "no-vendor"
    empty.mkdir()
    plan = load_plan(write_plan(tmp_path / "plan.json", [{"id": "a", "prompt": "go", "script": script}],
                                [{"kind": "codex", "vendor_dir": str(empty), "decisions": "observe"}]))
    # the driver's start checks are skipped (`admitted`): here they would refuse the batch, and the
    # case is a worker without the binary the driver found
    [result] = _gather(plan, tmp_path / "out", backend=RayBackend(plan, address=head.address, jobs=1), retries=1,
                       admitted=True)
    assert result.refusal is not None and result.refusal.startswith("VendorMissing: "), result
    assert result.attempts == 1 and not result.passed
    assert (tmp_path / "out" / "a" / "codex" / "1" / "stderr.txt").read_text().startswith("metaharness: VendorMissing")


def test_cancelling_a_ray_batch_halts_its_cells_and_leaves_a_resumable_dir(cluster, tmp_path):
    head, _ = cluster
    marker = f"slow-{uuid.uuid4().hex}.json"
    script = write_scenario(tmp_path / marker, {"text": "thinking", "delay_ms": 20000}, {"text": "done"})
    plan = load_plan(write_plan(tmp_path / "plan.json", [{"id": "t0", "prompt": "go", "script": script}],
                                [{"kind": "oharness", "decisions": "observe"}]))
    out = tmp_path / "out"

    async def go():
        backend = RayBackend(plan, address=head.address, jobs=1)
        consumer = asyncio.ensure_future(_drain(run_batch(plan, str(out), backend=backend)))
        deadline = time.monotonic() + 60
        while not runs_matching(marker) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert runs_matching(marker), "the cell's run never started"
        consumer.cancel()  # what Ctrl-C does to the CLI's task
        with pytest.raises(asyncio.CancelledError):
            await consumer

    asyncio.run(go())
    assert last_by_cell(out)[("t0", "oharness", 1)]["status"] == "interrupted"
    deadline = time.monotonic() + 30
    while runs_matching(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not runs_matching(marker), "the cell's run outlived the cancelled batch"


async def _drain(results):
    return [r async for r in results]


def test_a_node_removed_mid_batch_has_its_cells_run_again(cluster, tmp_path):
    head, worker = cluster
    marker = f"slow-{uuid.uuid4().hex}.json"  # names this test's runs among the machine's processes
    script = write_scenario(tmp_path / marker, {"text": "thinking", "delay_ms": 4000}, {"text": "done"})
    tasks = [{"id": f"t{i}", "prompt": "go", "script": script} for i in range(3)]
    plan = load_plan(write_plan(tmp_path / "plan.json", tasks, [{"kind": "oharness", "decisions": "observe"}]))
    backend = RayBackend(plan, address=head.address, jobs=2)
    removed = threading.Event()

    def remove_when_both_runs_are_up():
        # Both nodes' runs are alive (not merely submitted): then the worker node goes away.
        deadline = time.monotonic() + 60
        while len(runs_matching(marker)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)
        head.remove_node(worker, allow_graceful=False)
        removed.set()

    def on_change(progress):
        if len(progress.running) == 2 and not started:
            started.append(threading.Thread(target=remove_when_both_runs_are_up, daemon=True))
            started[0].start()

    started: list[threading.Thread] = []

    try:
        results = _gather(plan, tmp_path / "out", backend=backend, on_change=on_change)
        started[0].join(60)
    finally:  # the module's cluster has two nodes again for the tests after this one
        if removed.is_set():
            head.add_node(num_cpus=1, node_ip_address="127.0.0.1")
            head.wait_for_nodes()
    assert removed.is_set()
    assert len(results) == 3 and all(r.status == "ran" and r.passed for r in results), results
    retried = [r for r in results if r.retried_for]
    assert len(retried) == 1, results
    assert retried[0].retried_for[0].startswith("the Ray worker was lost mid-cell")
    for r in results:
        data = (tmp_path / "out" / r.task / "oharness" / "1" / "events.jsonl").read_bytes()
        assert check_stream(data).status == "complete"


def test_without_an_address_the_batch_starts_a_ray_of_its_own_whatever_ray_address_says(tmp_path, monkeypatch):
    # RAY_ADDRESS names a dead port (as a stale `ray start` would leave ray_current_cluster naming one):
    # Ray's auto-detection would try it; the batch starts a Ray of its own and says so.
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{s.getsockname()[1]}")
    script = write_scenario(tmp_path / "s.json", {"text": "done"})
    plan = write_plan(tmp_path / "plan.json", [{"id": "t", "prompt": "go", "script": script}], [{"kind": "oharness"}])
    # Its own temp directory, short (Ray's socket paths must fit 107 bytes): what the batch and its
    # Ray leave there, they left on the user's disk — Ray's session directory by default.
    temp = tempfile.mkdtemp(prefix="t", dir="/tmp")
    try:
        started = time.monotonic()
        proc = subprocess.run([*METAHARNESS, "batch", "run", plan, "--out", str(tmp_path / "out"), "--backend", "ray",
                               "--jobs", "1"], capture_output=True, text=True, timeout=240,
                              env={**os.environ, "TMPDIR": temp})
        assert proc.returncode == 0, proc.stderr
        assert "ray: on a Ray of its own, started for this batch (" in proc.stderr
        assert [c["passed"] for c in last_by_cell(tmp_path / "out").values()] == [True]
        assert time.monotonic() - started < 200
        assert os.listdir(temp) == []
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def test_an_address_that_accepts_and_says_nothing_is_refused_in_seconds(tmp_path):
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # accepts (the kernel does), never answers
    address = f"127.0.0.1:{listener.getsockname()[1]}"
    script = write_scenario(tmp_path / "s.json", {"text": "done"})
    plan = load_plan(write_plan(tmp_path / "plan.json", [{"id": "t", "prompt": "go", "script": script}],
                                [{"kind": "oharness"}]))
    started = time.monotonic()
    with pytest.raises(PlanError, match=f"RayUnreachable: --ray-address {address} did not answer as a Ray cluster "
                                        "within 5 s"):
        RayBackend(plan, address=address, jobs=1)
    assert time.monotonic() - started < 15
    listener.close()


def test_a_live_cluster_answers_the_probe(cluster):
    from metaharness.batch.ray_backend import check_reachable

    head, _ = cluster
    check_reachable(head.address)  # a real GCS answers as one


def test_the_batch_price_file_travels_to_the_workers(cluster, tmp_path, monkeypatch):
    monkeypatch.delenv("METAHARNESS_PRICES", raising=False)
    head, _ = cluster
    # the scripted model (`scripted:default`) at twice the shipped table's price
    prices = tmp_path / "prices.toml"
    prices.write_text('format = "metaharness.prices/1"\ntaken = "2031-01-01"\n[models."default"]\ninput = 6.0\noutput = 30.0\n')
    turn = {"usage": {"input_tokens": 100000, "output_tokens": 1000}, "text": "step",
            "calls": [{"op": "file.write", "input": {"path": "t.txt", "content": "x"}}]}
    script = write_scenario(tmp_path / "s.json", turn, turn, turn, {"text": "done"})
    plan = load_plan(write_plan(tmp_path / "plan.json", [{"id": "t", "prompt": "go", "script": script}],
                                [{"kind": "oharness", "decisions": "observe"}]))
    backend = RayBackend(plan, address=head.address, jobs=1, files=[str(prices)])
    [result] = _gather(plan, tmp_path / "out", backend=backend, prices=str(prices), max_cost_usd=0.5)
    # priced on the worker from the shipped copy of the user's table: crossed at the first answer
    assert result.close_reason == "budget" and result.cost_usd == 0.63, result
    assert "spent $0.6300 over 1 model response (prices taken 2031-01-01)" in (result.budget or ""), result
    assert str(tmp_path) not in (tmp_path / "out" / "t" / "oharness" / "1" / "stderr.txt").read_text()


def test_a_ray_batch_is_halted_at_its_budget_live_as_the_local_one_is(cluster, tmp_path, monkeypatch):
    """The local backend's live-budget case on Ray: the two running cells' workers report their
    spend as it grows, the driver halts them once the batch's 0.7 is spent (each would run on to
    its own cap otherwise), the third never starts, and every line is the local backend's."""
    from click.testing import CliRunner

    from metaharness.cli.main import cli

    from .test_budget_live import assert_halted_at_the_batch_budget, spending_plan

    monkeypatch.delenv("METAHARNESS_PRICES", raising=False)
    head, _ = cluster
    out = tmp_path / "out"
    done = CliRunner().invoke(cli, ["batch", "run", spending_plan(tmp_path), "--out", str(out), "--jobs", "2",
                                    "--backend", "ray", "--ray-address", head.address, "--max-cost-usd", "0.7"],
                              catch_exceptions=False)
    assert done.exit_code == 0, done.stderr
    assert f"ray: on the Ray cluster at {head.address}" in done.stderr
    assert_halted_at_the_batch_budget(out)
