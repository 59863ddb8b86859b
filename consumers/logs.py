"""Structured logs: one JSON object per line on stderr (stdlib ``logging`` only).

Fields: ``ts`` (UTC, ISO 8601), ``level``, ``logger``, ``event`` (the message), then every key
passed through ``extra=`` (for example ``topic``, ``partition``, ``offset``, ``reason``), and
``exc`` with the traceback text when one is attached.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

__all__ = ["JsonLineFormatter", "configure_logging"]

# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message",
    "asctime",
    "taskName",
}


def _jsonable(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    return str(value)


class JsonLineFormatter(logging.Formatter):
    """Format a record as one line of JSON."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a compact JSON object without a trailing newline."""
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD_ATTRS and not key.startswith("_"):
                line[key] = _jsonable(value)
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, separators=(",", ":"))


def configure_logging(level: str = "info", stream: TextIO | None = None) -> None:
    """Send every logger's records to ``stream`` (stderr) as JSON lines; quiet aiokafka's chatter."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonLineFormatter())
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level.upper())
    if root.level > logging.DEBUG:
        logging.getLogger("aiokafka").setLevel(max(root.level, logging.WARNING))
