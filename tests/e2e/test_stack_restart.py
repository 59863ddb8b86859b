"""``ledger down`` then ``ledger up``: the broker's log is new, and new bundles must not be lost.

The embedded broker keeps its log in memory, so each ``ledger up`` starts a new log whose
offsets restart at 0, while the offsets stored in PostgreSQL only move forward. The consumer must
record the new source incarnation and consume the new log from its start; ``ledger health`` must
say so until it has.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import psycopg
import pytest

from devstack.stack import default_corpus_dir
from tests.e2e.test_stack import ledger, ok, workdir
from tests.helpers.consumer import make_inputs

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(400)]

__all__ = ["workdir"]  # the fixture, imported for this module's tests

NEW_BUNDLES = 10


def database_url(up_output: str) -> str:
    found = re.search(r"^database URL\s+(postgresql://\S+)$", up_output, re.M)
    assert found, up_output
    return found.group(1)


def test_new_bundles_after_down_and_up_are_consumed_and_the_new_log_is_recorded(workdir: Path) -> None:
    corpus = default_corpus_dir()
    bundles = sorted(str(path) for path in (corpus / "bundles").glob("*.json"))
    poison = sorted(str(path) for path in (corpus / "poison").glob("*.json"))
    ok(ledger(workdir, "up"))
    ok(ledger(workdir, "publish", *bundles))
    ok(ledger(workdir, "publish", "--raw", *poison))
    ok(ledger(workdir, "consume", "--until-idle", "3"))
    ok(ledger(workdir, "down"))

    url = database_url(ok(ledger(workdir, "up")))
    new = []
    for index in range(NEW_BUNDLES):
        path = workdir / f"new{index}.json"
        path.write_text(json.dumps(make_inputs(900 + index)))
        new.append(str(path))
    ok(ledger(workdir, "publish", *new))
    undecided = ledger(workdir, "health")
    assert undecided.returncode == 1, undecided.stdout + undecided.stderr
    assert "UNDECIDED" in undecided.stdout

    ok(ledger(workdir, "consume", "--until-idle", "3"))

    with psycopg.connect(url, connect_timeout=10) as conn:
        stored = {row[0] for row in conn.execute("SELECT bundle_id FROM ledger.submissions").fetchall()}
        incarnations = conn.execute(
            "SELECT incarnation, reason FROM ledger.source_incarnations ORDER BY incarnation"
        ).fetchall()
        dead_letters = conn.execute(
            "SELECT count(*) FROM ledger.rejections WHERE dlq_partition IS NOT NULL AND dlq_offset IS NOT NULL"
        ).fetchone()
    assert {f"bundle_{900 + index:06d}" for index in range(NEW_BUNDLES)} <= stored
    assert [reason for _, reason in incarnations] == ["first", "cluster_changed"]
    assert dead_letters == (len(poison),)
    healthy = ok(ledger(workdir, "health"))
    assert "total lag 0" in healthy and "source log: ok incarnation 2" in healthy
    ok(ledger(workdir, "verify"))
