"""The entry kinds each submission status allows (``ledger.verify.kinds``): an allow-list."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.store.records import ENTRY_KINDS
from ledger.verify.kinds import KIND_ORDER, REQUIRED_KINDS, _kind_problems, kind_problems

AUDITED = ["submission.received", "trace.step", "trace.step", "audit.completed", "verdict.issued"]


def codes(status: str, kinds: list[str]) -> list[str]:
    return [code for code, _ in kind_problems(status, kinds)]


@pytest.mark.parametrize(
    ("status", "kinds"),
    [
        ("audited", AUDITED),
        ("audited", ["submission.received", "audit.completed", "verdict.issued"]),
        ("audited", [*AUDITED, "reasoning.verified", "replay.verified", "reasoning.verified"]),
        ("rejected", ["submission.rejected"]),
        ("por_verified", ["por.verified"]),
    ],
)
def test_what_the_writers_chain_has_no_problem(status: str, kinds: list[str]) -> None:
    assert kind_problems(status, kinds) == []


@pytest.mark.parametrize(
    "extra", ["verdict.issued", "reasoning.verified", "replay.verified", "por.verified", "trace.step"]
)
def test_any_other_kind_on_a_rejected_submission_is_unexpected(extra: str) -> None:
    assert codes("rejected", ["submission.rejected", extra]) == ["unexpected_entry"]


@pytest.mark.parametrize("extra", ["verdict.issued", "reasoning.verified", "audit.completed"])
def test_any_other_kind_on_a_por_verified_submission_is_unexpected(extra: str) -> None:
    assert codes("por_verified", ["por.verified", extra]) == ["unexpected_entry"]


def test_por_or_rejection_entries_on_an_audited_submission_are_unexpected() -> None:
    assert codes("audited", [*AUDITED, "por.verified"]) == ["unexpected_entry"]
    assert codes("audited", [*AUDITED, "submission.rejected"]) == ["unexpected_entry"]


def test_counts_and_order() -> None:
    assert codes("audited", [*AUDITED, "verdict.issued"]) == ["entries_missing"]
    assert codes("audited", AUDITED[:-1]) == ["entries_missing"]
    assert codes("rejected", []) == ["entries_missing"]
    assert codes("audited", ["trace.step", *AUDITED]) == ["entries_out_of_order"]
    swapped = ["submission.received", "trace.step", "verdict.issued", "audit.completed"]
    assert codes("audited", swapped) == ["entries_out_of_order"]
    late_step = ["submission.received", "audit.completed", "trace.step", "verdict.issued"]
    assert codes("audited", late_step) == ["entries_out_of_order"]
    follow_up_first = ["submission.received", "reasoning.verified", "audit.completed", "verdict.issued"]
    assert codes("audited", follow_up_first) == ["entries_out_of_order"]


def test_an_unknown_status_is_a_problem_whatever_its_entries() -> None:
    assert codes("accepted", AUDITED) == ["unexpected_entry"]
    assert codes("", []) == ["unexpected_entry"]


def test_every_status_names_only_known_kinds() -> None:
    for status, order in KIND_ORDER.items():
        assert set(order) <= set(ENTRY_KINDS)
        assert set(REQUIRED_KINDS[status]) <= set(order)


class _Kind(str):
    """A str subclass: never remembered by ``kind_problems``."""


_KINDS = st.sampled_from([*ENTRY_KINDS, "x", "", "trace.step\x00", "\ud800"])


@settings(max_examples=300, deadline=None)
@given(
    status=st.sampled_from([*KIND_ORDER, "unknown", "audited\x00"]),
    kinds=st.lists(st.one_of(_KINDS, _KINDS.map(_Kind)), max_size=8),
)
def test_remembered_results_are_the_computed_ones(status: str, kinds: list[str]) -> None:
    expected = _kind_problems(status, list(kinds))
    first = kind_problems(status, kinds)
    again = kind_problems(status, tuple(kinds))  # remembered by now, unless a kind is a subclass
    assert first == again == expected
    first.append(("mutated", "by a caller"))  # each call returns its own list
    assert kind_problems(status, kinds) == expected
