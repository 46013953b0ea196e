"""How a run names its model for oharness: the spelling `PROVIDER:MODEL`.

What belongs here: the providers oharness has, the split of a spelling, the environment
variable each real provider's key is read from, and the sentences for a spelling, a key or a
model that is missing. oharness parses its `--model` with these; metaharness's oharness adapter
refuses the same things with the same sentences before it spawns the child.

Pure: no I/O (the environment to look in is passed in), nothing imported.
"""

from __future__ import annotations

from typing import Any, Mapping

PROVIDERS = ("scripted", "anthropic", "openai", "chat")
DEFAULT_MODEL = "scripted:default"
# The environment variable each real provider's key is read from.
API_KEYS = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
# What is said when nothing chose a model.
NO_MODEL = ("no model chosen: give --model PROVIDER:MODEL for a real one (anthropic:claude-sonnet-4-5 with "
            "ANTHROPIC_API_KEY, openai:gpt-5 with OPENAI_API_KEY), or --script FILE to script one")


class ModelSpellingError(ValueError):
    """A model not spelled PROVIDER:MODEL with a known provider; the message is one sentence."""


def split_model(spelling: str) -> tuple[str, str]:
    """(provider, model) of `spelling`; ModelSpellingError when it is not PROVIDER:MODEL."""
    provider, sep, model = spelling.partition(":")
    if not sep or not model or provider not in PROVIDERS:
        raise ModelSpellingError(
            f"the model {spelling!r} is not spelled PROVIDER:MODEL with PROVIDER one of {', '.join(PROVIDERS)}"
        )
    return provider, model


def missing_key(provider: str, environ: Mapping[str, Any]) -> str | None:
    """The one sentence for a real provider whose key is not in `environ`, else None."""
    variable = API_KEYS.get(provider)
    if variable is None or environ.get(variable):
        return None
    return f"the {provider} provider needs {variable} in the environment"
