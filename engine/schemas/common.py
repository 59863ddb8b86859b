"""Shared pieces of the wire models: strict base config and UTC-normalised datetimes."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict

from engine.schemas.utc import to_utc

SCHEMA_VERSION = "v1"


class StrictModel(BaseModel):
    """Base of every Cournot wire model: unknown keys are rejected, as in Cournot."""

    model_config = ConfigDict(extra="forbid")


_to_utc = to_utc
"""The validator (compiled with the engine: :mod:`engine.schemas.utc`); the old name is kept."""

UtcDatetime = Annotated[datetime, AfterValidator(to_utc)]
"""A datetime that must carry a time zone and is normalised to UTC (serialised with ``Z``)."""
