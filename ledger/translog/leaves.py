"""What a leaf of the ledger's RFC 6962 tree is, recomputable by anyone from an entry's columns.

Leaf ``i`` (0-based) is the entry with ``global_seq = i + 1``; its leaf input ``d`` is the 32 raw
bytes of the entry's ``entry_hash`` (:func:`ledger.store.hashing.merkle_leaf_data`), so its leaf hash is
``SHA-256(0x00 || entry_hash bytes)``. ``entry_hash`` commits to the submission id (the stream),
``stream_seq``, ``kind``, ``payload_hash``, ``prev_hash`` and ``engine_version``; ``payload_hash``
is the SHA-256 of the stored canonical payload text. A verifier that holds an entry's columns
recomputes all three hashes; one that holds only ``entry_hash`` still checks the leaf.

Pure code (no database): the independent verifier imports it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from engine.merkle.rfc6962 import leaf_hash
from ledger.store.hashing import entry_hash, merkle_leaf_data, payload_hash
from ledger.translog.leaf_fill import fill_leaves

__all__ = [
    "ENTRY_FIELDS",
    "EntryCheckError",
    "ProvenLeaves",
    "check_stored_entry",
    "entry_leaf_hash",
    "hash_from_hex",
    "hex32",
    "leaf_index_for",
    "recompute_entry_hash",
]

ENTRY_FIELDS = (
    "global_seq",
    "submission_id",
    "stream_seq",
    "kind",
    "payload_hash",
    "prev_hash",
    "entry_hash",
    "engine_version",
)
_HEX32 = re.compile(r"0x[0-9a-f]{64}")


class EntryCheckError(ValueError):
    """An entry's stored fields do not hash to what it claims, or are malformed.

    ``code`` is ``malformed_entry``, ``payload_hash_mismatch`` or ``entry_hash_mismatch``.
    """

    def __init__(self, message: str, code: str = "malformed_entry") -> None:
        super().__init__(message)
        self.code = code


def hex32(value: bytes) -> str:
    """A 32-byte hash as ``0x`` + lowercase hex (the project's hash notation)."""
    return "0x" + value.hex()


def hash_from_hex(text: object, what: str) -> bytes:
    """Parse a ``0x`` + 64 lowercase hex digit hash; raises ``EntryCheckError`` naming ``what``."""
    if not isinstance(text, str) or not _HEX32.fullmatch(text):
        raise EntryCheckError(f"{what} must be 0x followed by 64 lowercase hex digits, got {text!r:.80}")
    return bytes.fromhex(text[2:])


def entry_leaf_hash(entry_hash_hex: str) -> bytes:
    """The RFC 6962 leaf hash of an entry: ``SHA-256(0x00 || entry_hash bytes)``."""
    return leaf_hash(merkle_leaf_data(entry_hash_hex))


def leaf_index_for(global_seq: int) -> int:
    """Leaf index of the entry with ``global_seq`` (which starts at 1)."""
    return global_seq - 1


def _int_field(entry: Mapping[str, Any], name: str) -> int:
    value = entry.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise EntryCheckError(f"entry field {name} must be a positive integer, got {value!r:.80}")
    return value


def _str_field(entry: Mapping[str, Any], name: str) -> str:
    value = entry.get(name)
    if not isinstance(value, str):
        raise EntryCheckError(f"entry field {name} must be a string, got {value!r:.80}")
    return value


def recompute_entry_hash(entry: Mapping[str, Any]) -> str:
    """Check an entry's hashes from its columns and return its ``entry_hash``.

    Needs :data:`ENTRY_FIELDS`; with ``payload_canonical`` present its hash must equal
    ``payload_hash``. Raises :class:`EntryCheckError` saying which hash does not match.
    """
    if not isinstance(entry, Mapping):
        raise EntryCheckError("entry must be a JSON object")
    missing = [name for name in ENTRY_FIELDS if name not in entry]
    if missing:
        raise EntryCheckError(f"entry lacks field(s) {', '.join(missing)}")
    _int_field(entry, "global_seq")
    stream_seq = _int_field(entry, "stream_seq")
    submission_id = _str_field(entry, "submission_id")
    kind = _str_field(entry, "kind")
    engine_version = _str_field(entry, "engine_version")
    stored_payload_hash = _str_field(entry, "payload_hash")
    prev_hash = _str_field(entry, "prev_hash")
    stored_entry_hash = _str_field(entry, "entry_hash")
    for name in ("submission_id", "payload_hash", "prev_hash", "entry_hash"):
        hash_from_hex(entry[name], f"entry field {name}")
    if "payload_canonical" in entry:
        text = entry["payload_canonical"]
        if not isinstance(text, str):
            raise EntryCheckError("entry field payload_canonical must be a string")
        try:
            recomputed_payload = payload_hash(text)
        except UnicodeEncodeError:
            raise EntryCheckError("entry field payload_canonical is not valid UTF-8 text") from None
        if recomputed_payload != stored_payload_hash:
            raise EntryCheckError(
                f"payload_hash {stored_payload_hash} does not match the payload, which hashes to "
                f"{recomputed_payload}",
                "payload_hash_mismatch",
            )
    try:
        recomputed = entry_hash(
            submission_id, stream_seq, kind, stored_payload_hash, prev_hash, engine_version
        )
    except UnicodeEncodeError:
        raise EntryCheckError("entry fields contain text that is not valid UTF-8") from None
    if recomputed != stored_entry_hash:
        raise EntryCheckError(
            f"entry_hash {stored_entry_hash} does not match the entry's fields, which hash to {recomputed}",
            "entry_hash_mismatch",
        )
    return recomputed


def check_stored_entry(row: Mapping[str, Any]) -> tuple[str, EntryCheckError | None]:
    """For a row read from the database: the ``entry_hash`` its content gives, and what is wrong.

    The content hash uses ``payload_canonical`` (not the stored ``payload_hash``) and ignores the
    stored ``entry_hash``, so any change to a committed column changes it. The second value says
    which stored hash disagrees with the content (or None). Each hash is computed once.
    """
    try:
        content_payload_hash = payload_hash(row["payload_canonical"])
        content_hash = entry_hash(
            row["submission_id"],
            int(row["stream_seq"]),
            row["kind"],
            content_payload_hash,
            row["prev_hash"],
            row["engine_version"],
        )
    except (UnicodeEncodeError, TypeError, KeyError, ValueError) as exc:
        raise EntryCheckError(f"entry cannot be hashed: {exc}") from None
    if content_payload_hash != row["payload_hash"]:
        message = f"payload_hash {row['payload_hash']} does not match the payload, which hashes to {content_payload_hash}"
        return content_hash, EntryCheckError(message, "payload_hash_mismatch")
    if content_hash != row["entry_hash"]:
        message = (
            f"entry_hash {row['entry_hash']} does not match the entry's fields, which hash to {content_hash}"
        )
        return content_hash, EntryCheckError(message, "entry_hash_mismatch")
    return content_hash, None


# At most this many proven leaves are held (33 bytes each: about 330 MB): ``ledger verify`` on a
# larger ledger reads and hashes the entries beyond it in the log check, as before the reuse.
PROVEN_LEAVES_CAPACITY = 10_000_000


class ProvenLeaves:
    """Leaf hashes of entries whose stored hashes a caller already recomputed from their content.

    ``ledger verify`` hashes every entry once in its ledger pass; the log check takes the leaves of
    the entries whose ``payload_hash`` and ``entry_hash`` that pass proved, instead of reading and
    hashing them again. Compact: 32 bytes per entry, indexed by ``global_seq``.
    """

    def __init__(self, capacity: int = PROVEN_LEAVES_CAPACITY) -> None:
        self._capacity = capacity
        self._hashes = bytearray()
        self._present = bytearray()

    def add(self, global_seq: int, entry_hash_hex: str) -> None:
        """Record that the entry ``global_seq`` has the proven ``entry_hash``.

        Entries at or beyond ``capacity`` are not kept: memory stays bounded, and the log check
        reads and hashes those entries itself, exactly as it does for any entry not proven.
        """
        index = leaf_index_for(global_seq)
        if index < 0:
            raise ValueError(f"global_seq must be positive, got {global_seq}")
        if index >= self._capacity:
            return
        if index >= len(self._present):
            grow = max(index + 1 - len(self._present), len(self._present))  # amortised growth
            grow = min(grow, self._capacity - len(self._present))
            self._present.extend(bytes(grow))
            self._hashes.extend(bytes(32 * grow))
        self._hashes[32 * index : 32 * index + 32] = entry_leaf_hash(entry_hash_hex)
        self._present[index] = 1

    def add_many(self, pairs: Iterable[tuple[int, str]]) -> None:
        """:meth:`add` for each ``(global_seq, entry_hash)``, with the leaf hashed inline.

        The same checks as :meth:`add` (``merkle_leaf_data``: ``0x`` then 32 bytes of hex; a
        positive ``global_seq``), raising ValueError on the first pair that fails them.
        """
        items = pairs if type(pairs) is list else list(pairs)
        position = 0
        while position < len(items):
            position = fill_leaves(self._hashes, self._present, items, position)
            if position < len(items):
                self.add(*items[position])  # grows, skips or raises as add does
                position += 1

    def get(self, global_seq: int) -> bytes | None:
        """The leaf hash of entry ``global_seq``, or None when it was not proven."""
        index = global_seq - 1  # leaf_index_for, inline: this runs once per entry of the log check
        if 0 <= index < len(self._present) and self._present[index]:
            return bytes(self._hashes[32 * index : 32 * index + 32])
        return None

    def has(self, global_seq: int) -> bool:
        """Was entry ``global_seq`` proven (:meth:`get` is not None), without copying its leaf?"""
        index = global_seq - 1
        return 0 <= index < len(self._present) and self._present[index] == 1

    def run_length(self, global_seq: int, limit: int) -> int:
        """How many consecutive entries from ``global_seq`` on (at most ``limit``) were proven."""
        index = global_seq - 1
        if index < 0 or limit <= 0 or index >= len(self._present):
            return 0
        end = min(len(self._present), index + limit)
        absent = self._present.find(0, index, end)
        return (end if absent < 0 else absent) - index

    def leaves(self, global_seq: int, count: int) -> bytes:
        """The concatenated leaf hashes of ``count`` entries from ``global_seq``, all proven
        (:meth:`run_length`); raises ValueError otherwise."""
        index = global_seq - 1
        if index < 0 or count < 0 or self.run_length(global_seq, count) != count:
            raise ValueError(f"entries {global_seq}..{global_seq + count - 1} are not all proven")
        return bytes(self._hashes[32 * index : 32 * (index + count)])
