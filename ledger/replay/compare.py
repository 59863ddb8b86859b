"""Compare a stored submission with a fresh pipeline run, byte for byte.

First, whole payloads: the submission draft the consumer would append today is rebuilt with the one
draft builder (:func:`ledger.store.drafts.submission_draft`) and the SHA-256 of each rebuilt entry's
canonical payload is compared with the stored payload's; with the step rows' hashes equal too, the
submission is identical and nothing else runs. Otherwise, to say where it differs, compared in this order (the first difference is the one reported with a diff):

1. every step: the stored canonical step text and its ``step_hash`` column against the replayed
   step's canonical JSON and hash (``engine.sentinel.replay_compare``), then the verdict's canonical
   JSON and the seven root fields of the ``verdict.issued`` entry;
2. the rest of what the entries commit to: the ``audit.completed`` roots, ``verification_result``,
   ``evaluation_variables`` and trace header (trace id, policy, evidence refs, step hashes), the
   ``verdict.issued`` ``judge_verification``, and the hashes in ``submission.received``.

The common case (:mod:`ledger.replay.identical`) costs one canonical dump per payload part and
no hash per stored step: step texts are compared with the engine's canonical step bytes, the
preimages of the replayed step hashes (a result without them has each text hashed), and the
engine's full snapshot comparison runs only when something differs.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from engine.canonical import canonical_bytes
from engine.pipeline import PipelineResult
from engine.schemas import PoRRoots
from engine.sentinel import ReplaySnapshot, replay_compare
from ledger.replay.identical import steps_identical, whole_run_identical
from ledger.store.hashing import canonical_text, text_sha256
from ledger.store.records import SubmissionDraft

__all__ = [
    "Difference",
    "Outcome",
    "StoredArtifacts",
    "canonical_diff",
    "compare_run",
    "whole_run_identical",  # its home is ledger.replay.identical
]

MAX_DIFF_LINES = 200
Status = Literal["identical", "diverged", "version_drift"]


@dataclass(frozen=True)
class StoredArtifacts:
    """What the ledger holds for one submission, parsed from the entries' canonical texts."""

    engine_version: str
    received: dict[str, Any]
    audit: dict[str, Any]
    verdict: dict[str, Any]
    step_ids: Sequence[str]
    step_hashes: Sequence[str]
    step_texts: Sequence[str]
    payload_texts: Mapping[str, str] = field(default_factory=dict)  # kind -> stored canonical payload


