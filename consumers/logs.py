"""Structured logs: one JSON object per line on stderr (``python-json-logger``).

Fields: ``ts`` (UTC, ISO 8601), ``level``, ``logger``, ``event`` (the message), then every key
passed through ``extra=`` (for example ``topic``, ``partition``, ``offset``, ``reason``), and
``exc`` with the traceback text when one is attached.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

from pythonjsonlogger.json import JsonFormatter

__all__ = ["JsonLineFormatter", "configure_logging"]


class JsonLineFormatter(JsonFormatter):
    """Format a record as one compact line of JSON with the field names above."""

    def __init__(self) -> None:
        """Compact separators, raw UTF-8, anything unserialisable as its ``str``."""
        super().__init__(
            "%(name)s %(levelname)s %(message)s",
            rename_fields={"name": "logger", "levelname": "level", "message": "event", "exc_info": "exc"},
            json_serializer=functools.partial(json.dumps, separators=(",", ":")),
            json_default=str,
            json_ensure_ascii=False,
        )

    def add_fields(
        self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        """``ts`` first, the level in lower case."""
        log_data["ts"] = (
            datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z")
        )
        super().add_fields(log_data, record, message_dict)
        log_data["level"] = record.levelname.lower()


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
