"""Logs on stderr: one JSON object per line (``python-json-logger``), or plain text for a terminal.

The one logging setup of every ``ledger`` command that logs: :func:`configure_logging`, with
``log_format`` "auto" (text when stderr is a terminal, else JSON), "json" or "text".

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

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter

__all__ = ["LOG_FORMATS", "LOG_LEVELS", "JsonLineFormatter", "TextLineFormatter", "configure_logging"]

LOG_FORMATS = ("auto", "json", "text")
LOG_LEVELS = ("debug", "info", "warning", "error")
NOT_FIELDS = frozenset({"color_message"})  # uvicorn's ANSI-coloured copy of the message


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
            reserved_attrs=[*RESERVED_ATTRS, *NOT_FIELDS],
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


class TextLineFormatter(logging.Formatter):
    """One plain line per record for a person at a terminal: ``level: event (key=value, ...)``."""

    _STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"} | NOT_FIELDS

    def __init__(self, clear_line: bool = False) -> None:
        """``clear_line``: start each line by erasing a progress line drawn with ``\\r``."""
        super().__init__()
        self._prefix = "\r\x1b[K" if clear_line else ""

    def format(self, record: logging.LogRecord) -> str:
        """The level, the message, the ``extra=`` fields; the traceback's last line if any."""
        fields = {key: value for key, value in vars(record).items() if key not in self._STANDARD}
        text = f"{record.levelname.lower()}: {record.getMessage()}"
        if fields:
            text += " (" + ", ".join(f"{key}={value}" for key, value in fields.items()) + ")"
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            text += f": {type(error).__name__}: {error}"
        return self._prefix + text


def configure_logging(level: str = "info", stream: TextIO | None = None, *, log_format: str = "auto") -> str:
    """Send every logger's records at ``level`` and above to ``stream`` (stderr); return "json" or "text".

    ``log_format``: "json" lines, "text" lines, or "auto": text when the stream is a terminal,
    else JSON. aiokafka's and Alembic's chatter is quieted below ``debug``.
    """
    target = stream or sys.stderr
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log_format must be one of {', '.join(LOG_FORMATS)}, not {log_format!r}")
    text = log_format == "text" or (log_format == "auto" and target.isatty())
    handler = logging.StreamHandler(target)
    handler.setFormatter(TextLineFormatter(clear_line=target.isatty()) if text else JsonLineFormatter())
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level.upper())
    if root.level > logging.DEBUG:
        logging.getLogger("aiokafka").setLevel(max(root.level, logging.WARNING))
        logging.getLogger("alembic").setLevel(max(root.level, logging.WARNING))
    return "text" if text else "json"
