"""The integer fast path of the contradiction tolerance test agrees with the Fraction reference."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from engine.auditor.reasoning.contradiction_checks import (
    _exact_tolerance,
    _within_tolerance,
    relative_spread,
)

_EDGES: list[int | float] = [
    0,
    0.0,
    -0.0,
    1,
    -1,
    5e-324,
    -5e-324,
    1e308,
    -1e308,
    2**80,
    -(2**80),
    0.1,
    0.3,
    99.5,
]


def _values(seed: int) -> list[int | float]:
    rng = random.Random(seed)
    values = list(_EDGES)
    for _ in range(400):
        base = rng.uniform(-1, 1) * 10 ** rng.randint(-300, 300)
        values += [base, base * (1 + rng.uniform(-0.02, 0.02)), rng.randint(-(10**6), 10**6)]
    return values


@pytest.mark.parametrize("tolerance", [0, 0.0, 0.01, 1e-12, 0.5, 1, 1.0])
def test_fast_tolerance_test_equals_the_fraction_comparison(tolerance: float) -> None:
    exact, ratio = _exact_tolerance(tolerance)
    assert exact == Fraction(tolerance) and ratio == (exact.numerator, exact.denominator)
    values = _values(7)
    rng = random.Random(11)
    for _ in range(3000):
        low, high = sorted((rng.choice(values), rng.choice(values)))
        expected = relative_spread(low, high) <= exact
        assert _within_tolerance(low, high, exact, exact.numerator, exact.denominator) is expected, (
            low,
            high,
        )


def test_values_other_than_ints_and_finite_floats_take_the_reference_path() -> None:
    exact, _ = _exact_tolerance(0.01)
    with pytest.raises((ValueError, OverflowError)):  # Fraction(nan) / Fraction(inf) refuse, as before
        _within_tolerance(1.0, float("inf"), exact, exact.numerator, exact.denominator)
