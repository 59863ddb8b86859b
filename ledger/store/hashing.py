"""The ledger's own commitments: submission ids, payload hashes and the per-submission hash chain.

Pure functions over strings and integers (no I/O). The definitions, stated in
``docs/event-store.md`` §3, are:

* ``submission_id = to_hex(sha256(canonical(header)))`` where ``header`` is
  ``{bundle_id, idempotency_key, input_hashes, market_id, status}`` (``None`` dropped as usual);
* ``payload_hash = to_hex(sha256(utf8(payload_canonical)))``, the exact stored text, which equals
  ``to_hex(hash_canonical(payload))``;
* ``entry_hash = to_hex(sha256(canonical({stream_id, stream_seq, kind, payload_hash, prev_hash,
  engine_version})))`` with ``stream_id`` = the submission id, ``stream_seq`` counting from 1, and
  ``prev_hash`` of the first entry = :data:`GENESIS_PREV_HASH`;
* the RFC 6962 Merkle leaf of an entry is the 32 raw bytes of its ``entry_hash``
  (:func:`merkle_leaf_data`), in ``global_seq`` order.

The append path's direct writers of those texts (the chain, ``trace.step`` payloads, the header)
live in :mod:`ledger.store.chain_text`, which is compiled, and are re-exported here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from engine.canonical import (
    CanonicalizationError,
    canonical_bytes_of_plain,
    canonicalize_value,
    from_hex,
    hash_canonical,
    sha256_hex,
    to_hex,
)
from ledger.store.chain_text import (
    _NEEDS_ESCAPE,
    GENESIS_PREV_HASH,
    _json_str,
    chain_entries,
    chain_links,
    submission_id_spliced,
    trace_step_text,
)

__all__ = [
    "GENESIS_PREV_HASH",
    "CanonicalText",
    "canonical_payload",
    "canonical_text",
    "chain_entries",
    "chain_hashes",
    "chain_links",
    "entry_hash",
    "entry_hash_reference",
    "merkle_leaf_data",
    "payload_hash",
    "quote",
    "step_hash",
    "submission_header",
    "submission_id_for",
    "submission_id_spliced",
    "text_sha256",
    "trace_step_text",
]


def text_sha256(text: str) -> str:
    """``0x`` + sha256 of the UTF-8 bytes of ``text``."""
    return sha256_hex(text.encode("utf-8"))


def payload_hash(payload_canonical: str) -> str:
    """The hash of an entry's canonical payload text (what replay/verify recompute)."""
    return text_sha256(payload_canonical)


def step_hash(canonical_step: str) -> str:
    """``step_hash = "0x" + sha256(canonical(step))`` over the stored canonical step text."""
    return text_sha256(canonical_step)


def submission_header(
    *,
    idempotency_key: str,
    market_id: str | None,
    bundle_id: str | None,
    input_hashes: Mapping[str, Any],
    status: str,
) -> dict[str, Any]:
    """The committed facts of a submission row; its hash is the submission id."""
    return {
        "bundle_id": bundle_id,
        "idempotency_key": idempotency_key,
        "input_hashes": dict(input_hashes),
        "market_id": market_id,
        "status": status,
    }


def submission_id_for(header: Mapping[str, Any]) -> str:
    """``to_hex(hash_canonical(header))``: the stream id of the submission's hash chain."""
    return to_hex(hash_canonical(dict(header)))


def entry_hash_reference(
    stream_id: str, stream_seq: int, kind: str, payload_hash: str, prev_hash: str, engine_version: str
) -> str:
    """The definition, through the general canonicaliser (slow path, used by tests and verify)."""
    preimage = {
        "engine_version": engine_version,
        "kind": kind,
        "payload_hash": payload_hash,
        "prev_hash": prev_hash,
        "stream_id": stream_id,
        "stream_seq": stream_seq,
    }
    return to_hex(hash_canonical(preimage))


def entry_hash(
    stream_id: str, stream_seq: int, kind: str, payload_hash: str, prev_hash: str, engine_version: str
) -> str:
    """Same bytes as :func:`entry_hash_reference`, built directly (keys are already sorted)."""
    if isinstance(stream_seq, bool) or not isinstance(stream_seq, int):
        raise TypeError(f"stream_seq must be an int, got {type(stream_seq).__name__}")
    text = (
        f'{{"engine_version":{_json_str(engine_version)},"kind":{_json_str(kind)},'
        f'"payload_hash":{_json_str(payload_hash)},"prev_hash":{_json_str(prev_hash)},'
        f'"stream_id":{_json_str(stream_id)},"stream_seq":{stream_seq}}}'
    )
    return text_sha256(text)


def chain_hashes(
    stream_id: str,
    links: Iterable[tuple[str, str, str]],
    *,
    start_seq: int = 1,
    prev_hash: str = GENESIS_PREV_HASH,
) -> list[tuple[int, str, str]]:
    """Chain ``(kind, payload_hash, engine_version)`` links; returns ``(stream_seq, prev_hash, entry_hash)``.

    :func:`chain_links` without the digests.
    """
    return [
        (seq, prev, current)
        for seq, prev, current, _ in chain_links(stream_id, links, start_seq=start_seq, prev_hash=prev_hash)
    ]


def canonical_text(value: Any) -> str:
    """The engine's canonical JSON of ``value`` as text (one implementation for the whole ledger).

    ``canonical_bytes_of_plain(canonicalize_value(value))``, which the engine property-tests equal
    to ``canonical_bytes(value)``: the walk reads models field by field and drops None as it goes,
    so a payload of models (the audit's and the verdict's) is not dumped by pydantic, serialised,
    pruned of nulls and serialised again (about half the CPU on those payloads; ``ledger replay``
    rebuilds payloads the same way).
    """
    return canonical_bytes_of_plain(canonicalize_value(value)).decode("utf-8")


