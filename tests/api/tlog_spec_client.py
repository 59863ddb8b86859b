"""An independent tlog client, written from the specifications only, to check what `ledger serve` serves.

Sources: RFC 6962 §2.1 (Merkle tree hash, audit path, consistency proof), RFC 9162 §2.1.3.2 and
§2.1.4.2 (verifying inclusion and consistency), C2SP signed-note, tlog-checkpoint and tlog-tiles
(tile paths, tile contents, entry bundles). It imports nothing from this project: only hashlib,
base64 and the Ed25519 primitive, and reads the log over HTTP only.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

TILE_HEIGHT = 8
WIDTH = 256


class SpecCheckError(AssertionError):
    """What the log served does not verify."""


def leaf_hash(data: bytes) -> bytes:
    """RFC 6962: MTH({d}) = SHA-256(0x00 || d)."""
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """RFC 6962: SHA-256(0x01 || left || right)."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than n (n > 1)."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


# --- signed note / checkpoint ------------------------------------------------------------


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes


def open_checkpoint(note: bytes, origin: str, public_key: bytes) -> Checkpoint:
    """Verify a C2SP signed note from ``origin``'s Ed25519 key and parse its checkpoint body."""
    text_str = note.decode("utf-8")
    body, sep, signatures = text_str.rpartition("\n\n")
    if not sep:
        raise SpecCheckError("note has no blank line before its signatures")
    text = body + "\n"
    key_id = hashlib.sha256(origin.encode() + b"\n" + b"\x01" + public_key).digest()[:4]
    verifier = Ed25519PublicKey.from_public_bytes(public_key)
    verified = False
    for line in signatures.rstrip("\n").split("\n"):
        if not line.startswith("\u2014 "):
            raise SpecCheckError(f"bad signature line {line!r}")
        name, _, blob = line[2:].rpartition(" ")
        raw = base64.b64decode(blob)
        if name == origin and raw[:4] == key_id:
            verifier.verify(raw[4:], text.encode("utf-8"))  # raises InvalidSignature
            verified = True
    if not verified:
        raise SpecCheckError("no signature by the log's key")
    lines = text.split("\n")
    if lines[0] != origin:
        raise SpecCheckError(f"checkpoint origin {lines[0]!r} is not {origin!r}")
    root = base64.b64decode(lines[2])
    if len(root) != 32 or str(int(lines[1])) != lines[1]:
        raise SpecCheckError("malformed checkpoint body")
    return Checkpoint(lines[0], int(lines[1]), root)


# --- tiles --------------------------------------------------------------------------------


def encode_index(n: int) -> str:
    """tlog-tiles: N as zero-padded 3-digit elements, all but the last prefixed with ``x``."""
    elements = [f"{n % 1000:03d}"]
    n //= 1000
    while n > 0:
        elements.insert(0, f"x{n % 1000:03d}")
        n //= 1000
    return "/".join(elements)


def tile_url_path(level: str | int, n: int, width: int) -> str:
    suffix = "" if width == WIDTH else f".p/{width}"
    return f"tile/{level}/{encode_index(n)}{suffix}"


class TileLog:
    """Reads hashes of the tree of size ``size`` from hash tiles fetched with ``fetch(path)``."""

    def __init__(self, fetch: Callable[[str], bytes], size: int) -> None:
        self.fetch = fetch
        self.size = size
        self.tiles: dict[tuple[int, int], list[bytes]] = {}
        self.fetched: list[str] = []

    def _tile(self, level: int, n: int) -> list[bytes]:
        key = (level, n)
        if key not in self.tiles:
            width = min(WIDTH, (self.size >> (TILE_HEIGHT * level)) - n * WIDTH)
            path = tile_url_path(level, n, width)
            data = self.fetch(path)
            self.fetched.append(path)
            if len(data) != 32 * width:
                raise SpecCheckError(f"{path}: {len(data)} bytes, expected {32 * width}")
            self.tiles[key] = [data[i : i + 32] for i in range(0, len(data), 32)]
        return self.tiles[key]

    def perfect(self, level: int, index: int) -> bytes:
        """The hash of the perfect subtree at ``level`` (height) and ``index``, from one tile."""
        tile_level, rest = divmod(level, TILE_HEIGHT)
        first = index << rest
        hashes = self._tile(tile_level, first // WIDTH)[first % WIDTH : first % WIDTH + (1 << rest)]
        if len(hashes) != 1 << rest:
            raise SpecCheckError(f"tile too short for level {level} index {index}")
        while len(hashes) > 1:
            hashes = [node_hash(hashes[i], hashes[i + 1]) for i in range(0, len(hashes), 2)]
        return hashes[0]

    def mth(self, start: int, end: int) -> bytes:
        """RFC 6962 MTH of leaves [start, end) (start is aligned as RFC 6962's recursion makes it)."""
        n = end - start
        if n == 0:
            return hashlib.sha256(b"").digest()
        if n & (n - 1) == 0 and start % n == 0:
            return self.perfect(n.bit_length() - 1, start // n)
        k = _split(n)
        return node_hash(self.mth(start, start + k), self.mth(start + k, end))

    def inclusion_path(self, m: int, start: int, end: int) -> list[bytes]:
        """RFC 6962 PATH(m, D[start:end])."""
        n = end - start
        if n == 1:
            return []
        k = _split(n)
        if m < k:
            return [*self.inclusion_path(m, start, start + k), self.mth(start + k, end)]
        return [*self.inclusion_path(m - k, start + k, end), self.mth(start, start + k)]

    def consistency(self, m: int, start: int, end: int, complete: bool = True) -> list[bytes]:
        """RFC 6962 SUBPROOF(m, D[start:end], b)."""
        n = end - start
        if m == n:
            return [] if complete else [self.mth(start, end)]
        k = _split(n)
        if m <= k:
            return [*self.consistency(m, start, start + k, complete), self.mth(start + k, end)]
        return [*self.consistency(m - k, start + k, end, False), self.mth(start, start + k)]


def parse_entry_bundle(data: bytes) -> list[bytes]:
    """tlog-tiles entry bundle: big-endian uint16 length, then that many bytes, repeated."""
    entries, i = [], 0
    while i < len(data):
        if i + 2 > len(data):
            raise SpecCheckError("truncated entry length")
        length = int.from_bytes(data[i : i + 2], "big")
        if i + 2 + length > len(data):
            raise SpecCheckError("truncated entry")
        entries.append(data[i + 2 : i + 2 + length])
        i += 2 + length
    return entries


# --- RFC 9162 verification ------------------------------------------------------------------


def verify_inclusion(leaf: bytes, index: int, size: int, path: list[bytes], root: bytes) -> bool:
    """RFC 9162 §2.1.3.2."""
    if index >= size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            return False
        if fn % 2 == 1 or fn == sn:
            r = node_hash(p, r)
            if fn % 2 == 0:
                while fn % 2 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency(m: int, n: int, old_root: bytes, new_root: bytes, proof: list[bytes]) -> bool:
    """RFC 9162 §2.1.4.2 (sizes 0 < m <= n; m == n needs an empty proof and equal roots)."""
    if m == n:
        return not proof and old_root == new_root
    if m == 0 or m > n or not proof:
        return False
    if m & (m - 1) == 0:
        proof = [old_root, *proof]
    fn, sn = m - 1, n - 1
    while fn % 2 == 1:
        fn >>= 1
        sn >>= 1
    fr = sr = proof[0]
    for c in proof[1:]:
        if sn == 0:
            return False
        if fn % 2 == 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if fn % 2 == 0:
                while fn % 2 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return fr == old_root and sr == new_root and sn == 0
