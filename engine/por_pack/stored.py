"""The form in which a verified pack is stored in a ``por.verified`` entry, and re-verification.

``stored_pack`` is ``{"form": "document", "pack": {...}}`` or ``{"form": "files", "files": {path:
base64}}`` (paths sorted). :func:`reverify` rebuilds the parts from it and runs the verifier again
with the stored report's ``source``, so an unchanged verifier reproduces the stored report byte
for byte (compared as canonical JSON).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from engine.canonical import canonical_bytes
from engine.por_pack.models import PackReport
from engine.por_pack.parts import PackParts, parts_from_document, parts_from_files
from engine.por_pack.verify import verify_parts

__all__ = ["Reverification", "StoredPackError", "make_stored_pack", "parts_from_stored", "reverify"]


class StoredPackError(ValueError):
    """A stored pack that cannot be rebuilt (unknown form, a file that is not base64); ``path`` says where."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(f"{message} at {path}")
        self.message = message
        self.path = path


def make_stored_pack(pack: dict[str, Any] | None, files: dict[str, str] | None) -> dict[str, Any]:
    """The stored form of a pack given as a document or as base64 files (exactly one)."""
    if (pack is None) == (files is None):
        raise StoredPackError("exactly one of pack and files is required", "$")
    if pack is not None:
        return {"form": "document", "pack": pack}
    return {"form": "files", "files": dict(sorted((files or {}).items()))}


def parts_from_stored(stored: dict[str, Any], source: str) -> PackParts:
    """Parse a stored pack (see the module docstring)."""
    form = stored.get("form")
    if form == "document":
        return parts_from_document(stored.get("pack"), source=source)
    if form != "files" or not isinstance(stored.get("files"), dict):
        raise StoredPackError(f"unknown stored pack form {form!r}", "$.form")
    files: dict[str, bytes] = {}
    for path, text in stored["files"].items():
        try:
            files[path] = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError, TypeError) as exc:
            raise StoredPackError(f"not base64: {exc}", f"$.files[{json.dumps(path)}]") from exc
    return parts_from_files(files, source=source)


@dataclass(frozen=True)
class Reverification:
    """The fresh report and whether it is byte-identical (canonical JSON) to the stored one."""

    report: PackReport
    identical: bool


def reverify(stored_pack: dict[str, Any], stored_report: dict[str, Any]) -> Reverification:
    """Verify a stored pack again and compare with the report stored beside it."""
    source = stored_report.get("source")
    report = verify_parts(parts_from_stored(stored_pack, source if isinstance(source, str) else ""))
    identical = canonical_bytes(report.model_dump(mode="json")) == canonical_bytes(stored_report)
    return Reverification(report, identical)
