"""Small pure helpers over JSON values: field paths, plain numbers and observation times.

Times are computed from the epoch with ``timedelta`` arithmetic only, never through the
operating system's time zone database, so the process ``TZ`` cannot change a result.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, Final

__all__ = [
    "EPOCH",
    "MISSING",
    "epoch_micros",
    "format_time",
    "is_finite_number",
    "is_time_name",
    "lookup",
    "parse_plain_number",
    "parse_time",
    "split_path",
]

EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
MISSING: Final[Any] = object()
"""Sentinel returned by :func:`lookup` when a path does not resolve."""

_PLAIN_NUMBER: Final = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_INDEX: Final = re.compile(r"\[(\d+)\]")
_TIME_NAMES: Final = frozenset({"timestamp", "time", "date", "datetime", "as_of", "asof", "ts"})
_TIME_SUFFIXES: Final[tuple[str, ...]] = ("_at", "_time", "_timestamp", "_date", "time", "timestamp")
# Plausible observation times: 2000-01-01 .. 2100-01-01, in seconds or milliseconds since the epoch.
_MIN_EPOCH_S: Final = 946_684_800
_MAX_EPOCH_S: Final = 4_102_444_800
_MAX_TIME_TEXT: Final = 64


def is_finite_number(value: object) -> bool:
    """True for ints and finite floats, never for bools."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value)


_PATHS: Final[dict[str, tuple[str, ...]]] = {}
_PATHS_LIMIT: Final = 1024
_TIME_TEXTS: Final[dict[datetime, str]] = {}
_TIME_TEXTS_LIMIT: Final = 4096
"""Memos of :func:`split_path` and :func:`format_time` (pure functions): plain dicts read by
compiled code, emptied when full. Unlike ``lru_cache`` a hit costs no argument tuple, key tuple or
recency bookkeeping; equal keys give equal results, as with ``lru_cache``."""


def split_path(path: str) -> tuple[str, ...]:
    """``"data[0].close"`` and ``"data.0.close"`` both become ``("data", "0", "close")`` (memoised)."""
    found = _PATHS.get(path)
    if found is None:
        found = tuple(segment for segment in _INDEX.sub(r".\1", path).split(".") if segment)
        if len(_PATHS) >= _PATHS_LIMIT:
            _PATHS.clear()
        _PATHS[path] = found
    return found


def lookup(document: Any, segments: tuple[str, ...]) -> Any:
    """Follow ``segments`` through dicts (by key) and lists (by decimal index); :data:`MISSING` if absent."""
    current = document
    for segment in segments:
        if isinstance(current, dict):
            if segment not in current:
                return MISSING
            current = current[segment]
        elif isinstance(current, list) and segment.isdigit():
            index = int(segment)
            if index >= len(current):
                return MISSING
            current = current[index]
        else:
            return MISSING
    return current


def parse_plain_number(text: str) -> int | float | None:
    """Parse a JSON-style number held in a string (``"104250.12000000"``); ints stay ints."""
    candidate = text.strip()
    if len(candidate) > 64 or not _PLAIN_NUMBER.fullmatch(candidate):
        return None
    if "." in candidate or "e" in candidate or "E" in candidate:
        number = float(candidate)
        return number if math.isfinite(number) else None
    return int(candidate)


def is_time_name(name: str) -> bool:
    """Whether a field name denotes a point in time (``timestamp``, ``last_updated_at``, ``closeTime``).

    Memoised per exact ``str`` name (field names recur across items and bundles)."""
    if type(name) is not str:
        return _is_time_name(name)
    found = _TIME_NAME_ANSWERS.get(name)
    if found is None:
        found = _is_time_name(name)
        if len(_TIME_NAME_ANSWERS) >= _TIME_NAME_LIMIT:
            _TIME_NAME_ANSWERS.clear()
        _TIME_NAME_ANSWERS[name] = found
    return found


_TIME_NAME_ANSWERS: Final[dict[str, bool]] = {}
_TIME_NAME_LIMIT: Final = 4096


def _is_time_name(name: str) -> bool:
    lowered = name.lower()
    return lowered in _TIME_NAMES or lowered.endswith(_TIME_SUFFIXES)


def parse_time(value: object) -> datetime | None:
    """An aware UTC datetime from an ISO-8601 string with offset or an epoch number, else None.

    Epoch numbers are read as seconds when they fall in 2000..2100, as milliseconds when they fall
    in that range times 1000; anything else, naive strings and bools are not times.
    """
    if isinstance(value, str):
        if len(value) > _MAX_TIME_TEXT or len(value) < 10:
            return None
        text = value.strip()
        if not (text[:4].isascii() and text[:4].isdigit()):
            # Every form ``fromisoformat`` reads starts with a four-digit ASCII year: answer
            # before it raises (an exception per non-time string costs more than the parse).
            return None
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            return None
        zone = parsed.tzinfo
        if zone is UTC:  # a ``Z`` or ``+00:00`` suffix: ``astimezone(UTC)`` would return it as it is
            return parsed
        if zone is None or (type(zone) is not timezone and parsed.utcoffset() is None):
            return None  # (a fixed-offset ``timezone``, what the parser gives, always has an offset)
        try:
            return parsed.astimezone(UTC)
        except OverflowError:  # e.g. 0001-01-01T00:00:00+01:00: no UTC instant in years 1..9999
            return None
    if not is_finite_number(value):
        return None
    assert isinstance(value, (int, float))
    try:
        if _MIN_EPOCH_S <= value <= _MAX_EPOCH_S:
            return EPOCH + timedelta(seconds=value)
        if _MIN_EPOCH_S * 1000 <= value <= _MAX_EPOCH_S * 1000:
            return EPOCH + timedelta(milliseconds=value)
    except OverflowError:  # pragma: no cover - excluded by the range checks
        return None
    return None


def format_time(moment: datetime) -> str:
    """UTC ``Z`` text, with microseconds only when nonzero (as ``engine.canonical.format_datetime_canonical``).

    Memoised: equal datetimes (the same instant) have the same UTC text, and the window bounds of a
    market recur in every audit of its bundles.
    """
    text = _TIME_TEXTS.get(moment)
    if text is None:
        text = _format_time(moment)
        if len(_TIME_TEXTS) >= _TIME_TEXTS_LIMIT:
            _TIME_TEXTS.clear()
        _TIME_TEXTS[moment] = text
    return text


def _format_time(moment: datetime) -> str:
    utc = (
        moment
        if moment.tzinfo is UTC
        else moment.replace(tzinfo=UTC)
        if moment.tzinfo is None
        else moment.astimezone(UTC)
    )
    text = f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}"
    return f"{text}.{utc.microsecond:06d}Z" if utc.microsecond else f"{text}Z"


def epoch_micros(moment: datetime) -> int:
    """Exact integer microseconds since the epoch (used to order times without floats)."""
    return (moment - EPOCH) // timedelta(microseconds=1)
