"""Canonical bytes of plain JSON values and model dumps, fast: orjson where it cannot differ.

Shared by replay (comparing stored payload parts with replayed artifacts) and verify (deciding
whether stored text is canonical, hashing stored inputs). orjson with sorted keys writes the same
bytes as the canonical form for strings, ints and floats of 1e-4 and above; anything else that
could differ (a ``null``, which the canonical form drops inside objects; a float below 1e-4; a
datetime or other non-JSON type) goes to the exact rules of :func:`ledger.hashing.canonical_text`.
Equality with those rules is property-tested (``tests/integration/test_verify_canonical.py``).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import orjson
from pydantic import BaseModel

from ledger.hashing import canonical_text

__all__ = ["canonical_of", "model_canonical", "quote", "sha256_hex"]

_OPTIONS = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)
_PLAIN_TEXT = re.compile(r'[^"\\\x00-\x1f]*')
# orjson writes floats below 1e-4 unlike Python's repr (0.00001 and 1e-7 vs 1e-05 and 1e-07): any
# token that could be one, and any null (which the canonical form drops inside objects), goes to
# the exact path instead. Other floats, ints and strings come out byte-identical.
_SMALL_EXPONENT = re.compile(rb"[0-9]e-")


def _needs_exact(out: bytes) -> bool:
    """Plain substring tests first (fast); the regex only when an ``e-`` is there at all."""
    if b"null" in out or b"0.0000" in out:
        return True
    return b"e-" in out and _SMALL_EXPONENT.search(out) is not None


def canonical_of(value: Any) -> bytes:
    """Canonical JSON bytes of a value parsed from JSON: orjson with sorted keys when that cannot
    differ from the canonical form, else :func:`ledger.hashing.canonical_text` (ValueError if none)."""
    try:
        out = orjson.dumps(value, option=_OPTIONS)
    except (TypeError, orjson.JSONEncodeError):
        out = None
    if out is not None and not _needs_exact(out):
        return out
    return canonical_text(value).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    """``0x`` + SHA-256 of ``data``."""
    return "0x" + hashlib.sha256(data).hexdigest()


def model_canonical(model: BaseModel) -> bytes:
    """Canonical bytes of a pydantic model, as :func:`engine.canonical.canonical_bytes` writes them
    (its fields dumped with ``exclude_none``, then the canonical rules)."""
    return canonical_of(model.model_dump(mode="python", by_alias=True, exclude_none=True))


def quote(text: str) -> str:
    """``text`` as a JSON string, as the canonical form writes it."""
    return f'"{text}"' if _PLAIN_TEXT.fullmatch(text) else json.dumps(text, ensure_ascii=False)
