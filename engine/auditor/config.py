"""The auditor's bounded, declared policy: tolerances, slack and cost limits.

Every value here is recorded in ``TracePolicy.extra`` of the trace it produced, together with the
engine version, so a replay can tell a policy change from nondeterminism. A market may override
``numeric_tolerance`` and ``timestamp_slack_seconds`` through ``PromptSpec.extra["audit_policy"]``;
nothing else comes from outside (no environment, no clock).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from engine.version import ENGINE_VERSION

__all__ = ["DEFAULT_AUDITOR_NAME", "MAX_SLACK_SECONDS", "MIN_STEPS", "AuditConfig"]

DEFAULT_AUDITOR_NAME = "auditor.deterministic"
MAX_SLACK_SECONDS = 31 * 24 * 3600
MIN_STEPS = 8
"""The smallest ``max_steps`` that still fits extract, check, aggregate, contradictions, deduce, map."""


_INT_FIELDS = (
    "timestamp_slack_seconds",
    "max_steps",
    "max_text_chars",
    "max_pattern_chars",
    "max_capture_chars",
    "max_claims_per_item",
    "max_search_depth",
)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class AuditConfig:
    """Bounds and tolerances of one audit (all values are committed via the trace policy)."""

    numeric_tolerance: float = 0.01
    """Relative spread ``(max - min) / max(|max|, |min|)`` above which numeric claims conflict."""
    timestamp_slack_seconds: int = 900
    """How far outside ``resolution_window`` an observation time may fall and still count."""
    max_steps: int = 200
    max_text_chars: int = 65_536
    """Only this many characters of text/html content are scanned by extraction patterns."""
    max_pattern_chars: int = 512
    max_capture_chars: int = 512
    max_claims_per_item: int = 64
    max_search_depth: int = 3
    """Depth of the key-sorted search for the default fields inside ``parsed_value``."""

    def __post_init__(self) -> None:
        # Exact types first: a float or bool where an int is declared would be committed as such,
        # and the compiled engine (which unboxes these as C integers) would refuse or coerce it
        # where the pure one runs on: both refuse it here instead.
        for name in _INT_FIELDS:
            value = getattr(self, name)
            if type(value) is not int:
                raise TypeError(f"{name} must be an int, got {type(value).__name__}")
        if not _is_number(self.numeric_tolerance):
            raise TypeError(
                f"numeric_tolerance must be a number, got {type(self.numeric_tolerance).__name__}"
            )
        if not 0 <= self.numeric_tolerance <= 1:
            raise ValueError("numeric_tolerance must be within [0, 1]")
        if not 0 <= self.timestamp_slack_seconds <= MAX_SLACK_SECONDS:
            raise ValueError(f"timestamp_slack_seconds must be within [0, {MAX_SLACK_SECONDS}]")
        if self.max_steps < MIN_STEPS:
            raise ValueError(f"max_steps must be at least {MIN_STEPS}")
        for name in ("max_text_chars", "max_pattern_chars", "max_capture_chars", "max_claims_per_item"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive")

    def with_overrides(self, overrides: object) -> tuple[AuditConfig, list[str]]:
        """Apply ``PromptSpec.extra["audit_policy"]``; returns the config and a list of problems."""
        if overrides is None:
            return self, []
        if not isinstance(overrides, Mapping):
            return self, ["audit_policy must be an object"]
        problems: list[str] = []
        changes: dict[str, Any] = {}
        for key in sorted(overrides):
            value = overrides[key]
            if key == "numeric_tolerance":
                if _is_number(value) and 0 <= value <= 1:
                    changes[key] = float(value)
                else:
                    problems.append("audit_policy.numeric_tolerance must be a number within [0, 1]")
            elif key == "timestamp_slack_seconds":
                if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SLACK_SECONDS:
                    changes[key] = value
                else:
                    problems.append(
                        f"audit_policy.timestamp_slack_seconds must be an integer within [0, {MAX_SLACK_SECONDS}]"
                    )
            else:
                problems.append(f"audit_policy.{key} is not a known setting")
        return replace(self, **changes), problems

    def policy_extra(self, auditor_name: str) -> dict[str, Any]:
        """What ``TracePolicy.extra`` records: engine version, auditor name and every bound."""
        return {
            "auditor": auditor_name,
            "engine_version": ENGINE_VERSION,
            "max_capture_chars": self.max_capture_chars,
            "max_claims_per_item": self.max_claims_per_item,
            "max_pattern_chars": self.max_pattern_chars,
            "max_search_depth": self.max_search_depth,
            "max_text_chars": self.max_text_chars,
            "numeric_tolerance": self.numeric_tolerance,
            "role": "auditor",
            "timestamp_slack_seconds": self.timestamp_slack_seconds,
        }
