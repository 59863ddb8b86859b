"""Verification results (Cournot ``core/schemas/verification.py``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from engine.schemas.common import StrictModel
from engine.schemas.errors import CournotError
from engine.schemas.trusted import trusted_check

Severity = Literal["info", "warn", "error"]
ChallengeKind = Literal["evidence_leaf", "reasoning_leaf", "verdict_hash", "por_bundle", "provenance_tier"]


class CheckResult(StrictModel):
    """One named check: whether it passed, how severe a failure is, and structured details."""

    check_id: str = Field(min_length=1)
    ok: bool
    severity: Severity
    message: str
    details: dict[str, Any] = Field(default_factory=dict)

    # Engine-built checks skip re-validation when every value already has its declared type
    # (``trusted_check``); anything else is validated.

    @classmethod
    def passed(cls, check_id: str, message: str, details: dict[str, Any] | None = None) -> CheckResult:
        """A passing check (severity info)."""
        return trusted_check(cls, check_id, True, "info", message, details)

    @classmethod
    def warning(cls, check_id: str, message: str, details: dict[str, Any] | None = None) -> CheckResult:
        """A passing check that deserves attention (severity warn)."""
        return trusted_check(cls, check_id, True, "warn", message, details)

    @classmethod
    def failed(cls, check_id: str, message: str, details: dict[str, Any] | None = None) -> CheckResult:
        """A failing check (severity error)."""
        return trusted_check(cls, check_id, False, "error", message, details)


class ChallengeRef(StrictModel):
    """Points a challenger at the leaf or hash that failed."""

    kind: ChallengeKind
    leaf_index: int | None = None
    evidence_id: str | None = None
    step_id: str | None = None
    reason: str | None = None


class VerificationResult(StrictModel):
    """The outcome of a set of checks, with an optional challenge and error."""

    ok: bool
    checks: list[CheckResult] = Field(default_factory=list)
    challenge: ChallengeRef | None = None
    error: CournotError | None = None
