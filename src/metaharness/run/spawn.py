"""The driver's way to a running child: the start checks, the spawn, and a start that ends there.

What belongs here: `bring_up(run)`, the first part of `Run.execute` — the start checks on a thread
(so that a stop meanwhile kills a vendor's `--version` probe instead of waiting it out), then the
adapter's start, each outcome moved into the core (`spawn_begins`, `spawn_settles`). Like the rest
of the driver it decides nothing: a refusal is `start.py`'s or the adapter's, the run's end the core's.

Rules it keeps (the timing ones):
* commands read before the spawn go first: a halt that came with the prompt spawns nothing;
* a stop during the checks is the run's answer, whatever the checks said;
* the child of a refused start, if any, is stopped and reaped before the refusal is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from typing import TYPE_CHECKING

from metaharness.adapters.base import StartRefusal
from metaharness.adapters.process import VERSION_PROBES, VersionProbes
from metaharness.protocol.values import UnknownTermination

from .start import RunRefused

if TYPE_CHECKING:
    from .loop import Run


async def bring_up(run: "Run") -> int | None:
    """Check, then spawn the child and return None; or return the exit code of a run that ended here."""
    core = run.core
    if not core.stopping:
        probes, context = VersionProbes(), contextvars.copy_context()
        context.run(VERSION_PROBES.set, probes)
        checking = asyncio.get_running_loop().run_in_executor(None, context.run, core.check_start)
        if not await run.until_stopping(checking):
            probes.stop()
        try:
            await checking
        except RunRefused as refusal:
            if not core.stopping:  # a stop that came during the checks is the answer
                return run.refuse_start(refusal)
    run.worker = asyncio.create_task(run.queue.work())
    await asyncio.sleep(0)  # commands already read go first: a halt before the spawn spawns nothing
    if core.stopping:
        run.settle(spawned=False)
        await run.queue.drain()
        return run.wind_up(UnknownTermination())
    run.moved(core.spawn_begins)
    adapter = run.adapter
    try:
        await adapter.start(run)
    except StartRefusal as exc:
        run.settle(spawned=False)
        with contextlib.suppress(Exception):
            await adapter.halt()
            await asyncio.wait_for(adapter.child.wait(), 10) if adapter.child else None
        await run.queue.drain()
        return run.refuse_start(RunRefused(f"{exc.name}: {exc.sentence}"))
    except BaseException:
        run.settle(spawned=False)
        raise
    return None
