"""Signing, storing and exporting checkpoints of the ledger's tree.

:func:`create_checkpoint` runs in one transaction under the append lock: it catches the tree up
with the entries, re-derives the leaves added since the previous checkpoint from the stored
entries, proves the new tree consistent with the previous checkpoint, and only then signs. A log
must never sign two inconsistent checkpoints; this one refuses to.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from sqlalchemy import Engine

from engine.merkle.rfc6962 import Frontier, verify_consistency
from ledger.store.models import STORE_SCHEMA
from ledger.translog.db import Database, run_dicts
from ledger.translog.leaves import EntryCheckError, check_stored_entry, entry_leaf_hash
from ledger.translog.note import (
    Checkpoint,
    NoteError,
    check_origin,
    format_timestamp,
    key_id,
    open_checkpoint,
    parse_checkpoint_text,
    parse_signed_note,
    sign_checkpoint,
)
from ledger.translog.tree import (
    TreeError,
    catch_up_tree,
    consistency_proof_at,
    fetch_nodes,
    frontier_at,
    read_entries,
    root_at,
    tree_size,
)

__all__ = [
    "DEFAULT_ORIGIN",
    "CheckpointDamagedError",
    "CheckpointError",
    "StoredCheckpoint",
    "check_out_target",
    "covering_checkpoint",
    "create_checkpoint",
    "export_to_file",
    "export_to_topic",
    "find_checkpoint",
    "latest_checkpoint",
    "list_checkpoints",
    "matches_note",
]

CHECKPOINTS = f"{STORE_SCHEMA}.merkle_checkpoints"
DEFAULT_ORIGIN = "cournot-ledger.local/log"
ORIGIN_ENV = "LEDGER_LOG_ORIGIN"
_RECHECK_BATCH = 5000
_COLUMNS = "checkpoint_id, origin, tree_size, root_hash, signed_at, key_id, note"


class CheckpointError(RuntimeError):
    """A checkpoint could not be made or exported; the message says why."""


class CheckpointDamagedError(CheckpointError):
    """The entries, tree or previous checkpoint do not verify (tampering or damage): nothing is signed."""


@dataclass(frozen=True)
class StoredCheckpoint:
    """A row of ``merkle_checkpoints``."""

    checkpoint_id: int
    origin: str
    tree_size: int
    root_hash: bytes
    signed_at: datetime
    key_id: str
    note: str


def _row(values: dict[str, Any]) -> StoredCheckpoint:
    return StoredCheckpoint(
        int(values["checkpoint_id"]),
        values["origin"],
        int(values["tree_size"]),
        bytes(values["root_hash"]),
        values["signed_at"],
        values["key_id"],
        values["note"],
    )


def list_checkpoints(db: Database) -> list[StoredCheckpoint]:
    """Every stored checkpoint, oldest first."""
    rows = run_dicts(db, f"SELECT {_COLUMNS} FROM {CHECKPOINTS} ORDER BY checkpoint_id")
    return [_row(row) for row in rows]


def latest_checkpoint(db: Database) -> StoredCheckpoint | None:
    """The most recent checkpoint, or None."""
    rows = run_dicts(db, f"SELECT {_COLUMNS} FROM {CHECKPOINTS} ORDER BY checkpoint_id DESC LIMIT 1")
    return _row(rows[0]) if rows else None


def find_checkpoint(
    db: Database, *, checkpoint_id: int | None = None, tree_size: int | None = None
) -> StoredCheckpoint | None:
    """A checkpoint by id, or the newest one of a tree size."""
    if checkpoint_id is not None:
        query, params = "WHERE checkpoint_id = %(value)s", {"value": checkpoint_id}
    elif tree_size is not None:
        query, params = (
            "WHERE tree_size = %(value)s ORDER BY checkpoint_id DESC LIMIT 1",
            {"value": tree_size},
        )
    else:
        return latest_checkpoint(db)
    rows = run_dicts(db, f"SELECT {_COLUMNS} FROM {CHECKPOINTS} {query}", params)
    return _row(rows[0]) if rows else None


def matches_note(checkpoint: StoredCheckpoint) -> bool:
    """True if the row's origin, size and root are the ones its note's text states (no key needed):
    a row rewritten beside its note is never used to bind a proof or a tile."""
    try:
        stated = parse_checkpoint_text(parse_signed_note(checkpoint.note).text)
    except NoteError:
        return False
    row = (checkpoint.origin, checkpoint.tree_size, checkpoint.root_hash)
    return (stated.origin, stated.tree_size, stated.root_hash) == row


def covering_checkpoint(db: Database, size: int) -> StoredCheckpoint | None:
    """The newest checkpoint of the smallest tree size ``>= size``, or None if all are smaller."""
    rows = run_dicts(
        db,
        f"SELECT {_COLUMNS} FROM {CHECKPOINTS} WHERE tree_size >= %(size)s "
        "ORDER BY tree_size, checkpoint_id DESC LIMIT 1",
        {"size": size},
    )
    return _row(rows[0]) if rows else None


def _recheck_leaves(db: Database, frontier: Frontier, size: int) -> Frontier:
    """Recompute leaves ``frontier.size .. size-1`` from the stored entries, compare each with the
    tree and append it to ``frontier``; returns the frontier of ``size`` leaves, built from entries."""
    after = frontier.size
    while after < size:
        batch = read_entries(db, after, _RECHECK_BATCH, size)
        if not batch:
            raise CheckpointDamagedError(
                f"entries end at global_seq {after}, but the tree holds {size} leaves"
            )
        stored = fetch_nodes(db, [(0, row["global_seq"] - 1) for row in batch])
        for row in batch:
            seq = row["global_seq"]
            try:
                leaf = entry_leaf_hash(_checked_hash(row))
            except EntryCheckError as exc:
                raise CheckpointDamagedError(
                    f"entry global_seq {seq} (submission {row['submission_id']}): {exc}"
                ) from None
            if stored.get((0, seq - 1)) != leaf:
                raise CheckpointDamagedError(
                    f"leaf {seq - 1} of the tree does not match entry global_seq {seq} "
                    f"(submission {row['submission_id']}); refusing to sign"
                )
            frontier = frontier.append(leaf)
        after = batch[-1]["global_seq"]
    return frontier


def resolve_origin(db: Database, origin: str | None) -> str:
    """The log's origin: the given one, else the stored checkpoints', else the env or the default."""
    previous = latest_checkpoint(db)
    chosen = origin or (previous.origin if previous else None) or os.environ.get(ORIGIN_ENV) or DEFAULT_ORIGIN
    try:
        check_origin(chosen)
    except NoteError as exc:
        raise CheckpointError(str(exc)) from None
    if previous is not None and previous.origin != chosen:
        raise CheckpointError(f"the log's origin is {previous.origin!r}; refusing to sign as {chosen!r}")
    return chosen


def create_checkpoint(
    engine: Engine,
    private_key: Ed25519PrivateKey,
    *,
    origin: str | None = None,
    now: datetime | None = None,
) -> StoredCheckpoint:
    """Catch the tree up, check it against the previous checkpoint, sign and store a checkpoint."""
    public_key = private_key.public_key()
    with engine.begin() as connection:
        try:
            catch_up_tree(connection)
        except TreeError as exc:
            raise CheckpointDamagedError(f"cannot extend the tree: {exc}") from None
        chosen = resolve_origin(connection, origin)
        size = tree_size(connection)
        previous = latest_checkpoint(connection)
        try:
            root = root_at(connection, size)
            if previous is not None:
                _check_previous(connection, previous, public_key, chosen, size, root)
            # the leaves since the previous checkpoint, from the entries, on the frontier it signed
            start = frontier_at(connection, previous.tree_size) if previous else Frontier()
        except TreeError as exc:
            raise CheckpointDamagedError(f"the stored tree is damaged: {exc}; refusing to sign") from None
        if previous is not None and start.root() != previous.root_hash:
            raise CheckpointDamagedError(
                f"the stored tree's first {previous.tree_size} leaves do not hash to checkpoint "
                f"{previous.checkpoint_id}'s root; refusing to sign"
            )
        if _recheck_leaves(connection, start, size).root() != root:
            raise CheckpointDamagedError(
                f"the stored tree's root for {size} leaves is not the one its leaves hash to; refusing to sign"
            )
        stamp = format_timestamp(now or datetime.now(UTC))
        note = sign_checkpoint(Checkpoint(chosen, size, root, stamp), private_key)
        rows = run_dicts(
            connection,
            f"INSERT INTO {CHECKPOINTS} (origin, tree_size, root_hash, signed_at, key_id, note) "
            "VALUES (%(origin)s, %(size)s, %(root)s, %(signed_at)s, %(key_id)s, %(note)s) "
            f"RETURNING {_COLUMNS}",
            {
                "origin": chosen,
                "size": size,
                "root": root,
                "signed_at": datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC),
                "key_id": key_id(chosen, public_key).hex(),
                "note": note,
            },
        )
        return _row(rows[0])


def _check_previous(
    db: Database,
    previous: StoredCheckpoint,
    public_key: Ed25519PublicKey,
    origin: str,
    size: int,
    root: bytes,
) -> None:
    """The previous checkpoint verifies and the tree of ``size`` leaves (root ``root``) extends it."""
    try:
        opened = open_checkpoint(previous.note, public_key, origin)
    except NoteError as exc:
        raise CheckpointDamagedError(
            f"previous checkpoint {previous.checkpoint_id} does not verify: {exc}"
        ) from None
    if (opened.tree_size, opened.root_hash) != (previous.tree_size, previous.root_hash):
        raise CheckpointDamagedError(f"checkpoint row {previous.checkpoint_id} differs from its signed note")
    if previous.tree_size > size:
        raise CheckpointDamagedError(
            f"the tree ({size} leaves) is smaller than checkpoint {previous.checkpoint_id}"
        )
    proof = consistency_proof_at(db, previous.tree_size, size)
    if not verify_consistency(previous.tree_size, size, previous.root_hash, root, proof):
        raise CheckpointDamagedError(
            f"the tree of {size} leaves is not consistent with checkpoint {previous.checkpoint_id} "
            f"(size {previous.tree_size}); refusing to sign"
        )


def out_is_directory(out: str | Path) -> bool:
    """``--out`` names a directory when it exists as one or is written with a trailing ``/``."""
    text = str(out)
    return text.endswith(("/", os.sep)) or Path(text).is_dir()


def check_out_target(out: str | Path, *, overwrite: bool = False) -> str | None:
    """Why writing a note to ``out`` would be refused (before anything is signed), or None."""
    if out_is_directory(out):
        path = Path(out)
        if path.exists() and not path.is_dir():
            return f"--out {out}: exists and is not a directory"
        return None
    path = Path(out)
    if path.exists() and not overwrite:
        return f"--out {out}: file exists; pass --force to replace it, or give a directory"
    if not path.parent.is_dir():
        return f"--out {out}: directory {path.parent} does not exist (end the path with / to create it)"
    return None


def export_to_file(note: str, out: str | Path, *, overwrite: bool = False) -> Path:
    """Write the signed note to ``out``; return the path written.

    A directory (existing, or named with a trailing ``/`` and then created) receives
    ``checkpoint-<size>-<time>.note`` (the time is the note's own timestamp, in the name only).
    Any other path is the file itself. An existing file is never replaced unless ``overwrite``
    (``FileExistsError`` otherwise), including a directory entry of the same name.
    """
    path = Path(out)
    if out_is_directory(out):
        path.mkdir(parents=True, exist_ok=True)
        lines = note.split("\n")
        stamp = lines[3].removeprefix("timestamp ").replace(":", "") if len(lines) > 3 else "unknown"
        path = path / f"checkpoint-{lines[1]}-{stamp}.note"
        overwrite = False
    with path.open("w" if overwrite else "x", encoding="utf-8") as handle:
        handle.write(note)
    return path


async def _publish(bootstrap: str, topic: str, notes: Sequence[tuple[str, str]]) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for key, note in notes:
            await producer.send_and_wait(topic, note.encode("utf-8"), key=key.encode("utf-8"))
    finally:
        await producer.stop()


def export_to_topic(notes: Sequence[tuple[str, str]], topic: str, bootstrap: str | None = None) -> None:
    """Publish ``(key, note)`` pairs to a Kafka topic (bootstrap from ``LEDGER_KAFKA_BOOTSTRAP``)."""
    servers = bootstrap or os.environ.get("LEDGER_KAFKA_BOOTSTRAP", "")
    if not servers:
        raise CheckpointError("no Kafka bootstrap: set LEDGER_KAFKA_BOOTSTRAP or pass --bootstrap")
    try:
        asyncio.run(_publish(servers, topic, notes))
    except Exception as exc:
        raise CheckpointError(f"could not publish to topic {topic!r} at {servers}: {exc}") from None


def _checked_hash(row: dict[str, Any]) -> str:
    """The entry hash of a stored row; raises :class:`EntryCheckError` if its stored hashes disagree."""
    content_hash, mismatch = check_stored_entry(row)
    if mismatch is not None:
        raise mismatch
    return content_hash
