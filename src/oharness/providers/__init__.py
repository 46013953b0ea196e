"""Model providers, chosen by the spelling `PROVIDER:MODEL`.

Rules it keeps: a provider's SDK is imported only when that provider is chosen; a bad
spelling or a missing key is a `ProviderError` with one sentence, raised before the
run starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..model import Provider

# `oharness.model` is imported when a provider is made or a spelling refused, not here:
# metaharness checks a run's model spelling with `split_model` before it spawns oharness,
# and its start-up time is benchmarked.

PROVIDERS = ("scripted", "anthropic", "openai", "chat")
DEFAULT_MODEL = "scripted:default"


def __getattr__(name: str) -> Any:
    # `Provider` and `ProviderError` were importable from here; they still are.
    if name in ("Provider", "ProviderError"):
        from .. import model

        return getattr(model, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def split_model(spelling: str) -> tuple[str, str]:
    provider, sep, model = spelling.partition(":")
    if not sep or not model or provider not in PROVIDERS:
        from ..model import ProviderError

        raise ProviderError(
            f"the model {spelling!r} is not spelled PROVIDER:MODEL with PROVIDER one of {', '.join(PROVIDERS)}"
        )
    return provider, model


# The environment variable each real provider's key is read from.
API_KEYS = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}


def missing_key(provider: str, environ: Any) -> str | None:
    """The one sentence for a real provider whose key is not in `environ`, else None."""
    variable = API_KEYS.get(provider)
    if variable is None or environ.get(variable):
        return None
    return f"the {provider} provider needs {variable} in the environment"


def make_provider(spelling: str, script: str | None = None) -> Provider:
    from ..model import ProviderError

    provider, model = split_model(spelling)
    if script is not None and provider != "scripted":
        raise ProviderError(f"--script drives the scripted model only, not {spelling!r}")
    if provider == "scripted":
        from .scripted import ScriptedProvider

        return ScriptedProvider.from_file(spelling, script)
    if provider == "anthropic":
        from .anthropic_provider import AnthropicProvider

        return AnthropicProvider(spelling, model)
    if provider == "chat":
        from .chat_provider import ChatProvider

        return ChatProvider(spelling, model)
    from .openai_provider import OpenAIProvider

    return OpenAIProvider(spelling, model)


# What oharness says when nothing chose a model (its own CLI, and metaharness's oharness adapter).
NO_MODEL = ("no model chosen: give --model PROVIDER:MODEL for a real one (anthropic:claude-sonnet-4-5 with "
            "ANTHROPIC_API_KEY, openai:gpt-5 with OPENAI_API_KEY), or --script FILE to script one")
