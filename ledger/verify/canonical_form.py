"""Checks over stored canonical bytes for ``ledger verify``: is a text the canonical form of what it
parses to, a top-level member without parsing the rest, a Cournot root over hex leaves.

Pure functions and nothing else: compiled with mypyc by ``make install`` (:mod:`ledger.build`; the
sources are the reference, ``LEDGER_ENGINE=pure`` runs them).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

import orjson

from engine.canonical import canonical_bytes, to_hex
from engine.merkle import cournot_root
from ledger.verify.canonical_scan import ELEMENTS, view_object

__all__ = [
    "MISSING",
    "cournot_root_hex",
    "is_hex32",
    "orjson_is_canonical",
    "parse_canonical",
    "top_level_value",
    "view_canonical",
]

_HEX32 = re.compile(r"0x[0-9a-f]{64}")


def is_hex32(value: Any) -> bool:
    """``0x`` + 64 lowercase hex digits."""
    return isinstance(value, str) and _HEX32.fullmatch(value) is not None


MISSING = object()
_DECODER = json.JSONDecoder()


def top_level_value(text: str, key: str) -> Any:
    """The value of ``key`` in a canonical JSON object text, decoding only the members before it
    (keys are sorted); :data:`MISSING` when absent. Raises ValueError on anything else."""
    if text == "{}":
        return MISSING
    if not text.startswith("{"):
        raise ValueError("not a JSON object")
    position = 1
    while True:
        name, position = _DECODER.raw_decode(text, position)
        if not isinstance(name, str) or text[position : position + 1] != ":":
            raise ValueError("not a canonical JSON object")
        value, position = _DECODER.raw_decode(text, position + 1)
        if name == key:
            return value
        if name > key or text[position : position + 1] == "}":
            return MISSING
        if text[position : position + 1] != ",":
            raise ValueError("not a canonical JSON object")
        position += 1


_SORTED = orjson.OPT_SORT_KEYS


def _plain_value(value: Any) -> bool:
    """Is ``value`` (orjson's parse of a text) written by orjson's sorted output exactly as its
    canonical form writes it?

    The conditions of :func:`engine.canonical.canonical_bytes`' fast path, judged on the parsed
    value in one walk: no None at any depth (the canonical form drops None members; a None list
    element is refused too) and no float that orjson could format unlike Python's repr: only
    ``0.0`` and magnitudes in ``[1e-4, 1e16)`` pass, where both write the shortest decimal digits
    with no exponent (orjson writes ``0.00001`` and ``1e-7`` for Python's ``1e-05`` and ``1e-07``,
    and ``1e16`` for ``1e+16``). Strings, ints and booleans pass (orjson's output of them is the
    canonical one; an int orjson read as a float is caught by the byte comparison). Conservative:
    False sends the value to :func:`canonical_bytes`, which decides.
    """
    kind = type(value)
    if kind is str or kind is int or kind is bool:
        return True
    # typed containers: mypyc then iterates them natively (on an ``Any`` it calls ``.values()`` and
    # iterates through the generic protocol, about a third more CPU over the ledger's payloads)
    if kind is dict:
        mapping: dict[Any, Any] = value
        return all(_plain_value(item) for item in mapping.values())
    if kind is list:
        sequence: list[Any] = value
        return all(_plain_value(item) for item in sequence)
    if kind is float:
        magnitude: float = abs(value)
        return magnitude == 0.0 or 1e-4 <= magnitude < 1e16
    return False  # None, or a type orjson does not parse to


def _pieces(value: Any, serialise: Callable[[Any], bytes]) -> dict[str, Any]:
    """Canonical bytes of the parts verify hashes: ``prompt_spec``, ``verdict`` and each evidence item."""
    pieces: dict[str, Any] = {}
    if not isinstance(value, dict):
        return pieces
    for name in ("prompt_spec", "verdict"):
        if name in value:
            pieces[name] = serialise(value[name])
    bundle = value.get("evidence_bundle")
    if isinstance(bundle, dict) and isinstance(bundle.get("items"), list):
        pieces["items"] = [serialise(item) for item in bundle["items"]]
    return pieces


def _sorted_orjson(value: Any) -> bytes:
    return orjson.dumps(value, option=_SORTED)


def orjson_is_canonical(value: Any, data: bytes) -> bool:
    """Is ``data`` the canonical form of ``value``, orjson's parse of it? True
    only when orjson's sorted output is ``data`` byte for byte and holds nothing its fast canonical
    form could get wrong (False: undecided, the caller's general path decides)."""
    try:
        return _sorted_orjson(value) == data and _plain_value(value)
    except orjson.JSONEncodeError:
        return False


def parse_canonical(text: str, *, split: bool = False) -> tuple[Any, bool, dict[str, Any]]:
    """``(parsed, is canonical, pieces)``; raises ValueError when the text is not JSON.

    With ``split``, ``pieces`` holds the canonical bytes of the parts verify hashes (see
    :func:`_pieces`), so each is serialised once. Common case: orjson parses the text and writes it
    back byte for byte, with nothing its fast canonical form could get wrong; the parts are then
    orjson's output too (a part's output is a slice of the whole, so the same holds for it).
    """
    data = text.encode("utf-8")
    try:
        value = orjson.loads(data)
        if _sorted_orjson(value) == data and _plain_value(value):
            return value, True, _pieces(value, _sorted_orjson) if split else {}
        canonical = canonical_bytes(value) == data
    except (orjson.JSONDecodeError, orjson.JSONEncodeError, ValueError):
        canonical = False
    if not canonical:  # orjson reads ints beyond 64 bits as floats, refuses NaN: the standard parser decides
        value = json.loads(text)
        try:
            canonical = canonical_bytes(value) == data
        except ValueError:
            return value, False, {}
    return value, canonical, _pieces(value, canonical_bytes) if split and canonical else {}


VIEWS: dict[str, dict[str, Any]] = {
    "submission.received": {
        "evidence_bundle": {"items": ELEMENTS},
        "evidence_root": None,
        "prompt_spec": {"market": {"market_id": None}},
        "prompt_spec_hash": None,
    },
    "audit.completed": {"roots": None, "trace": {"step_hashes": None}},
    "verdict.issued": {
        "evidence_bundle": {"items": ELEMENTS},
        "roots": None,
        "verdict": {"evidence_root": None, "prompt_spec_hash": None, "reasoning_root": None},
    },
}
"""What ``ledger verify`` reads of each payload it keeps (:mod:`ledger.verify.checks`,
:mod:`ledger.verify.roots`), as a ``keep`` tree of :func:`ledger.verify.canonical_scan.view_object`:
``evidence_bundle.items`` becomes the list of its elements' canonical texts (only
``isinstance(items, list)`` and, through ``pieces``, those texts are used)."""


def view_canonical(
    text: str, keep: dict[str, Any], *, split: bool
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """``(view, pieces)`` of a payload when :mod:`ledger.verify.canonical_scan` accepts it as the
    canonical form of a JSON object: the view holds only the members ``keep`` names (see
    :data:`VIEWS`), ``pieces`` what :func:`parse_canonical` gives with ``split`` (the canonical
    bytes of the parts are their slices of the text). None: undecided, the reference decides."""
    scanned = view_object(text, keep)
    if scanned is None:
        return None
    view, spans = scanned
    pieces: dict[str, Any] = {}
    if split:
        for name in ("prompt_spec", "verdict"):
            span = spans.get(name)
            if span is not None:
                pieces[name] = text[span[0] : span[1]].encode("utf-8")
        bundle = view.get("evidence_bundle")
        if isinstance(bundle, dict) and isinstance(bundle.get("items"), list):
            items: list[str] = bundle["items"]
            pieces["items"] = [item.encode("utf-8") for item in items]
    return view, pieces


def cournot_root_hex(hex_leaves: list[str]) -> str:
    """Cournot Merkle root (duplicate-last padding) over ``0x`` hex leaves: the same root as
    :func:`engine.merkle.cournot_root`, which decides anything but 32-byte leaves (and raises)."""
    level = [bytes.fromhex(value[2:]) for value in hex_leaves]
    if not level or any(len(leaf) != 32 for leaf in level):
        return to_hex(cournot_root(level))
    sha256 = hashlib.sha256
    while len(level) > 1:
        if len(level) % 2:
            level.append(level[-1])
        level = [sha256(level[i] + level[i + 1]).digest() for i in range(0, len(level), 2)]
    return "0x" + level[0].hex()
