"""The entry kinds a submission of each status may hold, how many of each, and in which order."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Final

from ledger.store.records import FOLLOW_UP_KINDS

__all__ = ["KIND_ORDER", "REQUIRED_KINDS", "kind_problems"]

KIND_ORDER: Final[dict[str, dict[str, int]]] = {
    "audited": {
        "submission.received": 0,
        "trace.step": 1,
        "audit.completed": 2,
        "verdict.issued": 3,
        **dict.fromkeys(FOLLOW_UP_KINDS, 4),
    },
    "rejected": {"submission.rejected": 0},
    "por_verified": {"por.verified": 0},
}
"""Each status's allowed kinds by rank in the chain (kinds of equal rank may interleave). The store
chains follow-ups onto audited submissions only."""

REQUIRED_KINDS: Final[dict[str, tuple[str, ...]]] = {
    "audited": ("submission.received", "audit.completed", "verdict.issued"),
    "rejected": ("submission.rejected",),
    "por_verified": ("por.verified",),
}
"""The kinds each status needs exactly once; the first is the chain's first entry."""


_KNOWN: Final[dict[tuple[str, tuple[str, ...]], list[tuple[str, str]]]] = {}
""":func:`kind_problems` of ``(status, kinds)`` seen before, all plain ``str`` (a pure function of
them: the ledger repeats a few kind sequences), up to :data:`_KNOWN_KEPT` of them."""
_KNOWN_KEPT: Final = 1024


def kind_problems(status: str, kinds: Sequence[str]) -> list[tuple[str, str]]:
    """``(code, message)`` for each way ``kinds`` (stream order) break their status's rules.

    An allow-list, not a deny-list: a kind the status does not name (a ``verdict.issued`` or a
    follow-up chained onto a rejected submission, say) is ``unexpected_entry``; so is a status
    this code does not know. Remembered for plain strings (:data:`_KNOWN`): a new list each call."""
    key = (status, tuple(kinds))
    plain = type(status) is str and all(type(kind) is str for kind in key[1])
    if plain:
        known = _KNOWN.get(key)
        if known is not None:
            return list(known)
    problems = _kind_problems(status, kinds)
    if plain and len(_KNOWN) < _KNOWN_KEPT:
        _KNOWN[key] = list(problems)
    return problems


def _kind_problems(status: str, kinds: Sequence[str]) -> list[tuple[str, str]]:
    order = KIND_ORDER.get(status)
    if order is None:
        return [("unexpected_entry", f"a submission of unknown status {status!r}")]
    problems = [
        ("entries_missing", f"a {status} submission needs exactly one {kind} entry, has {kinds.count(kind)}")
        for kind in REQUIRED_KINDS[status]
        if kinds.count(kind) != 1
    ]
    problems += [
        ("unexpected_entry", f"a {status} submission has a {kind} entry")
        for kind in dict.fromkeys(kinds)
        if kind not in order
    ]
    first = REQUIRED_KINDS[status][0]
    if kinds and kinds[0] != first:
        problems.append(("entries_out_of_order", f"the chain starts with {kinds[0]}, not {first}"))
        return problems
    known = [kind for kind in kinds if kind in order]
    for earlier, later in pairwise(known):
        if order[later] < order[earlier]:
            problems.append(("entries_out_of_order", f"a {later} entry follows a {earlier} entry"))
            break
    return problems
