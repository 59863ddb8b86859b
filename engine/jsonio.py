"""Strict JSON decoding for untrusted input.

``json.loads`` accepts ``NaN``/``Infinity``, silently keeps the last of duplicate keys and has no
depth bound; each of those would let two parties disagree about what a payload means, so each is
an error here, reported with a code, a message and the JSON path where it was found.

With ``exact_numbers=True`` a number literal a 64-bit float cannot hold is refused too:
``1e400`` (it would become Infinity: ``non_finite_number``) and ``1e-400`` (a non-zero literal
that would silently become 0.0: ``number_underflow``). ``max_integer_digits`` bounds integer
literals (``number_too_large``); without it only the interpreter's digit limit applies.
"""

from __future__ import annotations

import json
import math
from typing import Any

import orjson

__all__ = ["DEFAULT_MAX_DEPTH", "StrictJSONError", "child_path", "loads_strict"]

DEFAULT_MAX_DEPTH = 64
_INFINITIES = (math.inf, -math.inf)
_ORJSON_INTEGER_DIGITS = 20
"""The most digits of an integer orjson decodes as an int (2**64 - 1)."""


class StrictJSONError(ValueError):
    """Why a document was refused: ``code`` (machine), ``message`` (human), ``path`` (where)."""

    def __init__(self, code: str, message: str, path: str = "$") -> None:
        super().__init__(f"{code}: {message} at {path}")
        self.code = code
        self.message = message
        self.path = path


class _Refused:
    """Left in the decoded tree where a value was refused, so a walk can name its JSON path.

    The decoder's hooks cannot see where they are; raising from them would lose the path.
    ``key`` is set for a duplicate key (the path then ends at that key).
    """

    __slots__ = ("code", "key", "message")

    def __init__(self, code: str, message: str, key: str | None = None) -> None:
        self.code = code
        self.message = message
        self.key = key


def child_path(path: str, key: str | int) -> str:
    """``$.a`` / ``$[2]`` / ``$["odd key"]`` (ASCII escapes, so the path is always storable)."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if key.isidentifier() and key.isascii() else f"{path}[{json.dumps(key)}]"


def _locate_refused(value: Any) -> StrictJSONError | None:
    """The first refused value in document order, as an error with its path."""
    stack: list[tuple[Any, str]] = [(value, "$")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, _Refused):
            return StrictJSONError(
                node.code, node.message, path if node.key is None else child_path(path, node.key)
            )
        if isinstance(node, dict):
            stack.extend((item, child_path(path, key)) for key, item in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend((node[i], child_path(path, i)) for i in range(len(node) - 1, -1, -1))
    return None


def _check_depth(value: Any, max_depth: int) -> None:
    """Reject nesting deeper than ``max_depth`` (measured on the decoded containers).

    Absurd depths never get this far: the C decoder raises RecursionError first.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            raise StrictJSONError("too_deep", f"nesting deeper than {max_depth} levels")
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))


class _Hooks:
    """The decoder callbacks; each refusal is recorded and left in the tree as a :class:`_Refused`."""

    def __init__(self, max_integer_digits: int | None) -> None:
        self.max_integer_digits = max_integer_digits
        self.refused = False

    def mark(self, code: str, message: str, key: str | None = None) -> _Refused:
        self.refused = True
        return _Refused(code, message, key)

    def constant(self, name: str) -> Any:
        return self.mark("non_finite_number", f"{name} is not allowed in canonical JSON")

    def pairs(self, pairs: list[tuple[str, Any]]) -> Any:
        result: dict[str, Any] = dict(pairs)
        if len(result) == len(pairs):  # no key twice: the common case, without a Python loop
            return result
        result = {}
        for key, value in pairs:
            if key in result:
                shown = key if len(key) <= 80 else key[:80] + "..."
                return self.mark("duplicate_key", f"object has the key {shown!r} more than once", key)
            result[key] = value
        return result

    def integer(self, text: str) -> Any:
        digits = len(text) - text.startswith("-")
        limit = self.max_integer_digits
        if limit is not None and digits > limit:
            return self.mark("number_too_large", f"integer of {digits} digits, the limit is {limit}")
        try:
            return int(text)
        except ValueError as exc:  # beyond the interpreter's digit limit
            return self.mark("number_too_large", str(exc))

    def exact_float(self, text: str) -> Any:
        value = float(text)
        if value in _INFINITIES:
            return self.mark("non_finite_number", f"{_short(text)} is beyond the range of a 64-bit float")
        if value == 0.0 and any(digit in "123456789" for digit in text.lower().partition("e")[0]):
            return self.mark(
                "number_underflow", f"{_short(text)} is too small for a 64-bit float and would become 0"
            )
        return value


def _short(text: str) -> str:
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


