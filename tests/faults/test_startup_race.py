"""A consumer (re)starting on a backlog must commit every record, from the offset Postgres holds.

Found by ``test_sigkill_iterations.py``: after a restart, records below the stored offsets were
missing while the offsets had moved past them. The window: aiokafka sets the assignment before it
runs ``on_partitions_assigned``, so while ``_reseek`` loads the offsets from Postgres, the fetcher
already delivers records from Kafka's own (earliest) position. ``BatchFetcher.positioned`` drops
those while the partition has no expected offset, but ``BatchFetcher.fetch`` lingers over several
``getmany`` calls: when the seek lands inside that window, records fetched before it (say offsets
12..14) come back together with an expected offset of 0, pass ``positioned``, and are committed as
``OffsetAdvance(from_offset=0, next_offset=15)``: offsets 0..11 are skipped for good.

Each attempt is a fresh topic and database; the race is won most of the time, so several attempts
make a pass meaningful.
"""

from __future__ import annotations

import asyncio
import socket

import pytest

from consumers.consumer import ConsumerConfig, LedgerConsumer
from ledger.migration import upgrade
from ledger.store.drafts import audit_envelope
from ledger.store.ledger_store import LedgerStore
from tests.helpers.faults import assert_ledger_matches, publish_bundles, send_keyed
from tests.helpers.services import PgServer, fresh_database

pytestmark = pytest.mark.integration

ATTEMPTS = 4
BACKLOG = 50
POISON = 3


async def test_a_consumer_starting_on_a_backlog_commits_every_record(
    kafka_bootstrap: str, pg_server: PgServer, topic_name: str
) -> None:
    for attempt in range(ATTEMPTS):
        topic = f"{topic_name}-{attempt}"
        sent = await asyncio.to_thread(publish_bundles, kafka_bootstrap, topic, 0, BACKLOG)
        bad: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]] = [
            (f"mk_poison_{i}".encode(), b"{", []) for i in range(POISON)
        ]
        landed = await asyncio.to_thread(send_keyed, kafka_bootstrap, topic, bad)
        config = ConsumerConfig(
            bootstrap=kafka_bootstrap,
            topic=topic,
            dlq_topic=f"{topic}.dlq",
            group_id=f"{topic}-group",
            host=socket.gethostname(),
            max_records=BACKLOG,
            until_idle=1.5,
            session_timeout_ms=2000,
            heartbeat_interval_ms=300,
        )
        with fresh_database(pg_server.admin_url) as url:
            await asyncio.to_thread(upgrade, url)
            with LedgerStore(url) as store:
                await LedgerConsumer(config, store, audit_envelope).run()
            assert_ledger_matches(
                url,
                config.group_id,
                topic,
                sent,
                poison=dict.fromkeys(landed, "invalid_json"),
                context=f"attempt {attempt + 1} of {ATTEMPTS}",
            )
