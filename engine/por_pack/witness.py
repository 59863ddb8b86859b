"""Second witnesses inside a pack, used to pinpoint which leaf of a root was changed.

A Merkle root alone cannot say which leaf differs. A Cournot pack carries other records of the
same facts, and each disagreement between them names a leaf:

* ``provenance.content_hash`` commits to an item's ``raw_content``;
* a JSON item's ``parsed_value`` is the decoded ``raw_content``;
* each step's ``evidence_refs`` repeat the cited item's requirement, source and extracted value;
* the verdict carries Cournot's simplified hashes (sorted evidence ids; step id/type/conclusion
  triples) and a justification listing the key conclusions;
* step ids are numbered in order and ``depends_on`` may only name earlier steps.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence

from engine.canonical import dumps_canonical
from engine.por_pack.models import EvidenceRef, PackCheck, PipelineReasoningStep, PipelineReasoningTrace
from engine.schemas import DeterministicVerdict, EvidenceBundle, EvidenceItem

__all__ = [
    "KEY_CONCLUSION_TYPES",
    "evidence_witnesses",
    "justification_conclusions",
    "natural_step_order",
    "reasoning_witnesses",
    "simplified_evidence_root",
    "simplified_reasoning_root",
]

KEY_CONCLUSION_TYPES = ("threshold_check", "conclusion", "rule_application")
_NUMBER = re.compile(r"(\d+)")


def simplified_evidence_root(bundle: EvidenceBundle) -> str:
    """Cournot's verdict ``evidence_root``: sha256 of the sorted evidence ids joined by ``|``."""
    joined = "|".join(sorted(item.evidence_id for item in bundle.items))
    return "0x" + hashlib.sha256(joined.encode("utf-8")).hexdigest()


def simplified_reasoning_root(steps: Sequence[PipelineReasoningStep]) -> str:
    """Cournot's verdict ``reasoning_root``: sha256 of the canonical (step_id, step_type, conclusion) list."""
    triples = [
        {"step_id": step.step_id, "step_type": step.step_type, "conclusion": step.conclusion}
        for step in steps
    ]
    return "0x" + hashlib.sha256(dumps_canonical(triples).encode("utf-8")).hexdigest()


def natural_step_order(steps: Sequence[PipelineReasoningStep]) -> list[int]:
    """Indexes of ``steps`` sorted by step id with digit runs compared as numbers (stable)."""

    def key(index: int) -> list[object]:
        return [int(part) if part.isdigit() else part for part in _NUMBER.split(steps[index].step_id)]

    return sorted(range(len(steps)), key=key)


def justification_conclusions(verdict: DeterministicVerdict) -> list[str] | None:
    """The "Key Conclusions" the judge wrote into ``metadata.justification``, or None if absent."""
    text = verdict.metadata.get("justification")
    if not isinstance(text, str):
        return None
    lines = text.split("\n")
    if "Key Conclusions:" not in lines:
        return []
    found: list[str] = []
    for line in lines[lines.index("Key Conclusions:") + 1 :]:
        match = re.fullmatch(r"  (\d+)\. (.*)", line)
        if match is None:
            break
        found.append(match.group(2))
    return found


def _fail(check_id: str, message: str, **fields: object) -> PackCheck:
    return PackCheck.model_validate({"check_id": check_id, "status": "failed", "message": message, **fields})


def _item_witnesses(index: int, item: EvidenceItem, path: str) -> list[PackCheck]:
    found: list[PackCheck] = []
    raw = item.raw_content
    claimed = item.provenance.content_hash
    if raw is not None and claimed is not None:
        actual = "0x" + hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()
        if actual != claimed.lower():
            found.append(
                _fail(
                    "evidence.content_hash",
                    f"item {index} raw_content does not hash to provenance.content_hash",
                    file=path,
                    root="evidence_root",
                    leaf_index=index,
                    evidence_id=item.evidence_id,
                    expected=claimed,
                    actual=actual,
                )
            )
    if raw is not None and item.parsed_value is not None and "json" in item.content_type:
        try:
            decoded = json.loads(raw)
        except ValueError:
            decoded = None
        if decoded is not None and decoded != item.parsed_value:
            found.append(
                _fail(
                    "evidence.parsed_value",
                    f"item {index} parsed_value is not the decoded raw_content",
                    file=path,
                    root="evidence_root",
                    leaf_index=index,
                    evidence_id=item.evidence_id,
                )
            )
    return found


