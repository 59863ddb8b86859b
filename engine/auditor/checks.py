"""The auditor's check constructors: ``CheckResult.passed`` / ``warning`` / ``failed`` as compiled calls.

Each function returns exactly what the classmethod of the same name returns (both go through
:func:`engine.schemas.trusted.trusted_check`), so a check built here equals one built there. The
classmethods live on a Pydantic model and stay interpreted; compiled auditor modules (``make
compile``) call these instead, natively, without an interpreted frame and argument parsing per check.
The parameters are ``Any`` for the reason ``trusted_check`` gives: a value of the wrong type must
reach validation, not stop at a compiled type check.
"""

from __future__ import annotations

from typing import Any, Final

from engine.schemas import CheckResult
from engine.schemas.trusted import (
    FAILED_TEMPLATE,
    PASSED_TEMPLATE,
    WARNING_TEMPLATE,
    trusted_check_from,
    trusted_check_taking,
)

__all__ = ["failed", "failed_taking", "passed", "passed_taking", "warning", "warning_taking"]

_CHECK_RESULT: Final = CheckResult
"""``CheckResult`` as a ``Final`` name: a compiled build reads it from a C static, not from the
module dict on every call (the class is imported from an interpreted module)."""


def passed(check_id: Any, message: Any, details: Any = None) -> CheckResult:
    """``CheckResult.passed``: a passing check (severity info)."""
    return trusted_check_from(PASSED_TEMPLATE, _CHECK_RESULT, check_id, message, details)


def warning(check_id: Any, message: Any, details: Any = None) -> CheckResult:
    """``CheckResult.warning``: a passing check that deserves attention (severity warn)."""
    return trusted_check_from(WARNING_TEMPLATE, _CHECK_RESULT, check_id, message, details)


def failed(check_id: Any, message: Any, details: Any = None) -> CheckResult:
    """``CheckResult.failed``: a failing check (severity error)."""
    return trusted_check_from(FAILED_TEMPLATE, _CHECK_RESULT, check_id, message, details)


# The ``_taking`` forms keep ``details`` itself (no copy): for a dict display or local dict the
# caller made for this one check and does not keep. Each equals its copying form otherwise.


def passed_taking(check_id: Any, message: Any, details: Any) -> CheckResult:
    """:func:`passed` holding the caller's fresh ``details`` dict itself."""
    return trusted_check_taking(PASSED_TEMPLATE, _CHECK_RESULT, check_id, message, details)


def warning_taking(check_id: Any, message: Any, details: Any) -> CheckResult:
    """:func:`warning` holding the caller's fresh ``details`` dict itself."""
    return trusted_check_taking(WARNING_TEMPLATE, _CHECK_RESULT, check_id, message, details)


def failed_taking(check_id: Any, message: Any, details: Any) -> CheckResult:
    """:func:`failed` holding the caller's fresh ``details`` dict itself."""
    return trusted_check_taking(FAILED_TEMPLATE, _CHECK_RESULT, check_id, message, details)
