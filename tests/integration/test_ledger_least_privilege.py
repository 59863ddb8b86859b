"""Least privilege with real logins: a reader cannot stall appends, the consumer runs as a writer,
a row written outside the append path stops appends with the row named, and offset moves are
journaled for ``ledger verify``. Every test creates its own login roles (cluster-wide, so with
unique names) and drops them afterwards."""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from cli.main import main as ledger_main
from consumers.batch import FATAL_LEDGER_ERRORS
from devstack.services import open_writer_store, settings_with
from ledger.connect import create_ledger_engine, libpq_url
from ledger.errors import LedgerDamagedError, LedgerPermissionError
from ledger.migration import current_revision, downgrade, head_revision, upgrade
from ledger.store.hashing import GENESIS_PREV_HASH
from ledger.store.ledger_store import LedgerStore
from ledger.store.records import OffsetAdvance
from ledger.translog.tree import tree_size
from ledger.verify.problems import Problem
from ledger.verify.runner import run_verify
from tests.helpers.database import chain_problems, query
from tests.helpers.ledger_factories import audited

pytestmark = pytest.mark.integration

OLD_APPEND_LOCK_KEY = 0x4C45444745520001  # the advisory key appends used before revision 0005
TOPIC = "evidence-bundles"  # the topic of ledger_factories' operational info
DOCS = Path(__file__).resolve().parents[2] / "docs" / "event-store.md"

Login = Callable[[str], str]
# Ledger-wide verify codes (the factories' drafts carry placeholder PoR hashes, which verify flags too).
LEDGER_WIDE = {"global_seq_gap", "step_entry_missing", "offset_move_unbacked", "offset_journal_missing"}


def _ledger_wide_codes(problems: list[Problem]) -> list[str]:
    return [p.code for p in problems if p.code in LEDGER_WIDE]


def _url_for(database_url: str, user: str, password: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(database_url).set(username=user, password=password).render_as_string(hide_password=False)


@pytest.fixture
def login(database_url: str) -> Iterator[Login]:
    """``login(group_role)`` creates a LOGIN role in ``group_role`` and returns its URL on the test database."""
    created: list[str] = []

    def make(group: str) -> str:
        name = f"lp_{uuid.uuid4().hex[:12]}_{group.removeprefix('ledger_')}"
        with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD 'pw' IN ROLE {}").format(
                    sql.Identifier(name), sql.Identifier(group)
                )
            )
        created.append(name)
        return _url_for(database_url, name, "pw")

    yield make
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        for name in created:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (name,))
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


# -- item 5: a reader cannot block the writer --------------------------------------------------


def test_a_reader_login_cannot_take_the_append_lock(migrated_database_url: str, login: Login) -> None:
    with psycopg.connect(libpq_url(login("ledger_reader"))) as conn:
        for statement in (
            "LOCK TABLE ledger_store.append_lock IN EXCLUSIVE MODE",
            "LOCK TABLE ledger_store.append_lock IN ACCESS SHARE MODE",
            "SELECT * FROM ledger_store.append_lock FOR UPDATE",
            "SELECT * FROM ledger_store.entries FOR SHARE",
            # the writer widens the partial tiles in place: a reader can neither row-lock nor share-lock them
            "SELECT * FROM ledger_store.merkle_tiles FOR KEY SHARE",
            "LOCK TABLE ledger_store.merkle_tiles IN SHARE MODE",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                conn.execute(statement)


def test_a_reader_holding_every_lock_it_can_does_not_block_a_writer_login(
    migrated_database_url: str, login: Login
) -> None:
    reader, writer = login("ledger_reader"), login("ledger_writer")
    with psycopg.connect(libpq_url(reader)) as conn:  # a transaction stays open until the end
        conn.execute("SELECT pg_advisory_lock(%s)", (OLD_APPEND_LOCK_KEY,))
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (OLD_APPEND_LOCK_KEY,))
        for table in ("entries", "submissions", "merkle_tiles", "consumer_offsets", "trace_steps"):
            conn.execute(f"LOCK TABLE ledger_store.{table} IN ACCESS SHARE MODE")
        with LedgerStore(writer, lock_timeout="3s") as store:
            results = store.append_batch([audited("k1")], [OffsetAdvance("g", TOPIC, 0, 0, 1)])
            follow = store.append_batch([audited("k2", offset=1)], [OffsetAdvance("g", TOPIC, 0, 1, 2)])
        assert [r.status for r in results + follow] == ["created", "created"]


