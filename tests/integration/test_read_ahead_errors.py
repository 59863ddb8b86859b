"""An error while a page is checked or replayed surfaces as itself, not as a cleanup error.

With one job, verify and replay read page k+1 in a thread while page k is worked on
(:func:`ledger.store.read.read_ahead`). When the work on page k raises, the reader must be
stopped before the snapshot's transaction ends: otherwise its query is still running (or starts a
new transaction) when ``snapshot`` resets the connection, and the CLI shows that psycopg error
("can't change 'isolation_level' now ...") instead of the real cause.
"""

from __future__ import annotations

from typing import Any

import pytest

from ledger.connect import create_ledger_engine
from ledger.replay import runner as replay_runner
from ledger.replay.source import ReplaySelection
from ledger.verify import runner as verify_runner
from tests.helpers.replay import build_ledger

pytestmark = pytest.mark.integration


class _Boom(Exception):
    """The error the test raises inside the page work."""


def test_an_error_checking_a_page_surfaces_as_itself(
    migrated_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_ledger(migrated_database_url, copies=3)  # 111 submissions: a second page is being read

    def boom(page: Any) -> Any:
        raise _Boom("checking failed")

    monkeypatch.setattr(verify_runner, "checked", boom)
    engine = create_ledger_engine(migrated_database_url)
    try:
        with pytest.raises(_Boom, match="checking failed"):
            verify_runner.run_verify(engine, jobs=1, translog=False)
        # the pooled connection went back clean: the next run works
        monkeypatch.undo()
        assert verify_runner.run_verify(engine, jobs=1, translog=False).submissions == 111
    finally:
        engine.dispose()


def test_an_error_replaying_a_case_surfaces_as_itself(
    migrated_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_ledger(migrated_database_url, copies=3)

    def boom(case: Any, live: bool) -> Any:
        raise _Boom("replay failed")

    monkeypatch.setattr(replay_runner, "replay_case", boom)
    engine = create_ledger_engine(migrated_database_url)
    try:
        with pytest.raises(_Boom, match="replay failed"):
            replay_runner.run_replay(engine, ReplaySelection(), jobs=1, page_size=20)
        monkeypatch.undo()
        assert replay_runner.run_replay(engine, ReplaySelection(), jobs=1).submissions == 111
    finally:
        engine.dispose()
