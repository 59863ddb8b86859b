"""Replay comparison: is a recomputation byte-identical to what was stored?

Both sides are reduced to a :class:`ReplaySnapshot` (canonical JSON text of every step, step hashes,
canonical verdict, PoR roots, engine version) and compared in a fixed order: steps, step hashes,
verdict, then the root fields. The first difference is reported with both canonical texts.

Status: ``identical`` (same engine version, nothing differs); ``version_drift`` (the engine versions
differ: differences are expected and are **not** nondeterminism; they are still listed);
``diverged`` (same engine version, something differs: a determinism or integrity failure).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.canonical import dumps_canonical
from engine.commitments import step_hash
from engine.schemas import DeterministicVerdict, PoRRoots, ReasoningStep

if TYPE_CHECKING:
    from engine.pipeline import PipelineResult

__all__ = ["ROOT_FIELDS", "ReplayComparison", "ReplaySnapshot", "replay_compare"]

ROOT_FIELDS = (
    "prompt_spec_hash",
    "evidence_root",
    "evidence_leaf_count",
    "reasoning_root",
    "reasoning_leaf_count",
    "verdict_hash",
    "por_root",
)


def _step_canonical(step: ReasoningStep) -> str:
    if step.hash_commitment is not None:
        step = step.model_copy(update={"hash_commitment": None})
    return dumps_canonical(step)


class ReplaySnapshot(BaseModel):
    """What one run committed, in comparable form. ``steps`` are canonical JSON texts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    engine_version: str
    steps: list[str] = Field(default_factory=list)
    step_hashes: list[str] = Field(default_factory=list)
    verdict: str | None = None
    roots: PoRRoots | None = None

    @classmethod
    def from_artifacts(
        cls,
        *,
        engine_version: str,
        steps: Sequence[ReasoningStep],
        verdict: DeterministicVerdict | None = None,
        roots: PoRRoots | None = None,
        step_hashes: Sequence[str] | None = None,
    ) -> ReplaySnapshot:
        """Snapshot of artifacts; ``step_hashes`` default to the hashes of ``steps``."""
        hashes = list(step_hashes) if step_hashes is not None else [step_hash(step) for step in steps]
        return cls(
            engine_version=engine_version,
            steps=[_step_canonical(step) for step in steps],
            step_hashes=[value.lower() for value in hashes],
            verdict=None if verdict is None else dumps_canonical(verdict),
            roots=roots,
        )

    @classmethod
    def of(cls, value: ReplaySnapshot | PipelineResult) -> ReplaySnapshot:
        """A snapshot as is, or the snapshot of a pipeline result."""
        if isinstance(value, ReplaySnapshot):
            return value
        return cls.from_artifacts(
            engine_version=value.engine_version,
            steps=value.trace.steps,
            verdict=value.verdict,
            roots=value.roots,
            step_hashes=value.step_hashes,
        )


class ReplayComparison(BaseModel):
    """The result of :func:`replay_compare`; ``component`` says where the first difference is."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: Literal["identical", "diverged", "version_drift"]
    stored_engine_version: str
    recomputed_engine_version: str
    differing: list[str] = Field(default_factory=list)
    component: Literal["step", "step_hash", "verdict", "roots"] | None = None
    first_divergent_step_index: int | None = None
    root_field: str | None = None
    stored_canonical: str | None = None
    recomputed_canonical: str | None = None


def _first_difference(stored: Sequence[str], recomputed: Sequence[str]) -> int | None:
    for index in range(max(len(stored), len(recomputed))):
        left = stored[index] if index < len(stored) else None
        right = recomputed[index] if index < len(recomputed) else None
        if left != right:
            return index
    return None


def _at(values: Sequence[str], index: int) -> str | None:
    return values[index] if index < len(values) else None


def replay_compare(
    stored: ReplaySnapshot | PipelineResult, recomputed: ReplaySnapshot | PipelineResult
) -> ReplayComparison:
    """Compare a stored run with a recomputation (see the module docstring for the order and status)."""
    left, right = ReplaySnapshot.of(stored), ReplaySnapshot.of(recomputed)
    differing: list[str] = []
    first: dict[str, object] = {}

    def record(name: str, **where: object) -> None:
        differing.append(name)
        if not first:
            first.update(where)

    step_index = _first_difference(left.steps, right.steps)
    if step_index is not None:
        record(
            "steps",
            component="step",
            first_divergent_step_index=step_index,
            stored_canonical=_at(left.steps, step_index),
            recomputed_canonical=_at(right.steps, step_index),
        )
    hash_index = _first_difference(left.step_hashes, right.step_hashes)
    if hash_index is not None:
        record(
            "step_hashes",
            component="step_hash",
            first_divergent_step_index=hash_index,
            stored_canonical=_at(left.step_hashes, hash_index),
            recomputed_canonical=_at(right.step_hashes, hash_index),
        )
    if left.verdict != right.verdict:
        record(
            "verdict", component="verdict", stored_canonical=left.verdict, recomputed_canonical=right.verdict
        )
    left_roots = None if left.roots is None else left.roots.model_dump()
    right_roots = None if right.roots is None else right.roots.model_dump()
    for name in ROOT_FIELDS:
        if (left_roots or {}).get(name) != (right_roots or {}).get(name):
            record(
                name,
                component="roots",
                root_field=name,
                stored_canonical=None if left.roots is None else dumps_canonical(left.roots),
                recomputed_canonical=None if right.roots is None else dumps_canonical(right.roots),
            )
    if left.engine_version != right.engine_version:
        status: Literal["identical", "diverged", "version_drift"] = "version_drift"
    else:
        status = "diverged" if differing else "identical"
    return ReplayComparison.model_validate(
        {
            "status": status,
            "stored_engine_version": left.engine_version,
            "recomputed_engine_version": right.engine_version,
            "differing": differing,
            **first,
        }
    )
