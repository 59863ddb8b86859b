"""What the PostgreSQL store can hold, in one place.

Every value of a record is checked against these limits before it reaches the store, so the
database never refuses a record the decoder accepted (docs/event-store.md, "Store limits"):

* text (``text`` and ``jsonb`` columns) cannot hold U+0000, and UTF-8 cannot encode a lone
  surrogate (U+D800..U+DFFF without its pair): ``unstorable_text``;
* ids stored in key or indexed columns are bounded in UTF-8 bytes (a btree row over 2,704 bytes
  is an error, not a warning): ``value_too_long``;
* integers have at most :data:`MAX_INTEGER_DIGITS` digits, so every engine step can convert them
  to a 64-bit float and ``jsonb`` (``numeric``) holds them exactly: ``number_too_large``.

Rejection rows must be storable whatever the record held: :func:`storable_id` and
:func:`storable_text` turn any string into one the store accepts (escaped, bounded or hashed).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from engine.jsonio import child_path

__all__ = [
    "MAX_EVENT_ID_BYTES",
    "MAX_ID_BYTES",
    "MAX_INTEGER_DIGITS",
    "MAX_MESSAGE_CHARS",
    "MAX_PATH_CHARS",
    "StoreProblem",
    "escape_unstorable",
    "find_unstorable_text",
    "id_too_long",
    "may_hold_unstorable_text",
    "storable_id",
    "storable_text",
    "unstorable_reason",
]

MAX_ID_BYTES = 512
"""``market_id`` and ``bundle_id`` (``ix_submissions_market_id`` is a btree index)."""
MAX_EVENT_ID_BYTES = 1024
"""``event_id`` (part of the unique ``idempotency_key``; the schema also caps it at 256 characters)."""
MAX_INTEGER_DIGITS = 308
"""Below 10**308: ``float()`` of any accepted integer is finite, and ``numeric`` holds it exactly."""
MAX_MESSAGE_CHARS = 4096
"""Rejection messages are cut here (they land in ``jsonb`` and in a dead-letter header)."""
MAX_PATH_CHARS = 1024
"""Rejection JSON paths are cut here (a path names keys, and keys can be long)."""

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# In JSON text, U+0000 and surrogates can only appear as \u escapes (raw control characters are
# invalid JSON, raw surrogates invalid UTF-8): their absence proves the document is clean.
_ESCAPE_IN_JSON = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")


@dataclass(frozen=True)
class StoreProblem:
    """A value the store cannot hold: reason ``code``, ``message`` and JSON ``path``."""

    code: str
    message: str
    path: str


def unstorable_reason(text: str) -> str | None:
    """Why ``text`` cannot be stored (U+0000 or a lone surrogate, with its index), else None."""
    found = _UNSTORABLE.search(text)
    if found is None:
        return None
    index, char = found.start(), found.group()
    if char == "\x00":
        return f"U+0000 (NUL) at character {index}: PostgreSQL text cannot hold it"
    return f"lone surrogate U+{ord(char):04X} at character {index}: not encodable as UTF-8"


def may_hold_unstorable_text(raw: bytes) -> bool:
    """False when the JSON text provably holds neither U+0000 nor a surrogate (a cheap pre-check)."""
    return _ESCAPE_IN_JSON.search(raw) is not None


@dataclass(frozen=True)
class _BadKey:
    """Stands in for a value whose object key cannot be stored (the walk reports it in order)."""

    reason: str


def find_unstorable_text(document: Any) -> StoreProblem | None:
    """The first string (object key or value, in document order) the store cannot hold."""
    stack: list[tuple[Any, str]] = [(document, "$")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, str):
            reason = unstorable_reason(node)
            if reason is not None:
                return StoreProblem("unstorable_text", f"string holds {reason}", path)
        elif isinstance(node, dict):
            children: list[tuple[Any, str]] = []
            for key, value in node.items():
                where = child_path(path, key)
                reason = unstorable_reason(key)
                if reason is not None:
                    children.append((_BadKey(reason), where))
                else:
                    children.append((value, where))
            stack.extend(reversed(children))
        elif isinstance(node, list):
            stack.extend((node[i], child_path(path, i)) for i in range(len(node) - 1, -1, -1))
        elif isinstance(node, _BadKey):
            return StoreProblem("unstorable_text", f"object key holds {node.reason}", path)
    return None


def id_too_long(value: str, path: str, limit: int = MAX_ID_BYTES) -> StoreProblem | None:
    """A problem when ``value`` is longer than ``limit`` UTF-8 bytes (a key or indexed column)."""
    size = len(value.encode("utf-8", "surrogatepass"))
    if size <= limit:
        return None
    return StoreProblem("value_too_long", f"{size} bytes in UTF-8, the limit for this id is {limit}", path)


def escape_unstorable(text: str) -> str:
    """``text`` with U+0000 and lone surrogates written as visible ``\\uXXXX`` escapes."""
    return _UNSTORABLE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


def storable_text(text: str, max_chars: int) -> str:
    """Escaped (:func:`escape_unstorable`) and cut to ``max_chars`` (``...`` marks a cut)."""
    escaped = escape_unstorable(text)
    if len(escaped) <= max_chars:
        return escaped
    return escaped[: max(0, max_chars - 3)] + "..."


def storable_id(value: str | None, limit: int = MAX_ID_BYTES) -> str | None:
    """An id for a rejection row: as given when storable, escaped if that fits, else its hash.

    The hash form is ``sha256:0x<hex>`` of the id's UTF-8 bytes (surrogates passed through), so
    the same bad id always maps to the same stored value.
    """
    if value is None:
        return None
    escaped = escape_unstorable(value)
    if len(escaped.encode("utf-8")) <= limit:
        return escaped
    return "sha256:0x" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
