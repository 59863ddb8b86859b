"""``open_database``: the configured URL, else a running ``ledger up`` server, else a foreground one."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from devstack.database import embedded_data_dir, open_database
from devstack.postgres import EmbeddedPostgres, EmbeddedPostgresUnavailable, postgres_install_dir
from devstack.server import pid_alive
from ledger.migration import current_revision, head_revision
from ledger.settings import LedgerSettings
from ledger.store.ledger_store import LedgerStore
from tests.helpers.ledger_factories import audited

pytestmark = pytest.mark.integration


def _require_embedded() -> None:
    try:
        postgres_install_dir()
    except EmbeddedPostgresUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def state_dir() -> Iterator[Path]:
    """A state directory outside pytest's tmp_path: a concurrent pytest session re-chmods
    ``/tmp/pytest-of-<user>`` to 0700, which would lock the ``embedded_postgres`` OS user out."""
    with tempfile.TemporaryDirectory(prefix="ledger-test-state-") as directory:
        yield Path(directory)


def _postmasters(data_dir: Path) -> list[int]:
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if proc.info.get("name") == "postgres" and str(data_dir.resolve()) in cmdline:
            found.append(proc.pid)
    return found


def test_configured_url_is_used_and_migrated(database_url: str, tmp_path: Path) -> None:
    settings = LedgerSettings(database_url=database_url, state_dir=tmp_path)
    with open_database(settings) as engine:
        assert engine.url.database == database_url.rsplit("/", 1)[1]
        assert current_revision(engine) == head_revision()
    assert not embedded_data_dir(settings).exists()


def test_embedded_server_starts_migrates_and_stops_cleanly(state_dir: Path) -> None:
    _require_embedded()
    settings = LedgerSettings(database_url="", state_dir=state_dir)
    with open_database(settings) as engine:
        assert engine.url.database == "ledger"
        assert _postmasters(embedded_data_dir(settings))
        with LedgerStore(engine) as store:
            assert store.append(audited("k1")).status == "created"
    assert _postmasters(embedded_data_dir(settings)) == []
    with open_database(settings) as engine, LedgerStore(engine) as store:  # data survives a restart
        assert store.max_seq() == 6
    assert _postmasters(embedded_data_dir(settings)) == []


def test_a_detached_ledger_up_server_is_reused_and_left_running(state_dir: Path) -> None:
    _require_embedded()
    settings = LedgerSettings(database_url="", state_dir=state_dir)
    detached = EmbeddedPostgres(
        embedded_data_dir(settings), mode="detached", state_dir=state_dir, durable=False
    )
    detached.start()
    try:
        pid = detached.pid
        assert pid is not None
        with open_database(settings) as engine:
            assert engine.url.port == detached.port
            assert current_revision(engine) == head_revision()
        assert pid_alive(pid)
        assert _postmasters(embedded_data_dir(settings)) == [pid]
    finally:
        detached.stop()
