"""The SQL interface as documented: every example query in docs/event-store.md runs as ledger_reader."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ledger.store.ledger_store import LedgerStore
from tests.helpers.database import query, tamper
from tests.helpers.ledger_factories import audited, rejected

pytestmark = pytest.mark.integration

DOC = Path(__file__).resolve().parents[2] / "docs" / "event-store.md"
QUERIES = re.findall(r"```sql\n(.*?)```", DOC.read_text(), flags=re.S)


@pytest.fixture
def populated(migrated_database_url: str) -> str:
    """Audits (one conflicting, one with insufficient evidence), a rejection and a conflict."""
    with LedgerStore(migrated_database_url) as store:
        store.append_batch(
            [
                audited("bundle-0001", market_id="btc-above-100k", conflict=True),
                audited("bundle-0002", market_id="eth-flip", insufficient=True, outcome="NO"),
                rejected("raw-1", b"{oops"),
            ]
        )
        store.append(audited("bundle-0001", market_id="btc-above-100k", variant=7))
    return migrated_database_url


def test_the_document_has_the_promised_examples() -> None:
    assert len(QUERIES) >= 8
    text = " ".join(QUERIES)
    for view in ("audit_results", "trace_steps", "verdicts", "rejections", "submissions"):
        assert f"ledger.{view}" in text


@pytest.mark.parametrize("example", QUERIES, ids=[f"example{i}" for i in range(len(QUERIES))])
def test_each_example_runs_as_the_reader(populated: str, example: str) -> None:
    query(populated, example, role="ledger_reader")


def test_examples_answer_the_questions(populated: str) -> None:
    conflicting, steps, insufficient = (query(populated, text, role="ledger_reader") for text in QUERIES[:3])
    assert len(conflicting) == 1
    assert [row[1] for row in steps] == ["step_0001", "step_0002", "step_0003"]
    assert [row[0] for row in insufficient] == ["eth-flip"]


def test_sql_hash_check_passes_then_catches_a_superuser_edit(populated: str) -> None:
    (check,) = [q for q in QUERIES if "payload_ok" in q]
    (gaps,) = [q for q in QUERIES if "gapless" in q]
    assert query(populated, check, role="ledger_reader") == []
    assert query(populated, gaps, role="ledger_reader")[0][2] is True
    tamper(populated, "DELETE FROM ledger_store.entries WHERE global_seq = 3")
    tamper(
        populated,
        "UPDATE ledger_store.entries SET payload_canonical = replace(payload_canonical, 'NO', 'YES') "
        "WHERE kind = 'verdict.issued'",
    )
    flagged = query(populated, check, role="ledger_reader")
    assert {row[0] for row in flagged} >= {4}  # the entry after the deleted one breaks its chain
    assert any(row[3] is False for row in flagged)  # payload_ok false for the edited verdict
    assert query(populated, gaps, role="ledger_reader")[0][2] is False


ROOT = Path(__file__).resolve().parents[2]


def _readme_views() -> set[str]:
    text = (ROOT / "README.md").read_text()
    listing = re.search(r"The stable views live in schema `ledger`:(.*?)\.\s", text, flags=re.S)
    assert listing, "README no longer lists the views"
    return set(re.findall(r"`(\w+)`", listing.group(1)))


def _documented_views() -> set[str]:
    return set(re.findall(r"^\| `ledger\.(\w+)` \|", DOC.read_text(), flags=re.M))


def test_readme_and_event_store_list_exactly_the_views_the_migrations_create(
    migrated_database_url: str,
) -> None:
    rows = query(
        migrated_database_url, "SELECT table_name FROM information_schema.views WHERE table_schema = 'ledger'"
    )
    views = {str(name) for (name,) in rows}
    assert {"log_checkpoints", "por_verifications"} <= views
    assert _readme_views() == views
    assert _documented_views() == views