def test_concurrent_writer_logins_stay_gapless(migrated_database_url: str, login: Login) -> None:
    writers = [login("ledger_writer") for _ in range(3)]
    errors: list[BaseException] = []

    def work(index: int, url: str) -> None:
        try:
            with LedgerStore(url) as store:
                for n in range(8):
                    store.append_batch([audited(f"w{index}-{n}-a"), audited(f"w{index}-{n}-b", steps=1)])
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i, url)) for i, url in enumerate(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    seqs = [
        row[0]
        for row in query(migrated_database_url, "SELECT global_seq FROM ledger_store.entries ORDER BY 1")
    ]
    assert seqs == list(range(1, len(seqs) + 1))
    with psycopg.connect(libpq_url(migrated_database_url)) as conn:
        assert tree_size(conn) == len(seqs)
    assert chain_problems(migrated_database_url) == []


# -- item 6: the consumer runs with a writer login and never migrates -----------------------------


def _consume(capsys: pytest.CaptureFixture[str], url: str) -> tuple[int, str]:
    code = ledger_main(
        ["consume", "--database-url", url, "--bootstrap", "127.0.0.1:9", "--topic", "t", "--until-idle", "1"]
    )
    return code, capsys.readouterr().err


def test_consume_with_a_writer_login_on_an_old_schema_says_run_migrate(
    database_url: str, login: Login, capsys: pytest.CaptureFixture[str]
) -> None:
    upgrade(database_url, "0003_translog")
    code, err = _consume(capsys, login("ledger_writer"))
    assert code == 2
    assert [line for line in err.splitlines() if line.strip()] == [err.strip()]
    assert "run `ledger migrate` as the ledger owner" in err and "Traceback" not in err
    assert current_revision(database_url) == "0003_translog"


def test_consume_never_migrates_even_with_a_superuser_url(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _consume(capsys, database_url)
    assert code == 2
    assert "none (empty database)" in err and "run `ledger migrate`" in err
    assert current_revision(database_url) is None


def test_consumer_store_appends_as_ledger_writer_even_on_a_superuser_url(
    migrated_database_url: str, login: Login
) -> None:
    with open_writer_store(settings_with(database_url=login("ledger_writer"))) as store:
        assert store.append(audited("by-login")).status == "created"
    with psycopg.connect(libpq_url(migrated_database_url), autocommit=True) as conn:
        conn.execute("REVOKE INSERT ON ledger_store.submissions FROM ledger_writer")
    with open_writer_store(settings_with(database_url=migrated_database_url)) as store:
        assert store.role == "ledger_writer"
        with pytest.raises(LedgerPermissionError):
            store.append(audited("as-superuser"))


def test_consume_refuses_a_login_that_is_not_a_writer(
    migrated_database_url: str, login: Login, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = _consume(capsys, login("ledger_reader"))
    assert code == 2  # a login that may not write: an environment error, nothing was checked


def _reason_worker(capsys: pytest.CaptureFixture[str], url: str) -> tuple[int, str]:
    """Exit code and the command's own last stderr line (earlier tests' log handlers may add noise)."""
    code = ledger_main(["reason-worker", "--database-url", url, "--once", "--providers", "anthropic,openai"])
    lines = capsys.readouterr().err.strip().splitlines()
    return code, lines[-1] if lines else ""


def test_reason_worker_with_a_writer_login_on_an_old_schema_says_run_migrate(
    database_url: str, login: Login, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-used")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    upgrade(database_url, "0003_translog")
    code, err = _reason_worker(capsys, login("ledger_writer"))
    assert code == 2, err
    assert "run `ledger migrate` as the ledger owner" in err and "Traceback" not in err
    assert current_revision(database_url) == "0003_translog"


def test_reason_worker_never_migrates_and_refuses_a_reader_login(
    database_url: str, login: Login, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-used")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    code, err = _reason_worker(capsys, database_url)
    assert code == 2, err
    assert current_revision(database_url) is None
    upgrade(database_url, head_revision())
    code, err = _reason_worker(capsys, login("ledger_reader"))
    assert code == 2 and "ledger_writer" in err, err  # an environment error, as for consume


# -- item 7: a bad row, and the offsets lever ------------------------------------------------------


def _insert_bad_row(writer_url: str) -> int:
    """As a writer login, bypass the append path: one entry whose entry_hash is wrong."""
    with psycopg.connect(libpq_url(writer_url)) as conn:
        seq = int(
            conn.execute("SELECT coalesce(max(global_seq), 0) + 1 FROM ledger_store.entries").fetchone()[0]
        )
        submission_id = "0x" + "ab" * 32
        conn.execute(
            "INSERT INTO ledger_store.submissions (submission_id, idempotency_key, status, input_hashes_canonical, "
            "engine_version) VALUES (%s, 'forged', 'audited', '{}', '1.0.0')",
            (submission_id,),
        )
        conn.execute(
            "INSERT INTO ledger_store.entries (global_seq, submission_id, stream_seq, kind, payload_canonical, "
            "payload_hash, prev_hash, entry_hash, engine_version) VALUES (%s, %s, 1, 'submission.received', '{}', "
            "%s, %s, %s, '1.0.0')",
            (
                seq,
                submission_id,
                "0x" + "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",
                GENESIS_PREV_HASH,
                "0x" + "cd" * 32,
            ),
        )
    return seq


def _recovery_sql() -> str:
    text = DOCS.read_text()
    section = text[text.index("**Recovering from a damaged ledger.**") :]
    match = re.search(r"```postgresql\n(.*?)```", section, re.S)
    assert match is not None
    return match.group(1)


def test_a_bad_row_stops_appends_with_the_row_named_and_the_documented_recovery_works(
    migrated_database_url: str, login: Login
) -> None:
    writer = login("ledger_writer")
    with LedgerStore(writer) as store:
        store.append(audited("before"))  # no source: stored before the offsets exist
        bad_seq = _insert_bad_row(writer)
        with pytest.raises(LedgerDamagedError) as caught:
            store.append(audited("after", offset=0), [OffsetAdvance("g", TOPIC, 0, 0, 1)])
        assert f"global_seq {bad_seq}" in caught.value.message and "0xabab" in caught.value.message
        assert "Recovering from a damaged ledger" in caught.value.message
        assert isinstance(caught.value, FATAL_LEDGER_ERRORS)  # the consumer stops, never dead-letters
        assert store.load_offsets("g", TOPIC) == {}  # the failed batch left nothing behind
    with psycopg.connect(libpq_url(login("ledger_owner")), autocommit=True) as conn:
        conn.execute(_recovery_sql())
    with LedgerStore(writer) as store:
        assert (
            store.append(audited("after", offset=0), [OffsetAdvance("g", TOPIC, 0, 0, 1)]).status == "created"
        )
    assert chain_problems(migrated_database_url) == []
    seqs = [
        row[0]
        for row in query(migrated_database_url, "SELECT global_seq FROM ledger_store.entries ORDER BY 1")
    ]
    assert seqs == list(range(1, len(seqs) + 1))
    forged = "SELECT count(*) FROM ledger_store.submissions WHERE submission_id = %s"
    assert query(migrated_database_url, forged, ("0x" + "ab" * 32,)) == [(0,)]
    report = run_verify(create_ledger_engine(migrated_database_url))
    assert _ledger_wide_codes(report.problems) == [] and report.max_global_seq == bad_seq + 6 - 1


def test_a_writer_cannot_hide_an_offset_move_and_verify_names_it(
    migrated_database_url: str, login: Login
) -> None:
    writer = login("ledger_writer")
    with LedgerStore(writer) as store:
        store.append(audited("k1", offset=0), [OffsetAdvance("g", TOPIC, 0, 0, 1)])
    engine = create_ledger_engine(migrated_database_url)
    assert _ledger_wide_codes(run_verify(engine).problems) == []
    with psycopg.connect(libpq_url(writer), autocommit=True) as conn:
        conn.execute("UPDATE ledger_store.consumer_offsets SET next_offset = 1001")
        for statement in (
            "INSERT INTO ledger_store.consumer_offset_moves (consumer_group, topic, kafka_partition, to_offset, "
            "moved_by) VALUES ('g', 't', 0, 1001, 'x')",
            "DELETE FROM ledger_store.consumer_offset_moves",
            "ALTER TABLE ledger_store.consumer_offsets DISABLE TRIGGER consumer_offsets_journal",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
    problems = [p for p in run_verify(engine).problems if p.code in LEDGER_WIDE]
    assert [p.code for p in problems] == ["offset_move_unbacked"]
    assert problems[0].details["from_offset"] == 1 and problems[0].details["to_offset"] == 1001
    assert problems[0].details["moved_by"] == writer.split("//")[1].split(":")[0]


def test_migration_0005_goes_down_and_up_on_a_ledger_holding_data(migrated_database_url: str) -> None:
    with LedgerStore(migrated_database_url) as store:
        store.append(audited("k1", offset=0), [OffsetAdvance("g", TOPIC, 0, 0, 1)])
    downgrade(migrated_database_url, "0003_translog")
    assert query(migrated_database_url, "SELECT to_regclass('ledger_store.append_lock')") == [(None,)]
    upgrade(migrated_database_url)
    assert current_revision(migrated_database_url) == head_revision()
    moves = query(
        migrated_database_url,
        "SELECT from_offset, to_offset, moved_by FROM ledger_store.consumer_offset_moves",
    )
    assert moves == [(None, 1, "migration 0005 baseline")]
    with LedgerStore(migrated_database_url, role="ledger_writer") as store:
        assert store.append(audited("k2", offset=1), [OffsetAdvance("g", TOPIC, 0, 1, 2)]).status == "created"
    assert _ledger_wide_codes(run_verify(create_ledger_engine(migrated_database_url)).problems) == []


def test_ledger_consume_runs_with_a_writer_login_and_its_offset_moves_are_backed(
    kafka_bootstrap: str, database_url: str, login: Login, topic_name: str, tmp_path: Path
) -> None:
    from tests.helpers.consumer import assert_ledger_exact, consumer_env, make_inputs, publish, run_consumer

    documents = [make_inputs(index) for index in range(12)]
    publish(kafka_bootstrap, topic_name, documents)
    env = consumer_env(kafka_bootstrap, database_url, topic_name)  # migrated here as the superuser
    env["LEDGER_DATABASE_URL"] = login("ledger_writer")
    run_consumer(tmp_path, env)
    assert_ledger_exact(database_url, {doc["evidence_bundle"]["bundle_id"] for doc in documents})
    movers = query(database_url, "SELECT DISTINCT moved_by FROM ledger_store.consumer_offset_moves")
    assert movers == [(env["LEDGER_DATABASE_URL"].split("//")[1].split(":")[0],)]
    assert _ledger_wide_codes(run_verify(create_ledger_engine(database_url)).problems) == []
