"""``ledger replay``'s collector setting: the heap alive at the start is frozen for the run and
thawed after, never twice, and a heap someone else froze is left as it is."""

from __future__ import annotations

import gc
import weakref

import pytest

from ledger.collection import frozen_heap


def test_frozen_heap_freezes_then_thaws_what_it_froze() -> None:
    assert gc.get_freeze_count() == 0
    with frozen_heap():
        frozen = gc.get_freeze_count()
        assert frozen > 0
        assert gc.isenabled()
        with frozen_heap():  # nested: nothing more frozen, nothing thawed at its end
            assert gc.get_freeze_count() == frozen
        assert gc.get_freeze_count() == frozen
    assert gc.get_freeze_count() == 0


def test_frozen_heap_thaws_after_an_error() -> None:
    with pytest.raises(RuntimeError), frozen_heap():
        raise RuntimeError("boom")
    assert gc.get_freeze_count() == 0


def test_a_heap_frozen_elsewhere_is_left_frozen() -> None:
    gc.freeze()
    try:
        before = gc.get_freeze_count()
        with frozen_heap():
            pass
        assert gc.get_freeze_count() == before  # not thawed: this block did not freeze it
    finally:
        gc.unfreeze()


def test_nothing_is_frozen_while_collection_is_off() -> None:
    gc.disable()
    try:
        with frozen_heap():
            assert gc.get_freeze_count() == 0
    finally:
        gc.enable()


def test_cyclic_garbage_made_in_the_block_is_still_collected() -> None:
    class Node:
        def __init__(self) -> None:
            self.me = self

    freed: list[int] = []
    with frozen_heap():
        for index in range(1000):
            weakref.finalize(Node(), freed.append, index)
        gc.collect()
        assert len(freed) == 1000  # by automatic collections in the loop or by this one
