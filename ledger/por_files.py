"""Read a Cournot PoR pack from disk: a directory, a ``.zip``, or one JSON document.

The pure verifier (:mod:`engine.por_pack`) takes bytes; this module is the file-system shell.
Reads are bounded (``MAX_PACK_BYTES`` in total, ``MAX_PACK_FILES`` files) so a zip bomb or a huge
directory is refused as unreadable instead of exhausting memory.
"""

from __future__ import annotations

import io
import os
import stat
import zipfile
from pathlib import Path, PurePosixPath
from typing import IO, Any

from engine.jsonio import StrictJSONError, loads_strict
from engine.por_pack import PackReport, verify_pack_document, verify_pack_files
from engine.por_pack.parts import MAX_INTEGER_DIGITS

__all__ = [
    "MAX_PACK_BYTES",
    "MAX_PACK_FILES",
    "PackReadError",
    "read_pack_files",
    "read_zip_bytes",
    "verify_pack_path",
]

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


def _read_bounded(path: Path, limit: int) -> bytes:
    """At most ``limit`` bytes of a regular file, refusing it when it holds more (sizes can lie or grow)."""
    with path.open("rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise PackReadError(f"{path}: more than {MAX_PACK_BYTES} bytes")
    return data


def _walk(root: Path) -> list[Path]:
    """Every regular file under ``root`` (sorted); a symbolic link or a special file is refused.

    A link could point outside the pack (a pack is untrusted input) and a FIFO or device would
    block or never end, so the pack is unreadable rather than silently read elsewhere.
    """
    found: list[Path] = []
    pending = [root]
    while pending:
        directory = pending.pop()
        for entry in os.scandir(directory):
            path = Path(entry.path)
            if entry.is_symlink():
                raise PackReadError(f"{path}: symbolic links are not allowed in a pack")
            if entry.is_dir(follow_symlinks=False):
                pending.append(path)
            elif entry.is_file(follow_symlinks=False):
                found.append(path)
            else:
                raise PackReadError(f"{path}: not a regular file")
    return sorted(found)


def _read_dir(path: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    total = 0
    for file in _walk(path):
        name = file.relative_to(path).as_posix()
        if total + file.stat(follow_symlinks=False).st_size > MAX_PACK_BYTES:
            raise PackReadError(f"more than {MAX_PACK_BYTES} bytes")
        total = _add(files, name, _read_bounded(file, MAX_PACK_BYTES - total), total)
    return files


def _read_zip(path: Path) -> dict[str, bytes]:
    if path.stat().st_size > MAX_PACK_BYTES:  # its central directory alone could exhaust memory
        raise PackReadError(f"{path}: zip of more than {MAX_PACK_BYTES} bytes")
    return _read_zip_archive(path, str(path))


def read_zip_bytes(data: bytes, *, label: str = "<zip>") -> dict[str, bytes]:
    """``{path inside the pack: bytes}`` of a pack zip held in memory, with the same limits as a file."""
    if len(data) > MAX_PACK_BYTES:
        raise PackReadError(f"{label}: zip of more than {MAX_PACK_BYTES} bytes")
    try:
        return _read_zip_archive(io.BytesIO(data), label)
    except (zipfile.BadZipFile, RuntimeError, ValueError, OSError) as exc:
        raise PackReadError(f"{label}: {exc}") from exc


def _read_zip_archive(source: Path | IO[bytes], label: str) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    total = 0
    with zipfile.ZipFile(source) as archive:
        members = archive.infolist()
        if len(members) > 2 * MAX_PACK_FILES:  # directories included; files are counted again below
            raise PackReadError(f"{label}: more than {2 * MAX_PACK_FILES} zip members")
        for info in members:
            if info.is_dir():
                continue
            name = PurePosixPath(info.filename)
            if name.is_absolute() or ".." in name.parts or "\\" in info.filename or "\x00" in info.filename:
                raise PackReadError(f"unsafe member name {info.filename!r}")
            if total + info.file_size > MAX_PACK_BYTES:
                raise PackReadError(f"more than {MAX_PACK_BYTES} bytes uncompressed")
            with archive.open(info) as member:  # bounded: the declared size may lie
                data = member.read(MAX_PACK_BYTES - total + 1)
            total = _add(files, name.as_posix(), data, total)
    return files


def read_pack_files(path: Path) -> dict[str, bytes]:
    """``{path inside the pack: bytes}`` for a pack directory or zip."""
    try:
        if path.is_dir():
            return _read_dir(path)
        if _is_regular_file(path) and zipfile.is_zipfile(path):
            return _read_zip(path)
    except (OSError, zipfile.BadZipFile, RuntimeError, ValueError) as exc:
        # RuntimeError: encrypted members; ValueError: a corrupt member header
        raise PackReadError(f"{path}: {exc}") from exc
    raise PackReadError(f"{path}: not a pack directory, zip or JSON document")


def _is_regular_file(path: Path) -> bool:
    """True for a regular file (a FIFO or device would block or never end, so it is no pack)."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


def _read_document(path: Path) -> Any:
    try:
        return loads_strict(
            _read_bounded(path, MAX_PACK_BYTES), max_integer_digits=MAX_INTEGER_DIGITS, exact_numbers=True
        )
    except OSError as exc:
        raise PackReadError(f"{path}: {exc}") from exc
    except StrictJSONError as exc:
        raise PackReadError(f"{path}: not strict JSON: {exc}") from exc


def verify_pack_path(path: Path) -> PackReport:
    """Read and verify one pack; raises :class:`PackReadError` when the input is unreadable."""
    if not path.exists():
        raise PackReadError(f"{path}: no such file or directory")
    if not path.is_dir() and not _is_regular_file(path):
        raise PackReadError(f"{path}: not a directory or a regular file")
    if path.is_file() and not zipfile.is_zipfile(path):
        return verify_pack_document(_read_document(path), source=str(path))
    return verify_pack_files(read_pack_files(path), source=str(path))
