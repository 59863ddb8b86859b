"""The real ``anthropic`` and ``openai`` SDK clients against local stub servers of each vendor API."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

from engine.reasoning import (
    ISSUE_NO_SECONDARY,
    ISSUE_TRACE_MISSING,
    ISSUE_TRACE_NON_SUBSTANTIVE,
    AnthropicProvider,
    AzureOpenAIProvider,
    GeminiProvider,
    OpenAIProvider,
    ProviderConfigError,
    ReasoningTask,
    ReasoningVerifier,
    RecordedProviders,
    RetryPolicy,
    UnavailableProvider,
    build_providers_from_env,
)
from engine.reasoning.sdk_providers import DEFAULT_SEED
from ledger.reasoning.stage import derive_request, result_entry
from tests.stubs.llm_servers import LLMStubServer, RecordedRequest, StubResponse, is_formula_request
from tests.stubs.providers import good_trace

pytestmark = pytest.mark.integration

QUERY = "Alice has 10 apples and Bob has 5. How many apples do they have together?"
TASK = ReasoningTask(expression="10 + 5")
VENDORS = ("anthropic", "openai", "azure", "gemini")
SECRETS = {vendor: f"sk-test-{vendor}-5ecr3t-9f8e7d6c5b4a" for vendor in VENDORS}
DEPLOYMENT = "ledger-gpt"
API_VERSION = "2024-10-21"


def default_reply(request: RecordedRequest) -> str:
    if is_formula_request(request):
        return json.dumps({"expression": "10 + 5"})
    return good_trace()


@pytest.fixture
def stubs() -> Iterator[dict[str, LLMStubServer]]:
    servers = {
        vendor: LLMStubServer(vendor, reply=default_reply, api_key=SECRETS[vendor], deployment=DEPLOYMENT)
        for vendor in VENDORS
    }
    for server in servers.values():
        server.start()
    yield servers
    for server in servers.values():
        server.stop()


@pytest.fixture
def provider_env(stubs: dict[str, LLMStubServer], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    env = {
        "ANTHROPIC_API_KEY": SECRETS["anthropic"],
        "ANTHROPIC_BASE_URL": stubs["anthropic"].base_url,
        "ANTHROPIC_MODEL": "claude-stub",
        "OPENAI_API_KEY": SECRETS["openai"],
        "OPENAI_BASE_URL": stubs["openai"].base_url,
        "OPENAI_MODEL": "gpt-stub",
        "AZURE_OPENAI_API_KEY": SECRETS["azure"],
        "AZURE_OPENAI_ENDPOINT": stubs["azure"].base_url,
        "AZURE_OPENAI_DEPLOYMENT": DEPLOYMENT,
        "OPENAI_API_VERSION": API_VERSION,
        "GEMINI_API_KEY": SECRETS["gemini"],
        "GEMINI_BASE_URL": stubs["gemini"].base_url,
        "GEMINI_MODEL": "gemini-stub",
    }
    for name in ("ANTHROPIC_AUTH_TOKEN", "GOOGLE_API_KEY", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


class SleepRecorder:
    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def direct(vendor: str, server: LLMStubServer, **kwargs: Any) -> Any:
    """A provider built directly (to inject timeouts, retry policies and a sleep recorder)."""
    key = SECRETS[vendor]
    if vendor == "anthropic":
        return AnthropicProvider(api_key=key, model="claude-stub", base_url=server.base_url, **kwargs)
    if vendor == "openai":
        return OpenAIProvider(api_key=key, model="gpt-stub", base_url=server.base_url, **kwargs)
    if vendor == "gemini":
        return GeminiProvider(api_key=key, model="gemini-stub", base_url=server.base_url, **kwargs)
    return AzureOpenAIProvider(
        api_key=key, azure_endpoint=server.base_url, deployment=DEPLOYMENT, api_version=API_VERSION, **kwargs
    )


EXPECTED_PATH = {
    "anthropic": "/v1/messages",
    "openai": "/v1/chat/completions",
    "azure": f"/openai/deployments/{DEPLOYMENT}/chat/completions",
    "gemini": "/v1beta/openai/chat/completions",
}
EXPECTED_MODEL = {
    "anthropic": "claude-stub",
    "openai": "gpt-stub",
    "azure": DEPLOYMENT,
    "gemini": "gemini-stub",
}


def assert_auth(vendor: str, request: RecordedRequest) -> None:
    headers = request.headers
    if vendor == "azure":
        assert headers["api-key"] == SECRETS[vendor]
    elif vendor == "anthropic":
        assert SECRETS[vendor] in (
            headers.get("x-api-key"),
            headers.get("authorization", "").removeprefix("Bearer "),
        )
    else:
        assert headers["authorization"] == f"Bearer {SECRETS[vendor]}"


def assert_pinned_decoding(vendor: str, body: dict[str, Any]) -> None:
    assert body["model"] == EXPECTED_MODEL[vendor]
    assert body["temperature"] == 0
    if vendor == "anthropic":
        assert "seed" not in body  # the Messages API has no seed
    else:
        assert body["seed"] == DEFAULT_SEED


@pytest.mark.parametrize(
    ("first", "second"),
    [("anthropic", "openai"), ("openai", "azure"), ("azure", "gemini"), ("gemini", "anthropic")],
)
def test_each_vendor_speaks_its_own_api_with_pinned_decoding(
    stubs: dict[str, LLMStubServer], provider_env: dict[str, str], first: str, second: str
) -> None:
    verifier = ReasoningVerifier([first, second], enable_cache=False)
    result = verifier.verify_reasoning(QUERY, TASK)
    assert result.is_valid, result.issues
    assert result.alternative_formula == "10 + 5"

    (trace_request,) = stubs[first].requests
    assert trace_request.path == EXPECTED_PATH[first]
    assert_auth(first, trace_request)
    assert_pinned_decoding(first, trace_request.json)
    assert not is_formula_request(trace_request)

    (formula_request,) = stubs[second].requests
    assert formula_request.path == EXPECTED_PATH[second]
    assert_auth(second, formula_request)
    assert_pinned_decoding(second, formula_request.json)
    body = formula_request.json
    if second == "anthropic":
        fmt = body["output_config"]["format"]
        assert fmt["type"] == "json_schema" and fmt["schema"]["required"] == ["expression"]
    else:
        fmt = body["response_format"]
        assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
        assert fmt["json_schema"]["schema"]["additionalProperties"] is False
    if "azure" in (first, second):
        azure_request = stubs["azure"].requests[0]
        assert azure_request.query["api-version"] == [API_VERSION]

    policies = {exchange.vendor: exchange.decoding_policy for exchange in result.exchanges}
    assert policies[first].temperature == 0.0
    assert "json_schema" in policies[second].structured_output


def test_retry_after_on_429_is_honoured_then_the_call_succeeds(stubs: dict[str, LLMStubServer]) -> None:
    for vendor in VENDORS:
        server = stubs[vendor]
        server.enqueue(StubResponse(status=429, headers={"retry-after": "0.25"}))
        sleeper = SleepRecorder()
        provider = direct(vendor, server, sleep=sleeper)
        result = ReasoningVerifier([provider], enable_cache=False).verify_reasoning(
            QUERY, TASK, enable_cross_validation=False
        )
        assert result.is_valid, (vendor, result.issues)
        assert sleeper.delays == [0.25]
        assert len(server.requests) == 2


def test_server_errors_are_retried_with_bounded_exponential_backoff(stubs: dict[str, LLMStubServer]) -> None:
    server = stubs["openai"]
    server.enqueue(*[StubResponse(status=500)] * 5)
    sleeper = SleepRecorder()
    provider = direct(
        "openai", server, sleep=sleeper, retry=RetryPolicy(max_retries=3, base_delay=0.5, max_delay=1.5)
    )
    verifier = ReasoningVerifier([provider])
    result = verifier.verify_reasoning(QUERY, TASK, enable_cross_validation=False)
    assert sleeper.delays == [0.5, 1.0, 1.5]
    assert len(server.requests) == 4
    assert result.issues == [ISSUE_TRACE_MISSING, ISSUE_TRACE_NON_SUBSTANTIVE]
    assert result.exchanges[0].error_class == "ProviderServerError"
    assert verifier.verify_reasoning(QUERY, TASK, enable_cross_validation=False).is_valid  # not cached


def test_persistent_rate_limit_fails_closed_and_is_not_cached(stubs: dict[str, LLMStubServer]) -> None:
    server = stubs["anthropic"]
    server.enqueue(*[StubResponse(status=429, headers={"retry-after": "0"})] * 3)
    provider = direct("anthropic", server, sleep=SleepRecorder(), retry=RetryPolicy(max_retries=2))
    verifier = ReasoningVerifier([provider, direct("openai", stubs["openai"])])
    failed = verifier.verify_reasoning(QUERY, TASK)
    assert not failed.is_valid
    assert failed.issues[:2] == [ISSUE_TRACE_MISSING, ISSUE_TRACE_NON_SUBSTANTIVE]
    assert failed.exchanges[0].error_code == "rate_limited"
    assert len(server.requests) == 3
    assert verifier.verify_reasoning(QUERY, TASK).cached is False


def test_retry_after_beyond_the_cap_fails_fast(stubs: dict[str, LLMStubServer]) -> None:
    server = stubs["gemini"]
    server.enqueue(StubResponse(status=429, headers={"retry-after": "3600"}))
    sleeper = SleepRecorder()
    provider = direct("gemini", server, sleep=sleeper, retry=RetryPolicy(max_retry_after=20))
    result = ReasoningVerifier([provider]).verify_reasoning(QUERY, TASK, enable_cross_validation=False)
    assert not result.is_valid and sleeper.delays == [] and len(server.requests) == 1


@pytest.mark.parametrize("vendor", VENDORS)
def test_timeout_beyond_the_client_timeout_fails_closed(stubs: dict[str, LLMStubServer], vendor: str) -> None:
    server = stubs[vendor]
    server.enqueue(StubResponse(text="1. too late", delay=1.5), StubResponse(text="1. too late", delay=1.5))
    provider = direct(vendor, server, timeout=0.3, sleep=SleepRecorder(), retry=RetryPolicy(max_retries=1))
    started = time.perf_counter()
    result = ReasoningVerifier([provider]).verify_reasoning(QUERY, TASK, enable_cross_validation=False)
    assert time.perf_counter() - started < 1.4
    assert result.issues == [ISSUE_TRACE_MISSING, ISSUE_TRACE_NON_SUBSTANTIVE]
    assert result.exchanges[0].error_class == "ProviderTimeoutError"
    assert len(server.requests) == 2


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize(
    ("response", "code"),
    [
        (StubResponse(body="{not json"), "invalid_response"),
        (StubResponse(body=b""), "invalid_response"),
        (StubResponse(text=""), "empty_response"),
        (StubResponse(body={"unexpected": True}), "empty_response"),
    ],
)
def test_malformed_or_empty_responses_fail_closed(
    stubs: dict[str, LLMStubServer], vendor: str, response: StubResponse, code: str
) -> None:
    server = stubs[vendor]
    server.enqueue(response)
    result = ReasoningVerifier([direct(vendor, server)]).verify_reasoning(
        QUERY, TASK, enable_cross_validation=False
    )
    assert not result.is_valid
    assert result.issues == [ISSUE_TRACE_MISSING, ISSUE_TRACE_NON_SUBSTANTIVE]
    assert result.exchanges[0].error_code == code
    assert len(server.requests) == 1  # not retried


def test_malformed_translation_from_the_secondary_fails_cross_validation(
    stubs: dict[str, LLMStubServer],
) -> None:
    stubs["openai"].reply = lambda request: (
        "the answer is 15" if is_formula_request(request) else good_trace()
    )
    verifier = ReasoningVerifier([direct("anthropic", stubs["anthropic"]), direct("openai", stubs["openai"])])
    result = verifier.verify_reasoning(QUERY, TASK)
    assert result.issues == ["Cross-validation failed: invalid_response"]
    assert verifier.verify_reasoning(QUERY, TASK).cached is False


def test_disagreeing_secondary_through_the_sdk(stubs: dict[str, LLMStubServer]) -> None:
    stubs["azure"].reply = lambda request: (
        json.dumps({"expression": "10 * 5"}) if is_formula_request(request) else good_trace()
    )
    result = ReasoningVerifier(
        [direct("anthropic", stubs["anthropic"]), direct("azure", stubs["azure"])]
    ).verify_reasoning(QUERY, TASK)
    assert result.issues == ["LLM disagreement: Primary='10 + 5' vs Secondary='10 * 5'"]
    assert result.provider_agreement is False


def test_wrong_key_is_an_auth_failure_that_fails_closed(stubs: dict[str, LLMStubServer]) -> None:
    provider = OpenAIProvider(
        api_key="sk-wrong-key-123456", model="gpt-stub", base_url=stubs["openai"].base_url
    )
    result = ReasoningVerifier([provider]).verify_reasoning(QUERY, TASK, enable_cross_validation=False)
    assert result.exchanges[0].error_class == "ProviderAuthError"
    assert "sk-wrong-key-123456" not in result.canonical_json()


def test_secrets_are_never_logged(
    stubs: dict[str, LLMStubServer], provider_env: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for name in ("openai", "anthropic", "httpx", "httpx2", "httpcore", "httpcore2", "engine"):
        caplog.set_level(logging.DEBUG, logger=name)
    stubs["openai"].enqueue(StubResponse(status=429, headers={"retry-after": "0"}))
    stubs["gemini"].enqueue(StubResponse(status=401))
    verifier = ReasoningVerifier(list(VENDORS), enable_cache=False)
    outputs = [verifier.verify_reasoning(QUERY, TASK).canonical_json()]
    for vendor in VENDORS:
        outputs.append(
            ReasoningVerifier([vendor, "openai"], enable_cache=False)
            .verify_reasoning(QUERY, TASK)
            .canonical_json()
        )
    outputs.append(repr(verifier.providers))
    build_providers_from_env(["anthropic"], environ={"ANTHROPIC_BASE_URL": "x"})
    with pytest.raises(ProviderConfigError) as info:
        build_providers_from_env(["azure"], environ={"AZURE_OPENAI_API_KEY": SECRETS["azure"]}, strict=True)
    outputs.append(str(info.value))
    assert any(record.name.startswith(("openai", "anthropic", "httpx")) for record in caplog.records)
    logged = "\n".join(f"{r.getMessage()} {r.args!r} {r.__dict__!r}" for r in caplog.records)
    for secret in SECRETS.values():
        assert secret not in logged
        assert all(secret not in output for output in outputs)


def test_missing_environment_gives_unavailable_providers(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    providers = build_providers_from_env(VENDORS, environ={})
    assert all(isinstance(p, UnavailableProvider) for p in providers)
    assert "ANTHROPIC_API_KEY not set" in caplog.text
    result = ReasoningVerifier(providers).verify_reasoning(QUERY, TASK)
    assert result.issues == [ISSUE_TRACE_MISSING, ISSUE_TRACE_NON_SUBSTANTIVE, ISSUE_NO_SECONDARY]
    with pytest.raises(ProviderConfigError, match="AZURE_OPENAI_ENDPOINT"):
        build_providers_from_env(["azure"], environ={"AZURE_OPENAI_API_KEY": "k"}, strict=True)


def test_recorded_exchanges_replay_the_result_without_network(
    stubs: dict[str, LLMStubServer], provider_env: dict[str, str]
) -> None:
    stubs["gemini"].enqueue(StubResponse(status=500), StubResponse(status=500), StubResponse(status=500))
    recorded = [
        ReasoningVerifier(names, enable_cache=False).verify_reasoning(QUERY, TASK)
        for names in (["anthropic", "azure"], ["gemini", "openai"])
    ]
    assert recorded[0].is_valid and not recorded[1].is_valid
    for server in stubs.values():
        server.stop()
    for original in recorded:
        replayed = ReasoningVerifier(
            RecordedProviders.from_result(original), enable_cache=False
        ).verify_reasoning(QUERY, TASK)
        assert replayed.canonical_json() == original.canonical_json()


async def test_async_twin_uses_the_async_sdk_clients(
    stubs: dict[str, LLMStubServer], provider_env: dict[str, str]
) -> None:
    sync_result = ReasoningVerifier(["azure", "anthropic"], enable_cache=False).verify_reasoning(QUERY, TASK)
    verifier = ReasoningVerifier(["azure", "anthropic"])
    async_result = await verifier.averify_reasoning(QUERY, TASK)
    assert async_result.canonical_json() == sync_result.canonical_json()
    assert stubs["azure"].requests[-1].headers.get("x-stainless-async", "").startswith("async")
    assert (await verifier.averify_reasoning(QUERY, TASK)).cached is True


URL_SECRET = "sk-in-the-url-0f1e2d3c4b5a"


@pytest.mark.parametrize("vendor", VENDORS)
def test_a_credential_in_the_base_url_is_never_recorded_or_logged(
    vendor: str, stubs: dict[str, LLMStubServer], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for name in ("openai", "anthropic", "httpx", "httpx2", "httpcore", "httpcore2", "engine"):
        caplog.set_level(logging.DEBUG, logger=name)
    server = stubs[vendor]
    base = f"{server.base_url.rstrip('/')}/?key={URL_SECRET}#{URL_SECRET}"
    key = SECRETS[vendor]
    provider: Any
    if vendor == "anthropic":
        provider = AnthropicProvider(api_key=key, model="claude-stub", base_url=base)
    elif vendor == "openai":
        provider = OpenAIProvider(api_key=key, model="gpt-stub", base_url=base)
    elif vendor == "gemini":
        provider = GeminiProvider(api_key=key, model="gemini-stub", base_url=base)
    else:
        provider = AzureOpenAIProvider(
            api_key=key, azure_endpoint=base, deployment=DEPLOYMENT, api_version=API_VERSION
        )
    assert provider.identity.endpoint == server.base_url.rstrip("/") + (
        f"/openai/deployments/{DEPLOYMENT}" if vendor == "azure" else ""
    )
    verifier = ReasoningVerifier([provider], enable_cache=False)
    result = verifier.verify_reasoning(QUERY, TASK, enable_cross_validation=False)
    request = derive_request(QUERY, {"reasoning_expression": "10 + 5"}, None, cross_validation=False)
    payload = json.dumps(result_entry(request, result, attempt=1, audit_entry_hash=None).payload)
    assert result.exchanges and server.requests, "the provider was really called"
    assert URL_SECRET not in payload
    assert any(record.name.startswith(("openai", "anthropic", "httpx")) for record in caplog.records)
    logged = "\n".join(f"{r.getMessage()} {r.args!r} {r.msg!r}" for r in caplog.records)
    assert URL_SECRET not in logged
    verifier.close()
