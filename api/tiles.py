"""The log as C2SP ``tlog-tiles``: ``/checkpoint``, ``/tile/<L>/<N>[.p/<W>]`` and ``/tile/entries/<N>[.p/<W>]``.

Read from the stored tiles (``ledger_store.merkle_tiles``), bounded by the latest signed checkpoint:

* a hash tile at level ``L`` holds the hashes of tree level ``8 * L``, nodes ``256 * N`` up to
  ``256 * N + W - 1``, each 32 bytes, concatenated. The store keeps exactly these tiles (a partial
  one only grows), so a tile is the first ``32 * W`` bytes of its stored row;
* an entry bundle holds leaves ``256 * N ..``, each as a big-endian ``uint16`` length and the leaf
  data: the 32 raw bytes of the entry's ``entry_hash`` (see :mod:`ledger.translog.leaves`), so the
  RFC 6962 leaf hash of each bundle entry is the matching hash of the level-0 tile;
* ``N`` is written in 3-digit path elements, all but the last prefixed ``x`` (``x001/x234/067``);
  only the canonical spelling is served, anything else is a 404 problem.

Every tile is checked before it is sent: its hashes, with the other stored tiles, must hash to the
latest checkpoint's signed root (:func:`ledger.translog.tree.tile_root`); in an entry bundle each
entry's hashes are also recomputed from its columns and its leaf hash compared with that checked
tile. A damaged or rewritten log answers a 500 problem, never a tile that differs from the tree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path
from fastapi.responses import PlainTextResponse, Response
from sqlalchemy import Connection

from api.db import db_connection
from api.problems import ApiProblem, problem_responses
from api.proofs import NOTE_MEDIA_TYPE, NOTE_RESPONSE, latest_note
from engine.merkle.rfc6962 import HASH_SIZE, leaf_hash
from ledger.translog.checkpoints import StoredCheckpoint, latest_checkpoint, matches_note
from ledger.translog.db import run
from ledger.translog.leaves import check_stored_entry
from ledger.translog.tables import TILES
from ledger.translog.tiles import MAX_TILE_LEVEL, TILE_HEIGHT, TILE_WIDTH
from ledger.translog.tree import TreeError, read_entries, tile_root

__all__ = ["ENTRIES_LEVEL", "TILE_HEIGHT", "TILE_WIDTH", "TileRef", "parse_tile_path", "router", "tile_path"]

router = APIRouter(tags=["tlog-tiles"])
Db = Annotated[Connection, Depends(db_connection)]
ENTRIES_LEVEL = -1
MAX_LEVEL = MAX_TILE_LEVEL
MAX_INDEX = 2**54  # 256 * N stays inside a bigint
IMMUTABLE = "public, max-age=31536000, immutable"
_LEVEL = re.compile(r"0|[1-9][0-9]?")
_WIDTH = re.compile(r"[1-9][0-9]{0,2}")
_INNER = re.compile(r"x[0-9]{3}")
_LAST = re.compile(r"[0-9]{3}")


@dataclass(frozen=True)
class TileRef:
    """A tile: ``level`` (-1 for entry bundles), index ``n`` and width ``w`` (256 = full)."""

    level: int
    n: int
    w: int


def tile_path(tile: TileRef) -> str:
    """The tile's path below the log's prefix, e.g. ``tile/0/x001/x234/067.p/8``."""
    digits = f"{tile.n:d}"
    digits = "0" * (-len(digits) % 3) + digits
    groups = [digits[i : i + 3] for i in range(0, len(digits), 3)]
    encoded = "/".join([*(f"x{group}" for group in groups[:-1]), groups[-1]])
    level = "entries" if tile.level == ENTRIES_LEVEL else str(tile.level)
    suffix = f".p/{tile.w}" if tile.w < TILE_WIDTH else ""
    return f"tile/{level}/{encoded}{suffix}"


def parse_tile_path(rest: str) -> TileRef | None:
    """Parse ``<L or entries>/<N>[.p/<W>]``; None unless it is the canonical spelling."""
    parts = rest.split("/")
    if len(parts) < 2:
        return None
    if parts[0] == "entries":
        level = ENTRIES_LEVEL
    elif _LEVEL.fullmatch(parts[0]) and int(parts[0]) <= MAX_LEVEL:
        level = int(parts[0])
    else:
        return None
    elements = parts[1:]
    width = TILE_WIDTH
    if len(elements) >= 2 and elements[-2].endswith(".p"):
        if not _WIDTH.fullmatch(elements[-1]) or not 1 <= int(elements[-1]) < TILE_WIDTH:
            return None
        width = int(elements[-1])
        elements = [*elements[:-2], elements[-2][:-2]]
    if (
        not elements
        or not _LAST.fullmatch(elements[-1])
        or not all(_INNER.fullmatch(e) for e in elements[:-1])
    ):
        return None
    if len(elements) > 1 and elements[0] == "x000":
        return None  # not the shortest spelling
    if len(elements) > 7:
        return None
    n = int("".join([*(e[1:] for e in elements[:-1]), elements[-1]]))
    return TileRef(level, n, width) if n <= MAX_INDEX else None


def _available(db: Connection, tile: TileRef) -> StoredCheckpoint:
    """The latest checkpoint; 404 unless its tree holds all ``w`` hashes (or entries) of the tile."""
    checkpoint = latest_checkpoint(db)
    if checkpoint is None:
        raise ApiProblem(404, "no_checkpoint", "the log has no signed checkpoint yet")
    if not matches_note(checkpoint):
        raise ApiProblem(
            500,
            "log_damaged",
            "the latest checkpoint's row differs from its signed note; run `ledger verify-log`",
        )
    shift = 0 if tile.level == ENTRIES_LEVEL else TILE_HEIGHT * tile.level
    count_at_level = checkpoint.tree_size >> shift
    if tile.n * TILE_WIDTH + tile.w > count_at_level:
        raise ApiProblem(
            404, "not_covered", f"{tile_path(tile)} is beyond the checkpoint of size {checkpoint.tree_size}"
        )
    return checkpoint


def _stored_tile(db: Connection, level: int, n: int, width: int, checkpoint: StoredCheckpoint) -> bytes:
    """The first ``width`` hashes of stored tile ``(level, n)``, checked against ``checkpoint``'s root.

    A 500 problem if the tile holds fewer, or if they (with the other stored tiles) do not hash to
    the signed root: a tampered or damaged tile is never served.
    """
    rows = run(
        db,
        f"SELECT substring(hashes FROM 1 FOR %(length)s) FROM {TILES} WHERE level = %(level)s AND idx = %(n)s",
        {"level": level, "n": n, "length": width * HASH_SIZE},
    )
    if not rows or len(rows[0][0]) != width * HASH_SIZE:
        raise ApiProblem(
            500,
            "log_damaged",
            f"the stored tile {level}/{n} lacks hashes below width {width}; run `ledger verify-log`",
        )
    data = bytes(rows[0][0])
    try:
        bound = tile_root(db, level, n, data, checkpoint.tree_size) == checkpoint.root_hash
    except TreeError:
        bound = False
    if not bound:
        raise ApiProblem(
            500,
            "log_damaged",
            f"the stored tile {level}/{n} does not hash to the root of the checkpoint of size "
            f"{checkpoint.tree_size}; run `ledger verify-log`",
        )
    return data


def hash_tile(db: Connection, tile: TileRef, checkpoint: StoredCheckpoint) -> bytes:
    """The tile's bytes: ``w`` concatenated 32-byte hashes of tree level ``8 * level``."""
    return _stored_tile(db, tile.level, tile.n, tile.w, checkpoint)


