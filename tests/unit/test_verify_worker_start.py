"""How ``ledger verify --jobs N`` starts its workers: forked only while no other thread runs."""

from __future__ import annotations

import threading
from multiprocessing import get_all_start_methods

import pytest

from ledger.verify.workers import fork_is_safe, worker_context


@pytest.mark.skipif("fork" not in get_all_start_methods(), reason="no fork on this platform")
def test_workers_are_forked_only_while_this_is_the_only_thread() -> None:
    if threading.active_count() != 1:
        pytest.skip("another thread runs in this test process")
    assert fork_is_safe() and worker_context().get_start_method() == "fork"
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        assert not fork_is_safe()
        assert worker_context().get_start_method() == "forkserver"
    finally:
        release.set()
        other.join()
    assert fork_is_safe()
