"""How metaharness launches oharness: `python -m oharness --stdio …` (docs/internals/oharness-stdio.md)."""

from __future__ import annotations

import os
import sys

from metaharness.protocol.models import DEFAULT_MODEL
from metaharness.protocol.spec import RunSpec

# The oharness this adapter speaks to. oharness ships in the metaharness distribution, so the pin
# is the distribution's version and oharness's own `__version__` (tests/run/test_cli_oharness.py
# holds the three equal); a constant, where importlib.metadata costs ~15 ms of every start-up.
PINNED_VERSION = "0.1.0"


def argv(spec: RunSpec, session_dir: str | None) -> list[str]:
    args = [sys.executable, "-m", "oharness", "--stdio", "--model", spec.model or DEFAULT_MODEL]
    if spec.script:
        args += ["--script", os.path.abspath(spec.script)]
    if spec.cwd:
        args += ["--cwd", os.path.abspath(spec.cwd)]
    if spec.posture:
        args += ["--mode", spec.posture]
    if spec.no_decision_trail:
        args.append("--no-decision-trail")
    if session_dir:
        args += ["--session-dir", session_dir]
    return args


PLACEHOLDER_KEY = "mh-placeholder-oharness"


def child_env(spec: RunSpec) -> dict[str, str] | None:
    """The child's environment: inherited, unless `--model-endpoint` names the model server.

    Then both SDKs are pointed at it (the OpenAI SDK's base URL carries `/v1`); with credentials
    `none` the child gets a placeholder key instead of any key in metaharness's environment."""
    if not spec.model_endpoint:
        return None
    endpoint = spec.model_endpoint.rstrip("/")
    env = dict(os.environ, ANTHROPIC_BASE_URL=endpoint,
               OPENAI_BASE_URL=endpoint if endpoint.endswith("/v1") else endpoint + "/v1")
    if spec.credentials == "none":
        env.update(ANTHROPIC_API_KEY=PLACEHOLDER_KEY, OPENAI_API_KEY=PLACEHOLDER_KEY)
    return env
