"""Verification helpers of the Auditor: logic sanity and trace policy."""

from engine.auditor.verification.logic_sanity import LogicSanityChecker, SanityReport
from engine.auditor.verification.trace_policy import TracePolicyVerifier

__all__ = ["LogicSanityChecker", "SanityReport", "TracePolicyVerifier"]
