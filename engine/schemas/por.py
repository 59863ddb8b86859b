"""Proof-of-reasoning roots. Unlike Cournot, every Merkle root carries its leaf count."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator, model_validator

from engine.schemas.common import SCHEMA_VERSION, StrictModel, UtcDatetime
from engine.schemas.verdict import DeterministicVerdict

HEX32 = re.compile(r"^0x[0-9a-fA-F]{64}$")


def _hex32(value: str) -> str:
    if not HEX32.fullmatch(value):
        raise ValueError(f"expected 0x followed by 64 hex digits, got {value!r}")
    return value.lower()


class PoRRoots(StrictModel):
    """The five PoR commitments; ``evidence_leaf_count`` and ``reasoning_leaf_count`` bind the roots."""

    prompt_spec_hash: str
    evidence_root: str
    evidence_leaf_count: int = Field(ge=0)
    reasoning_root: str
    reasoning_leaf_count: int = Field(ge=0)
    verdict_hash: str
    por_root: str

    @field_validator("prompt_spec_hash", "evidence_root", "reasoning_root", "verdict_hash", "por_root")
    @classmethod
    def _check_hex(cls, value: str) -> str:
        return _hex32(value)


class PoRBundle(StrictModel):
    """Cournot's PoR bundle (accepted for interop; never hashed itself)."""

    schema_version: str = SCHEMA_VERSION
    protocol_version: str = "v1"
    market_id: str = Field(min_length=1)
    prompt_spec_hash: str
    evidence_root: str
    reasoning_root: str
    verdict_hash: str
    por_root: str | None = None
    verdict: DeterministicVerdict
    tee_attestation: dict[str, Any] | None = None
    signatures: dict[str, Any] = Field(default_factory=dict)
    created_at: UtcDatetime
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("prompt_spec_hash", "evidence_root", "reasoning_root", "verdict_hash")
    @classmethod
    def _check_hex(cls, value: str) -> str:
        return _hex32(value)

    @field_validator("por_root")
    @classmethod
    def _check_optional_hex(cls, value: str | None) -> str | None:
        return None if value is None else _hex32(value)

    @model_validator(mode="after")
    def _same_market(self) -> PoRBundle:
        if self.market_id != self.verdict.market_id:
            raise ValueError("market_id must equal verdict.market_id")
        return self
