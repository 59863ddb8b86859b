"""Deciding "canonical JSON" on a stored text without parsing it, for ``ledger verify``.

A :class:`_Scan` reads a text once, left to right, and accepts it only when it is, by
construction, what the canonical form (:func:`engine.canonical.canonical_bytes`) writes for the
value it parses to; anything else is *undecided* (never "not canonical"): the caller's reference
path (:func:`ledger.verify.canonical_form.parse_canonical`) then decides. It accepts a
conservative subset of the canonical texts:

* objects with keys written without escapes, strictly increasing by code point (the canonical
  order; a repeated key is undecided), ``:`` and ``,`` with no whitespace;
* no ``null`` at any depth (the canonical form drops None members; a None list element is left
  to the reference), no character below U+0020 anywhere, no lone surrogate;
* strings whose escapes are only ``\\"``, ``\\\\``, ``\\b``, ``\\f``, ``\\n``, ``\\r``, ``\\t``
  (how the canonical form writes those characters; any ``\\u`` escape is undecided);
* ints of at most 18 characters, not ``-0`` (exact in every parser, under any digit limit); a
  number with a fraction or an exponent only when it is Python's ``repr`` of the float it parses to;
* ``true`` and ``false``; at most :data:`MAX_DEPTH` nested containers.

A text accepted is thus ``canonical_bytes(json.loads(text))`` decoded, and each value's slice of it
is the canonical text of that value (the form is compositional); property-tested against the
reference. While scanning, :func:`view_object` also parses the members a caller asks for.
Pure functions and a plain class: compiled with mypyc (:mod:`ledger.build`).
"""

from __future__ import annotations

from typing import Any, Final

import orjson

__all__ = ["ELEMENTS", "MAX_DEPTH", "is_canonical", "view_object"]

MAX_DEPTH: Final = 64
ELEMENTS: Final[Any] = object()
"""In a ``keep`` tree of :func:`view_object`: the array's elements as their texts (a list of str)."""

_CONTROLS: Final = tuple(chr(code) for code in range(32))
_SHORT_ESCAPES: Final = '"\\bfnrt'  # what follows a backslash the canonical form writes
_REPR_FLOATS: Final[set[str]] = set()
"""Float tokens found equal to Python's ``repr`` of the float they parse to (a pure function of the
token: remembered, up to :data:`_REPR_FLOATS_KEPT` of them, as the ledger repeats the same few)."""
_REPR_FLOATS_KEPT: Final = 4096


