"""``iter_groups`` with a small first page growing to ``page_size``: every submission once, in order."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.verify import source
from ledger.verify.source import SubmissionGroup, iter_groups


def _group(submission_id: str) -> SubmissionGroup:
    return SubmissionGroup(submission_id, "key", None, None, "audited", "{}", "v", (), ())


def _pages(ids: list[str], page_size: int, first_page: int | None, monkeypatch: Any) -> list[list[str]]:
    """The pages ``iter_groups`` yields over a ledger holding ``ids``, with the sizes it asked for."""
    stored = sorted(set(ids))
    asked: list[int] = []

    def load_page(conn: Any, after: str, size: int) -> list[SubmissionGroup]:
        asked.append(size)
        return [_group(sid) for sid in stored if sid > after][:size]

    monkeypatch.setattr(source, "load_page", load_page)
    pages = [[group.submission_id for group in page] for page in iter_groups(None, page_size, first_page)]  # type: ignore[arg-type]
    for index, page in enumerate(pages):  # each page as large as asked, but the last
        assert len(page) == asked[index] or index == len(pages) - 1
    return pages


@settings(max_examples=200, deadline=None)
@given(
    ids=st.lists(st.text(alphabet="0123456789abcdef", min_size=1, max_size=4), max_size=60),
    page_size=st.integers(1, 20),
    first_page=st.one_of(st.none(), st.integers(-3, 30)),
)
def test_ramped_pages_hold_every_submission_once_in_order(
    ids: list[str], page_size: int, first_page: int | None
) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        ramped = _pages(ids, page_size, first_page, monkeypatch)
        flat = _pages(ids, page_size, None, monkeypatch)
    assert [sid for page in ramped for sid in page] == sorted(set(ids))
    assert [sid for page in flat for sid in page] == sorted(set(ids))
    assert all(0 < len(page) <= page_size for page in ramped)


def test_page_sizes_double_from_the_first_up_to_page_size(monkeypatch: pytest.MonkeyPatch) -> None:
    ids = [f"{n:04d}" for n in range(100)]
    assert [len(page) for page in _pages(ids, 40, 5, monkeypatch)] == [5, 10, 20, 40, 25]
    assert [len(page) for page in _pages(ids, 40, None, monkeypatch)] == [40, 40, 20]
    assert [len(page) for page in _pages(ids[:5], 40, 5, monkeypatch)] == [5]  # a full page, then none
