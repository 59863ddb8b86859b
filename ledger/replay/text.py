"""Small text helpers shared by replay and verify.

Canonical bytes themselves always come from :func:`engine.canonical.canonical_bytes`, the one
implementation of the canonical rules (with its guarded orjson fast path).
"""

from __future__ import annotations

import hashlib
import json
import re

from engine.canonical import canonical_bytes

__all__ = ["canonical_bytes", "quote", "sha256_hex"]

_PLAIN_TEXT = re.compile(r'[^"\\\x00-\x1f]*')


def sha256_hex(data: bytes) -> str:
    """``0x`` + SHA-256 of ``data``."""
    return "0x" + hashlib.sha256(data).hexdigest()


def quote(text: str) -> str:
    """``text`` as a JSON string, as the canonical form writes it."""
    return f'"{text}"' if _PLAIN_TEXT.fullmatch(text) else json.dumps(text, ensure_ascii=False)
