"""The entries table's COPY data in PostgreSQL's binary format, built before the append lock.

The server parses a text-format COPY row byte by byte (line splitting, de-escaping, each value's
input function): about 11,000 of the 67,500 instructions an entry row cost the backend
(docs/event-store.md §8). In ``FORMAT BINARY`` each value arrives with its length, so a text
value is only checked as UTF-8 and copied.

``prepare`` builds a submission's rows once (:func:`entries_template`: one ``bytes`` per entry,
everything after its ``global_seq``), and :func:`entries_copy_data` puts each row's field count,
``global_seq`` and the format's signature and trailer around them under the lock, for one
``copy.write`` per batch. The bytes are the ones psycopg's binary formatter
(``psycopg._copy_base.format_row_binary`` with the columns' types) writes for the same rows:
``tests/unit/test_copy_binary.py`` compares them (hypothesis).

What is refused is what :func:`ledger.store.copy_text.entries_template` refuses (U+0000, a lone
surrogate, a value that is not a ``str``, a ``step_index`` that is not an ``int``), with the same
error and path: on any of them that function is called to raise it. A ``str`` subclass (which the
text format writes as its characters unless another value needs escaping, and refuses otherwise)
is also given to that function, and written as its characters if it does not refuse. A text value is sent as UTF-8
bytes, so the connection's client encoding must be UTF8 or SQL_ASCII (``ledger.store.append``
writes the text format otherwise). A ``step_index`` outside PostgreSQL's ``integer`` (which the
server refused in the text format) is refused here.

Pure functions over strings and bytes (no dataclass or named tuple is defined here), so the
module can be compiled (:data:`ledger.build.LEDGER`).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, Final

from ledger.errors import InvalidDraftError
from ledger.store.copy_text import entries_template as text_template

__all__ = ["SIGNATURE", "TRAILER", "entries_copy_data", "entries_template"]

SIGNATURE: Final = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"
"""The binary COPY header: signature, flags (no OIDs), header extension length 0."""
TRAILER: Final = b"\xff\xff"
"""The binary COPY trailer (a field count of -1)."""
FIELDS: Final = 15
"""``ENTRY_WRITE_COLUMNS`` (9) then ``STEP_WRITE_COLUMNS`` (6)."""
TEXT_OID: Final = 25
"""The element type of ``evidence_ids`` (``text[]``), which ``array_recv`` checks."""

_HEAD: Final = struct.Struct(">hiq")  # the row's field count, then global_seq (int8: length 8, value)
_LENGTH: Final = struct.Struct(">i")
_INT4: Final = struct.Struct(">ii")  # an int4 value: length 4, value
_ARRAY_HEAD: Final = struct.Struct(">iiiii")  # length, ndim 1, no NULLs, element type, then dim size and
_LOWER_BOUND_1: Final = b"\x00\x00\x00\x01"  # the lower bound
_EMPTY_ARRAY: Final = _LENGTH.pack(12) + struct.pack(">iii", 0, 0, TEXT_OID)  # ndim 0, as '{}' is stored
_NULL_STEP: Final = b"\xff\xff\xff\xff" * 6  # the six step columns of an entry that is no trace.step
_INT4_MIN: Final = -(2**31)
_INT4_MAX: Final = 2**31 - 1
_LENGTHS: Final = tuple(_LENGTH.pack(size) for size in range(4096))


def entries_template(
    submission_id: str,
    version: str,
    entries: Sequence[tuple[Any, ...]],
    steps: dict[int, tuple[Any, ...]],
) -> tuple[bytes, ...]:
    """The submission's entry rows in binary COPY format, each without its field count and
    ``global_seq`` (:func:`entries_copy_data` puts them in front).

    The arguments are :func:`ledger.store.copy_text.entries_template`'s: ``entries`` is
    ``(stream_seq, kind, payload_canonical, payload_hash, prev_hash, entry_hash)`` per entry,
    ``steps`` by entry position ``(step_index, step_id, step_type, evidence_ids, step_hash,
    canonical_step)``. What that function refuses is refused, with its error (it is called to
    raise it).
    """
    if not entries:
        return ()
    user: list[str] = []
    odd: list[bool] = []
    rows: list[bytes] | None
    try:
        rows = _rows(submission_id, version, entries, steps, user, odd)
        # U+0000 anywhere, or a str subclass (written as its characters, as the text format
        # writes it when it does not refuse it): the text format decides
        if rows is not None and (odd or "\x00" in "".join(user)):
            text_template(submission_id, version, entries, steps)
            if "\x00" in "".join(user):
                rows = None
    except (TypeError, AttributeError, UnicodeEncodeError, struct.error):  # not a str, a lone surrogate
        rows = None
    if rows is None:
        text_template(submission_id, version, entries, steps)  # raises with the value's path
        raise InvalidDraftError("the entry rows cannot be written as COPY data", field_path="entries")
    return tuple(rows)


def _rows(
    submission_id: str,
    version: str,
    entries: Sequence[tuple[Any, ...]],
    steps: dict[int, tuple[Any, ...]],
    user: list[str],
    odd: list[bool],
) -> list[bytes] | None:
    """The rows; ``user`` gets every value the caller must check for U+0000, ``odd`` a note of each
    ``str`` subclass. None: refuse.

    Each text value is two parts, its length and its bytes; a row is one ``join`` of its parts.
    An entry's ``prev_hash`` is the previous entry's ``entry_hash`` (ledger-made), whose bytes are
    reused when they are equal."""
    plain_version = _plain(version, odd)  # a value that is no str: TypeError, refused by the caller
    user.append(plain_version)
    sid = submission_id.encode()
    sid_length = _length(len(sid))
    encoded_version = plain_version.encode()
    version_length = _length(len(encoded_version))
    rows: list[bytes] = []
    last_hash = ""
    last_data = b""
    for position, (seq, kind, text, digest, prev, current) in enumerate(entries):
        plain_kind = _plain(kind, odd)
        plain_text = _plain(text, odd)
        user.append(plain_kind)
        user.append(plain_text)
        kind_data = plain_kind.encode()
        text_data = plain_text.encode()
        digest_data = digest.encode()
        prev_data = last_data if prev == last_hash else prev.encode()
        current_data = current.encode()
        last_hash = current
        last_data = current_data
        parts = [sid_length, sid, _INT4.pack(4, seq), _length(len(kind_data)), kind_data,
                 _length(len(text_data)), text_data, _length(len(digest_data)), digest_data,
                 _length(len(prev_data)), prev_data, _length(len(current_data)), current_data,
                 version_length, encoded_version]  # fmt: skip
        step = steps.get(position)
        if step is None:
            parts.append(_NULL_STEP)
        else:
            index, step_id, step_type, evidence_ids, step_digest, canonical_step = step
            if type(index) is not int:
                return None
            plain_id = _plain(step_id, odd)
            plain_type = _plain(step_type, odd)
            plain_digest = _plain(step_digest, odd)
            plain_step = _plain(canonical_step, odd)
            if not _INT4_MIN <= index <= _INT4_MAX:
                raise InvalidDraftError(
                    "step_index does not fit PostgreSQL's integer", field_path=f"steps[{index}].step_index"
                )
            user.append(plain_id)
            user.append(plain_type)
            user.append(plain_digest)
            user.append(plain_step)
            array = _text_array(evidence_ids, user)
            if array is None:
                return None
            id_data = plain_id.encode()
            type_data = plain_type.encode()
            step_digest_data = plain_digest.encode()
            step_data = plain_step.encode()
            parts += (_INT4.pack(4, index), _length(len(id_data)), id_data, _length(len(type_data)), type_data,
                      array, _length(len(step_digest_data)), step_digest_data, _length(len(step_data)),
                      step_data)  # fmt: skip
        rows.append(b"".join(parts))
    return rows


def _plain(value: Any, odd: list[bool]) -> str:
    """``value`` as an exact ``str``: a subclass copied (and noted in ``odd``), anything else refused."""
    if type(value) is str:
        return value
    if isinstance(value, str):
        odd.append(True)
        return str.__str__(value)
    raise TypeError(type(value).__name__)


def _length(size: int) -> bytes:
    """A value's length word (precomputed below 4,096 bytes)."""
    return _LENGTHS[size] if size < 4096 else _LENGTH.pack(size)