@dataclass(frozen=True)
class Difference:
    """The first difference: where, and both canonical texts with a unified diff between them."""

    component: str
    step_index: int | None = None
    step_id: str | None = None
    root_field: str | None = None
    stored: str | None = None
    replayed: str | None = None
    diff: str = ""

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form (None fields dropped)."""
        return {key: value for key, value in self.__dict__.items() if value is not None}


@dataclass(frozen=True)
class Outcome:
    """The comparison of one submission."""

    status: Status
    differing: tuple[str, ...]
    first: Difference | None


def _model(model: BaseModel) -> str:
    return canonical_bytes(model).decode("utf-8")


def _pretty(text: str | None) -> list[str]:
    if text is None:
        return ["(absent)"]
    try:
        return json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    except ValueError:
        return text.splitlines() or [""]


def canonical_diff(stored: str | None, replayed: str | None, label: str) -> str:
    """Unified diff of the pretty-printed canonical JSON texts (at most MAX_DIFF_LINES lines)."""
    lines = list(
        difflib.unified_diff(
            _pretty(stored),
            _pretty(replayed),
            fromfile=f"stored {label}",
            tofile=f"replayed {label}",
            lineterm="",
        )
    )
    if len(lines) > MAX_DIFF_LINES:
        lines = [*lines[:MAX_DIFF_LINES], f"... {len(lines) - MAX_DIFF_LINES} more diff lines"]
    return "\n".join(lines)


def _text(value: Any) -> str | None:
    return None if value is None else canonical_bytes(value).decode("utf-8")


def _extras(stored: StoredArtifacts, result: PipelineResult) -> list[tuple[str, str | None, str | None]]:
    """``(component, stored canonical, replayed canonical)`` for every payload part beyond steps/verdict."""
    audit, verdict, received = stored.audit, stored.verdict, stored.received
    roots = _model(result.roots)
    trace = {
        "evidence_refs": result.trace.evidence_refs,
        "policy": result.trace.policy.model_dump(mode="python", by_alias=True, exclude_none=True),
        "step_hashes": result.step_hashes,
        "trace_id": result.trace.trace_id,
    }
    return [
        ("audit.roots", _text(audit.get("roots")), roots),
        ("audit.verification_result", _text(audit.get("verification_result")), _model(result.audit_verification)),
        ("audit.evaluation_variables", _text(audit.get("evaluation_variables")), _text(result.evaluation_variables or {})),
        ("audit.trace", _text(audit.get("trace")), _text(trace)),
        ("verdict.judge_verification", _text(verdict.get("judge_verification")), _model(result.judge_verification)),
        ("received.prompt_spec_hash", _text(received.get("prompt_spec_hash")), _text(result.roots.prompt_spec_hash)),
        ("received.evidence_root", _text(received.get("evidence_root")), _text(result.roots.evidence_root)),
    ]  # fmt: skip


def _stored_roots(value: Any) -> PoRRoots | None:
    try:
        return PoRRoots.model_validate(value)
    except ValidationError:
        return None


def _core_identical(stored: StoredArtifacts, result: PipelineResult, verdict_text: str | None) -> bool:
    """Steps, step hashes, verdict and verdict.issued roots equal, judged by hashes only."""
    replayed = result.step_hashes
    if list(stored.step_hashes) != replayed or len(stored.step_texts) != len(replayed):
        return False
    if any(text_sha256(text) != value for text, value in zip(stored.step_texts, replayed, strict=True)):
        return False
    if verdict_text is None or text_sha256(verdict_text) != result.roots.verdict_hash:
        return False
    return _text(stored.verdict.get("roots")) == _model(result.roots)


def _core_difference(
    stored: StoredArtifacts, result: PipelineResult, verdict_text: str | None
) -> tuple[list[str], Difference | None]:
    snapshot = ReplaySnapshot(
        engine_version=stored.engine_version,
        steps=list(stored.step_texts),
        step_hashes=[value.lower() for value in stored.step_hashes],
        verdict=verdict_text,
        roots=_stored_roots(stored.verdict.get("roots")),
    )
    comparison = replay_compare(snapshot, result)
    if comparison.component is None:
        return [], None
    index = comparison.first_divergent_step_index
    step_id = None
    if index is not None:
        ids = stored.step_ids if index < len(stored.step_ids) else [s.step_id for s in result.trace.steps]
        step_id = ids[index] if index < len(ids) else None
    label = {"step": f"step {step_id}", "step_hash": f"step_hash of {step_id}"}.get(
        comparison.component, comparison.root_field or comparison.component
    )
    first = Difference(
        component=comparison.component,
        step_index=index,
        step_id=step_id,
        root_field=comparison.root_field,
        stored=comparison.stored_canonical,
        replayed=comparison.recomputed_canonical,
        diff=canonical_diff(comparison.stored_canonical, comparison.recomputed_canonical, label),
    )
    return list(comparison.differing), first


def payload_differences(stored: StoredArtifacts, draft: SubmissionDraft) -> list[tuple[str, str, str]]:
    """``(kind, stored text, rebuilt text)`` for each stored payload whose hash differs from the draft's."""
    rebuilt = {entry.kind: entry.payload for entry in draft.entries if entry.kind in stored.payload_texts}
    differing = []
    for kind, text in stored.payload_texts.items():
        replayed = canonical_text(rebuilt[kind]) if kind in rebuilt else ""
        if text_sha256(text) != text_sha256(replayed):
            differing.append((kind, text, replayed))
    return differing


def compare_run(stored: StoredArtifacts, result: PipelineResult, draft: SubmissionDraft) -> Outcome:
    """Compare ``stored`` with ``result`` and its ``draft``; see the module docstring for what and in which order."""
    whole = payload_differences(stored, draft)
    if not whole and steps_identical(stored.step_hashes, stored.step_texts, result):
        status: Status = "version_drift" if stored.engine_version != result.engine_version else "identical"
        return Outcome(status=status, differing=(), first=None)
    verdict_value = stored.verdict.get("verdict")
    verdict_text = _text(verdict_value)
    differing: list[str] = []
    first: Difference | None = None
    if not _core_identical(stored, result, verdict_text):
        differing, first = _core_difference(stored, result, verdict_text)
    for component, stored_text, replayed_text in _extras(stored, result):
        if stored_text == replayed_text:
            continue
        differing.append(component)
        if first is None:
            first = Difference(
                component=component,
                stored=stored_text,
                replayed=replayed_text,
                diff=canonical_diff(stored_text, replayed_text, component),
            )
    if not differing:  # the payloads differ where no part above looks: report the whole payloads
        for kind, stored_text, replayed_text in whole:
            differing.append(f"{kind} payload")
            if first is None:
                first = Difference(
                    component=f"{kind} payload",
                    stored=stored_text,
                    replayed=replayed_text,
                    diff=canonical_diff(stored_text, replayed_text, f"{kind} payload"),
                )
    if stored.engine_version != result.engine_version:
        status = "version_drift"
    else:
        status = "diverged" if differing else "identical"
    return Outcome(status=status, differing=tuple(differing), first=first)
