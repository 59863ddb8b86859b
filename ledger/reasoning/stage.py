"""The reasoning stage's pure core: task derivation, the ``reasoning.verified`` payload, replay.

A submission asks for reasoning verification with the envelope option ``verify_reasoning``
(stored in its ``submission.received`` payload under ``envelope_options``; read from the dict, so
the ledger never imports ``consumers``). Its task is derived from stored entries only:

* **query**: ``envelope_options.reasoning_query`` when that string is present, else the market
  question (``prompt_spec.market.question``);
* **expression**: ``envelope_options.reasoning_expression`` when present, else the arithmetic the
  auditor evaluated: ``"<numeric_value> - <threshold>"`` from the ``evaluation_variables`` of the
  ``audit.completed`` entry, each number written as its canonical JSON text (ints stay ints,
  floats are Python ``repr``: ``104250.12 - 100000``, ``1.234e-05 - 1e-05``) and a negative
  threshold in parentheses (``5 - (-3)``). The outcome the auditor computed holds exactly when
  ``(numeric_value - threshold) <comparator> 0``; the comparator is recorded beside it. Without
  both numbers (boolean and multiple-choice markets) there is no arithmetic to verify and the
  entry says ``not_applicable``.

:func:`replay_reasoning_entry` re-runs a recorded entry over its recorded exchanges (no network)
and compares result hashes. See ``docs/reasoning-verification.md``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from pydantic import ValidationError

from engine.canonical import dumps_canonical, hash_canonical, to_hex
from engine.comparison import is_finite_number
from engine.reasoning import (
    VERIFIER_VERSION,
    Provider,
    ReasoningResult,
    ReasoningTask,
    ReasoningVerifier,
    RecordedProviders,
    ReplayMissError,
    is_fail_closed,
)
from ledger.store.drafts import (
    committed_reasoning_result,
    reasoning_not_applicable_entry,
    reasoning_result_entry,
)
from ledger.store.records import EntryDraft

__all__ = [
    "EXPRESSION_RULE",
    "OPTION_EXPRESSION",
    "OPTION_QUERY",
    "OPTION_VERIFY",
    "ReasoningRequest",
    "RerunComparison",
    "VerificationStatus",
    "derive_request",
    "format_operand",
    "not_applicable_entry",
    "replay_reasoning_entry",
    "result_entry",
    "status_of",
]

OPTION_VERIFY = "verify_reasoning"
OPTION_QUERY = "reasoning_query"
OPTION_EXPRESSION = "reasoning_expression"
EXPRESSION_RULE = "numeric_value - threshold"

VerificationStatus = Literal["valid", "invalid", "fail_closed", "not_applicable"]


@dataclass(frozen=True)
class ReasoningRequest:
    """What one submission asks the verifier, or why it cannot ask (``reason_code`` set)."""

    query: str | None
    query_source: str
    expression: str | None
    expression_source: str
    operands: dict[str, Any] | None = None
    reason_code: str | None = None
    message: str | None = None
    cross_validation: bool = True

    @property
    def applicable(self) -> bool:
        """True when there is a query and an expression to verify."""
        return self.reason_code is None

    def task(self) -> ReasoningTask:
        """The engine task (only for applicable requests)."""
        if self.expression is None:
            raise ValueError("request is not applicable")
        return ReasoningTask(expression=self.expression)

    def to_payload(self) -> dict[str, Any]:
        """The ``task`` block of the entry payload."""
        return {
            "query": self.query,
            "query_source": self.query_source,
            "expression": self.expression,
            "expression_source": self.expression_source,
            "operands": self.operands,
            "cross_validation": self.cross_validation,
        }


def format_operand(value: int | float) -> str:
    """A number as its canonical JSON text (``100000``, ``104250.12``, ``1e-05``)."""
    return dumps_canonical(value)


def _option_text(options: Mapping[str, Any], name: str) -> str | None:
    value = options.get(name)
    return value if isinstance(value, str) and value.strip() else None


def _derived_expression(
    options: Mapping[str, Any], variables: Mapping[str, Any]
) -> tuple[str | None, str, dict[str, Any] | None]:
    """``(expression, source, operands)``; expression None when there is no arithmetic."""
    given = _option_text(options, OPTION_EXPRESSION)
    if given is not None:
        return given, f"envelope_options.{OPTION_EXPRESSION}", None
    value, threshold = variables.get("numeric_value"), variables.get("threshold")
    if not (is_finite_number(value) and is_finite_number(threshold)):
        return None, "evaluation_variables", None
    right = format_operand(threshold)
    if right.startswith("-"):
        right = f"({right})"
    operands = {"numeric_value": value, "threshold": threshold, "comparator": variables.get("comparator")}
    return f"{format_operand(value)} - {right}", "evaluation_variables", operands


def _no_arithmetic_message(variables: Mapping[str, Any]) -> str:
    """Why no expression was derived: the operands are missing, or present but not finite numbers."""
    present = [name for name in ("numeric_value", "threshold") if variables.get(name) is not None]
    unusable = [name for name in present if not is_finite_number(variables.get(name))]
    if unusable:
        return (
            f"the auditor's {' and '.join(unusable)} for this submission is not a finite number "
            "(a bool, a non-number, or a value beyond float range), so no arithmetic can be checked"
        )
    return "the auditor evaluated no numeric_value and threshold for this submission"


def derive_request(
    question: str | None,
    options: Mapping[str, Any] | None,
    evaluation_variables: Mapping[str, Any] | None,
    *,
    cross_validation: bool = True,
) -> ReasoningRequest:
    """Query and expression for one submission (the rule in the module docstring)."""
    opts: Mapping[str, Any] = options or {}
    query = _option_text(opts, OPTION_QUERY)
    query_source = f"envelope_options.{OPTION_QUERY}"
    if query is None:
        query, query_source = question, "prompt_spec.market.question"
    expression, source, operands = _derived_expression(opts, evaluation_variables or {})
    reason_code = message = None
    if expression is None:
        reason_code = "no_arithmetic"
        message = _no_arithmetic_message(evaluation_variables or {})
    elif not query:
        reason_code, message = "no_query", "the submission has no market question to verify against"
    return ReasoningRequest(
        query=query or None,
        query_source=query_source,
        expression=expression,
        expression_source=source,
        operands=operands,
        reason_code=reason_code,
        message=message,
        cross_validation=cross_validation,
    )


def status_of(result: ReasoningResult) -> VerificationStatus:
    """``valid``; ``fail_closed`` when evidence was missing (no provider, a provider failure, an
    empty or placeholder trace, no distinct secondary: :func:`engine.reasoning.is_fail_closed`);
    otherwise ``invalid`` (the providers answered and the check failed)."""
    if result.is_valid:
        return "valid"
    return "fail_closed" if is_fail_closed(result) else "invalid"


def result_entry(
    request: ReasoningRequest, result: ReasoningResult, *, attempt: int, audit_entry_hash: str | None
) -> EntryDraft:
    """``reasoning.verified`` for a verifier run (shaped by :func:`ledger.store.drafts.reasoning_result_entry`)."""
    return reasoning_result_entry(
        status=status_of(result),
        attempt=attempt,
        audit_entry_hash=audit_entry_hash,
        task=request.to_payload(),
        result=result,
    )


def not_applicable_entry(
    request: ReasoningRequest, *, attempt: int, audit_entry_hash: str | None
) -> EntryDraft:
    """``reasoning.verified`` when there is nothing to verify: the request is answered, not dropped."""
    return reasoning_not_applicable_entry(
        attempt=attempt,
        audit_entry_hash=audit_entry_hash,
        task=request.to_payload(),
        reason_code=request.reason_code,
        message=request.message,
        verifier_version=VERIFIER_VERSION,
    )


class RerunComparison(NamedTuple):
    """``identical`` when the re-run reproduces the recorded ``result_hash``; ``diff`` says where not."""

    identical: bool
    diff: list[str]


def _short(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _field_diff(recorded: Mapping[str, Any], replayed: Mapping[str, Any]) -> list[str]:
    lines = []
    for key in sorted(set(recorded) | set(replayed)):
        if recorded.get(key) != replayed.get(key):
            lines.append(
                f"result.{key}: recorded {_short(recorded.get(key))} != replayed {_short(replayed.get(key))}"
            )
    return lines


def replay_reasoning_entry(
    entry_payload: Mapping[str, Any], *, providers: Sequence[Provider] | None = None
) -> RerunComparison:
    """Re-run a ``reasoning.verified`` payload and compare result hashes.

    By default the providers are :meth:`RecordedProviders.from_result` over the recorded
    descriptors and exchanges (no network; a request that was not recorded is a difference).
    Pass ``providers`` to re-ask live providers instead (``--live``). Never raises for bad
    payloads: problems are reported in ``diff``.
    """
    status = entry_payload.get("status")
    if status == "not_applicable":
        if "result" in entry_payload:
            return RerunComparison(False, ["payload: not_applicable entry carries a result"])
        return RerunComparison(True, [])
    task_block = entry_payload.get("task")
    if not isinstance(task_block, Mapping):
        return RerunComparison(False, ["payload: no task block"])
    stored = entry_payload.get("result")
    if not isinstance(stored, Mapping):
        return RerunComparison(False, ["payload: no result"])
    try:
        recorded = ReasoningResult.model_validate(stored)
    except ValidationError as exc:
        return RerunComparison(False, [f"payload: result is malformed: {exc.error_count()} error(s)"])
    query, expression = task_block.get("query"), task_block.get("expression")
    if not isinstance(query, str) or not isinstance(expression, str):
        return RerunComparison(False, ["payload: task.query and task.expression must be strings"])
    diff: list[str] = []
    recorded_hash = to_hex(hash_canonical({k: v for k, v in stored.items() if k != "cached"}))
    if entry_payload.get("result_hash") != recorded_hash:
        diff.append(
            f"result_hash: payload says {entry_payload.get('result_hash')} but the result hashes to {recorded_hash}"
        )
    if recorded.result_hash() != recorded_hash:
        diff.append("result: does not round-trip through the engine's model")
    if hashlib.sha256(query.encode("utf-8")).hexdigest() != recorded.query_sha256:
        diff.append("task.query: does not hash to result.query_sha256")
    if recorded.verifier_version != VERIFIER_VERSION:
        diff.append(f"version drift: recorded {recorded.verifier_version}, running {VERIFIER_VERSION}")
    replay_providers = list(providers) if providers is not None else RecordedProviders.from_result(recorded)
    verifier = ReasoningVerifier(replay_providers, enable_cache=False)
    try:
        replayed = verifier.verify_reasoning(
            query,
            ReasoningTask(expression=expression, reasoning=task_block.get("reasoning")),
            enable_cross_validation=bool(
                task_block.get("cross_validation", recorded.cross_validation_requested)
            ),
        )
    except ReplayMissError as exc:
        return RerunComparison(False, [*diff, f"replay miss: {exc}"])
    except (TypeError, ValueError) as exc:
        return RerunComparison(False, [*diff, f"task: {exc}"])
    finally:
        verifier.close()
    if replayed.result_hash() != recorded_hash:
        diff.append(f"result_hash: recorded {recorded_hash} != replayed {replayed.result_hash()}")
        diff.extend(_field_diff(committed_reasoning_result(recorded), committed_reasoning_result(replayed)))
    if status != status_of(replayed):
        diff.append(f"status: recorded {status} != replayed {status_of(replayed)}")
    return RerunComparison(not diff, diff)