def entry_bundle(db: Connection, tile: TileRef, checkpoint: StoredCheckpoint) -> bytes:
    """The entry bundle: each leaf's data (the entry_hash bytes) behind a big-endian uint16 length."""
    first = tile.n * TILE_WIDTH
    rows = read_entries(db, first, tile.w)
    stored = _stored_tile(db, 0, tile.n, tile.w, checkpoint)
    leaves = [stored[i : i + HASH_SIZE] for i in range(0, len(stored), HASH_SIZE)]
    if [int(row["global_seq"]) for row in rows] != list(range(first + 1, first + tile.w + 1)):
        raise ApiProblem(500, "log_damaged", f"entries from global_seq {first + 1} are missing")
    out = bytearray()
    for row, stored_leaf in zip(rows, leaves, strict=True):
        content_hash, mismatch = check_stored_entry(row)
        data = bytes.fromhex(content_hash[2:])
        if mismatch is not None or leaf_hash(data) != stored_leaf:
            raise ApiProblem(
                500,
                "log_damaged",
                f"entry {row['global_seq']} does not match leaf {row['global_seq'] - 1}; run `ledger verify-log`",
            )
        out += len(data).to_bytes(2, "big") + data
    return bytes(out)


TILE_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
        "description": "the tile's bytes",
    }
}


@router.get(
    "/checkpoint",
    response_class=PlainTextResponse,
    responses={**NOTE_RESPONSE, **problem_responses(401, 404, 503)},
)
def checkpoint(db: Db) -> PlainTextResponse:
    """The latest signed checkpoint (C2SP tlog-checkpoint, signed note)."""
    return PlainTextResponse(
        latest_note(db), media_type=NOTE_MEDIA_TYPE, headers={"Cache-Control": "no-cache"}
    )


@router.get(
    "/tile/{tile:path}",
    response_class=Response,
    responses={**TILE_RESPONSE, **problem_responses(401, 404, 500, 503)},
)
def tile(
    tile: Annotated[
        str,
        Path(
            description="<L>/<N>[.p/<W>] or entries/<N>[.p/<W>]",
            openapi_examples={
                "hash tile": {"value": "0/000"},
                "partial hash tile": {"value": "0/000.p/3"},
                "entry bundle": {"value": "entries/000.p/2"},
            },
        ),
    ],
    db: Db,
) -> Response:
    """A hash tile or an entry bundle (C2SP tlog-tiles)."""
    ref = parse_tile_path(tile)
    if ref is None:
        raise ApiProblem(404, "not_found", f"/tile/{tile:.200} is not a tile path")
    signed = _available(db, ref)
    body = entry_bundle(db, ref, signed) if ref.level == ENTRIES_LEVEL else hash_tile(db, ref, signed)
    return Response(body, media_type="application/octet-stream", headers={"Cache-Control": IMMUTABLE})
