"""Model providers, chosen by the spelling `PROVIDER:MODEL`.

Rules it keeps: a provider's SDK is imported only when that provider is chosen; a bad
spelling or a missing key is a `ProviderError` with one sentence, raised before the
run starts.
"""

from __future__ import annotations

from ..model import Provider, ProviderError

PROVIDERS = ("scripted", "anthropic", "openai")
DEFAULT_MODEL = "scripted:default"


def split_model(spelling: str) -> tuple[str, str]:
    provider, sep, model = spelling.partition(":")
    if not sep or not model or provider not in PROVIDERS:
        raise ProviderError(
            f"the model {spelling!r} is not spelled PROVIDER:MODEL with PROVIDER one of {', '.join(PROVIDERS)}"
        )
    return provider, model


def make_provider(spelling: str, script: str | None = None) -> Provider:
    provider, model = split_model(spelling)
    if script is not None and provider != "scripted":
        raise ProviderError(f"--script drives the scripted model only, not {spelling!r}")
    if provider == "scripted":
        from .scripted import ScriptedProvider

        return ScriptedProvider.from_file(spelling, script)
    if provider == "anthropic":
        from .anthropic_provider import AnthropicProvider

        return AnthropicProvider(spelling, model)
    from .openai_provider import OpenAIProvider

    return OpenAIProvider(spelling, model)
