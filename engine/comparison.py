"""Exact numeric comparison shared by the Auditor (deduce step) and the Judge (consistency check)."""

from __future__ import annotations

import operator
from collections.abc import Callable

COMPARATORS: dict[str, Callable[[int | float, int | float], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
}


def compare(value: int | float, comparator: str, threshold: int | float) -> bool:
    """``value <comparator> threshold``, exactly (ints and floats compare exactly; ``1 == 1.0``)."""
    try:
        return COMPARATORS[comparator](value, threshold)
    except KeyError:
        raise ValueError(f"unknown comparator {comparator!r}") from None