def _as_number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _ref_mismatches(ref: EvidenceRef, item: EvidenceItem) -> list[str]:
    mismatches = []
    if ref.requirement_id is not None and ref.requirement_id != item.requirement_id:
        mismatches.append("requirement_id")
    if ref.source_id is not None and ref.source_id != item.provenance.source_id:
        mismatches.append("source_id")
    cited = _as_number(ref.value_at_reference)
    field_used = ref.field_used
    if (
        field_used is not None
        and cited is not None
        and field_used in item.extracted_fields
        and _as_number(item.extracted_fields[field_used]) != cited
    ):
        mismatches.append(f"extracted_fields.{ref.field_used}")
    return mismatches


def evidence_witnesses(
    bundle: EvidenceBundle, trace: PipelineReasoningTrace | None, path: str
) -> list[PackCheck]:
    """Per-item disagreements between the evidence bundle and the pack's other records."""
    found: list[PackCheck] = []
    for index, item in enumerate(bundle.items):
        found.extend(_item_witnesses(index, item, path))
    if trace is None:
        return found
    positions: dict[str, list[int]] = {}
    for index, item in enumerate(bundle.items):
        positions.setdefault(item.evidence_id, []).append(index)
    last_seen = -1
    for step in trace.steps:
        for ref in step.evidence_refs:
            indexes = positions.get(ref.evidence_id)
            if indexes is None:
                found.append(
                    _fail(
                        "evidence.cited_missing",
                        f"{step.step_id} cites {ref.evidence_id!r}, which is not in the evidence bundle; "
                        f"by the order of the trace's citations it stood at index {last_seen + 1}",
                        file=path,
                        root="evidence_root",
                        leaf_index=last_seen + 1,
                        step_id=step.step_id,
                        evidence_id=ref.evidence_id,
                        details={"index_inferred_from": "citation order"},
                    )
                )
                continue
            mismatches = [_ref_mismatches(ref, bundle.items[index]) for index in indexes]
            best = min(range(len(indexes)), key=lambda k: len(mismatches[k]))
            index = indexes[best]
            last_seen = max(last_seen, index)
            if mismatches[best]:
                found.append(
                    _fail(
                        "evidence.cited_fields",
                        f"item {index} disagrees with what {step.step_id} recorded about it: {mismatches[best]}",
                        file=path,
                        root="evidence_root",
                        leaf_index=index,
                        step_id=step.step_id,
                        evidence_id=ref.evidence_id,
                        details={"fields": mismatches[best]},
                    )
                )
    return found


def reasoning_witnesses(
    trace: PipelineReasoningTrace, verdict: DeterministicVerdict | None, path: str
) -> list[PackCheck]:
    """Disagreements that name a step: order, ``depends_on``, duplicates, and the judge's key conclusions."""
    found: list[PackCheck] = []
    steps = trace.steps
    order = natural_step_order(steps)
    if order != list(range(len(steps))):
        first = next(i for i, j in enumerate(order) if i != j)
        found.append(
            _fail(
                "reasoning.step_order",
                f"step ids are out of order at index {first}",
                file=path,
                root="reasoning_root",
                leaf_index=first,
                step_id=steps[first].step_id,
                expected=steps[order[first]].step_id,
                actual=steps[first].step_id,
            )
        )
    seen: set[str] = set()
    for index, step in enumerate(steps):
        if step.step_id in seen:
            found.append(
                _fail(
                    "reasoning.duplicate_step_id",
                    f"{step.step_id} appears twice",
                    file=path,
                    root="reasoning_root",
                    leaf_index=index,
                    step_id=step.step_id,
                )
            )
        later = [dep for dep in step.depends_on if dep not in seen]
        if later:
            found.append(
                _fail(
                    "reasoning.depends_on",
                    f"{step.step_id} depends on steps that are not earlier: {later}",
                    file=path,
                    root="reasoning_root",
                    leaf_index=index,
                    step_id=step.step_id,
                    details={"not_earlier": later},
                )
            )
        seen.add(step.step_id)
    written = justification_conclusions(verdict) if verdict is not None else None
    if written is not None:
        keyed = [(i, s) for i, s in enumerate(steps) if s.conclusion and s.step_type in KEY_CONCLUSION_TYPES][
            :5
        ]
        for position, (index, step) in enumerate(keyed):
            if position >= len(written) or written[position] != step.conclusion:
                found.append(
                    _fail(
                        "reasoning.key_conclusions",
                        f"{step.step_id} concludes {step.conclusion!r}; the verdict's justification recorded "
                        f"{written[position] if position < len(written) else None!r}",
                        file=path,
                        root="reasoning_root",
                        leaf_index=index,
                        step_id=step.step_id,
                        expected=written[position] if position < len(written) else None,
                        actual=step.conclusion,
                    )
                )
                break
    return found
