"""Signed checkpoints: C2SP ``tlog-checkpoint`` notes signed with Ed25519 (C2SP ``signed-note``).

A checkpoint's note text is four lines, each ending in a newline::

    <origin>
    <tree size, ASCII decimal, no leading zeroes>
    <base64 of the 32-byte RFC 6962 root hash>
    timestamp <UTC time, YYYY-MM-DDTHH:MM:SSZ>

then a blank line and one or more signature lines ``— <key name> <base64(key id || signature)>``.
The log signs with key name = origin; the key id is ``SHA-256(name || 0x0A || 0x01 || public
key)[:4]`` and the Ed25519 signature covers the whole note text, so the timestamp is signed. The
timestamp is the operator's clock: it says when the operator claims to have signed, nothing more.

Pure code: no database, no clock (callers pass the timestamp). Parsers raise :class:`NoteError`
with a message that says what is wrong; they never raise anything else on bad input.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

__all__ = [
    "MAX_NOTE_BYTES",
    "Checkpoint",
    "NoteError",
    "NoteSignature",
    "SignedNote",
    "check_origin",
    "format_timestamp",
    "key_id",
    "open_checkpoint",
    "parse_checkpoint_text",
    "parse_signed_note",
    "public_key_bytes",
    "sign_checkpoint",
    "sign_note",
    "verifier_key",
]

ED25519_TYPE = b"\x01"
MAX_NOTE_BYTES = 64 * 1024
MAX_TREE_SIZE = 2**63 - 1  # sizes live in a Postgres bigint
_SIGNATURE_PREFIX = "\u2014 "  # em dash, space
_TIMESTAMP_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
_SIZE_RE = re.compile(r"0|[1-9][0-9]{0,18}")
_BASE64_RE = re.compile(r"[A-Za-z0-9+/]*={0,2}")


class NoteError(ValueError):
    """A note or checkpoint is malformed, unsigned, or signed by the wrong key."""


@dataclass(frozen=True)
class Checkpoint:
    """A tree head: the log ``origin``, ``tree_size`` leaves, their RFC 6962 ``root_hash``."""

    origin: str
    tree_size: int
    root_hash: bytes
    timestamp: str

    def note_text(self) -> str:
        """The note text that is signed (four newline-terminated lines)."""
        check_origin(self.origin)
        if not (isinstance(self.tree_size, int) and 0 <= self.tree_size <= MAX_TREE_SIZE):
            raise NoteError(f"tree size must be an int in [0, {MAX_TREE_SIZE}]")
        if not (isinstance(self.root_hash, bytes) and len(self.root_hash) == 32):
            raise NoteError("root hash must be 32 bytes")
        if not _TIMESTAMP_RE.fullmatch(self.timestamp):
            raise NoteError(f"timestamp must look like 2026-01-31T12:00:00Z, got {self.timestamp!r}")
        root = base64.b64encode(self.root_hash).decode("ascii")
        return f"{self.origin}\n{self.tree_size}\n{root}\ntimestamp {self.timestamp}\n"

    @property
    def root_hex(self) -> str:
        """The root hash as ``0x`` + lowercase hex."""
        return "0x" + self.root_hash.hex()


@dataclass(frozen=True)
class NoteSignature:
    """One signature line: key name, 4-byte key id and the signature bytes."""

    name: str
    key_id: bytes
    signature: bytes


@dataclass(frozen=True)
class SignedNote:
    """A note split into its text (with the final newline) and its signature lines."""

    text: str
    signatures: tuple[NoteSignature, ...]


def format_timestamp(moment: datetime) -> str:
    """UTC, whole seconds, ``Z`` suffix: the only timestamp form a checkpoint carries."""
    utc = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%SZ")


def public_key_bytes(public_key: Ed25519PublicKey) -> bytes:
    """The 32-byte RFC 8032 encoding of an Ed25519 public key."""
    return public_key.public_bytes(Encoding.Raw, PublicFormat.Raw)


def key_id(name: str, public_key: Ed25519PublicKey) -> bytes:
    """``SHA-256(name || 0x0A || 0x01 || public key)[:4]`` (signed-note, Ed25519)."""
    material = name.encode("utf-8") + b"\n" + ED25519_TYPE + public_key_bytes(public_key)
    return hashlib.sha256(material).digest()[:4]


def verifier_key(name: str, public_key: Ed25519PublicKey) -> str:
    """The ``name+keyid+base64(0x01||key)`` verifier-key string other note tools understand."""
    encoded = base64.b64encode(ED25519_TYPE + public_key_bytes(public_key)).decode("ascii")
    return f"{name}+{key_id(name, public_key).hex()}+{encoded}"


def check_origin(origin: object) -> None:
    """Raise :class:`NoteError` unless ``origin`` is a note name: non-empty UTF-8 text, no space, '+' or control."""
    if not isinstance(origin, str) or not origin:
        raise NoteError("origin must be a non-empty string")
    if any(ch.isspace() or ch == "+" or ord(ch) < 0x20 or 0xD800 <= ord(ch) <= 0xDFFF for ch in origin):
        raise NoteError(f"origin {origin!r} must not contain spaces, '+' or control characters")


def sign_note(text: str, name: str, private_key: Ed25519PrivateKey) -> str:
    """A signed note: ``text`` (ending in a newline), a blank line, one signature line by ``name``."""
    if not text.endswith("\n"):
        raise NoteError("note text must end with a newline")
    check_origin(name)
    signature = private_key.sign(text.encode("utf-8"))
    encoded = base64.b64encode(key_id(name, private_key.public_key()) + signature).decode("ascii")
    return f"{text}\n{_SIGNATURE_PREFIX}{name} {encoded}\n"


def sign_checkpoint(checkpoint: Checkpoint, private_key: Ed25519PrivateKey) -> str:
    """The signed note for ``checkpoint``, signed under key name = origin."""
    return sign_note(checkpoint.note_text(), checkpoint.origin, private_key)


def _strict_base64(text: str, what: str) -> bytes:
    if not _BASE64_RE.fullmatch(text) or len(text) % 4:
        raise NoteError(f"{what} is not standard padded base64")
    try:
        value = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise NoteError(f"{what} is not valid base64: {exc}") from None
    if base64.b64encode(value).decode("ascii") != text:
        raise NoteError(f"{what} is not canonical base64")
    return value


def parse_signed_note(note: str | bytes) -> SignedNote:
    """Split a signed note into text and signature lines; checks the framing only."""
    if isinstance(note, bytes):
        if len(note) > MAX_NOTE_BYTES:
            raise NoteError(f"note is larger than {MAX_NOTE_BYTES} bytes")
        try:
            note = note.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NoteError(f"note is not valid UTF-8: {exc.reason} at byte {exc.start}") from None
    if not isinstance(note, str):
        raise NoteError("note must be text")
    try:
        size = len(note.encode("utf-8"))
    except UnicodeEncodeError:
        raise NoteError("note contains characters that are not valid UTF-8 (lone surrogates)") from None
    if size > MAX_NOTE_BYTES:
        raise NoteError(f"note is larger than {MAX_NOTE_BYTES} bytes")
    if any(ord(ch) < 0x20 and ch != "\n" for ch in note):
        raise NoteError("note contains a control character other than newline")
    if not note.endswith("\n"):
        raise NoteError("note does not end with a newline")
    split = note.rfind("\n\n")
    if split < 0:
        raise NoteError("note has no blank line between its text and its signatures")
    text, block = note[: split + 1], note[split + 2 :]
    signatures = []
    for number, line in enumerate(block.split("\n")[:-1], start=1):
        if not line.startswith(_SIGNATURE_PREFIX):
            raise NoteError(f"signature line {number} does not start with an em dash and a space")
        name, sep, encoded = line[len(_SIGNATURE_PREFIX) :].partition(" ")
        if not sep or not name or " " in encoded:
            raise NoteError(f"signature line {number} is not '— <name> <base64>'")
        raw = _strict_base64(encoded, f"signature line {number}")
        if len(raw) < 5:
            raise NoteError(f"signature line {number} is too short to hold a key id and a signature")
        signatures.append(NoteSignature(name, raw[:4], raw[4:]))
    if not signatures:
        raise NoteError("note has no signature lines")
    if len(signatures) > 100:
        raise NoteError("note has more than 100 signature lines")
    return SignedNote(text, tuple(signatures))


def parse_checkpoint_text(text: str) -> Checkpoint:
    """Parse the four lines of a checkpoint's note text (origin, size, root, timestamp)."""
    if not text.endswith("\n"):
        raise NoteError("checkpoint text does not end with a newline")
    lines = text[:-1].split("\n")
    if len(lines) != 4:
        raise NoteError(f"checkpoint text has {len(lines)} lines, expected 4 (origin, size, root, timestamp)")
    origin, size_text, root_text, stamp_line = lines
    check_origin(origin)
    if not _SIZE_RE.fullmatch(size_text) or int(size_text) > MAX_TREE_SIZE:
        raise NoteError(f"tree size {size_text!r} is not a decimal without leading zeroes below 2^63")
    root = _strict_base64(root_text, "root hash")
    if len(root) != 32:
        raise NoteError(f"root hash is {len(root)} bytes, expected 32")
    keyword, _, stamp = stamp_line.partition(" ")
    if keyword != "timestamp" or not _TIMESTAMP_RE.fullmatch(stamp):
        raise NoteError(f"line 4 must be 'timestamp YYYY-MM-DDTHH:MM:SSZ', got {stamp_line!r}")
    try:
        datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        raise NoteError(f"timestamp {stamp!r} is not a valid date and time") from None
    return Checkpoint(origin, int(size_text), root, stamp)


