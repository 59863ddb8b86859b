"""How ``ledger replay --jobs N`` starts its workers: forked only while no other thread runs."""

from __future__ import annotations

import threading
from multiprocessing import get_all_start_methods

import pytest

from ledger.replay.runner import worker_context


@pytest.mark.skipif("fork" not in get_all_start_methods(), reason="no fork on this platform")
def test_replay_workers_are_forked_only_while_this_is_the_only_thread() -> None:
    if threading.active_count() != 1:
        pytest.skip("another thread runs in this test process")
    assert worker_context().get_start_method() == "fork"
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        assert worker_context().get_start_method() == "forkserver"
    finally:
        release.set()
        other.join()
    assert worker_context().get_start_method() == "fork"