def loads_strict(
    data: bytes | str,
    *,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_integer_digits: int | None = None,
    exact_numbers: bool = False,
) -> Any:
    """Decode UTF-8 JSON, refusing invalid UTF-8, NaN/Infinity, duplicate keys and deep nesting.

    ``max_integer_digits`` and ``exact_numbers`` add the number checks described in the module
    docstring. Every refusal names the JSON path of the first offending value in document order.
    """
    fast_allowed = max_integer_digits is None or max_integer_digits >= _ORJSON_INTEGER_DIGITS
    if isinstance(data, (bytes, bytearray)):
        raw = bytes(data)
        if fast_allowed and not raw.startswith(_UTF8_BOM):
            # orjson refuses invalid UTF-8 itself (the decode below then reports where), so the
            # bytes need not be decoded to a str first.
            fast = _decoded_fast_bytes(raw)
            if fast is not None and not (exact_numbers and _may_underflow_bytes(raw, fast[1])):
                return _bounded(fast, max_depth)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise StrictJSONError(
                "invalid_utf8", f"byte {exc.start} is not valid UTF-8 ({exc.reason})"
            ) from exc
        fast_allowed = False  # orjson declined these very bytes
    else:
        text = data
    if text.startswith("\ufeff"):
        raise StrictJSONError("invalid_json", "a byte order mark is not allowed")
    if fast_allowed:
        fast = _decoded_fast(text)
        if fast is not None and not (exact_numbers and _may_underflow(text, fast[1])):
            return _bounded(fast, max_depth)
    hooks = _Hooks(max_integer_digits)
    # Without a digit bound, integers are decoded by the C decoder itself (no call per literal);
    # one beyond the interpreter's digit limit raises a plain ValueError there, and the document is
    # then decoded again with the integer hook, which records where and why.
    fast_integers = max_integer_digits is None
    try:
        value = json.loads(
            text,
            object_pairs_hook=hooks.pairs,
            parse_constant=hooks.constant,
            parse_int=int if fast_integers else hooks.integer,
            parse_float=hooks.exact_float if exact_numbers else float,
        )
    except json.JSONDecodeError as exc:
        raise StrictJSONError("invalid_json", f"{exc.msg} (line {exc.lineno}, column {exc.colno})") from exc
    except RecursionError as exc:
        raise StrictJSONError("too_deep", "nesting too deep to decode") from exc
    except ValueError:
        if not fast_integers:
            raise
        return _loads_hooked(text, hooks, exact_numbers, max_depth)
    return _checked(text, value, hooks, max_depth)


_UNDERFLOW_ZEROS = "0" * 300
_UNDERFLOW_ZERO_BYTES = b"0" * 300
_UTF8_BOM = b"\xef\xbb\xbf"


def _may_underflow(text: str, encoded: bytes) -> bool:
    """Could a number literal in ``text`` be non-zero yet have become 0.0 (``number_underflow``)?

    orjson decodes such a literal to 0.0 without a word; every other ``exact_numbers`` refusal
    (a literal beyond the float range) it refuses itself, and the hooked decoder then reports it.
    No ``0.0`` token in orjson's re-encoding ``encoded`` means no float is zero. Else a literal
    below the smallest float needs a negative exponent (a digit, ``e`` or ``E``, ``-``) or 300 zeros
    after its decimal point; a document with either (in a number or merely in a string) takes the
    hooked decoder.
    """
    if not _zero_float_token(encoded):
        return False
    return _digit_before(text, "e-") or _digit_before(text, "E-") or _UNDERFLOW_ZEROS in text


def _may_underflow_bytes(raw: bytes, encoded: bytes) -> bool:
    """:func:`_may_underflow` of the UTF-8 bytes of a text, without decoding them: its markers are
    ASCII, and in UTF-8 an ASCII byte is always that very character (every byte of a multi-byte
    character is 0x80 or above), so each is found in the bytes exactly where it is in the text."""
    if not _zero_float_token(encoded):
        return False
    return _digit_before_bytes(raw, b"e-") or _digit_before_bytes(raw, b"E-") or _UNDERFLOW_ZERO_BYTES in raw


def _zero_float_token(encoded: bytes) -> bool:
    """Whether orjson's compact output holds a ``0.0`` or ``-0.0`` number (or such text in a string)."""
    index = encoded.find(b"0.0")
    while index != -1:
        end = index + 3
        if (end == len(encoded) or encoded[end] in b",]}") and (index == 0 or encoded[index - 1] in b":[,-"):
            return True
        index = encoded.find(b"0.0", index + 1)
    return False


def _digit_before(text: str, marker: str) -> bool:
    """Whether ``marker`` occurs in ``text`` right after an ASCII digit."""
    index = text.find(marker)
    while index != -1:
        if index > 0 and "0" <= text[index - 1] <= "9":
            return True
        index = text.find(marker, index + 2)
    return False


