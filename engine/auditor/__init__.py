"""The Auditor (Module 06): deterministic claim extraction, checks and a grounded reasoning trace."""

from engine.auditor.agent import AuditorAgent, trace_id_for
from engine.auditor.config import AuditConfig
from engine.auditor.reasoning.claim_extraction import Claim, ClaimExtractor, ClaimSet, ItemClaims
from engine.auditor.reasoning.contradiction_checks import ContradictionChecker
from engine.auditor.report import audit_report, evaluation_variables
from engine.auditor.verification.logic_sanity import LogicSanityChecker, SanityReport
from engine.auditor.verification.trace_policy import TracePolicyVerifier

__all__ = [
    "AuditConfig",
    "AuditorAgent",
    "Claim",
    "ClaimExtractor",
    "ClaimSet",
    "ContradictionChecker",
    "ItemClaims",
    "LogicSanityChecker",
    "SanityReport",
    "TracePolicyVerifier",
    "audit_report",
    "evaluation_variables",
    "trace_id_for",
]
