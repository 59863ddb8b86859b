"""``fewer_collections`` raises the young generation's threshold only while verify runs."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from ledger.collection import YOUNG_THRESHOLD, fewer_collections


@pytest.fixture(autouse=True)
def thresholds() -> Iterator[tuple[int, int, int]]:
    found = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield gc.get_threshold()
    gc.set_threshold(*found)


def test_raised_inside_restored_after_nested_uses_and_errors(thresholds: tuple[int, int, int]) -> None:
    with fewer_collections():
        assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)
        with pytest.raises(RuntimeError), fewer_collections():
            raise RuntimeError("inner")
        assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)  # the outer use is still open
    assert gc.get_threshold() == thresholds
    with pytest.raises(RuntimeError), fewer_collections():
        raise RuntimeError("outer")
    assert gc.get_threshold() == thresholds


def test_collection_is_never_switched_on_or_lowered() -> None:
    gc.set_threshold(0, 10, 10)  # collection off: stays off
    with fewer_collections():
        assert gc.get_threshold()[0] == 0
    gc.set_threshold(YOUNG_THRESHOLD * 2, 5, 5)
    with fewer_collections():
        assert gc.get_threshold() == (YOUNG_THRESHOLD * 2, 5, 5)
    assert gc.get_threshold() == (YOUNG_THRESHOLD * 2, 5, 5)


def test_a_cycle_made_inside_is_still_collected_without_asking() -> None:
    collected = []

    class Node:
        def __init__(self) -> None:
            self.me = self

        def __del__(self) -> None:
            collected.append(True)

    with fewer_collections():
        Node()
        alive: list[list[int]] = [
            [] for _ in range(2 * YOUNG_THRESHOLD)
        ]  # enough allocations for a young collection
        assert collected == [True]
    assert len(alive) == 2 * YOUNG_THRESHOLD
