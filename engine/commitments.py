"""Hash commitments over artifacts: step hashes and the Cournot-compatible PoR roots.

* ``step_hash``        = ``0x`` + sha256(canonical(step without ``hash_commitment``))
* ``prompt_spec_hash`` = ``0x`` + sha256(canonical(prompt_spec))
* ``evidence_root``    = Cournot Merkle root over ``hash_canonical(item)`` for the bundle's items
* ``reasoning_root``   = Cournot Merkle root over the step hashes, in step order
* ``verdict_hash``     = ``0x`` + sha256(canonical(verdict))
* ``por_root``         = Cournot Merkle root over the four values above

Every Merkle root is reported with its leaf count, because Cournot's duplicate-last padding makes
``[a, b, c]`` and ``[a, b, c, c]`` share a root.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.canonical import (
    canonical_bytes,
    canonical_bytes_of_plain,
    canonicalize_value,
    from_hex,
    hash_canonical,
    plain_data,
    to_hex,
)
from engine.merkle.cournot import compute_por_root, cournot_root
from engine.schemas import (
    DeterministicVerdict,
    EvidenceBundle,
    PoRRoots,
    PromptSpec,
    ReasoningStep,
    ReasoningTrace,
)

__all__ = [
    "InputCommitments",
    "commit_inputs",
    "compute_roots",
    "evidence_leaf_hashes",
    "evidence_root",
    "plain_step",
    "por_root",
    "prompt_spec_hash",
    "reasoning_leaf_hashes",
    "reasoning_root",
    "step_hash",
    "step_preimage",
    "step_preimages",
    "verdict_hash",
]


def step_hash(step: ReasoningStep) -> str:
    """Hash of a step as committed: ``hash_commitment`` is never part of the preimage."""
    if step.hash_commitment is not None:
        step = step.model_copy(update={"hash_commitment": None})
    return to_hex(hash_canonical(step))


def plain_step(step: ReasoningStep) -> dict[str, Any] | None:
    """``canonicalize_value(step)`` read straight from the fields of a plain-data step, else None.

    Applies to an exact ``ReasoningStep`` without ``hash_commitment`` whose strings and lists have
    their declared types and whose inputs and output hold only JSON data (no models, datetimes or
    other objects); any other step goes through the model dump. Tested equal on the corpus.
    """
    if type(step) is not ReasoningStep or step.hash_commitment is not None:
        return None
    fields = step.__dict__
    try:
        inputs, output = plain_data(fields["inputs"]), plain_data(fields["output"])
    except (ValueError, RecursionError):  # not plain data: the model-dump path below decides
        return None
    scalars = (fields["schema_version"], fields["step_id"], fields["type"], fields["action"])
    evidence_ids, prior_step_ids = fields["evidence_ids"], fields["prior_step_ids"]
    if (
        any(type(value) is not str for value in scalars)
        or type(evidence_ids) is not list
        or type(prior_step_ids) is not list
        or any(type(value) is not str for value in evidence_ids)
        or any(type(value) is not str for value in prior_step_ids)
    ):
        return None
    return {
        "schema_version": scalars[0],
        "step_id": scalars[1],
        "type": scalars[2],
        "inputs": inputs,
        "action": scalars[3],
        "output": output,
        "evidence_ids": list(evidence_ids),
        "prior_step_ids": list(prior_step_ids),
    }


def step_preimage(step: ReasoningStep) -> tuple[Any, bytes]:
    """One step's canonical plain value and canonical bytes, as :func:`step_preimages` makes them.

    A step of plain data is read field by field (:func:`plain_step`); any other step, or one
    carrying ``hash_commitment``, goes through :func:`engine.canonical.canonicalize_value`.
    """
    plain = plain_step(step)
    if plain is None:
        committed = (
            step if step.hash_commitment is None else step.model_copy(update={"hash_commitment": None})
        )
        plain = canonicalize_value(committed)
    return plain, canonical_bytes_of_plain(plain)


def step_preimages(steps: Sequence[ReasoningStep]) -> tuple[list[Any], list[bytes]]:
    """Each step's canonical plain value and canonical bytes (the step-hash preimage), made once.

    The plain values are what :func:`engine.canonical.canonicalize_value` returns for the step, so
    reports reuse them instead of walking the steps again; ``hash_commitment`` is never part of
    the preimage (a step carrying one is committed as :func:`step_hash` does).
    """
    plains: list[Any] = []
    preimages: list[bytes] = []
    for step in steps:
        plain, preimage = step_preimage(step)
        plains.append(plain)
        preimages.append(preimage)
    return plains, preimages


def prompt_spec_hash(prompt_spec: PromptSpec) -> str:
    """Hash of the whole PromptSpec (``created_at`` included when set, as Cournot's PoR does)."""
    return to_hex(hash_canonical(prompt_spec))


def evidence_leaf_hashes(bundle: EvidenceBundle) -> list[bytes]:
    """One leaf per evidence item, in bundle order."""
    return [hash_canonical(item) for item in bundle.items]


def evidence_root(bundle: EvidenceBundle) -> tuple[str, int]:
    """``(root, leaf_count)`` over the bundle's items."""
    leaves = evidence_leaf_hashes(bundle)
    return to_hex(cournot_root(leaves)), len(leaves)


def reasoning_leaf_hashes(steps: Sequence[ReasoningStep]) -> list[bytes]:
    """One leaf per step: the raw bytes of its step hash."""
    return [from_hex(step_hash(step)) for step in steps]


def reasoning_root(trace: ReasoningTrace) -> tuple[str, int]:
    """``(root, leaf_count)`` over the trace's steps."""
    leaves = reasoning_leaf_hashes(trace.steps)
    return to_hex(cournot_root(leaves)), len(leaves)


def verdict_hash(verdict: DeterministicVerdict) -> str:
    """Hash of the whole verdict, metadata included."""
    return to_hex(hash_canonical(verdict))


def por_root(prompt_hash: str, evidence: str, reasoning: str, verdict: str) -> str:
    """Cournot's PoR root over the four commitments."""
    return to_hex(
        compute_por_root(from_hex(prompt_hash), from_hex(evidence), from_hex(reasoning), from_hex(verdict))
    )


@dataclass(frozen=True)
class InputCommitments:
    """The commitments over a verdict's inputs, computed once and shared by judge and pipeline."""

    prompt_spec_hash: str
    evidence_root: str
    evidence_leaf_count: int
    reasoning_root: str
    reasoning_leaf_count: int
    step_hashes: tuple[str, ...]
    step_canonical: tuple[bytes, ...] = ()
    """Canonical UTF-8 bytes of each step (the preimage of its hash), for the ledger to store."""
    prompt_spec_canonical: bytes = b""
    """Canonical UTF-8 bytes of the prompt spec (the preimage of ``prompt_spec_hash``)."""


def commit_inputs(
    prompt_spec: PromptSpec,
    bundle: EvidenceBundle,
    trace: ReasoningTrace,
    *,
    preimages: Sequence[bytes] | None = None,
    prompt_spec_canonical: bytes = b"",
) -> InputCommitments:
    """Hash the prompt spec, every evidence item and every step exactly once.

    ``preimages`` are the steps' canonical bytes when the caller already has them (the auditor
    makes them as it builds the steps: ``AuditorAgent.audit_committed``); one per step.
    ``prompt_spec_canonical`` likewise for the prompt spec (the envelope decoder makes them).
    """
    if preimages is None:
        preimages = step_preimages(trace.steps)[1]
    elif len(preimages) != len(trace.steps):
        raise ValueError(f"{len(preimages)} step preimages for {len(trace.steps)} steps")
    hashes = tuple("0x" + hashlib.sha256(preimage).hexdigest() for preimage in preimages)
    spec_bytes = prompt_spec_canonical or canonical_bytes(prompt_spec)
    ev_root, ev_count = evidence_root(bundle)
    return InputCommitments(
        prompt_spec_hash="0x" + hashlib.sha256(spec_bytes).hexdigest(),
        evidence_root=ev_root,
        evidence_leaf_count=ev_count,
        reasoning_root=to_hex(cournot_root([from_hex(value) for value in hashes])),
        reasoning_leaf_count=len(hashes),
        step_hashes=hashes,
        step_canonical=tuple(preimages),
        prompt_spec_canonical=spec_bytes,
    )


def compute_roots(
    prompt_spec: PromptSpec,
    bundle: EvidenceBundle,
    trace: ReasoningTrace,
    verdict: DeterministicVerdict,
    *,
    inputs: InputCommitments | None = None,
) -> PoRRoots:
    """All five PoR commitments with leaf counts (``inputs`` reuses hashes already computed)."""
    if inputs is None:
        inputs = commit_inputs(prompt_spec, bundle, trace)
    v_hash = verdict_hash(verdict)
    return PoRRoots(
        prompt_spec_hash=inputs.prompt_spec_hash,
        evidence_root=inputs.evidence_root,
        evidence_leaf_count=inputs.evidence_leaf_count,
        reasoning_root=inputs.reasoning_root,
        reasoning_leaf_count=inputs.reasoning_leaf_count,
        verdict_hash=v_hash,
        por_root=por_root(inputs.prompt_spec_hash, inputs.evidence_root, inputs.reasoning_root, v_hash),
    )
