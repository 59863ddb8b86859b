"""Attack on the binary COPY of the entries (ledger.store.copy_binary): for hostile values the
server stores exactly what the text COPY (ledger.store.copy_text, the format before) stores, a
corrupted length word in the stream is refused, and a client encoding other than UTF8 stores the
same text or is refused, on a UTF8 and on a SQL_ASCII database.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from ledger.connect import libpq_url
from ledger.errors import ClientEncodingError
from ledger.migration import upgrade
from ledger.store import copy_binary, copy_text
from ledger.store.append import begin_append, prepare, write_batch
from ledger.store.records import ENTRY_WRITE_COLUMNS, STEP_WRITE_COLUMNS
from tests.helpers.ledger_factories import audited

pytestmark = pytest.mark.integration

COLUMNS = f"{ENTRY_WRITE_COLUMNS}, {STEP_WRITE_COLUMNS}"
SID = "0x" + "1" * 64
HASH = "0x" + "2" * 64
INT4 = (-(2**31), 2**31 - 1)
# values COPY text escapes, array literals quote, JSON escapes, plus non-BMP and long ones
HOSTILE = [
    "",
    "\\",
    "\\.",
    "\\N",
    "NULL",
    "%d%s%%",
    "\b\t\n\v\f\r\x7f\x1f",
    '{"a":[1,2]}',
    "é\u2028\U0001f600\U0010ffff",
    "a" * 4097,
]
EVIDENCE = [
    [],
    [""],
    ["NULL"],
    ["null", "NULL ", " NULL"],
    ["a,b", "{x}", '"q"', "back\\slash", " sp ", "\\N", "\t\n"],
    ["\U0001f600", "é" * 3000],
    [f"e{i}" for i in range(20_000)],
]


def _rows() -> tuple[list[tuple[Any, ...]], dict[int, tuple[Any, ...]]]:
    """Entries and steps holding every hostile value in every user field, int4 edges and a 1 MB payload."""
    entries: list[tuple[Any, ...]] = []
    steps: dict[int, tuple[Any, ...]] = {}
    values = [*HOSTILE, "p" * (1 << 20) + "\U0001f600"]
    for i, value in enumerate(values):
        seq = INT4[i % 2] if i < 2 else i - 5  # stream_seq at both int4 edges, negative, zero
        entries.append((seq, value, HOSTILE[-1 - i % len(HOSTILE)], HASH, HASH, f"0x{i:064x}"))
        index = (*INT4, 0, -1)[i % 4]
        steps[i] = (index, value, HOSTILE[i % len(HOSTILE)], EVIDENCE[i % len(EVIDENCE)], value, value)
    entries.append((99, "no.step", "{}", HASH, HASH, HASH))
    return entries, steps


@pytest.fixture
def conn(migrated_database_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(libpq_url(migrated_database_url)) as connection:
        for table in ("binary_rows", "text_rows"):
            connection.execute(f"CREATE TEMP TABLE {table} (LIKE ledger_store.entries INCLUDING DEFAULTS)")
        yield connection


def _stored(conn: psycopg.Connection[Any], table: str) -> list[tuple[Any, ...]]:
    return conn.execute(
        f"SELECT {COLUMNS}, array_ndims(evidence_ids), array_lower(evidence_ids, 1), "
        f"cardinality(evidence_ids), array_position(evidence_ids, NULL) FROM {table} ORDER BY global_seq"
    ).fetchall()


@pytest.mark.parametrize("first", [1, 2**63 - 32])
def test_hostile_rows_are_stored_the_same_by_binary_and_text_copy(
    conn: psycopg.Connection[Any], first: int
) -> None:
    entries, steps = _rows()
    binary = copy_binary.entries_copy_data(
        [(first, copy_binary.entries_template(SID, "v\\%", entries, steps), len(entries))]
    )
    text = copy_text.entries_copy_data(
        [(first, copy_text.entries_template(SID, "v\\%", entries, steps), len(entries))]
    )
    with conn.cursor() as cur:
        with cur.copy(f"COPY binary_rows ({COLUMNS}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(binary)
        with cur.copy(f"COPY text_rows ({COLUMNS}) FROM STDIN") as copy:
            copy.write(text)
    stored = _stored(conn, "binary_rows")
    assert stored == _stored(conn, "text_rows")
    expected = []
    for position, entry in enumerate(entries):
        step = steps.get(position)
        body = (None,) * 6 if step is None else (*step[:3], list(step[3]), *step[4:])
        expected.append((first + position, SID, *entry, "v\\%", *body))
    assert [row[:15] for row in stored] == expected
    for row, (position, _) in zip(stored, enumerate(entries), strict=True):
        ids = steps[position][3] if position in steps else None
        shape = (
            (None, None, None, None)
            if ids is None
            else (1, 1, len(ids), None)
            if ids
            else (None,) * 2 + (0, None)
        )
        assert row[15:] == shape  # '{}' is stored with no dimension, as array_in stores it


def _length_offsets(data: bytes) -> list[int]:
    """Offsets of every length word of the one-row stream (fields, and the array's elements)."""
    offsets, at = [], len(copy_binary.SIGNATURE) + 2
    for _ in range(copy_binary.FIELDS):
        size = int.from_bytes(data[at : at + 4], "big", signed=True)
        offsets.append(at)
        if size > 12 and data[at + 12 : at + 16] == copy_binary.TEXT_OID.to_bytes(4, "big"):
            inner, count = at + 4 + 20, int.from_bytes(data[at + 16 : at + 20], "big")
            for _ in range(count):
                offsets.append(inner)
                inner += 4 + int.from_bytes(data[inner : inner + 4], "big")
        at += 4 + max(size, 0)
    return offsets


def test_a_length_word_off_by_one_is_refused_by_the_server(conn: psycopg.Connection[Any]) -> None:
    entries = [(1, "kind", '{"a":1}', HASH, HASH, HASH)]
    steps = {0: (3, "id", "type", ["ev1", "ev2"], HASH, "{}")}
    data = copy_binary.entries_copy_data([(1, copy_binary.entries_template(SID, "v", entries, steps), 1)])
    offsets = _length_offsets(data)
    assert len(offsets) == copy_binary.FIELDS + 2
    for at in offsets:
        size = int.from_bytes(data[at : at + 4], "big", signed=True)
        if size < 0:
            continue  # the NULL global_seq... none here: every field of this row is set
        for changed in (size - 1, size + 1):
            bad = data[:at] + changed.to_bytes(4, "big", signed=True) + data[at + 4 :]
            with (
                pytest.raises(psycopg.Error),
                conn.transaction(),
                conn.cursor() as cur,
                cur.copy(f"COPY binary_rows ({COLUMNS}) FROM STDIN (FORMAT BINARY)") as copy,
            ):
                copy.write(bad)
    assert _stored(conn, "binary_rows") == []


MARKET = 'mé\t"q"\\{a,b}\n%d ÿ'


def _append(url: str, encoding: str, key: str, market: str) -> str:
    """One audited draft appended as ledger_writer on a connection with ``encoding``: 'ok' or the error's type."""
    try:
        with (
            psycopg.connect(libpq_url(url), options=f"-c client_encoding={encoding}") as conn,
            conn.cursor() as cur,
        ):
            begin_append(cur, role="ledger_writer", lock_timeout="10s", idle_timeout="10s")
            write_batch(cur, [prepare(audited(key, market_id=market, steps=2))], [])
    except (ClientEncodingError, UnicodeEncodeError) as exc:
        return type(exc).__name__
    return "ok"


def _raw(url: str, key: str) -> list[tuple[Any, ...]]:
    """The key's stored market_id, then each entry's payload, step body and evidence ids, as bytes."""
    with psycopg.connect(libpq_url(url), options="-c client_encoding=UTF8") as conn:
        return conn.execute(
            "SELECT convert_to(s.market_id, 'UTF8'), NULL, NULL FROM ledger_store.submissions s "
            "WHERE s.idempotency_key = %(k)s UNION ALL (SELECT convert_to(e.payload_canonical, 'UTF8'), "
            "convert_to(e.canonical_step, 'UTF8'), e.evidence_ids FROM ledger_store.entries e "
            "JOIN ledger_store.submissions s USING (submission_id) WHERE s.idempotency_key = %(k)s "
            "ORDER BY e.stream_seq)",
            {"k": key},
        ).fetchall()


def _expected(key: str, market: str) -> list[tuple[Any, ...]]:
    """What :func:`_raw` must read for the draft (its values encoded as UTF-8)."""
    offer = prepare(audited(key, market_id=market, steps=2))
    steps = {row[0]: row for row in offer.step_rows}
    return [(market.encode(), None, None)] + [
        (entry[2].encode(), *((steps[i][6].encode(), steps[i][4]) if i in steps else (None, None)))
        for i, entry in enumerate(offer.entries)
    ]


@pytest.fixture
def sql_ascii_url(migrated_database_url: str) -> Iterator[str]:
    """A migrated SQL_ASCII database beside the test one (dropped afterwards)."""
    name = f"attack16c_{uuid.uuid4().hex[:12]}"
    admin_url = libpq_url(migrated_database_url)
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(
            f"CREATE DATABASE {name} ENCODING 'SQL_ASCII' TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'"
        )
    base = migrated_database_url.rsplit("/", 1)[0] + "/" + name
    try:
        upgrade(base + "?options=-c%20client_encoding%3DUTF8")  # SQLAlchemy cannot read SQL_ASCII names
        yield base
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.mark.parametrize("kind", ["utf8", "sql_ascii"])
def test_every_client_encoding_stores_the_utf8_bytes_or_is_refused(
    kind: str, migrated_database_url: str, request: pytest.FixtureRequest
) -> None:
    url = migrated_database_url if kind == "utf8" else request.getfixturevalue("sql_ascii_url")
    assert _append(url, "UTF8", "reference", MARKET) == "ok"
    assert _raw(url, "reference") == _expected("reference", MARKET)
    outcomes = {}
    for encoding in ("LATIN1", "WIN1252", "SQL_ASCII"):
        for suffix, market in (("latin", MARKET), ("emoji", MARKET + "\U0001f600")):
            key = f"reference-{encoding}-{suffix}"
            outcomes[key] = _append(url, encoding, key, market)
            # stored as the UTF8 connection stores it, or (refused) nothing written
            assert _raw(url, key) == (_expected(key, market) if outcomes[key] == "ok" else []), key
    if kind == "utf8":  # the server converts: text that LATIN1/WIN1252 cannot hold fails in the client
        assert outcomes == {
            "reference-LATIN1-latin": "ok",
            "reference-LATIN1-emoji": "UnicodeEncodeError",
            "reference-WIN1252-latin": "ok",
            "reference-WIN1252-emoji": "UnicodeEncodeError",
            "reference-SQL_ASCII-latin": "ok",
            "reference-SQL_ASCII-emoji": "ok",
        }
    else:  # stored unconverted: only UTF8 and SQL_ASCII clients (UTF-8 bytes) may append
        assert outcomes == {
            "reference-LATIN1-latin": "ClientEncodingError",
            "reference-LATIN1-emoji": "ClientEncodingError",
            "reference-WIN1252-latin": "ClientEncodingError",
            "reference-WIN1252-emoji": "ClientEncodingError",
            "reference-SQL_ASCII-latin": "ok",
            "reference-SQL_ASCII-emoji": "ok",
        }
