"""Contradictions between claims of the same semantic key across evidence items.

Claims are grouped by ``(kind, key)``: the key is the declared field or pattern name, so
``price_usd`` read from CoinGecko and from Binance is one group. A numeric group conflicts when its
relative spread ``(max - min) / max(|max|, |min|)`` exceeds the tolerance (computed exactly with
fractions, so huge ints and tiny floats neither overflow nor round); a boolean group conflicts when
it holds both ``true`` and ``false``.

A passing ``contradiction.scan`` check says how many groups were compared; each conflict is one
more :class:`CheckResult` (``contradiction.numeric:<key>`` or ``contradiction.boolean:<key>``)
naming the claim ids, evidence ids and values. It is an error when
the key decides the event and the claims disagree about the event; a warning when the key is not
decisive or when every claim still leads to the same event outcome.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Sequence
from fractions import Fraction
from functools import lru_cache
from typing import Any

from engine.auditor.checks import failed as check_failed
from engine.auditor.checks import passed as check_passed
from engine.auditor.checks import warning as check_warning
from engine.auditor.reasoning.claim_extraction import Claim, ClaimSet
from engine.schemas import CheckResult

__all__ = ["ContradictionChecker", "relative_spread"]

CHECKED_KINDS = ("numeric", "boolean")


def relative_spread(low: int | float, high: int | float) -> Fraction:
    """``(high - low) / max(|low|, |high|)`` exactly; 0 when both are 0."""
    low_exact, high_exact = Fraction(low), Fraction(high)
    scale = max(abs(low_exact), abs(high_exact))
    return Fraction(0) if scale == 0 else (high_exact - low_exact) / scale


@lru_cache(maxsize=64)
def _exact_tolerance(relative_tolerance: float) -> tuple[Fraction, tuple[int, int]]:
    """``Fraction(relative_tolerance)`` and its ``(numerator, denominator)``, made once per policy
    value (Fractions are immutable; their numerator and denominator are interpreted properties)."""
    exact = Fraction(relative_tolerance)
    return exact, (exact.numerator, exact.denominator)


def _ratio(value: Any) -> tuple[int, int] | None:
    """``value`` as the exact ``(numerator, denominator > 0)`` that ``Fraction(value)`` holds, for an int
    or a finite float; None for anything else (those take the :func:`relative_spread` path)."""
    kind = type(value)
    if kind is int:
        number: int = value
        return number, 1
    if kind is float and math.isfinite(value):
        numerator, denominator = float.as_integer_ratio(value)
        return numerator, denominator
    return None


def _within_tolerance(low: Any, high: Any, tolerance: Fraction, numerator: int, denominator: int) -> bool:
    """``relative_spread(low, high) <= tolerance`` (``tolerance == numerator / denominator``), exactly.

    Ints and finite floats are compared by cross-multiplying their exact integer ratios, which is
    the comparison the Fractions make, without building them; any other value (or ``high < low``)
    takes :func:`relative_spread` itself.
    """
    low_ratio, high_ratio = _ratio(low), _ratio(high)
    if low_ratio is None or high_ratio is None:
        return relative_spread(low, high) <= tolerance
    a, b = low_ratio
    c, d = high_ratio
    difference = c * b - a * d  # (high - low) * b * d
    if difference < 0:
        return relative_spread(low, high) <= tolerance
    # scale = max(|a|/b, |c|/d) as scale_num / scale_den
    scale_num, scale_den = (abs(a), b) if abs(a) * d >= abs(c) * b else (abs(c), d)
    if scale_num == 0:
        return True  # both are 0: the spread is 0, within every tolerance (which is >= 0)
    # difference / (b * d) <= (numerator / denominator) * (scale_num / scale_den), all denominators > 0
    return difference * denominator * scale_den <= numerator * scale_num * b * d


class ContradictionChecker:
    """Detect numeric and boolean contradictions; ``relative_tolerance`` comes from the audit policy."""

    def __init__(self, relative_tolerance: float | int = 0.01) -> None:
        # ``float | int``: a compiled build (engine.build) would turn a ``float`` parameter's int
        # into a float, and the tolerance is echoed into check details (``0`` must stay ``0``).
        if not 0 <= relative_tolerance <= 1:
            raise ValueError("relative_tolerance must be within [0, 1]")
        self.relative_tolerance = relative_tolerance
        self._tolerance, self._tolerance_ratio = _exact_tolerance(relative_tolerance)

    def check(
        self,
        claims: ClaimSet | Iterable[Claim],
        *,
        decisive_keys: Collection[str] | None = None,
        agrees: Callable[[Sequence[Claim]], bool] | None = None,
    ) -> list[CheckResult]:
        """A ``contradiction.scan`` summary, then one CheckResult per conflicting group.

        ``decisive_keys`` (default: every key) are the keys the event depends on; ``agrees(group)``
        says whether a group's claims all lead to the same event outcome.
        """
        groups: dict[tuple[str, str], list[Claim]] = {}
        for claim in claims:
            if claim.kind in CHECKED_KINDS:
                groups.setdefault((claim.kind, claim.key), []).append(claim)
        results: list[CheckResult] = []
        compared = {"numeric": 0, "boolean": 0}  # ``dict.fromkeys(CHECKED_KINDS, 0)``, without the call
        for (kind, key), members in groups.items():
            if len({claim.evidence_id for claim in members}) < 2:
                continue
            compared[kind] += 1
            details = self._numeric(members) if kind == "numeric" else self._boolean(members)
            if details is None:
                continue
            decisive = decisive_keys is None or key in decisive_keys
            outcome_agrees = decisive and agrees is not None and agrees(members)
            details.update(
                {
                    "claim_ids": [claim.claim_id for claim in members],
                    "decisive": decisive,
                    "evidence_ids": [claim.evidence_id for claim in members],
                    "key": key,
                    "kind": kind,
                    "outcome_agrees": outcome_agrees if decisive and agrees is not None else None,
                    "values": [claim.value for claim in members],
                }
            )
            results.append(self._result(kind, key, details, decisive and not outcome_agrees))
        summary: dict[str, Any] = {
            "boolean_groups": compared["boolean"],
            "conflicts": len(results),
            "numeric_groups": compared["numeric"],
            "tolerance": self.relative_tolerance,
        }
        message = (
            f"compared {compared['numeric']} numeric and {compared['boolean']} boolean group(s) across sources: "
            f"{len(results) or 'no'} contradiction(s)"
        )
        results.insert(0, check_passed("contradiction.scan", message, summary))
        return results

    def _numeric(self, members: Sequence[Claim]) -> dict[str, Any] | None:
        values = [claim.value for claim in members]
        low, high = min(values), max(values)
        numerator, denominator = self._tolerance_ratio
        if _within_tolerance(low, high, self._tolerance, numerator, denominator):
            return None
        spread = relative_spread(low, high)
        return {
            "high": high,
            "low": low,
            "relative_spread": float(spread),
            "tolerance": self.relative_tolerance,
        }

    @staticmethod
    def _boolean(members: Sequence[Claim]) -> dict[str, Any] | None:
        values = [claim.value for claim in members]
        return {} if (True in values and False in values) else None

    @staticmethod
    def _result(kind: str, key: str, details: dict[str, Any], is_error: bool) -> CheckResult:
        check_id = f"contradiction.{kind}:{key}"
        sources = len(dict.fromkeys(details["evidence_ids"]))
        if kind == "numeric":
            message = (
                f"{key}: {sources} sources differ by a relative {details['relative_spread']!r} "
                f"(from {details['low']!r} to {details['high']!r}), tolerance {details['tolerance']!r}"
            )
        else:
            message = f"{key}: {sources} sources state both true and false"
        if is_error:
            return check_failed(
                check_id, message + "; the event outcome depends on which source is used", details
            )
        if details["decisive"]:
            return check_warning(check_id, message + "; every value leads to the same event outcome", details)
        return check_warning(check_id, message + "; the key does not decide the event", details)
