"""In-process providers implementing the Provider protocol, for tests that need no HTTP."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable

from engine.reasoning import CompletionRequest, DecodingPolicy, ProviderIdentity

__all__ = ["ScriptedProvider", "good_trace"]

GOOD_TRACE = "1. Take the 10 apples Alice has and the 5 apples Bob has\n2. Add them: 10 + 5 = 15"


def good_trace() -> str:
    """A substantive numbered trace."""
    return GOOD_TRACE


class ScriptedProvider:
    """Answers traces with ``trace`` and translations with ``{"expression": formula}``.

    ``failures`` (exceptions) are raised, in order, before any answer; ``answer`` overrides both.
    Every request is appended to ``requests``.
    """

    def __init__(
        self,
        vendor: str = "anthropic",
        model: str = "model-a",
        endpoint: str = "https://a.example",
        *,
        trace: str = GOOD_TRACE,
        formula: str = "10 + 5",
        failures: list[BaseException] | None = None,
        answer: Callable[[CompletionRequest], object] | None = None,
        policy: DecodingPolicy | None = None,
    ) -> None:
        self.identity = ProviderIdentity(vendor=vendor, model=model, endpoint=endpoint)
        self.decoding_policy = policy or DecodingPolicy(temperature=0.0, seed=7)
        self.trace = trace
        self.formula = formula
        self.failures: deque[BaseException] = deque(failures or [])
        self.answer = answer
        self.requests: list[CompletionRequest] = []

    def complete(self, request: CompletionRequest) -> str:
        self.requests.append(request)
        if self.failures:
            raise self.failures.popleft()
        if self.answer is not None:
            return self.answer(request)  # type: ignore[return-value]
        if request.json_schema is not None:
            return json.dumps({"expression": self.formula})
        return self.trace

    def __eq__(self, other: object) -> bool:  # hostile __eq__: distinctness must not use it
        return isinstance(other, ScriptedProvider)

    __hash__ = object.__hash__
