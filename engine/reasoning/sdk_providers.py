"""Providers backed by the official SDKs: ``anthropic`` and ``openai`` (OpenAI, Azure, Gemini).

Decoding is pinned: temperature 0 (sent to Anthropic through ``extra_body`` because the SDK no
longer exposes it), a fixed ``seed`` where the API supports one (OpenAI, Azure, Gemini), and
schema-locked JSON for formula translation (``response_format`` ``json_schema`` with
``strict`` on the OpenAI family, ``output_config.format`` on Anthropic). The SDKs' own retries
are disabled (``max_retries=0``) in favour of :class:`~engine.reasoning.provider.RetryPolicy`,
which bounds how long a ``Retry-After`` may stall a call. SDK exceptions become
:class:`~engine.reasoning.errors.ProviderError` subclasses with sanitised messages; API keys are
held only by the SDK clients and never appear in ``repr``, logs, exchanges or errors. Recorded
endpoints keep only scheme, host, port and path (no userinfo, query or fragment, where a key may
hide), and :class:`RedactURLsFilter` strips the same parts from every URL the HTTP client and the
SDKs log.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

from engine.reasoning import errors
from engine.reasoning.models import CompletionRequest, DecodingPolicy, ProviderIdentity, public_endpoint
from engine.reasoning.provider import RetryPolicy, call_with_retries, call_with_retries_async

__all__ = [
    "DEFAULT_SEED",
    "DEFAULT_TIMEOUT_SECONDS",
    "AnthropicProvider",
    "AzureOpenAIProvider",
    "GeminiProvider",
    "OpenAIProvider",
    "RedactURLsFilter",
    "install_url_redaction",
    "redact_urls",
    "translate_sdk_error",
]

log = logging.getLogger(__name__)

DEFAULT_SEED = 20240607
DEFAULT_TIMEOUT_SECONDS = 30.0


def _sdks() -> tuple[Any, Any]:
    """The SDK modules, imported on first use (importing them costs seconds)."""
    import anthropic
    import openai

    return anthropic, openai


def _retry_after(response: Any) -> float | None:
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / divisor
        except ValueError:
            continue
        if seconds == seconds and seconds >= 0:  # not NaN
            return seconds
    return None


def translate_sdk_error(exc: Exception, vendor: str) -> errors.ProviderError:
    """Map an SDK exception to a ProviderError whose message carries no server or request text."""
    if isinstance(exc, errors.ProviderError):
        return exc
    anthropic, openai = _sdks()
    status = getattr(exc, "status_code", None)
    response = getattr(exc, "response", None)
    retry_after = _retry_after(response)
    kind: type[errors.ProviderError]
    if isinstance(exc, (anthropic.APITimeoutError, openai.APITimeoutError)):
        kind = errors.ProviderTimeoutError
    elif isinstance(exc, (anthropic.APIConnectionError, openai.APIConnectionError)):
        kind = errors.ProviderConnectionError
    elif isinstance(exc, (anthropic.APIResponseValidationError, openai.APIResponseValidationError)):
        kind = errors.ProviderResponseError
    elif isinstance(status, int):
        if status == 429:
            kind = errors.ProviderRateLimitError
        elif status >= 500 or status in (408, 409):
            kind = errors.ProviderServerError
        elif status in (401, 403):
            kind = errors.ProviderAuthError
        else:
            kind = errors.ProviderRequestError
    elif isinstance(exc, (ValueError, TypeError, AttributeError, KeyError, IndexError)):
        kind = errors.ProviderResponseError
    else:
        kind = errors.ProviderError
    suffix = f" (HTTP {status})" if isinstance(status, int) else ""
    return kind(f"{vendor} request failed: {kind.code}{suffix}", status=status, retry_after=retry_after)


_URL_IN_TEXT = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?:[^\s/?#@\"'<>]*@)?(?P<rest>[^\s?#\"'<>]*)"
    r"(?:\?[^\s#\"'<>]*)?(?:#[^\s\"'<>]*)?"
)
_HTTP_LOGGERS = (
    "httpx",
    "httpx2",
    "httpcore",
    "httpcore2",
    "openai",
    "openai._base_client",
    "anthropic",
    "anthropic._base_client",
)


def redact_urls(text: str) -> str:
    """``text`` with every URL reduced to scheme, host and path (no userinfo, query or fragment)."""
    return _URL_IN_TEXT.sub(lambda match: match["scheme"] + match["rest"], text)


class RedactURLsFilter(logging.Filter):
    """Rewrites log records whose message holds a URL with credentials-capable parts.

    The HTTP clients under the SDKs log every request URL (``httpx`` at INFO, the SDKs at DEBUG);
    a base URL may carry a key in its query string or userinfo, so the formatted message is
    replaced by its redacted form. Records are never dropped.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact ``record`` in place; always keep it."""
        try:
            message = record.getMessage()
        except Exception:  # a record that cannot be formatted is left for logging to report
            return True
        redacted = redact_urls(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


_REDACTION = RedactURLsFilter()


def install_url_redaction() -> None:
    """Attach the URL-redacting filter to the HTTP client and SDK loggers (idempotent)."""
    for name in _HTTP_LOGGERS:
        logger = logging.getLogger(name)
        if _REDACTION not in logger.filters:
            logger.addFilter(_REDACTION)


def _require_text(text: object, vendor: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise errors.ProviderEmptyResponseError(f"{vendor} returned an empty response")
    return text


class _SDKProvider:
    """Shared plumbing: identity, policy, retries, error translation, sync/async clients."""

    vendor = ""

    def __init__(
        self,
        *,
        model: str,
        endpoint: str,
        decoding_policy: DecodingPolicy,
        timeout: float,
        retry: RetryPolicy | None,
        sleep: Callable[[float], None] | None,
        async_sleep: Callable[[float], Awaitable[None]] | None,
    ) -> None:
        if not model:
            raise errors.ProviderConfigError(f"{self.vendor} provider needs a model")
        install_url_redaction()
        self.identity = ProviderIdentity(vendor=self.vendor, model=model, endpoint=public_endpoint(endpoint))
        self.decoding_policy = decoding_policy
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self._sleep = sleep or time.sleep
        self._async_sleep = async_sleep or asyncio.sleep
        self._async_clients: dict[int, Any] = {}

    def __repr__(self) -> str:
        ident = self.identity
        return f"{type(self).__name__}(model={ident.model!r}, endpoint={ident.endpoint!r})"

    # Subclasses implement these three.
    def _sync_client(self) -> Any:
        raise NotImplementedError

    def _new_async_client(self) -> Any:
        raise NotImplementedError

    def _call(self, client: Any, request: CompletionRequest) -> Any:
        raise NotImplementedError

    def _extract(self, response: Any) -> str:
        raise NotImplementedError

    def _async_client(self) -> Any:
        loop_id = id(asyncio.get_running_loop())
        client = self._async_clients.get(loop_id)
        if client is None:
            self._async_clients.clear()  # clients are bound to the loop they first ran on
            client = self._async_clients[loop_id] = self._new_async_client()
        return client

    def _once(self, request: CompletionRequest) -> str:
        try:
            return self._extract(self._call(self._sync_client(), request))
        except Exception as exc:  # SDK, transport and parsing failures alike
            raise translate_sdk_error(exc, self.vendor) from None

    async def _aonce(self, request: CompletionRequest) -> str:
        try:
            response = await self._call(self._async_client(), request)
            return self._extract(response)
        except Exception as exc:  # SDK, transport and parsing failures alike
            raise translate_sdk_error(exc, self.vendor) from None

    def complete(self, request: CompletionRequest) -> str:
        """Answer ``request``, retrying transient failures under the retry policy."""
        text, attempts = call_with_retries(lambda: self._once(request), self.retry, self._sleep)
        log.debug(
            "%s/%s answered %s after %d attempt(s)",
            self.vendor,
            self.identity.model,
            request.purpose,
            attempts,
        )
        return text

    async def acomplete(self, request: CompletionRequest) -> str:
        """Async twin of :meth:`complete`."""
        text, attempts = await call_with_retries_async(
            lambda: self._aonce(request), self.retry, self._async_sleep
        )
        log.debug(
            "%s/%s answered %s after %d attempt(s)",
            self.vendor,
            self.identity.model,
            request.purpose,
            attempts,
        )
        return text


class AnthropicProvider(_SDKProvider):
    """Claude through ``anthropic.Anthropic`` (``/v1/messages``)."""

    vendor = "anthropic"
    DEFAULT_BASE_URL = "https://api.anthropic.com"

    def __init__(
        self,
        *,
        api_key: str,
        model: str,
        base_url: str | None = None,
        temperature: float | None = 0.0,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] | None = None,
        async_sleep: Callable[[float], Awaitable[None]] | None = None,
    ) -> None:
        base = (base_url or self.DEFAULT_BASE_URL).rstrip("/")
        policy = DecodingPolicy(
            temperature=temperature, seed=None, structured_output="anthropic.output_config.format.json_schema"
        )
        super().__init__(
            model=model,
            endpoint=base,
            decoding_policy=policy,
            timeout=timeout,
            retry=retry,
            sleep=sleep,
            async_sleep=async_sleep,
        )
        self._client_kwargs: dict[str, Any] = {
            "api_key": api_key,
            "base_url": base,
            "timeout": timeout,
            "max_retries": 0,
        }
        self._client = _sdks()[0].Anthropic(**self._client_kwargs)

    def _sync_client(self) -> Any:
        return self._client

    def _new_async_client(self) -> Any:
        return _sdks()[0].AsyncAnthropic(**self._client_kwargs)

    def _call(self, client: Any, request: CompletionRequest) -> Any:
        kwargs: dict[str, Any] = {
            "model": self.identity.model,
            "max_tokens": request.max_tokens,
            "system": request.system,
            "messages": [{"role": "user", "content": request.prompt}],
        }
        if request.json_schema is not None:
            kwargs["output_config"] = {"format": {"type": "json_schema", "schema": request.json_schema}}
        if self.decoding_policy.temperature is not None:
            kwargs["extra_body"] = {"temperature": self.decoding_policy.temperature}
        return client.messages.create(**kwargs)

    def _extract(self, response: Any) -> str:
        blocks = getattr(response, "content", None) or []
        text = "".join(block.text for block in blocks if getattr(block, "type", None) == "text")
        return _require_text(text, self.vendor)

    def close(self) -> None:
        """Release the HTTP connection pool."""
        self._client.close()


class _ChatCompletionsProvider(_SDKProvider):
    """The OpenAI chat-completions wire format, shared by OpenAI, Azure and Gemini."""

    token_parameter = "max_completion_tokens"
    _client: Any
    _async_factory: Callable[[], Any]

    def _sync_client(self) -> Any:
        return self._client

    def _new_async_client(self) -> Any:
        return self._async_factory()

    def _call(self, client: Any, request: CompletionRequest) -> Any:
        policy = self.decoding_policy
        kwargs: dict[str, Any] = {
            "model": self.identity.model,
            "messages": [
                {"role": "system", "content": request.system},
                {"role": "user", "content": request.prompt},
            ],
            self.token_parameter: request.max_tokens,
        }
        if policy.temperature is not None:
            kwargs["temperature"] = policy.temperature
        if policy.seed is not None:
            kwargs["seed"] = policy.seed
        if request.json_schema is not None:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": request.schema_name or "result",
                    "schema": request.json_schema,
                    "strict": True,
                },
            }
        return client.chat.completions.create(**kwargs)

    def _extract(self, response: Any) -> str:
        choices = getattr(response, "choices", None)
        if not choices:
            raise errors.ProviderEmptyResponseError(f"{self.vendor} returned no choices")
        return _require_text(choices[0].message.content, self.vendor)

    def close(self) -> None:
        """Release the HTTP connection pool."""
        self._client.close()


def _chat_policy(temperature: float | None, seed: int | None) -> DecodingPolicy:
    return DecodingPolicy(
        temperature=temperature, seed=seed, structured_output="openai.response_format.json_schema.strict"
    )


class OpenAIProvider(_ChatCompletionsProvider):
    """OpenAI through ``openai.OpenAI`` (``/v1/chat/completions``)."""

    vendor = "openai"
    DEFAULT_BASE_URL = "https://api.openai.com/v1"

    def __init__(
        self,
        *,
        api_key: str,
        model: str,
        base_url: str | None = None,
        temperature: float | None = 0.0,
        seed: int | None = DEFAULT_SEED,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] | None = None,
        async_sleep: Callable[[float], Awaitable[None]] | None = None,
    ) -> None:
        endpoint = (base_url or self.DEFAULT_BASE_URL).rstrip("/")
        super().__init__(
            model=model,
            endpoint=endpoint,
            decoding_policy=_chat_policy(temperature, seed),
            timeout=timeout,
            retry=retry,
            sleep=sleep,
            async_sleep=async_sleep,
        )
        kwargs: dict[str, Any] = {
            "api_key": api_key,
            "base_url": endpoint,
            "timeout": timeout,
            "max_retries": 0,
        }
        sdk = _sdks()[1]
        self._client = sdk.OpenAI(**kwargs)
        self._async_factory = lambda: sdk.AsyncOpenAI(**kwargs)


class GeminiProvider(OpenAIProvider):
    """Gemini through its OpenAI-compatible endpoint (``/v1beta/openai/chat/completions``)."""

    vendor = "gemini"
    DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com/v1beta/openai"
    token_parameter = "max_tokens"


class AzureOpenAIProvider(_ChatCompletionsProvider):
    """Azure OpenAI through ``openai.AzureOpenAI`` deployment routes
    (``/openai/deployments/{deployment}/chat/completions?api-version=...``)."""

    vendor = "azure"
    DEFAULT_API_VERSION = "2024-10-21"

    def __init__(
        self,
        *,
        api_key: str,
        azure_endpoint: str,
        deployment: str,
        api_version: str | None = None,
        temperature: float | None = 0.0,
        seed: int | None = DEFAULT_SEED,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] | None = None,
        async_sleep: Callable[[float], Awaitable[None]] | None = None,
    ) -> None:
        version = api_version or self.DEFAULT_API_VERSION
        base = azure_endpoint.rstrip("/")
        # recorded without the api-version query (no query string is ever recorded)
        endpoint = f"{public_endpoint(base)}/openai/deployments/{deployment}"
        super().__init__(
            model=deployment,
            endpoint=endpoint,
            decoding_policy=_chat_policy(temperature, seed),
            timeout=timeout,
            retry=retry,
            sleep=sleep,
            async_sleep=async_sleep,
        )
        kwargs: dict[str, Any] = {
            "api_key": api_key,
            "azure_endpoint": base,
            "azure_deployment": deployment,
            "api_version": version,
            "timeout": timeout,
            "max_retries": 0,
        }
        sdk = _sdks()[1]
        self._client = sdk.AzureOpenAI(**kwargs)
        self._async_factory = lambda: sdk.AsyncAzureOpenAI(**kwargs)
