"""Which broker and database a command talks to: configured, a running ``ledger up`` one, or embedded.

Broker: ``--bootstrap`` / ``LEDGER_KAFKA_BOOTSTRAP`` if given; else the detached embedded broker
named by ``<state_dir>/broker.json`` (``ledger up``) if it runs; else a new detached embedded
broker on a free loopback port, recorded in the same state file so that the next ``ledger
publish`` / ``ledger consume`` reuses it (its data lives in memory until it stops).
Database: ``--database-url`` / ``LEDGER_DATABASE_URL``, else :func:`devstack.database.open_database`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass

from consumers.consumer_config import consumer_kwargs
from devstack.broker import EmbeddedBroker
from devstack.database import open_database
from ledger.migration import WRITER_ROLE, require_head, require_role_member
from ledger.settings import LedgerSettings, get_settings
from ledger.store.ledger_store import LedgerStore

__all__ = ["BrokerChoice", "open_store", "open_writer_store", "resolve_broker", "settings_with"]

log = logging.getLogger("devstack.services")


@dataclass(frozen=True)
class BrokerChoice:
    """Bootstrap servers and whether they belong to the embedded tansu broker."""

    bootstrap: str
    embedded: bool
    origin: str  # "configured", "ledger up" or "started"

    def group_timing(self) -> dict[str, int]:
        """Session and heartbeat timeouts suited to this broker."""
        return consumer_kwargs(embedded=self.embedded)


def settings_with(
    settings: LedgerSettings | None = None, *, bootstrap: str | None = None, database_url: str | None = None
) -> LedgerSettings:
    """The settings with command-line overrides applied."""
    base = settings or get_settings()
    update: dict[str, str] = {}
    if bootstrap:
        update["kafka_bootstrap"] = bootstrap
    if database_url:
        update["database_url"] = database_url
    return base.model_copy(update=update) if update else base


def detached_broker(settings: LedgerSettings) -> EmbeddedBroker:
    """The embedded broker handle for ``settings.state_dir`` (nothing starts here)."""
    return EmbeddedBroker(mode="detached", state_dir=settings.state_dir)


def running_embedded_bootstrap(settings: LedgerSettings) -> str | None:
    """Bootstrap of a running ``ledger up`` broker, if there is one."""
    broker = detached_broker(settings)
    if not broker.state_file.exists():
        return None
    status = broker.status()
    return status.url if status.running and status.url else None


def resolve_broker(settings: LedgerSettings, *, start: bool = True) -> BrokerChoice | None:
    """Configured broker, else the ``ledger up`` one, else (``start``) a new detached embedded one."""
    if settings.kafka_bootstrap:
        return BrokerChoice(settings.kafka_bootstrap, embedded=False, origin="configured")
    running = running_embedded_bootstrap(settings)
    if running:
        return BrokerChoice(running, embedded=True, origin="ledger up")
    if not start:
        return None
    broker = detached_broker(settings)
    broker.start()
    log.warning(
        "no LEDGER_KAFKA_BOOTSTRAP: started the embedded broker (memory storage) in the background",
        extra={"bootstrap": broker.bootstrap, "pid": broker.pid, "state_file": str(broker.state_file)},
    )
    return BrokerChoice(broker.bootstrap, embedded=True, origin="started")


@contextlib.contextmanager
def open_store(
    settings: LedgerSettings, *, migrate: bool = True, create: bool = True
) -> Iterator[LedgerStore]:
    """A :class:`LedgerStore` on the configured (or embedded) database, migrated to head.

    ``create=False``: never start a new, empty embedded cluster (see :func:`open_database`).
    """
    with open_database(settings, migrate=migrate, create=create) as engine, LedgerStore(engine) as store:
        yield store


@contextlib.contextmanager
def open_writer_store(
    settings: LedgerSettings, *, command_name: str = "ledger consume"
) -> Iterator[LedgerStore]:
    """A store whose appends run as ``ledger_writer``, on a database already at head (never migrates).

    Raises :class:`~ledger.errors.SchemaNotReadyError` when the schema is behind (run ``ledger
    migrate`` as the owner) and :class:`~ledger.errors.LedgerPermissionError` when the login may
    not act as ``ledger_writer``. A superuser or owner URL still appends as ``ledger_writer``.
    """
    with open_database(settings, migrate=False) as engine:
        require_head(engine, command_name=command_name)
        require_role_member(engine, WRITER_ROLE)
        with LedgerStore(engine, role=WRITER_ROLE) as store:
            yield store
