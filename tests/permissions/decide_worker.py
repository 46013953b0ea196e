"""A decision worker for tests/permissions/test_compiled_equivalence.py: the engine of whichever
build is first on its path (PYTHONPATH), deciding calls sent as JSON lines.

Started as `python decide_worker.py ROOT HOME FD`; its first line out names the build it runs
(`engine_build()`); then, for each line read from the inherited descriptor FD ({"call":
notation, "mode": mode}; its standard input is /dev/null, so that a command reading /dev/stdin
resolves the same path in every worker), one line out: the
verdict's every field but the call object, its subjects in full. The project's settings are those
on disk under ROOT and HOME (the test writes them before starting it).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys


def verdict_fields(verdict) -> dict:
    out = {field.name: getattr(verdict, field.name) for field in dataclasses.fields(verdict) if field.name != "call"}
    out["subjects"] = [dataclasses.asdict(subject) for subject in verdict.subjects]
    return out


def main() -> None:
    root, home, requests = sys.argv[1], sys.argv[2], int(sys.argv[3])
    os.environ["HOME"] = home
    from metaharness.permissions import decide, load_settings, notation_call
    from metaharness.permissions.build import engine_build
    from metaharness.permissions.decision import forget_decisions
    from metaharness.permissions.subjects import analysis_of

    settings = load_settings(root, home=home)
    contexts = {}
    print(json.dumps({"build": engine_build()}), flush=True)
    for line in os.fdopen(requests):
        request = json.loads(line)
        mode = request["mode"]
        ctx = contexts.get(mode) or contexts.setdefault(mode, settings.context(mode=mode))
        analysis_of.cache_clear()  # every decision a first sight: the analysis made, not recalled
        forget_decisions(ctx)
        try:
            answer = verdict_fields(decide(notation_call(request["call"], root), ctx))
        except Exception as error:  # the same failure on both sides is the same decision
            answer = {"error": type(error).__name__, "message": str(error)}
        print(json.dumps(answer, default=repr, sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