def _text_array(values: Sequence[Any], user: list[str]) -> bytes | None:
    """A one-dimensional ``text[]`` without NULLs (``array_send``'s layout), or None if a value is no ``str``."""
    if not values:
        return _EMPTY_ARRAY
    items: list[bytes] = []
    size = 20  # the four header words and the lower bound
    for value in values:
        if type(value) is not str:
            return None
        user.append(value)
        data = value.encode()
        items.append(_length(len(data)))
        items.append(data)
        size += 4 + len(data)
    return _ARRAY_HEAD.pack(size, 1, 0, TEXT_OID, len(values)) + _LOWER_BOUND_1 + b"".join(items)


def entries_copy_data(batches: Sequence[tuple[int, Sequence[bytes], int]]) -> bytes:
    """The whole binary COPY stream of whole submissions: signature, each ``(first global_seq,
    template rows, entry count)`` with its positions put in, trailer."""
    parts = [SIGNATURE]
    head = _HEAD.pack
    for first, rows, count in batches:
        if len(rows) != count:
            raise ValueError(f"{len(rows)} rows for {count} entries")
        seq = first
        for row in rows:
            parts.append(head(FIELDS, 8, seq))
            parts.append(row)
            seq += 1
    parts.append(TRAILER)
    return b"".join(parts)
