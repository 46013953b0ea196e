"""Model providers, chosen by the spelling `PROVIDER:MODEL`.

Rules it keeps: a provider's SDK is imported only when that provider is chosen; a bad
spelling or a missing key is a `ProviderError` with one sentence, raised before the
run starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..model import Provider

from metaharness.protocol.models import (  # noqa: F401  (the spelling rules are shared with metaharness)
    API_KEYS, DEFAULT_MODEL, NO_MODEL, PROVIDERS, ModelSpellingError, missing_key,
)
from metaharness.protocol.models import split_model as _split_model

# `oharness.model` is imported when a provider is made or a spelling refused, not here.


def __getattr__(name: str) -> Any:
    # `Provider` and `ProviderError` were importable from here; they still are.
    if name in ("Provider", "ProviderError"):
        from .. import model

        return getattr(model, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def split_model(spelling: str) -> tuple[str, str]:
    """(provider, model); a bad spelling is oharness's `ProviderError`, with the shared sentence."""
    try:
        return _split_model(spelling)
    except ModelSpellingError as exc:
        from ..model import ProviderError

        raise ProviderError(str(exc)) from None


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
