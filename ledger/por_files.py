"""Read a Cournot PoR pack from disk: a directory, a ``.zip``, or one JSON document.

The pure verifier (:mod:`engine.por_pack`) takes bytes; this module is the file-system shell.
Reads are bounded (``MAX_PACK_BYTES`` in total, ``MAX_PACK_FILES`` files) so a zip bomb or a huge
directory is refused as unreadable instead of exhausting memory.
"""

from __future__ import annotations

import zipfile
from pathlib import Path, PurePosixPath
from typing import Any

from engine.jsonio import StrictJSONError, loads_strict
from engine.por_pack import PackReport, verify_pack_document, verify_pack_files

__all__ = ["MAX_PACK_BYTES", "MAX_PACK_FILES", "PackReadError", "read_pack_files", "verify_pack_path"]

MAX_PACK_BYTES = 64 * 1024 * 1024
MAX_PACK_FILES = 256


class PackReadError(Exception):
    """The path cannot be read as a pack (missing, unreadable, not a zip/dir/JSON, too large)."""


def _add(files: dict[str, bytes], name: str, data: bytes, total: int) -> int:
    if name in files:
        raise PackReadError(f"{name} occurs more than once")
    if len(files) >= MAX_PACK_FILES:
        raise PackReadError(f"more than {MAX_PACK_FILES} files")
    total += len(data)
    if total > MAX_PACK_BYTES:
        raise PackReadError(f"more than {MAX_PACK_BYTES} bytes")
    files[name] = data
    return total


def _read_dir(path: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    total = 0
    for file in sorted(path.rglob("*")):
        if file.is_file():
            total = _add(files, file.relative_to(path).as_posix(), file.read_bytes(), total)
    return files


def _read_zip(path: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    total = 0
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if info.is_dir():
                continue
            name = PurePosixPath(info.filename)
            if name.is_absolute() or ".." in name.parts:
                raise PackReadError(f"unsafe member name {info.filename!r}")
            if total + info.file_size > MAX_PACK_BYTES:
                raise PackReadError(f"more than {MAX_PACK_BYTES} bytes uncompressed")
            total = _add(files, name.as_posix(), archive.read(info), total)
    return files


def read_pack_files(path: Path) -> dict[str, bytes]:
    """``{path inside the pack: bytes}`` for a pack directory or zip."""
    try:
        if path.is_dir():
            return _read_dir(path)
        if zipfile.is_zipfile(path):
            return _read_zip(path)
    except (OSError, zipfile.BadZipFile, RuntimeError) as exc:  # RuntimeError: encrypted members
        raise PackReadError(f"{path}: {exc}") from exc
    raise PackReadError(f"{path}: not a pack directory, zip or JSON document")


def _read_document(path: Path) -> Any:
    try:
        if path.stat().st_size > MAX_PACK_BYTES:
            raise PackReadError(f"{path}: more than {MAX_PACK_BYTES} bytes")
        return loads_strict(path.read_bytes())
    except OSError as exc:
        raise PackReadError(f"{path}: {exc}") from exc
    except StrictJSONError as exc:
        raise PackReadError(f"{path}: not strict JSON: {exc}") from exc


def verify_pack_path(path: Path) -> PackReport:
    """Read and verify one pack; raises :class:`PackReadError` when the input is unreadable."""
    if not path.exists():
        raise PackReadError(f"{path}: no such file or directory")
    if path.is_file() and not zipfile.is_zipfile(path):
        return verify_pack_document(_read_document(path), source=str(path))
    return verify_pack_files(read_pack_files(path), source=str(path))
