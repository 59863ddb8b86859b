"""Shared pieces of the wire models: strict base config and UTC-normalised datetimes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict
from pydantic_core import TzInfo

SCHEMA_VERSION = "v1"


class StrictModel(BaseModel):
    """Base of every Cournot wire model: unknown keys are rejected, as in Cournot."""

    model_config = ConfigDict(extra="forbid")


def _to_utc(value: datetime) -> datetime:
    zone = value.tzinfo
    # pydantic's parsed offset (TzInfo) always has a utcoffset: the check, a slow call, is skipped.
    if type(zone) is not TzInfo and (zone is None or value.utcoffset() is None):
        raise ValueError("timestamp has no time zone; send UTC with a 'Z' suffix or an explicit offset")
    try:
        return value.astimezone(UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00:00+01:00: its UTC instant is before year 1
        raise ValueError("timestamp is out of range once converted to UTC (years 1-9999)") from None


UtcDatetime = Annotated[datetime, AfterValidator(_to_utc)]
"""A datetime that must carry a time zone and is normalised to UTC (serialised with ``Z``)."""
