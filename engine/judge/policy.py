"""The Judge's confidence policy, read from ``PromptSpec.extra["confidence_policy"]``.

Keys (all optional; unknown keys are ignored so Cournot prompt specs load unchanged):

=========================== ======= ===========================================================
key                         default meaning
=========================== ======= ===========================================================
``default_confidence``      0.7     base confidence of a decided outcome
``min_confidence_for_yesno`` 0.55   a decided outcome below this becomes INVALID (``R_CONFIDENCE``);
                                    an INVALID verdict's confidence never exceeds it
``conflict_multiplier``     0.8     applied when ``conflict_detected`` is true
``fallback_multiplier``     0.9     applied when the auditor reports ``fallback_used``
``invalid_confidence``      0.3     confidence of an INVALID verdict whose inputs were well formed
                                    but did not settle the market (capped as above)
``conflict_action``         reduce  ``"reduce"`` (multiply) or ``"invalid"`` (INVALID via ``R_CONFLICT``)
=========================== ======= ===========================================================

Numbers must be JSON numbers (never booleans) in ``[0, 1]``. A malformed policy is a schema-lock
failure (the verdict is INVALID via ``R_VALIDITY``) and the defaults are used for arithmetic.

Arithmetic (IEEE doubles, always in this order, so every process computes the same bits)::

    c = default_confidence
    if conflict_detected: c = c * conflict_multiplier
    if fallback_used:     c = c * fallback_multiplier
    c = round(min(1.0, max(0.0, c)), 6)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final, Literal

from engine.auditor.record import Record
from engine.comparison import is_finite_number

__all__ = ["CONFIDENCE_DIGITS", "ConfidencePolicy", "round_confidence"]

CONFIDENCE_DIGITS = 6

_NUMBER_KEYS = (
    "default_confidence",
    "min_confidence_for_yesno",
    "conflict_multiplier",
    "fallback_multiplier",
    "invalid_confidence",
)
_CONFLICT_ACTIONS = ("reduce", "invalid")


def round_confidence(value: float) -> float:
    """Clamp to ``[0, 1]`` and round to :data:`CONFIDENCE_DIGITS` places (correctly rounded, no -0.0)."""
    clamped = min(1.0, max(0.0, float(value)))
    return round(clamped, CONFIDENCE_DIGITS) + 0.0


class ConfidencePolicy(Record):
    """Confidence parameters; see the module docstring for their meaning and defaults."""

    FIELDS: ClassVar[tuple[str, ...]] = (
        "default_confidence",
        "min_confidence_for_yesno",
        "conflict_multiplier",
        "fallback_multiplier",
        "invalid_confidence",
        "conflict_action",
    )
    __slots__ = FIELDS

    def __init__(
        self,
        default_confidence: float = 0.7,
        min_confidence_for_yesno: float = 0.55,
        conflict_multiplier: float = 0.8,
        fallback_multiplier: float = 0.9,
        invalid_confidence: float = 0.3,
        conflict_action: Literal["reduce", "invalid"] = "reduce",
    ) -> None:
        self.default_confidence: Final = default_confidence
        self.min_confidence_for_yesno: Final = min_confidence_for_yesno
        self.conflict_multiplier: Final = conflict_multiplier
        self.fallback_multiplier: Final = fallback_multiplier
        self.invalid_confidence: Final = invalid_confidence
        self.conflict_action: Final = conflict_action

    @classmethod
    def from_extra(cls, extra: Mapping[str, Any]) -> tuple[ConfidencePolicy, list[str]]:
        """Policy from ``PromptSpec.extra`` and the problems found (empty when the policy is valid)."""
        raw = extra.get("confidence_policy")
        if raw is None:
            return cls(), []
        if type(raw) is not dict and not isinstance(raw, Mapping):  # an exact dict skips the ABC check
            return cls(), [f"confidence_policy must be an object, got {type(raw).__name__}"]
        problems: list[str] = []
        values: dict[str, Any] = {}
        for key in _NUMBER_KEYS:
            if key not in raw or raw[key] is None:
                continue
            value = raw[key]
            if not is_finite_number(value):
                problems.append(f"confidence_policy.{key} must be a number, got {value!r}")
            elif not 0 <= value <= 1:
                problems.append(f"confidence_policy.{key} must lie in [0, 1], got {value!r}")
            else:
                values[key] = float(value)
        action = raw.get("conflict_action")
        if action is not None:
            if action in _CONFLICT_ACTIONS:
                values["conflict_action"] = action
            else:
                problems.append(
                    f"confidence_policy.conflict_action must be 'reduce' or 'invalid', got {action!r}"
                )
        if problems:
            return cls(), problems
        return cls(**values), []

    def decided_confidence(self, *, conflict: bool, fallback: bool) -> float:
        """Confidence of a decided outcome: base, times the applicable multipliers, clamped and rounded."""
        value = self.default_confidence
        if conflict:
            value = value * self.conflict_multiplier
        if fallback:
            value = value * self.fallback_multiplier
        return round_confidence(value)

    def invalid_cap(self, value: float) -> float:
        """An INVALID verdict's confidence: ``value`` capped at ``min_confidence_for_yesno``."""
        return round_confidence(min(value, self.min_confidence_for_yesno))

    def as_dict(self) -> dict[str, Any]:
        """The effective policy, recorded in verdict metadata."""
        return {
            "conflict_action": self.conflict_action,
            "conflict_multiplier": self.conflict_multiplier,
            "default_confidence": self.default_confidence,
            "fallback_multiplier": self.fallback_multiplier,
            "invalid_confidence": self.invalid_confidence,
            "min_confidence_for_yesno": self.min_confidence_for_yesno,
        }
