"""The fast paths that build ``PoRRoots`` and ``ChallengeRef`` without validation are taken only
while each model has exactly the layout they restate (``engine.schemas.trusted.model_layout``):
a constraint, validator, serializer or config added later turns them off, never skips it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_serializer, model_validator

import engine.commitments as commitments
import engine.judge.rules as rules
from engine.schemas import ChallengeRef
from engine.schemas.por import PoRRoots
from engine.schemas.trusted import model_layout


def test_both_fast_paths_are_on_for_the_models_as_they_are() -> None:
    assert commitments._ROOTS_FAST is True
    assert rules._CHALLENGE_FAST is True


class TighterCount(PoRRoots):
    evidence_leaf_count: int = Field(ge=0, le=1_000)


class LongerId(ChallengeRef):
    evidence_id: str | None = Field(default=None, max_length=8)


class OtherKinds(ChallengeRef):
    kind: Literal["evidence_leaf"]  # type: ignore[assignment]


class Checked(ChallengeRef):
    @model_validator(mode="after")
    def _never(self) -> Checked:
        return self


class Serialised(PoRRoots):
    @field_serializer("por_root")
    def _upper(self, value: str) -> str:
        return value.upper()


def test_any_added_constraint_changes_the_layout() -> None:
    assert model_layout(TighterCount) != model_layout(PoRRoots)
    assert model_layout(Serialised) != model_layout(PoRRoots)
    assert model_layout(LongerId) != model_layout(ChallengeRef)
    assert model_layout(OtherKinds) != model_layout(ChallengeRef)
    assert model_layout(Checked) != model_layout(ChallengeRef)