class _Scan:
    """One left-to-right pass over ``text``; every method returns where its value ends, or -1."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.n = len(text)
        backslash = text.find("\\")
        self.backslash = self.n if backslash < 0 else backslash  # the next backslash (n: none)

    def string_end(self, i: int) -> int:
        """``text[i]`` is a quote: the index after the closing quote."""
        text = self.text
        i += 1
        while True:
            quote = text.find('"', i)
            if quote < 0:
                return -1
            escape = self.backslash  # never before i: every backslash passed was inside a string
            if escape > quote:
                return quote + 1
            if escape + 1 >= self.n or text[escape + 1] not in _SHORT_ESCAPES:
                return -1
            i = escape + 2
            following = text.find("\\", i)
            self.backslash = self.n if following < 0 else following

    def key_end(self, i: int) -> int:
        """The index of the quote closing a key that starts at ``i`` and holds no escape."""
        quote = self.text.find('"', i)
        return quote if 0 <= quote < self.backslash else -1

    def after(self, a: int, a_end: int, b: int, b_end: int) -> bool:
        """Does ``text[a:a_end]`` sort strictly after ``text[b:b_end]`` (by code point)?"""
        text = self.text
        while a < a_end and b < b_end:
            x = ord(text[a])
            y = ord(text[b])
            if x != y:
                return x > y
            a += 1
            b += 1
        return a < a_end

    def digits_end(self, i: int) -> int:
        text, n = self.text, self.n
        while i < n:
            c = ord(text[i])
            if c < 48 or c > 57:
                return i
            i += 1
        return i

    def number_end(self, i: int) -> int:
        """A number at ``i`` (JSON grammar) written as the canonical form writes it."""
        text, n, start = self.text, self.n, i
        if ord(text[i]) == 45:  # -
            i += 1
            if i >= n:
                return -1
        c = ord(text[i])
        if c == 48:
            i += 1
        elif 48 < c <= 57:
            i = self.digits_end(i + 1)
        else:
            return -1
        is_float = False
        if i < n and ord(text[i]) == 46:  # .
            end = self.digits_end(i + 1)
            if end == i + 1:
                return -1
            i, is_float = end, True
        if i < n and (ord(text[i]) == 101 or ord(text[i]) == 69):  # e E
            i += 1
            if i < n and (ord(text[i]) == 43 or ord(text[i]) == 45):  # + -
                i += 1
            end = self.digits_end(i)
            if end == i:
                return -1
            i, is_float = end, True
        if not is_float:  # at most 18 characters, and not -0
            negative_zero = i - start == 2 and ord(text[start]) == 45 and ord(text[start + 1]) == 48
            return -1 if i - start > 18 or negative_zero else i
        token = text[start:i]
        if token in _REPR_FLOATS:
            return i
        if repr(float(token)) != token:
            return -1
        if len(_REPR_FLOATS) < _REPR_FLOATS_KEPT:
            _REPR_FLOATS.add(token)
        return i

    def value_end(self, i: int, depth: int) -> int:
        """Where the canonical JSON value at ``i`` ends."""
        if i >= self.n:
            return -1
        text = self.text
        c = ord(text[i])
        if c == 34:  # "
            return self.string_end(i)
        if c == 123:  # {
            return self.object_end(i, depth + 1, None, None, None)
        if c == 91:  # [
            return self.array_end(i, depth + 1, None)
        if c == 116:  # t
            return i + 4 if text[i : i + 4] == "true" else -1
        if c == 102:  # f
            return i + 5 if text[i : i + 5] == "false" else -1
        if c == 45 or 48 <= c <= 57:
            return self.number_end(i)
        return -1  # null, whitespace, anything else

    def object_end(
        self,
        i: int,
        depth: int,
        keep: dict[str, Any] | None,
        view: dict[str, Any] | None,
        spans: dict[str, tuple[int, int]] | None,
    ) -> int:
        """An object at ``i``; with ``keep``, ``view`` receives the members it names (parsed, or
        viewed in turn: see :func:`view_object`) and ``spans`` (if given) every member's span."""
        if depth > MAX_DEPTH:
            return -1
        text, n = self.text, self.n
        i += 1
        if i < n and ord(text[i]) == 125:  # }
            return i + 1
        previous = previous_end = -1
        while i < n and ord(text[i]) == 34:
            key = i + 1
            key_end = self.key_end(key)
            if key_end < 0:
                return -1
            # keys mostly differ at their first character: then order is decided at once
            first_after = key < key_end and previous < previous_end and ord(text[key]) > ord(text[previous])
            if previous >= 0 and not first_after and not self.after(key, key_end, previous, previous_end):
                return -1
            previous, previous_end = key, key_end
            i = key_end + 1
            if i >= n or ord(text[i]) != 58:  # :
                return -1
            start = i + 1
            if keep is None or view is None:
                i = self.value_end(start, depth)
            else:
                name = text[key:key_end]  # one string for the view and the spans
                i = self.member(name, start, depth, keep, view)
                if spans is not None and i >= 0:
                    spans[name] = (start, i)
            if i < 0 or i >= n:
                return -1
            c = ord(text[i])
            if c == 125:  # }
                return i + 1
            if c != 44:  # ,
                return -1
            i += 1
        return -1

    def member(self, name: str, start: int, depth: int, keep: dict[str, Any], view: dict[str, Any]) -> int:
        """A member's value at ``start``, put in ``view`` if ``keep`` names it."""
        if name not in keep:
            return self.value_end(start, depth)
        wanted = keep[name]
        first = self.text[start] if start < self.n else ""
        if type(wanted) is dict and first == "{":
            inner: dict[str, Any] = {}
            end = self.object_end(start, depth + 1, wanted, inner, None)
            view[name] = inner
            return end
        if wanted is ELEMENTS and first == "[":
            elements: list[Any] = []
            end = self.array_end(start, depth + 1, elements)
            view[name] = elements
            return end
        end = self.value_end(start, depth)
        if end >= 0:  # a value the caller reads whole, or not of the shape it views (it tests types)
            view[name] = orjson.loads(self.text[start:end])
        return end

    def array_end(self, i: int, depth: int, elements: list[Any] | None) -> int:
        """An array at ``i``; ``elements`` (if given) receives each element's text."""
        if depth > MAX_DEPTH:
            return -1
        text, n = self.text, self.n
        i += 1
        if i < n and ord(text[i]) == 93:  # ]
            return i + 1
        while True:
            end = self.value_end(i, depth)
            if end < 0 or end >= n:
                return -1
            if elements is not None:
                elements.append(text[i:end])
            i = end
            c = ord(text[i])
            if c == 93:  # ]
                return i + 1
            if c != 44:  # ,
                return -1
            i += 1


def _scannable(text: str) -> bool:
    """No character below U+0020 (a canonical text has none; :class:`_Scan` does not look: one
    ``in`` per such character, each a memchr over the text) and no lone surrogate (it has no UTF-8
    form, hence no canonical bytes)."""
    if not all(control not in text for control in _CONTROLS):
        return False
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return False
    return True


def is_canonical(text: str) -> bool:
    """True when ``text`` is surely the canonical form of what it parses to (False: undecided)."""
    return _scannable(text) and _Scan(text).value_end(0, 0) == len(text)


def view_object(text: str, keep: dict[str, Any]) -> tuple[dict[str, Any], dict[str, tuple[int, int]]] | None:
    """``(view, spans)`` when ``text`` is surely the canonical form of a JSON object; None: undecided.

    ``view`` holds the members ``keep`` names: a key to a dict views an object member in turn
    (only those members), a key to :data:`ELEMENTS` gives an array member as its elements' texts,
    anything else (or a value not of that shape) is parsed whole. ``spans`` gives every top-level
    member's ``(start, end)`` in ``text``.
    """
    if not text.startswith("{") or not _scannable(text):
        return None
    view: dict[str, Any] = {}
    spans: dict[str, tuple[int, int]] = {}
    end = _Scan(text).object_end(0, 1, keep, view, spans)
    return (view, spans) if end == len(text) else None
