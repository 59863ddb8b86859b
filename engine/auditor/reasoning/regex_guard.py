"""Refuse regular expressions whose backtracking cost can explode.

Python's ``re`` backtracks, so two shapes make a search on hostile text exponential or high-degree
polynomial: a quantified group whose body is itself unbounded or alternating (``(a+)+``,
``(a|aa)*``), and two unbounded quantifiers over overlapping characters with nothing between them
that only one of them can match (``\\d+\\d+x``, ``.*\\s*x``). This module parses a pattern (already
known to compile) into a small tree and refuses both shapes. Character overlap is decided by
matching each atom against a fixed probe alphabet, so the analysis is deterministic. It is a
conservative heuristic: a refused pattern can always be rewritten (``[0-9,]+`` instead of
``(?:\\d|,)+``); together with the cap on scanned text it bounds extraction cost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["regex_risk"]

_PROBES = "".join(chr(code) for code in range(128)) + "é ß中€٣\u00a0\u2028\U0001f600"
_ALL = frozenset(_PROBES)
_QUANTIFIER = re.compile(r"\{(\d*)(,?)(\d*)\}")
_ZERO_WIDTH_ESCAPES = frozenset("bBAZ")


@dataclass
class _Node:
    chars: frozenset[str]
    minimum: int = 1
    unbounded: bool = False
    zero_width: bool = False
    branches: list[list[_Node]] | None = None
    children_unbounded: bool = False
    alternation: bool = False


@lru_cache(maxsize=2048)
def _atom_chars(text: str) -> frozenset[str]:
    try:
        atom = re.compile(text)
    except re.error:
        return _ALL
    return frozenset(char for char in _PROBES if atom.fullmatch(char))


def _quantifier(pattern: str, index: int) -> tuple[int, bool, int]:
    """``(minimum, unbounded, next_index)`` for the quantifier at ``index`` (``(1, False, index)`` if none)."""
    if index >= len(pattern):
        return 1, False, index
    char = pattern[index]
    minimum, unbounded, end = 1, False, index
    if char == "*":
        minimum, unbounded, end = 0, True, index + 1
    elif char == "+":
        minimum, unbounded, end = 1, True, index + 1
    elif char == "?":
        minimum, end = 0, index + 1
    elif char == "{":
        match = _QUANTIFIER.match(pattern, index)
        if match is None or (not match.group(1) and not match.group(2)):
            return 1, False, index
        minimum = int(match.group(1) or 0)
        unbounded = bool(match.group(2)) and not match.group(3)
        end = match.end()
    else:
        return 1, False, index
    if end < len(pattern) and pattern[end] in "?+":
        end += 1
    return minimum, unbounded, end


def _class_end(pattern: str, index: int) -> int:
    position = index + 1
    if position < len(pattern) and pattern[position] == "^":
        position += 1
    if position < len(pattern) and pattern[position] == "]":
        position += 1
    while position < len(pattern) and pattern[position] != "]":
        position += 2 if pattern[position] == "\\" else 1
    return position + 1


def _group_prefix(pattern: str, index: int) -> tuple[int, str]:
    """Skip ``(?:``, ``(?P<name>``, lookarounds and flags; returns (body index, group kind).

    The kind is ``group`` (consumes text), ``lookaround`` (zero width) or ``skip`` (comment, flags,
    back reference: no body to parse; the index then points at the closing parenthesis).
    """
    if pattern[index] != "?":
        return index, "group"
    nxt = pattern[index + 1]
    if nxt in ":>":
        return index + 2, "group"
    if nxt in "=!":
        return index + 2, "lookaround"
    if nxt == "<" and pattern[index + 2] in "=!":
        return index + 3, "lookaround"
    if pattern.startswith("P<", index + 1):
        return pattern.index(">", index) + 1, "group"
    if nxt in "#(" or pattern.startswith("P=", index + 1):
        return pattern.index(")", index), "skip"
    position = index + 1
    while pattern[position].isalpha() or pattern[position] == "-":
        position += 1
    return (position + 1, "group") if pattern[position] == ":" else (position, "skip")


def _parse(pattern: str, index: int) -> tuple[list[list[_Node]], int]:
    branches: list[list[_Node]] = [[]]
    while index < len(pattern) and pattern[index] != ")":
        char = pattern[index]
        if char == "|":
            branches.append([])
            index += 1
            continue
        if char == "(":
            body, kind = _group_prefix(pattern, index + 1)
            inner: list[list[_Node]] = [[]]
            if kind != "skip":
                inner, body = _parse(pattern, body)
            node = _group_node(inner)
            node.zero_width = node.zero_width or kind != "group"
            index = body + 1
        elif char == "[":
            end = _class_end(pattern, index)
            node = _Node(chars=_atom_chars(pattern[index:end]))
            index = end
        elif char == "\\":
            escape = pattern[index : index + 2]
            node = _Node(chars=_atom_chars(escape), zero_width=escape[1:] in _ZERO_WIDTH_ESCAPES)
            index += 2
        else:
            node = _Node(
                chars=_atom_chars(re.escape(char) if char not in ".^$" else char), zero_width=char in "^$"
            )
            index += 1
        node.minimum, node.unbounded, index = _quantifier(pattern, index)
        branches[-1].append(node)
    return branches, index


def _group_node(inner: list[list[_Node]]) -> _Node:
    members = [node for branch in inner for node in branch]
    chars = frozenset().union(*(node.chars for node in members)) if members else frozenset()
    unbounded_inside = any(node.unbounded or node.children_unbounded for node in members)
    node = _Node(chars=chars, branches=inner, children_unbounded=unbounded_inside, alternation=len(inner) > 1)
    node.zero_width = not members or all(member.zero_width for member in members)
    return node


def _flatten(branch: list[_Node]) -> list[_Node]:
    """Inline plain groups (one branch, matched exactly once) into their parent sequence."""
    flat: list[_Node] = []
    for node in branch:
        plain = node.branches is not None and len(node.branches) == 1 and not node.zero_width
        if plain and node.minimum == 1 and not node.unbounded:
            assert node.branches is not None
            flat.extend(_flatten(node.branches[0]))
        else:
            flat.append(node)
    return flat


_NESTED = "a quantified group contains an unbounded quantifier or an alternation"
_ADJACENT = "two unbounded quantifiers over overlapping characters follow each other"


def _walk(branch: list[_Node], pending: list[frozenset[str]]) -> tuple[str | None, list[frozenset[str]]]:
    """Walk a sequence keeping the character sets of unbounded runs not yet cut off by a separator.

    A mandatory atom cuts off every pending run it cannot itself match; an unbounded run whose
    characters overlap a pending run is refused.
    """
    for node in _flatten(branch):
        if node.branches is not None:
            if node.unbounded and (node.children_unbounded or node.alternation):
                return _NESTED, pending
            after: list[frozenset[str]] = []
            for inner in node.branches:
                risk, inner_after = _walk(inner, [] if node.zero_width else list(pending))
                if risk:
                    return risk, pending
                after.extend(inner_after)
            if node.zero_width:
                continue
            if node.unbounded:
                if any(node.chars & earlier for earlier in pending):
                    return _ADJACENT, pending
                after.append(node.chars)
            if node.minimum == 0:
                after.extend(pending)
            pending = list(dict.fromkeys(after))
            continue
        if node.zero_width:
            continue
        if node.unbounded:
            if any(node.chars & earlier for earlier in pending):
                return _ADJACENT, pending
            if node.minimum >= 1:
                pending = []
            pending.append(node.chars)
        elif node.minimum >= 1:
            pending = [earlier for earlier in pending if earlier & node.chars]
    return None, pending


def regex_risk(pattern: str) -> str | None:
    """Why ``pattern`` (which must compile) is refused, or None when its cost is bounded."""
    try:
        branches, _ = _parse(pattern, 0)
    except (IndexError, ValueError):
        return "pattern too complex to analyse; simplify it"
    for branch in branches:
        risk, _ = _walk(branch, [])
        if risk:
            return f"{risk} (catastrophic backtracking risk)"
    return None
