"""``ledger replay``'s common case: is a stored submission identical to its replay, from texts alone.

Every stored payload text against the text the draft builder makes for it, every step row against
its replayed step (through SHA-256: equal hashes mean equal bytes). True settles the submission;
False says nothing about where it differs (:func:`ledger.replay.compare.compare_run` then finds it).
Pure functions only: compiled with mypyc by ``make install`` (:mod:`ledger.build`; the sources are
the reference, ``LEDGER_ENGINE=pure`` runs them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from engine.canonical import canonical_bytes, canonical_bytes_of_plain, canonicalize_value, sha256_hex
from engine.pipeline import PipelineResult
from ledger.store.hashing import quote, text_sha256
from ledger.store.records import EntryDraft

__all__ = ["steps_identical", "whole_run_identical"]


def steps_identical(
    step_hashes: Sequence[str], step_texts: Sequence[str | bytes], result: PipelineResult
) -> bool:
    """Every stored step row matches the replayed step: the same hashes, and each text hashing to its own.

    A text equal to the replayed step's canonical bytes, the very preimage the engine hashed into
    that step's hash (:attr:`~engine.pipeline.PipelineResult.step_canonical`), hashes to it: it is
    compared instead of hashed. A result without those bytes has each text hashed. A text is its
    UTF-8 bytes (as replay reads them) or the string.
    """
    hashes = result.step_hashes
    if list(step_hashes) != hashes or len(step_texts) != len(hashes):
        return False
    preimages = result.step_canonical
    if len(preimages) != len(hashes):
        return all(_text_hash(text) == value for text, value in zip(step_texts, hashes, strict=True))
    return all(
        text == data if isinstance(text, bytes) else text == data.decode("utf-8")
        for text, data in zip(step_texts, preimages, strict=True)
    )


def _text_hash(text: str | bytes) -> str:
    """``text_sha256`` of a stored text given as its UTF-8 bytes or as the string."""
    return sha256_hex(text) if isinstance(text, bytes) else text_sha256(text)


def whole_run_identical(
    payload_texts: Mapping[str, str | bytes | None],
    step_hashes: Sequence[str],
    step_texts: Sequence[str | bytes],
    result: PipelineResult,
    entries: Iterable[EntryDraft],
) -> bool:
    """The fast verdict of :func:`compare_run`, from stored texts alone (nothing parsed): True when
    every stored payload text equals the text the draft builder makes for it in ``entries`` (the
    rebuilt entries, :func:`ledger.store.drafts.payload_entries`; the consumer's spliced canonical
    text when it made one) and every step row matches. Texts are UTF-8 bytes or strings.

    False says nothing about where the difference is: :func:`compare_run` then finds it.
    """
    rebuilt = {entry.kind: entry for entry in entries if entry.kind in payload_texts}
    for kind, text in payload_texts.items():
        entry = rebuilt.get(kind)
        if text is None or entry is None:
            return False
        if entry.canonical is not None:
            if text != (entry.canonical.encode("utf-8") if isinstance(text, bytes) else entry.canonical):
                return False
        elif not _matches_rebuilt(
            text, entry.payload, result.verdict, result.roots.verdict_hash, result.verdict_canonical
        ):
            return False
    return steps_identical(step_hashes, step_texts, result)


def _matches_rebuilt(text: str | bytes, payload: Any, hashed: Any, digest: str, preimage: bytes) -> bool:
    """``text`` (UTF-8 bytes, or the string) equals the canonical text of the rebuilt ``payload``,
    compared as UTF-8 bytes.

    A dict payload with plain ASCII string keys is written member by member, as the canonical form
    writes a dict (``{"key":<member>,...}``, keys sorted, None members dropped), each member by
    :func:`_member_bytes`. A member that is ``hashed`` (the very object, e.g. the replayed verdict)
    is not serialised again: the canonical bytes of the other members fix where its bytes lie in
    the stored ones, and that slice must equal ``preimage``, the canonical bytes the engine made of
    the member and hashed into ``digest`` (:attr:`~engine.pipeline.PipelineResult.verdict_canonical`,
    ``roots.verdict_hash``); without them (a result built elsewhere) the slice must hash to
    ``digest``, as stored steps are proved by their hashes. Payloads of another shape (not a dict,
    keys that are not plain ASCII strings) are serialised whole.
    """
    keys = sorted(key for key, value in payload.items() if value is not None) if type(payload) is dict else ()
    stored = text if isinstance(text, bytes) else text.encode("utf-8")
    if not keys or not all(type(key) is str and key.isascii() for key in keys):
        return stored == _rebuilt_bytes(payload)
    parts: list[bytes] = []
    at = -1  # the index in parts of the hashed member's name, when it is a member
    for key in keys:
        value = payload[key]
        name = f"{quote(key)}:".encode()
        if at < 0 and value is hashed:
            at = len(parts)
            parts.append(name)
        else:
            parts.append(name + _member_bytes(value))
    if at < 0:
        return stored == b"{" + b",".join(parts) + b"}"
    prefix = b"{" + b",".join(parts[: at + 1])
    suffix = b"".join([b"," + part for part in parts[at + 1 :]]) + b"}"
    if len(stored) < len(prefix) + len(suffix) or not (stored.startswith(prefix) and stored.endswith(suffix)):
        return False
    member = stored[len(prefix) : len(stored) - len(suffix)]
    if preimage:
        return member == preimage
    return sha256_hex(member) == digest


def _member_bytes(value: Any) -> bytes:
    """The canonical bytes of one payload member: a model's by :func:`~engine.canonical.canonical_bytes`
    (its field plan: no generic walk, no key sort), anything else by :func:`_rebuilt_bytes`. Both
    are the store's canonical form (``canonical_text``); the tests pin them equal on the corpus."""
    if isinstance(value, BaseModel):
        return canonical_bytes(value)
    return _rebuilt_bytes(value)


def _rebuilt_bytes(payload: Any) -> bytes:
    """The store's canonical bytes of a rebuilt payload (``canonical_text(payload)``), in one walk.

    :func:`~engine.canonical.canonicalize_value` reads models field by field and drops None members
    as it goes, so a payload holding nulls (the audit's check details, evaluation variables) is not
    dumped, serialised and pruned twice; the engine property-tests this pair against
    :func:`~engine.canonical.canonical_bytes`, which ``canonical_text`` is.
    """
    return canonical_bytes_of_plain(canonicalize_value(payload))
