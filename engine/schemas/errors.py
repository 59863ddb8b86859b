"""Cournot's error record, carried inside VerificationResult."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class CournotError(BaseModel):
    """A structured error: machine code, human message, details, and whether a retry may help."""

    model_config = ConfigDict(validate_assignment=True)

    code: str
    message: str
    details: dict[str, Any] = Field(default_factory=dict)
    retryable: bool = False
