"""The UTC normalisation of :data:`engine.schemas.common.UtcDatetime`, in a module of its own so
the mypyc build (:mod:`engine.build`) compiles it: pydantic calls it once per timestamp of every
decoded envelope, and a compiled function is called without a Python frame. It defines no model
(``tests/unit/test_engine_build.py`` checks that)."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic_core import TzInfo

__all__ = ["to_utc"]


def to_utc(value: datetime) -> datetime:
    """``value`` converted to UTC; ``ValueError`` when it has no time zone or its UTC instant is
    outside years 1-9999 (pydantic reports either as a ``value_error``)."""
    zone = value.tzinfo
    # pydantic's parsed offset (TzInfo) always has a utcoffset: the check, a slow call, is skipped.
    if type(zone) is not TzInfo and (zone is None or value.utcoffset() is None):
        raise ValueError("timestamp has no time zone; send UTC with a 'Z' suffix or an explicit offset")
    try:
        return value.astimezone(UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00:00+01:00: its UTC instant is before year 1
        raise ValueError("timestamp is out of range once converted to UTC (years 1-9999)") from None
