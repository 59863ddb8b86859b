"""The per-entry texts of the append path written directly: entry-hash preimages (the hash chain),
``trace.step`` payloads and the submission header, each only when its values need no escaping.

Pure functions over strings, no class defined here: the module is compiled with mypyc
(:data:`ledger.build.LEDGER`; ``LEDGER_ENGINE=pure`` runs this source). :mod:`ledger.store.hashing`
re-exports everything public, states the definitions, and holds the general paths these are
tested against (``tests/unit/test_append_fast_paths.py``). Values that are not plain ``str`` are
typed ``Any`` on purpose: they take the general JSON encoder, as before, instead of a type error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from hashlib import sha256
from typing import Any

from engine.canonical import sha256_hex

__all__ = ["GENESIS_PREV_HASH", "chain_entries", "chain_links", "submission_id_spliced", "trace_step_text"]

GENESIS_PREV_HASH = "0x" + "0" * 64

_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f]')


def _json_str(value: Any) -> str:
    """``json.dumps(value, ensure_ascii=False)``; hex hashes and plain names skip the encoder."""
    if type(value) is str and (value.isalnum() or _NEEDS_ESCAPE.search(value) is None):
        return f'"{value}"'
    return json.dumps(value, ensure_ascii=False)


def chain_links(
    stream_id: str,
    links: Iterable[tuple[str, str, str]],
    *,
    start_seq: int = 1,
    prev_hash: str = GENESIS_PREV_HASH,
) -> list[tuple[int, str, str, bytes]]:
    """Chain ``(kind, payload_hash, engine_version)`` links; returns ``(stream_seq, prev_hash,
    entry_hash, digest)`` with ``digest`` the 32 raw bytes of ``entry_hash`` (the Merkle leaf data).

    The same bytes as :func:`ledger.store.hashing.entry_hash` link by link, with the JSON quoting
    of the values that repeat along a chain (stream id, kinds, engine versions) done once, and each
    link's ``prev_hash`` taken as the previous link's own hex digest (which needs no escaping).
    """
    seq: Any = start_seq
    if isinstance(seq, bool) or not isinstance(seq, int):
        raise TypeError(f"stream_seq must be an int, got {type(seq).__name__}")
    stream = _json_str(stream_id)
    quoted: dict[str, str] = {}  # plain str values only (a subclass may compare equal yet differ)
    out: list[tuple[int, str, str, bytes]] = []
    prev: Any = prev_hash
    prev_text = _json_str(prev)
    link: tuple[Any, ...]
    for link in links:
        kind, link_payload_hash, engine_version = link
        if type(kind) is str and kind in quoted:
            kind_text = quoted[kind]
        else:
            kind_text = _json_str(kind)
            if type(kind) is str:
                quoted[kind] = kind_text
        if type(engine_version) is str and engine_version in quoted:
            version_text = quoted[engine_version]
        else:
            version_text = _json_str(engine_version)
            if type(engine_version) is str:
                quoted[engine_version] = version_text
        preimage = (
            f'{{"engine_version":{version_text},"kind":{kind_text},'
            f'"payload_hash":{_json_str(link_payload_hash)},"prev_hash":{prev_text},'
            f'"stream_id":{stream},"stream_seq":{seq}}}'
        )
        digest = sha256(preimage.encode("utf-8")).digest()
        current = "0x" + digest.hex()
        out.append((seq, prev, current, digest))
        prev, prev_text = current, f'"{current}"'
        seq += 1
    return out


def chain_entries(
    stream_id: str, engine_version: Any, kinds: list[Any], texts: list[str]
) -> tuple[list[tuple[int, Any, str, str, str, str]], list[bytes]]:
    """A new submission's chain in one pass: per entry ``(stream_seq, kind, text, payload_hash,
    prev_hash, entry_hash)`` and, in a second list, its RFC 6962 leaf hash
    ``SHA-256(0x00 || entry_hash digest)``.

    The same values as ``payload_hash(text)`` for each text, then :func:`chain_links` of
    ``(kind, payload_hash, engine_version)`` from stream_seq 1 and the genesis ``prev_hash``, then
    ``leaf_hash(digest)`` (pinned to those in ``tests/unit/test_append_fast_paths.py``): the
    payload hashes are ``0x`` + hex, which need no JSON escaping, so they go into the preimage
    between quotes. A text that cannot be encoded as UTF-8 raises as ``payload_hash`` does.
    """
    if len(kinds) != len(texts):
        raise ValueError("one kind per text")
    stream = _json_str(stream_id)
    version_text = _json_str(engine_version)
    quoted: dict[str, str] = {}  # plain str kinds only (a subclass may compare equal yet differ)
    rows: list[tuple[int, Any, str, str, str, str]] = []
    leaves: list[bytes] = []
    prev = GENESIS_PREV_HASH
    seq = 1
    for position in range(len(texts)):
        kind = kinds[position]
        text = texts[position]
        if type(kind) is str and kind in quoted:
            kind_text = quoted[kind]
        else:
            kind_text = _json_str(kind)
            if type(kind) is str:
                quoted[kind] = kind_text
        digest_hex = "0x" + sha256(text.encode("utf-8")).hexdigest()
        preimage = (
            f'{{"engine_version":{version_text},"kind":{kind_text},'
            f'"payload_hash":"{digest_hex}","prev_hash":"{prev}",'
            f'"stream_id":{stream},"stream_seq":{seq}}}'
        )
        digest = sha256(preimage.encode("utf-8")).digest()
        current = "0x" + digest.hex()
        rows.append((seq, kind, text, digest_hex, prev, current))
        leaves.append(sha256(b"\x00" + digest).digest())
        prev = current
        seq += 1
    return rows, leaves


_HEADER_STRINGS = ("bundle_id", "idempotency_key", "market_id", "status")
_HEADER_KEYS = frozenset({*_HEADER_STRINGS, "input_hashes"})


def submission_id_spliced(header: Mapping[str, Any], input_hashes_canonical: str) -> str | None:
    """:func:`~ledger.store.hashing.submission_id_for` of ``header``, its text put together
    directly; None unless plain.

    ``input_hashes_canonical`` must be ``canonical_text(header["input_hashes"])`` (the append has
    made it for the submission row): the canonical text of the header is its members in code-point
    key order (``bundle_id``, ``idempotency_key``, ``input_hashes``, ``market_id``, ``status``),
    None dropped, each string between quotes when it is ASCII and needs no escaping. Any other
    value (a non-ASCII or escaped string, a non-string, another key) gets None: use
    :func:`~ledger.store.hashing.submission_id_for`.
    """
    if type(header) is not dict or header.keys() != _HEADER_KEYS:
        return None
    values = [header[key] for key in _HEADER_STRINGS]
    present = [value for value in values if value is not None]
    if any(type(value) is not str for value in present):
        return None
    joined = "".join(present)
    if not joined.isascii() or _NEEDS_ESCAPE.search(joined) is not None:
        return None
    bundle, key, market, status = values
    members = [
        f'"bundle_id":"{bundle}"' if bundle is not None else None,
        f'"idempotency_key":"{key}"' if key is not None else None,
        f'"input_hashes":{input_hashes_canonical}',
        f'"market_id":"{market}"' if market is not None else None,
        f'"status":"{status}"' if status is not None else None,
    ]
    text = "{" + ",".join(member for member in members if member is not None) + "}"
    return sha256_hex(text.encode("utf-8"))


_STEP_PAYLOAD_KEYS = frozenset({"step_hash", "step_id", "step_index", "step_type"})


def trace_step_text(payload: Mapping[str, Any]) -> str | None:
    """The canonical text of a ``trace.step`` payload of the usual shape, written directly; else None.

    The usual shape (:func:`ledger.store.payloads.trace_step_payload`): exactly the keys
    ``step_hash``, ``step_id``, ``step_index``, ``step_type``, an ``int`` index below 2**31 and ASCII strings
    that need no JSON escaping. The text is then :func:`~ledger.store.hashing.canonical_text`'s
    (keys in code-point order, ``int.__repr__``, the strings between quotes); anything else (a
    bool, a float, a non-ASCII or escaped string, another key) gets None and takes the general path.
    """
    if type(payload) is not dict or payload.keys() != _STEP_PAYLOAD_KEYS:
        return None
    digest, step_id, index, kind = (
        payload["step_hash"], payload["step_id"], payload["step_index"], payload["step_type"]
    )  # fmt: skip
    if type(index) is not int or type(digest) is not str or type(step_id) is not str or type(kind) is not str:
        return None
    if not 0 <= index < 2**31:  # the column is an integer; anything else takes the general path
        return None
    joined = digest + step_id + kind
    if not joined.isascii() or _NEEDS_ESCAPE.search(joined) is not None:
        return None
    return f'{{"step_hash":"{digest}","step_id":"{step_id}","step_index":{index},"step_type":"{kind}"}}'