def _digit_before_bytes(raw: bytes, marker: bytes) -> bool:
    """:func:`_digit_before` of bytes: whether ``marker`` occurs in ``raw`` right after an ASCII digit."""
    index = raw.find(marker)
    while index != -1:
        if index > 0 and 48 <= raw[index - 1] <= 57:  # b"0" to b"9"
            return True
        index = raw.find(marker, index + 2)
    return False


_ALL_BUT_STRUCTURE = bytes(byte for byte in range(256) if byte not in b":[{+")
"""What ``bytes.translate`` deletes to leave a re-encoding's colons, opening brackets and ``+``."""


def _decoded_fast(text: str) -> tuple[Any, bytes, int] | None:
    """orjson's decode of ``text``, its re-encoding and the re-encoding's count of ``[`` and ``{``,
    when the decode provably equals the hooked decoder's, else None.

    orjson refuses NaN, Infinity, out-of-range floats, lone surrogates and everything malformed
    (the hooked decoder then decides, with the same error as always); what it accepts it decodes to
    the same values, except that it keeps the last of duplicate keys and makes an integer beyond 64
    bits a float. Both are ruled out on orjson's re-encoding of the value (C code, no Python walk):

    * an integer beyond 64 bits became a float of at least 2**63, which orjson writes with ``e+``
      (so does any float from 1e16 up, and a string may hold ``e+``: those merely take the slow path);
    * every ``:`` outside strings separates one member, and orjson writes colons inside strings as
      they are, so a document and its re-encoding hold equally many ``:`` exactly when no member was
      dropped, i.e. no key was seen twice (dropped members take their strings' colons with them).
      An escaped colon (``\\u003a``) is a colon the text does not show: a document with any
      ``\\u003`` escape takes the slow path.

    One ``translate`` pass keeps only the re-encoding's ``:``, ``[``, ``{`` and ``+``, so they are
    counted on a short string; ``e+`` is looked for only when some ``+`` is there at all.
    """
    if "\\u003" in text:
        return None
    try:
        value = orjson.loads(text)
        encoded = orjson.dumps(value)
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        return None
    return _proved(value, encoded, text.count(":"))


def _decoded_fast_bytes(raw: bytes) -> tuple[Any, bytes, int] | None:
    """:func:`_decoded_fast` of UTF-8 bytes, which orjson decodes as they are (no str made first).

    orjson refuses invalid UTF-8 (None: the caller's decode reports it); for valid UTF-8 it decodes
    what it decodes from the str, and ASCII ``:`` and ``\\u003`` are the same bytes in both forms.
    """
    if b"\\u003" in raw:
        return None
    try:
        value = orjson.loads(raw)
        encoded = orjson.dumps(value)
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        return None
    return _proved(value, encoded, raw.count(b":"))


def _proved(value: Any, encoded: bytes, colons: int) -> tuple[Any, bytes, int] | None:
    """The proofs of :func:`_decoded_fast` on orjson's re-encoding ``encoded`` of ``value``, given the
    source's count of ``:``."""
    structure = encoded.translate(None, _ALL_BUT_STRUCTURE)
    encoded_colons, pluses = structure.count(b":"), structure.count(b"+")
    if (pluses and b"e+" in encoded) or encoded_colons != colons:
        return None
    return value, encoded, len(structure) - encoded_colons - pluses


def _bounded(fast: tuple[Any, bytes, int], max_depth: int) -> Any:
    """A fast decode's value once its nesting is within ``max_depth``."""
    value, _, openings = fast
    # As in _checked: the brackets bound the nesting (the re-encoding has the same ones).
    if isinstance(value, (dict, list)) and openings > max_depth:
        _check_depth(value, max_depth)
    return value


def _loads_hooked(text: str, hooks: _Hooks, exact_numbers: bool, max_depth: int) -> Any:
    """Decode with every hook (integers included), so each refusal is recorded with its path."""
    hooks.refused = False
    try:
        value = json.loads(
            text,
            object_pairs_hook=hooks.pairs,
            parse_constant=hooks.constant,
            parse_int=hooks.integer,
            parse_float=hooks.exact_float if exact_numbers else float,
        )
    except json.JSONDecodeError as exc:
        raise StrictJSONError("invalid_json", f"{exc.msg} (line {exc.lineno}, column {exc.colno})") from exc
    except RecursionError as exc:
        raise StrictJSONError("too_deep", "nesting too deep to decode") from exc
    return _checked(text, value, hooks, max_depth)


def _checked(text: str, value: Any, hooks: _Hooks, max_depth: int) -> Any:
    """``value`` once no hook refused anything and its nesting is within ``max_depth``."""
    if hooks.refused:  # a marker is always in the tree; fail closed if it somehow is not
        raise _locate_refused(value) or StrictJSONError("invalid_json", "a refused value was not located")
    if isinstance(value, (dict, list)) and text.count("[") + text.count("{") > max_depth:
        _check_depth(value, max_depth)
    return value
