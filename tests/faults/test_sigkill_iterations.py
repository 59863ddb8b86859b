"""SIGKILL the consumer at random points, many times over one growing topic: one copy of everything, no gap.

``tests/integration/test_consumer_crash.py`` kills once, mid-batch, after a fixed number of
commits. Here every iteration publishes more bundles, starts ``ledger consume`` and kills it at a
seeded random point: during start-up (interpreter start, migration check, group join), after a
random number of newly committed submissions, or a random moment after that. After every kill
the ledger must be atomic (exactly the records below each stored offset, nothing half-written);
at the end a clean run must leave every published bundle exactly once, where the broker put it,
with gapless ``global_seq``, intact hash chains and offsets at the partition ends.
"""

from __future__ import annotations

import random
import signal
import time
from pathlib import Path

import psycopg
import pytest

from consumers.publisher import SentRecord
from ledger.connect import libpq_url
from tests.helpers.faults import (
    GROUP_TIMING,
    ConsumerProcess,
    assert_ledger_matches,
    consumer_env,
    dead_letter_sources,
    publish_bundles,
    read_until,
    run_consumer,
    send_keyed,
    submission_count,
)

pytestmark = pytest.mark.integration

ITERATIONS = 10
PER_ITERATION = 50
# A few refused records per iteration, so kills also strike between dead-lettering and the commit.
POISON = [(b"{", "invalid_json"), (b"[1, 2]", "not_an_object"), (b"\xff\xfe", "invalid_utf8")]
DEADLINE = 90.0  # seconds for one iteration's kill point to be reached


def atomic_snapshot_problems(url: str, group: str, topic: str) -> list[str]:
    """Stored submissions are exactly the records below each partition's stored next_offset.

    Read in one snapshot: a transaction the killed consumer had fully sent may still commit.
    """
    with psycopg.connect(libpq_url(url)) as conn:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        with conn.transaction():
            try:
                offsets = conn.execute(
                    "SELECT kafka_partition, next_offset FROM ledger.consumer_offsets "
                    "WHERE consumer_group = %s AND topic = %s",
                    (group, topic),
                ).fetchall()
            except psycopg.errors.UndefinedTable:
                return []  # killed before the (transactional) migration committed: nothing is stored
            rows = conn.execute("SELECT kafka_partition, kafka_offset FROM ledger.submissions").fetchall()
    have = sorted((int(partition), int(offset)) for partition, offset in rows)
    want = sorted((int(partition), offset) for partition, end in offsets for offset in range(int(end)))
    if have == want:
        return []
    extra, lost = sorted(set(have) - set(want)), sorted(set(want) - set(have))
    twice = len(have) - len(set(have))
    return [
        f"beyond the stored offsets: {extra[:5]}, below them but missing: {lost[:5]}, duplicated: {twice}"
    ]


def kill_at_random_point(
    consumer: ConsumerProcess, url: str, rng: random.Random, available: int, label: str, kind: str
) -> str:
    """Wait for a seeded random kill point, SIGKILL, and describe where it struck."""
    before = submission_count(url)
    if kind == "startup":
        time.sleep(rng.uniform(0.0, 2.5))
        where = "during start-up"
    else:
        target = before + rng.randint(1, max(1, min(available - before, 30)))
        deadline = time.monotonic() + DEADLINE
        while submission_count(url) < target:
            assert consumer.proc.poll() is None, (
                f"{label}: consumer exited: {consumer.log_path.read_text()[-3000:]}"
            )
            assert time.monotonic() < deadline, f"{label}: {target} commits not reached in {DEADLINE}s"
            time.sleep(0.02)
        where = f"after {target - before} new commits"
        if kind == "mid_batch":
            time.sleep(rng.uniform(0.0, 0.1))
            where += " plus a random delay"
    consumer.signal(signal.SIGKILL)
    status = consumer.wait(30)
    assert status in (-signal.SIGKILL, 0), f"{label}: unexpected exit status {status}"
    return f"{where} (committed {before} -> {submission_count(url)})"


def test_repeated_sigkill_at_random_points_leaves_every_bundle_exactly_once(
    kafka_bootstrap: str, database_url: str, topic_name: str, tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    env = consumer_env(kafka_bootstrap, database_url, topic_name)
    group = env["LEDGER_GROUP_ID"]
    sent: list[SentRecord] = []
    history: list[str] = []
    poison: dict[tuple[int, int], str] = {}
    for iteration in range(ITERATIONS):
        sent += publish_bundles(kafka_bootstrap, topic_name, len(sent), PER_ITERATION)
        keys = [f"mk_poison_{rng.randrange(16)}".encode() for _ in POISON]
        landed = send_keyed(
            kafka_bootstrap, topic_name, [(k, v, []) for k, (v, _) in zip(keys, POISON, strict=True)]
        )
        poison.update(zip(landed, (reason for _, reason in POISON), strict=True))
        label = f"seed {seed}, iteration {iteration}"
        max_records = rng.choice([3, 7, 20, 50])
        # the first kill may strike a fresh database's migration; later ones anywhere
        kind = "startup" if iteration == 0 else rng.choice(["startup", "after_commits", "mid_batch"])
        consumer = ConsumerProcess(
            ["--max-records", str(max_records), *GROUP_TIMING], env, tmp_path / f"victim-{iteration}.log"
        )
        try:
            history.append(
                f"#{iteration} max_records={max_records}: killed "
                + kill_at_random_point(consumer, database_url, rng, len(sent), label, kind)
            )
        finally:
            consumer.stop()
        problems = atomic_snapshot_problems(database_url, group, topic_name)
        assert not problems, (
            f"{label}: stored records and stored offsets disagree: {problems}; history: {history}"
        )

    run_consumer(tmp_path, env, name="survivor", timeout=300)

    assert_ledger_matches(
        database_url,
        group,
        topic_name,
        sent,
        poison=poison,
        context=f"seed {seed}; kills: {'; '.join(history)}",
    )
    # at least one dead letter per refused record (a kill after the send may have duplicated some)
    letters = read_until(
        kafka_bootstrap, env["LEDGER_DLQ_TOPIC"], lambda got: set(dead_letter_sources(got)) >= set(poison)
    )
    sources = set(dead_letter_sources(letters))
    assert sources == set(poison), (
        f"seed {seed}: dead letters missing for {sorted(set(poison) - sources)[:5]}"
    )
