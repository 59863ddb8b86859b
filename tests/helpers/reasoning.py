"""Helpers for the reasoning-stage integration tests (this module holds no tests of its own).

Submissions are real: a corpus bundle wrapped in a v1 envelope (``verify_reasoning`` on or off),
decoded and audited by the consumer's own code, appended with ``LedgerStore.append``. Providers
are the real SDK clients pointed at the local vendor stub servers of ``tests/stubs``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.envelope import decode_envelope, wrap_inputs
from engine.reasoning import ReasoningVerifier, RetryPolicy, build_providers_from_env
from ledger.reasoning.worker import ReasoningWorker, WorkerConfig
from ledger.store.drafts import audit_envelope
from ledger.store.ledger_store import LedgerStore
from ledger.store.records import LedgerEntry
from tests.stubs.llm_servers import LLMStubServer, RecordedRequest, StubResponse, is_formula_request

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "samples" / "corpus"
SECRETS = {"anthropic": "sk-test-anthropic-stage-0001", "openai": "sk-test-openai-stage-0002"}

AT_OR_ABOVE = "35_event_definition_comparator.json"  # "Will BTC close at or above $100,000?"
ABOVE_ON_DATE = "01_clean_threshold.json"  # the question also holds a date: numbers missing → invalid
BOOLEAN = "14_boolean_event.json"  # no numeric_value/threshold → not_applicable
FORMULAS = {
    "Will BTC close at or above $100,000?": "100000.0 - 100000",
    "Will BTC trade above $100,000 on 2026-02-01 00:00 UTC?": "104250.12 - 100000",
}
TRACE = (
    "1. Take the observed BTC close of 100000.0 USD from the evidence\n"
    "2. Subtract the 100,000 USD threshold: 100000.0 - 100000 = 0.0\n"
    "3. A difference of at least zero means the close is at or above the threshold"
)


def corpus_inputs(name: str) -> dict[str, Any]:
    """``{"prompt_spec", "evidence_bundle"}`` of one corpus file."""
    data: dict[str, Any] = json.loads((CORPUS / name).read_text())
    return data


def submit(store: LedgerStore, name: str, *, event_id: str, verify: bool) -> str:
    """Audit a corpus bundle like the consumer does and append it; returns the submission id."""
    inputs = corpus_inputs(name)
    document = wrap_inputs(
        inputs["prompt_spec"], inputs["evidence_bundle"], event_id=event_id, verify_reasoning=verify
    )
    draft = audit_envelope(decode_envelope(json.dumps(document).encode()))
    result = store.append(draft)
    assert result.status == "created", result
    return result.submission_id


@dataclass
class InFlight:
    """Counts provider requests being answered at once, across every stub server."""

    delay: float = 0.0
    current: int = 0
    peak: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def wrap(
        self, reply: Callable[[RecordedRequest], str | StubResponse]
    ) -> Callable[..., str | StubResponse]:
        def counted(request: RecordedRequest) -> str | StubResponse:
            with self.lock:
                self.current += 1
                self.peak = max(self.peak, self.current)
            try:
                if self.delay:
                    time.sleep(self.delay)
                return reply(request)
            finally:
                with self.lock:
                    self.current -= 1

        return counted


def stub_reply(request: RecordedRequest) -> str | StubResponse:
    """A substantive trace, or the formula of the asked question (``FORMULAS``)."""
    if not is_formula_request(request):
        return TRACE
    body = request.json if isinstance(request.json, dict) else {}
    messages = body.get("messages") or []
    prompt = json.loads(messages[-1]["content"]) if messages else {}
    return json.dumps({"expression": FORMULAS.get(prompt.get("query", ""), "0")})


class Stubs:
    """The anthropic (primary) and openai (secondary) stub servers, and provider settings for them."""

    def __init__(self, in_flight: InFlight | None = None) -> None:
        self.in_flight = in_flight or InFlight()
        reply = self.in_flight.wrap(stub_reply)
        self.servers = {
            vendor: LLMStubServer(vendor, reply=reply, api_key=SECRETS[vendor])
            for vendor in ("anthropic", "openai")
        }

    def __enter__(self) -> Stubs:
        for server in self.servers.values():
            server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        for server in self.servers.values():
            server.stop()

    @property
    def anthropic(self) -> LLMStubServer:
        return self.servers["anthropic"]

    @property
    def openai(self) -> LLMStubServer:
        return self.servers["openai"]

    def request_count(self) -> int:
        return sum(len(server.requests) for server in self.servers.values())

    def env(self) -> dict[str, str]:
        """The providers' usual environment variables, pointing at the stubs."""
        return {
            "ANTHROPIC_API_KEY": SECRETS["anthropic"],
            "ANTHROPIC_BASE_URL": self.anthropic.base_url,
            "ANTHROPIC_MODEL": "claude-stub",
            "OPENAI_API_KEY": SECRETS["openai"],
            "OPENAI_BASE_URL": self.openai.base_url,
            "OPENAI_MODEL": "gpt-stub",
        }

    def verifier(self, *, retries: int = 1, cache: bool = False) -> ReasoningVerifier:
        """A verifier over real SDK providers (fast retry backoff, no cache unless asked)."""
        providers = build_providers_from_env(
            ["anthropic", "openai"],
            environ=self.env(),
            timeout=10.0,
            retry=RetryPolicy(max_retries=retries, base_delay=0.01, max_delay=0.05),
        )
        return ReasoningVerifier(providers, enable_cache=cache)


def make_worker(store: LedgerStore, stubs: Stubs, **config: Any) -> ReasoningWorker:
    """A worker with its own verifier over the stubs."""
    return ReasoningWorker(store, stubs.verifier(), WorkerConfig(**config))


def reasoning_entries(store: LedgerStore) -> list[LedgerEntry]:
    """Every ``reasoning.verified`` entry, in global order."""
    return [entry for entry in store.iter_entries() if entry.kind == "reasoning.verified"]


def by_submission(store: LedgerStore) -> dict[str, list[LedgerEntry]]:
    """``reasoning.verified`` entries grouped by submission id."""
    grouped: dict[str, list[LedgerEntry]] = {}
    for entry in reasoning_entries(store):
        grouped.setdefault(entry.submission_id, []).append(entry)
    return grouped


def iter_exchanges(payload: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The recorded exchanges of a ``reasoning.verified`` payload."""
    yield from payload.get("result", {}).get("exchanges", [])