def open_checkpoint(note: str | bytes, public_key: Ed25519PublicKey, origin: str | None = None) -> Checkpoint:
    """Verify a signed checkpoint against ``public_key`` and return its contents.

    The note must carry a signature whose key name is the checkpoint's origin and whose key id is
    that of ``public_key``, and it must verify; signatures by other keys are ignored (witness
    cosignatures, rotated keys). With ``origin`` given, the checkpoint must be for that log.
    """
    signed = parse_signed_note(note)
    checkpoint = parse_checkpoint_text(signed.text)
    if origin is not None and checkpoint.origin != origin:
        raise NoteError(f"checkpoint is for origin {checkpoint.origin!r}, expected {origin!r}")
    expected_id = key_id(checkpoint.origin, public_key)
    ours = [s for s in signed.signatures if s.name == checkpoint.origin and s.key_id == expected_id]
    if not ours:
        names = ", ".join(f"{s.name}/{s.key_id.hex()}" for s in signed.signatures)
        raise NoteError(
            f"no signature by the given key (name {checkpoint.origin}, key id {expected_id.hex()}); "
            f"found: {names}"
        )
    for signature in ours:
        try:
            public_key.verify(signature.signature, signed.text.encode("utf-8"))
        except InvalidSignature:
            raise NoteError("signature by the given key does not verify over the checkpoint text") from None
    return checkpoint
