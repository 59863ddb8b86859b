"""Build providers from the usual environment variables.

=========  ==========================================================================================
name       variables
=========  ==========================================================================================
anthropic  ``ANTHROPIC_API_KEY`` (required), ``ANTHROPIC_MODEL``, ``ANTHROPIC_BASE_URL``
openai     ``OPENAI_API_KEY`` (required), ``OPENAI_MODEL``, ``OPENAI_BASE_URL``
azure      ``AZURE_OPENAI_API_KEY``, ``AZURE_OPENAI_ENDPOINT``, ``AZURE_OPENAI_DEPLOYMENT`` (required),
           ``OPENAI_API_VERSION`` (or ``AZURE_OPENAI_API_VERSION``)
gemini     ``GEMINI_API_KEY`` (required; ``GOOGLE_API_KEY`` accepted), ``GEMINI_MODEL``, ``GEMINI_BASE_URL``
=========  ==========================================================================================

A provider whose required variables are missing becomes an
:class:`~engine.reasoning.provider.UnavailableProvider` (or raises with ``strict=True``), so the
verifier fails closed instead of raising. Messages name variables, never their values.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence

from engine.reasoning.errors import ProviderConfigError
from engine.reasoning.provider import Provider, RetryPolicy, UnavailableProvider
from engine.reasoning.sdk_providers import (
    DEFAULT_TIMEOUT_SECONDS,
    AnthropicProvider,
    AzureOpenAIProvider,
    GeminiProvider,
    OpenAIProvider,
)

__all__ = ["DEFAULT_MODELS", "PROVIDER_NAMES", "build_provider_from_env", "build_providers_from_env"]

log = logging.getLogger(__name__)

PROVIDER_NAMES = ("anthropic", "openai", "azure", "gemini")
DEFAULT_MODELS = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-4o-mini", "gemini": "gemini-2.5-flash"}
_ALIASES = {"azure_openai": "azure", "azure-openai": "azure", "google": "gemini"}


def _normalise(name: str) -> str:
    if not isinstance(name, str):
        raise ProviderConfigError(f"provider names must be str, not {type(name).__name__}")
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in PROVIDER_NAMES:
        raise ProviderConfigError(f"unknown provider {name!r}; expected one of {', '.join(PROVIDER_NAMES)}")
    return key


def _missing(env: Mapping[str, str], *names: str) -> list[str]:
    return [name for name in names if not env.get(name, "").strip()]


def build_provider_from_env(
    name: str,
    *,
    environ: Mapping[str, str] | None = None,
    strict: bool = False,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
    retry: RetryPolicy | None = None,
) -> Provider:
    """One provider for ``name`` (``anthropic``, ``openai``, ``azure`` or ``gemini``)."""
    vendor = _normalise(name)
    env = os.environ if environ is None else environ
    required: tuple[str, ...]
    if vendor == "anthropic":
        required = ("ANTHROPIC_API_KEY",)
    elif vendor == "openai":
        required = ("OPENAI_API_KEY",)
    elif vendor == "azure":
        required = ("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_DEPLOYMENT")
    else:
        required = () if env.get("GOOGLE_API_KEY", "").strip() else ("GEMINI_API_KEY",)
    missing = _missing(env, *required)
    if missing:
        reason = f"{', '.join(missing)} not set"
        if strict:
            raise ProviderConfigError(f"{vendor} provider unavailable: {reason}")
        log.warning("%s provider unavailable: %s", vendor, reason)
        model = (
            env.get("AZURE_OPENAI_DEPLOYMENT", "")
            if vendor == "azure"
            else env.get(f"{vendor.upper()}_MODEL", DEFAULT_MODELS.get(vendor, ""))
        )
        return UnavailableProvider(vendor, reason, model=model)
    if vendor == "anthropic":
        return AnthropicProvider(
            api_key=env["ANTHROPIC_API_KEY"],
            model=env.get("ANTHROPIC_MODEL") or DEFAULT_MODELS[vendor],
            base_url=env.get("ANTHROPIC_BASE_URL") or None,
            timeout=timeout,
            retry=retry,
        )
    if vendor == "openai":
        return OpenAIProvider(
            api_key=env["OPENAI_API_KEY"],
            model=env.get("OPENAI_MODEL") or DEFAULT_MODELS[vendor],
            base_url=env.get("OPENAI_BASE_URL") or None,
            timeout=timeout,
            retry=retry,
        )
    if vendor == "azure":
        return AzureOpenAIProvider(
            api_key=env["AZURE_OPENAI_API_KEY"],
            azure_endpoint=env["AZURE_OPENAI_ENDPOINT"],
            deployment=env["AZURE_OPENAI_DEPLOYMENT"],
            api_version=env.get("OPENAI_API_VERSION") or env.get("AZURE_OPENAI_API_VERSION") or None,
            timeout=timeout,
            retry=retry,
        )
    return GeminiProvider(
        api_key=env.get("GEMINI_API_KEY") or env["GOOGLE_API_KEY"],
        model=env.get("GEMINI_MODEL") or DEFAULT_MODELS[vendor],
        base_url=env.get("GEMINI_BASE_URL") or None,
        timeout=timeout,
        retry=retry,
    )


def build_providers_from_env(
    names: Sequence[str],
    *,
    environ: Mapping[str, str] | None = None,
    strict: bool = False,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
    retry: RetryPolicy | None = None,
) -> list[Provider]:
    """Providers for ``names`` in the given order (see the module docstring for variables)."""
    if isinstance(names, str):
        raise ProviderConfigError("names must be a sequence of provider names, not a single str")
    return [
        build_provider_from_env(name, environ=environ, strict=strict, timeout=timeout, retry=retry)
        for name in names
    ]
