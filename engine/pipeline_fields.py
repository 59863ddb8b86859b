"""The check :func:`engine.pipeline.run_pipeline` makes before it stores its result's fields as they
are (compiled by ``make compile``; :mod:`engine.pipeline` defines a Pydantic model and stays
interpreted, where this loop cost a generator frame per value)."""

from __future__ import annotations

from typing import Any

__all__ = ["engine_made"]


def engine_made(fields: dict[str, Any], types: tuple[tuple[str, type], ...]) -> bool:
    """Whether each named field is of exactly its type (``type(value) is kind``, no subclass),
    ``step_hashes`` holds only exact ``str`` values, and ``evaluation_variables`` is None or an
    exact ``dict`` whose keys are all exact ``str``. A missing name raises ``KeyError``."""
    for name, kind in types:
        if type(fields[name]) is not kind:
            return False
    hashes: Any = fields["step_hashes"]
    if type(hashes) is not list:
        return False
    listed: list[Any] = hashes
    for value in listed:
        if type(value) is not str:
            return False
    variables: Any = fields["evaluation_variables"]
    if variables is None:
        return True
    if type(variables) is not dict:
        return False
    table: dict[Any, Any] = variables
    return all(type(key) is str for key in table)
