"""Exact numeric comparison shared by the Auditor (deduce step) and the Judge (consistency check),
and what counts as a number there."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import TypeGuard

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


def is_finite_number(value: object) -> TypeGuard[int | float]:
    """A finite int or float, never a bool. An int beyond a float's range is not one:
    ``math.isfinite`` would raise on it, and such a value is refused (fail closed), never a crash."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False
