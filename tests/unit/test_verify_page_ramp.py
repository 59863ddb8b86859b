"""``iter_groups`` with a growing first page reads exactly the submissions of fixed pages, in order."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.verify import runner, source
from ledger.verify.source import SubmissionGroup, iter_groups


def _group(submission_id: str) -> SubmissionGroup:
    return SubmissionGroup(submission_id, "k", None, None, "audited", "{}", "1.0.0", (), ())


def _reads(monkeypatch: pytest.MonkeyPatch, ids: list[str]) -> list[tuple[str, int]]:
    """Serve ``load_page`` from ``ids`` (sorted); returns the log of ``(after, size)`` reads."""
    reads: list[tuple[str, int]] = []

    def load_page(conn: Any, after: str, page_size: int) -> list[SubmissionGroup]:
        reads.append((after, page_size))
        return [_group(sid) for sid in ids if sid > after][:page_size]

    monkeypatch.setattr(source, "load_page", load_page)
    return reads


@settings(max_examples=200, deadline=None)
@given(
    count=st.integers(0, 120),
    page_size=st.integers(1, 40),
    first=st.none() | st.integers(-2, 50),
)
def test_growing_pages_cover_the_same_submissions_in_order(
    count: int, page_size: int, first: int | None
) -> None:
    ids = [f"0x{n:04x}" for n in range(count)]
    with pytest.MonkeyPatch.context() as monkeypatch:
        reads = _reads(monkeypatch, ids)
        pages = list(iter_groups(None, page_size, first_page_size=first))  # type: ignore[arg-type]
    assert [group.submission_id for page in pages for group in page] == ids
    assert all(page for page in pages)
    sizes = [size for _, size in reads]
    start = page_size if first is None else max(1, min(first, page_size))
    assert sizes == [min(start << n, page_size) for n in range(len(sizes))]
    assert all(len(page) <= size for page, size in zip(pages, sizes, strict=False))


def test_without_a_first_size_every_page_is_page_size(monkeypatch: pytest.MonkeyPatch) -> None:
    reads = _reads(monkeypatch, [f"0x{n:04x}" for n in range(25)])
    pages = list(iter_groups(None, 10))  # type: ignore[arg-type]
    assert [len(page) for page in pages] == [10, 10, 5]
    assert reads == [("", 10), ("0x0009", 10), ("0x0013", 10)]


def test_one_job_verify_reads_a_small_first_page(monkeypatch: pytest.MonkeyPatch) -> None:
    reads = _reads(monkeypatch, [f"0x{n:04x}" for n in range(1000)])
    monkeypatch.setattr(runner, "_ledger_wide", lambda conn, report: None)
    monkeypatch.setattr(runner, "_offset_moves", lambda conn, report: None)
    pages = list(runner._pages_then_facts(None, 300, runner.VerifyReport()))
    assert [len(page) for page in pages] == [100, 200, 300, 300, 100]
    assert reads[0][1] == runner.FIRST_PAGE