def merkle_leaf_data(entry_hash_hex: str) -> bytes:
    """The RFC 6962 leaf input ``d`` for an entry: the raw 32 bytes of ``entry_hash``."""
    data = from_hex(entry_hash_hex)
    if len(data) != 32:
        raise ValueError(f"entry_hash must be 32 bytes, got {len(data)}")
    return data


_PLAIN_TEXT = re.compile(r'[^"\\\x00-\x1f]*')


def quote(text: str) -> str:
    """``text`` as a JSON string, as the canonical form writes it."""
    return f'"{text}"' if _PLAIN_TEXT.fullmatch(text) else json.dumps(text, ensure_ascii=False)


_MINT = object()  # only canonical_payload holds it: the one way to make a CanonicalText
_ABSENT = object()


class CanonicalText(str):
    """The canonical text of one payload dict, made by :func:`canonical_payload` and nothing else.

    ``prepare`` stores and hashes such a text without parsing it again, when it is attached to the
    very dict it was made from (:meth:`made_from`). Why that is sound:

    * the text is made once, by the store's own canonical function (members the engine already
      canonicalised are spliced in as they are, in canonical key order); nothing else can make one
      (the constructor wants a token only :func:`canonical_payload` has; a plain ``str``, even
      with equal characters, takes the exact path);
    * it remembers the dict and each top-level member object it was made from: a draft whose
      payload was swapped (``dataclasses.replace``), or given, removed or re-assigned a member
      since, is not trusted; ``prepare`` then canonicalises the payload and refuses the draft
      unless the texts are equal (fail closed);
    * what it cannot see is a value changed in place inside a member. The drafts that carry one
      (:mod:`ledger.store.drafts`) build their payload dicts fresh, from the engine's result, and
      hand them to nobody before ``prepare``; the stored text is the truth from then on (replay
      compares stored texts with payloads it rebuilds itself, never with these dicts).

    It is a ``str`` so that every reader of ``EntryDraft.canonical`` keeps working unchanged.
    """

    _payload: dict[str, Any]
    _members: tuple[tuple[str, Any], ...]

    def __new__(cls, text: str, payload: dict[str, Any], token: object) -> CanonicalText:
        """Only :func:`canonical_payload` can call this (it holds the token)."""
        if token is not _MINT:
            raise TypeError("a CanonicalText is made by canonical_payload() only")
        self = super().__new__(cls, text)
        object.__setattr__(self, "_payload", payload)
        object.__setattr__(self, "_members", tuple(payload.items()))
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a CanonicalText is immutable")

    def __reduce__(self) -> Any:
        raise TypeError("a CanonicalText is not pickled: canonicalise the payload where it is used")

    def made_from(self, payload: Any) -> bool:
        """Whether this text was made from ``payload`` and every top-level member is still the same object."""
        if payload is not self._payload or len(payload) != len(self._members):
            return False
        get = payload.get
        for key, value in self._members:  # noqa: SIM110 (a loop: no generator per call, ~1 us of prepare)
            if get(key, _ABSENT) is not value:
                return False
        return True

    def plain(self) -> str:
        """The same characters as an exact ``str`` (what is stored; it holds no payload reference)."""
        return str.__str__(self)


def canonical_payload(
    payload: dict[str, Any], carried: Mapping[str, bytes] | None = None
) -> CanonicalText | None:
    """The canonical text of ``payload`` as a :class:`CanonicalText`; None when it has none.

    ``carried``: canonical UTF-8 bytes the engine already made for some top-level members (the
    caller has checked them against the hashes the payload commits to). The text is then put
    together member by member in canonical key order, those members as they are and the others
    canonicalised here; without them (or when a key is not a string of ASCII needing no escaping) the payload is
    canonicalised whole. None when ``payload`` cannot be canonicalised: the draft then carries no
    text and ``prepare`` raises the error with its path, as for any other draft.

    Worth it only where members are carried: for a small payload of scalars, canonicalising it in
    ``prepare`` costs less than making the text here and checking that it is still attached there.
    """
    try:
        text = _spliced(payload, carried) if carried else None
        if text is None:
            text = canonical_text(payload)
    except (CanonicalizationError, UnicodeDecodeError):  # no text: prepare's exact path reports it
        return None
    return CanonicalText(text, payload, _MINT)


def _spliced(payload: dict[str, Any], carried: Mapping[str, bytes]) -> str | None:
    """:func:`canonical_payload`'s text put together member by member; None unless every key is a
    string of ASCII that needs no JSON escaping (then its text is the key between quotes and the
    key order is code-point order).

    A member's text is its carried bytes as they are; for a string of ASCII that needs no escaping
    (the hex hashes) the string between quotes, as :func:`canonical_text` writes it (pinned
    character by character in the tests); anything else :func:`canonical_text`'s (compiled: faster
    than writing a small dict here). None members are dropped, as the canonical form drops them.
    """
    for key in payload:  # exact strings only (a subclass may sort or print otherwise)
        if type(key) is not str:
            return None
    keys = "".join(payload)
    if not keys.isascii() or _NEEDS_ESCAPE.search(keys) is not None:
        return None
    members = []
    for key, value in sorted(payload.items()):
        if value is None:
            continue
        if key in carried:
            member = carried[key].decode("utf-8")
        elif type(value) is str and value.isascii() and _NEEDS_ESCAPE.search(value) is None:
            member = f'"{value}"'
        else:
            member = canonical_text(value)
        members.append(f'"{key}":{member}')
    return "{" + ",".join(members) + "}"
