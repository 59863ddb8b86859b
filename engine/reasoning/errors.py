"""Error vocabulary of the reasoning verifier.

Provider failures are translated at the SDK edge into :class:`ProviderError` subclasses carrying a
machine ``code`` and a sanitised message: raw SDK or server text never reaches issues or logs,
because it can echo request data or credentials.
"""

from __future__ import annotations

__all__ = [
    "ProviderAuthError",
    "ProviderConfigError",
    "ProviderConnectionError",
    "ProviderEmptyResponseError",
    "ProviderError",
    "ProviderRateLimitError",
    "ProviderRequestError",
    "ProviderResponseError",
    "ProviderServerError",
    "ProviderTimeoutError",
    "ProviderUnavailableError",
    "ReplayMissError",
]


class ProviderError(Exception):
    """A provider call failed. ``code`` is stable; ``transient`` marks failures worth retrying."""

    code = "provider_error"
    transient = False

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.retry_after = retry_after

    @property
    def error_class(self) -> str:
        """The class name recorded in an :class:`~engine.reasoning.models.Exchange`."""
        return type(self).__name__


class ProviderRateLimitError(ProviderError):
    """HTTP 429 or an equivalent quota refusal."""

    code = "rate_limited"
    transient = True


class ProviderServerError(ProviderError):
    """HTTP 5xx (or 408/409) from the provider."""

    code = "server_error"
    transient = True


class ProviderTimeoutError(ProviderError):
    """The request exceeded the client timeout."""

    code = "timeout"
    transient = True


class ProviderConnectionError(ProviderError):
    """The endpoint could not be reached."""

    code = "connection_error"
    transient = True


class ProviderResponseError(ProviderError):
    """The provider answered, but the answer is empty, malformed or breaks the schema."""

    code = "invalid_response"


class ProviderEmptyResponseError(ProviderResponseError):
    """The provider answered with no text at all."""

    code = "empty_response"


class ProviderAuthError(ProviderError):
    """HTTP 401/403: the credentials were refused."""

    code = "auth_error"


class ProviderRequestError(ProviderError):
    """Another HTTP 4xx: the request itself was refused."""

    code = "bad_request"


class ProviderUnavailableError(ProviderError):
    """The provider is not configured (e.g. its API key is missing)."""

    code = "unavailable"


class ProviderConfigError(ValueError):
    """A provider cannot be built from the given configuration (names no secret values)."""


class ReplayMissError(LookupError):
    """A replayed provider was asked something that is not in the recorded exchanges."""

    def __init__(self, fingerprint: str, vendor: str, model: str, purpose: str) -> None:
        super().__init__(
            f"no recorded exchange for request {fingerprint} ({purpose}) to {vendor}/{model}; "
            "the replay inputs differ from the recording"
        )
        self.fingerprint = fingerprint
