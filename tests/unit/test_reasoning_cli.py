"""``ledger reason``: the ad-hoc check through the real SDK clients and the vendor stub servers,
configured only by the providers' usual environment variables. Exit 0 valid, 1 invalid, 2 usage."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from cli.main import main
from engine.reasoning import ReasoningResult
from tests.stubs.llm_servers import LLMStubServer, RecordedRequest, StubResponse, is_formula_request
from tests.stubs.providers import good_trace

QUERY = "Alice has 10 apples and Bob has 5. How many apples do they have together?"
KEYS = {"anthropic": "sk-test-anthropic-cli-1111", "openai": "sk-test-openai-cli-2222"}


class Formula:
    """The secondary's answer, settable per test."""

    def __init__(self) -> None:
        self.expression = "10 + 5"

    def __call__(self, request: RecordedRequest) -> str:
        return json.dumps({"expression": self.expression}) if is_formula_request(request) else good_trace()


@pytest.fixture
def formula() -> Formula:
    return Formula()


@pytest.fixture
def stubs(formula: Formula, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, LLMStubServer]]:
    servers = {vendor: LLMStubServer(vendor, reply=formula, api_key=KEYS[vendor]) for vendor in KEYS}
    for server in servers.values():
        server.start()
    for name in ("LEDGER_REDIS_URL", "ANTHROPIC_AUTH_TOKEN", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEYS["anthropic"])
    monkeypatch.setenv("ANTHROPIC_BASE_URL", servers["anthropic"].base_url)
    monkeypatch.setenv("ANTHROPIC_MODEL", "claude-stub")
    monkeypatch.setenv("OPENAI_API_KEY", KEYS["openai"])
    monkeypatch.setenv("OPENAI_BASE_URL", servers["openai"].base_url)
    monkeypatch.setenv("OPENAI_MODEL", "gpt-stub")
    yield servers
    for server in servers.values():
        server.stop()


def reason(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["reason", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_valid_check_prints_the_canonical_result_and_exits_0(
    stubs: dict[str, LLMStubServer], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = reason(capsys, QUERY, "--expression", "10 + 5")

    result = ReasoningResult.model_validate_json(out)
    assert code == 0 and result.is_valid
    assert [(e.vendor, e.purpose) for e in result.exchanges] == [
        ("anthropic", "reasoning_trace"),
        ("openai", "formula_translation"),
    ]
    assert result.exchanges[0].endpoint == stubs["anthropic"].base_url.rstrip("/")
    assert len(stubs["anthropic"].requests) == len(stubs["openai"].requests) == 1
    assert all(key not in out for key in KEYS.values())


def test_disagreeing_secondary_exits_1_with_the_issue(
    stubs: dict[str, LLMStubServer], formula: Formula, capsys: pytest.CaptureFixture[str]
) -> None:
    formula.expression = "10 - 5"
    code, out, _ = reason(capsys, QUERY, "--expression", "10 + 5", "--format", "text")

    assert code == 1
    assert out.startswith("INVALID")
    assert "issue: LLM disagreement: Primary='10 + 5' vs Secondary='10 - 5'" in out


def test_provider_failure_fails_closed_with_exit_1(
    stubs: dict[str, LLMStubServer], capsys: pytest.CaptureFixture[str]
) -> None:
    stubs["anthropic"].reply = lambda request: StubResponse(status=401)
    code, out, _ = reason(capsys, QUERY, "--expression", "10 + 5")

    result = ReasoningResult.model_validate_json(out)
    assert code == 1 and not result.is_valid
    assert result.exchanges[0].error_code == "auth_error"


def test_no_cross_validation_asks_only_the_primary(
    stubs: dict[str, LLMStubServer], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = reason(
        capsys, QUERY, "--expression", "10 + 5", "--providers", "anthropic", "--no-cross-validation"
    )

    result = ReasoningResult.model_validate_json(out)
    assert code == 0 and result.cross_validation_requested is False
    assert len(result.exchanges) == 1 and stubs["openai"].requests == []


def test_missing_api_key_is_recorded_unavailable_and_fails_closed(
    stubs: dict[str, LLMStubServer], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    code, out, _ = reason(capsys, QUERY, "--expression", "10 + 5")

    result = ReasoningResult.model_validate_json(out)
    assert code == 1
    assert "Cross-validation requested but no distinct secondary provider is available" in result.issues
    assert [d.available for d in result.providers] == [True, False]


@pytest.mark.parametrize(
    "args",
    [
        pytest.param([QUERY], id="no-expression"),
        pytest.param([QUERY, "--expression", "1", "--format", "yaml"], id="bad-format"),
    ],
)
def test_argument_errors_exit_2(
    stubs: dict[str, LLMStubServer], capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["reason", *args])
    assert exit_info.value.code == 2
    assert stubs["anthropic"].requests == []


@pytest.mark.parametrize(
    "args",
    [
        pytest.param([QUERY, "--expression", "1", "--providers", "anthropic,mistral"], id="unknown-provider"),
        pytest.param([QUERY, "--expression", "1", "--providers", " , "], id="no-provider"),
        pytest.param(["x" * 40_000, "--expression", "1"], id="query-too-long"),
    ],
)
def test_refused_inputs_exit_2_without_calling_a_provider(
    stubs: dict[str, LLMStubServer], capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    code, out, err = reason(capsys, *args)

    assert code == 2 and out == "" and err.startswith("ledger reason: ")
    assert stubs["anthropic"].requests == [] and stubs["openai"].requests == []


def test_cli_verifiers_own_private_cache_namespaces_even_with_redis() -> None:
    import argparse

    from cli.reason import _verifier
    from ledger.settings import LedgerSettings

    args = argparse.Namespace(providers="anthropic,openai", timeout=1.0, no_cache=False)
    settings = LedgerSettings(redis_url="redis://127.0.0.1:1/0")  # never contacted here
    first, second = _verifier(args, settings), _verifier(args, settings)
    assert first.cache is not None and second.cache is not None
    assert first.cache.uses_redis and second.cache.uses_redis
    assert first.cache.namespace != second.cache.namespace
    first.close()
    second.close()
