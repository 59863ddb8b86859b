"""The judge's trace-policy metadata is exactly pydantic's JSON-mode dump, fast path or not."""

from __future__ import annotations

import math
from typing import Any

import pytest

from engine.judge.agent import _policy_dump
from engine.schemas import TracePolicy


class _Policy(TracePolicy):
    """A subclass (always dumped by pydantic)."""


EXTRAS: list[dict[str, Any]] = [
    {},
    {"a": "x", "b": 1, "c": True, "d": 0.25, "e": None, "é": -3.5e-9},
    {"nested": {"k": None}},
    {"list": [1, None]},
    {"inf": math.inf},
    {"nan": math.nan},
    {"big": 2**80},
]


@pytest.mark.parametrize("extra", EXTRAS)
@pytest.mark.parametrize("kind", [TracePolicy, _Policy])
def test_the_dump_equals_pydantics(extra: dict[str, Any], kind: type[TracePolicy]) -> None:
    policy = kind(max_steps=7, allow_external_sources=True, extra=extra)
    dumped = _policy_dump(policy)
    expected = policy.model_dump(mode="json", exclude_none=True)
    assert dumped == expected
    assert repr(dumped) == repr(expected)  # same keys in the same order, same value types
    assert dumped["extra"] is not policy.extra  # a fresh dict, as the dump makes


@pytest.mark.filterwarnings("ignore::UserWarning")  # pydantic warns of the odd values
def test_a_policy_built_without_validation_with_odd_values_is_dumped_by_pydantic() -> None:
    policy = TracePolicy.model_construct(max_steps=3.0, extra={1: "x"})
    assert repr(_policy_dump(policy)) == repr(policy.model_dump(mode="json", exclude_none=True))


def test_the_auditors_policies_match_and_take_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.helpers.replay import corpus_drafts

    policies = [draft.entries[-1].payload["verdict"] for draft in corpus_drafts(limit=5)]
    assert len(policies) == 5
    for verdict in policies:
        metadata = verdict.metadata["trace_policy"]
        assert metadata["extra"]  # the auditor's settings
        policy = TracePolicy.model_validate(metadata)
        expected = policy.model_dump(mode="json", exclude_none=True)
        with monkeypatch.context() as patched:  # the fast path never asks pydantic
            patched.setattr(TracePolicy, "model_dump", None)
            assert repr(_policy_dump(policy)) == repr(expected) == repr(metadata)
