"""What ``ledger verify`` reports: :class:`Problem`, and small helpers over stored canonical bytes."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from engine.canonical import to_hex
from engine.merkle import cournot_root
from engine.sentinel import Challenge
from ledger.hashing import canonical_text

__all__ = [
    "MISSING",
    "Problem",
    "canonical_of",
    "cournot_root_hex",
    "is_hex32",
    "parse_canonical",
    "quote",
    "top_level_value",
]

_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class Problem:
    """One broken item: a machine ``code``, a message, where it is, and the challenge if any."""

    code: str
    message: str
    severity: Literal["error", "warning"] = "error"
    source: Literal["ledger", "translog"] = "ledger"
    submission_id: str | None = None
    market_id: str | None = None
    global_seq: int | None = None
    stream_seq: int | None = None
    entry_kind: str | None = None
    step_index: int | None = None
    step_id: str | None = None
    leaf_index: int | None = None
    details: dict[str, Any] = field(default_factory=dict)
    challenge: Challenge | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form: None fields dropped, the challenge as its packet."""
        out = {k: v for k, v in self.__dict__.items() if v is not None and k != "challenge"}
        if not self.details:
            out.pop("details", None)
        out["challenge"] = None if self.challenge is None else self.challenge.model_dump(mode="json")
        return out


def is_hex32(value: Any) -> bool:
    """``0x`` + 64 lowercase hex digits."""
    return isinstance(value, str) and len(value) == 66 and value[:2] == "0x" and set(value[2:]) <= _HEX


_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_PLAIN_KEY = re.compile(r'[^"\\\x00-\x1f]*')


def canonical_of(value: Any, fast: bool) -> str:
    """Canonical text of a value parsed from canonical JSON (``fast``: sorted json.dumps suffices,
    which holds when the value has no None inside an object)."""
    return _ENCODER.encode(value) if fast else canonical_text(value)


def quote(text: str) -> str:
    """``text`` as a JSON string, as the canonical form writes it."""
    return f'"{text}"' if _PLAIN_KEY.fullmatch(text) else _ENCODER.encode(text)


MISSING = object()
_DECODER = json.JSONDecoder()


def top_level_value(text: str, key: str) -> Any:
    """The value of ``key`` in a canonical JSON object text, decoding only the members before it
    (keys are sorted); :data:`MISSING` when absent. Raises ValueError on anything else."""
    if not text.startswith("{") or text == "{}":
        if text == "{}":
            return MISSING
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


_DICT_PATHS = frozenset({"", "evidence_bundle"})
_PIECES = frozenset({"prompt_spec", "verdict"})


def _compose(value: Any, path: str, pieces: dict[str, Any]) -> str:
    """Canonical text of a None-free value, serialising the parts replay/verify hash only once:
    ``pieces`` gets the texts of ``prompt_spec``, ``verdict`` and each ``evidence_bundle.items``."""
    if path in _DICT_PATHS and isinstance(value, dict):
        children = (f"{path}.{key}" if path else key for key in sorted(value))
        parts = [
            f"{quote(key)}:{_compose(value[key], child, pieces)}"
            for key, child in zip(sorted(value), children, strict=True)
        ]
        return "{" + ",".join(parts) + "}"
    if path == "evidence_bundle.items" and isinstance(value, list):
        items = [canonical_of(item, True) for item in value]
        pieces["items"] = items
        return "[" + ",".join(items) + "]"
    text = canonical_of(value, True)
    if path in _PIECES:
        pieces[path] = text
    return text


def parse_canonical(text: str, *, split: bool = False) -> tuple[Any, bool, dict[str, Any]]:
    """``(parsed, is canonical, pieces)``; raises ValueError when the text is not JSON.

    With ``split``, ``pieces`` holds the canonical texts of the parts verify hashes (see
    :func:`_compose`); it is empty when the text is not canonical or holds a ``null`` (then the
    full canonical rules are used).
    """
    value = json.loads(text)
    if "null" in text:  # a null inside an object is dropped by the canonical form: use the full rules
        try:
            return value, canonical_text(value) == text, {}
        except ValueError:
            return value, False, {}
    pieces: dict[str, Any] = {}
    try:
        canonical = (_compose(value, "", pieces) if split else canonical_of(value, True)) == text
    except ValueError:
        return value, False, {}
    return value, canonical, pieces if canonical else {}


def cournot_root_hex(hex_leaves: list[str]) -> str:
    """Cournot Merkle root (duplicate-last padding) over ``0x`` hex leaves."""
    return to_hex(cournot_root([bytes.fromhex(value[2:]) for value in hex_leaves]))
