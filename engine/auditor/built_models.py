"""The audit's three per-bundle models (policy, trace, verification), built without re-validation.

Each equals what ``engine.schemas.trusted.trusted`` builds from the same values (same field dict,
in declared order, same ``model_fields_set``, no extra or private values; unit-tested), without its
general work per call (keyword packing, the template merge, the required/unknown-name checks): the
field set here is fixed, and it is checked once, at import, against the models' declared fields.
Should a model's fields ever differ from the layout below, every call takes ``trusted`` itself.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel

from engine.schemas import ReasoningTrace, TracePolicy, VerificationResult
from engine.schemas.trusted import instance_from_state, trusted

__all__ = ["policy_model", "trace_model", "verification_model"]

_POLICY_FIELDS: Final = ("schema_version", "decoding_policy", "allow_external_sources", "max_steps", "extra")
_TRACE_FIELDS: Final = ("schema_version", "trace_id", "policy", "steps", "evidence_refs")
_RESULT_FIELDS: Final = ("ok", "checks", "challenge", "error")
_POLICY_SET: Final = frozenset(_POLICY_FIELDS[1:])
_TRACE_SET: Final = frozenset(_TRACE_FIELDS[1:])
_RESULT_SET: Final = frozenset(_RESULT_FIELDS)
_RESULT_FIELDS_SET: Final[set[str]] = set(_RESULT_FIELDS)
"""The ``model_fields_set`` every built result shares: it names every field, so no pydantic
operation changes it (assigning a field adds a name already present; copies copy the set)."""


def _layout_holds() -> bool:
    """Whether the three models declare exactly the fields (and order) built here."""
    return (
        tuple(TracePolicy.model_fields) == _POLICY_FIELDS
        and tuple(ReasoningTrace.model_fields) == _TRACE_FIELDS
        and tuple(VerificationResult.model_fields) == _RESULT_FIELDS
        and not TracePolicy.model_fields["schema_version"].is_required()
        and not ReasoningTrace.model_fields["schema_version"].is_required()
    )


_FAST: Final = _layout_holds()
_POLICY_SCHEMA: Final[Any] = TracePolicy.model_fields["schema_version"].default
_TRACE_SCHEMA: Final[Any] = ReasoningTrace.model_fields["schema_version"].default


def _made(cls: type[BaseModel], data: dict[str, Any], fields_set: frozenset[str]) -> Any:
    return instance_from_state(cls, data, set(fields_set))


def policy_model(max_steps: Any, extra: dict[str, Any]) -> TracePolicy:
    """``trusted(TracePolicy, decoding_policy="strict", allow_external_sources=False, max_steps=…, extra=…)``."""
    if not _FAST:
        return trusted(
            TracePolicy,
            decoding_policy="strict",
            allow_external_sources=False,
            max_steps=max_steps,
            extra=extra,
        )
    data = {
        "schema_version": _POLICY_SCHEMA,
        "decoding_policy": "strict",
        "allow_external_sources": False,
        "max_steps": max_steps,
        "extra": extra,
    }
    policy: TracePolicy = _made(TracePolicy, data, _POLICY_SET)
    return policy


def trace_model(trace_id: Any, policy: Any, steps: Any, evidence_refs: Any) -> ReasoningTrace:
    """``trusted(ReasoningTrace, trace_id=…, policy=…, steps=…, evidence_refs=…)``."""
    if not _FAST:
        return trusted(
            ReasoningTrace, trace_id=trace_id, policy=policy, steps=steps, evidence_refs=evidence_refs
        )
    data = {
        "schema_version": _TRACE_SCHEMA,
        "trace_id": trace_id,
        "policy": policy,
        "steps": steps,
        "evidence_refs": evidence_refs,
    }
    trace: ReasoningTrace = _made(ReasoningTrace, data, _TRACE_SET)
    return trace


def verification_model(ok: Any, checks: Any, challenge: Any, error: Any) -> VerificationResult:
    """``trusted(VerificationResult, ok=…, checks=…, challenge=…, error=…)``."""
    if not _FAST:
        return trusted(VerificationResult, ok=ok, checks=checks, challenge=challenge, error=error)
    data = {"ok": ok, "checks": checks, "challenge": challenge, "error": error}
    result: VerificationResult = instance_from_state(VerificationResult, data, _RESULT_FIELDS_SET)
    return result
