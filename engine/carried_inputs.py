"""The inputs hash, bound to the very objects and bytes it was computed from (proof by identity).

The envelope decoder canonicalises the prompt spec and the evidence bundle once and hashes the
pair (``inputs_hash``). The ledger's ``submission.received`` text splices those same bytes in, and
must know they are the preimage of the ``inputs_hash`` the payload commits to. Hashing the pair
again proves it; :class:`InputsCanonical` proves it by identity instead, the way
:class:`engine.commitments.ItemCanonical` does for the evidence items.
"""

from __future__ import annotations

from typing import Any

from engine.canonical import sha256, to_hex

__all__ = ["InputsCanonical", "inputs_preimage"]


def inputs_preimage(prompt_spec_canonical: bytes, evidence_bundle_canonical: bytes) -> bytes:
    """The canonical bytes of the ``{"prompt_spec", "evidence_bundle"}`` pair from those of its members
    (keys in canonical order); the inputs hash is the SHA-256 of it."""
    return (
        b'{"evidence_bundle":' + evidence_bundle_canonical + b',"prompt_spec":' + prompt_spec_canonical + b"}"
    )


class InputsCanonical:
    """The inputs hash, computed here from the two canonical byte strings it is held with.

    Made by the envelope decoder from the prompt spec and evidence bundle objects it validated and
    the canonical bytes it made from them; :attr:`inputs_hash` is computed by the constructor from
    those bytes, so it cannot disagree with them. :meth:`vouches_for` answers True only when it is
    handed exactly these objects and bytes (``is``) and exactly this hash: a copied, swapped or
    re-made object, other bytes (even equal ones) or another hash get False, and the caller hashes
    the pair itself (fail closed). The objects are held, so their identities cannot be reused; it is
    immutable once made. What identity cannot see is a value changed in place inside the spec or
    the bundle after decoding (the limit :class:`~engine.commitments.ItemCanonical` and the carried
    prompt-spec bytes have too): the decoder's callers hand the decoded envelope straight on.
    """

    __slots__ = (
        "_evidence_bundle",
        "_prompt_spec",
        "evidence_bundle_canonical",
        "inputs_hash",
        "prompt_spec_canonical",
    )

    _prompt_spec: Any
    _evidence_bundle: Any
    prompt_spec_canonical: bytes
    evidence_bundle_canonical: bytes
    inputs_hash: str

    def __init__(
        self,
        prompt_spec: Any,
        evidence_bundle: Any,
        prompt_spec_canonical: bytes,
        evidence_bundle_canonical: bytes,
    ) -> None:
        digest = to_hex(sha256(inputs_preimage(prompt_spec_canonical, evidence_bundle_canonical)))
        init = object.__setattr__
        init(self, "_prompt_spec", prompt_spec)
        init(self, "_evidence_bundle", evidence_bundle)
        init(self, "prompt_spec_canonical", prompt_spec_canonical)
        init(self, "evidence_bundle_canonical", evidence_bundle_canonical)
        init(self, "inputs_hash", digest)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("an InputsCanonical is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("an InputsCanonical is immutable")

    def __reduce__(self) -> Any:
        raise TypeError("an InputsCanonical is not pickled or copied: decode the envelope where it is used")

    def vouches_for(
        self,
        prompt_spec: Any,
        evidence_bundle: Any,
        prompt_spec_canonical: bytes,
        evidence_bundle_canonical: bytes,
        inputs_hash: Any,
    ) -> bool:
        """Whether ``inputs_hash`` is the SHA-256 of the pair of these bytes, made from these objects,
        proved by identity: True only for the very objects and bytes this was made from and its hash."""
        return (
            prompt_spec is self._prompt_spec
            and evidence_bundle is self._evidence_bundle
            and prompt_spec_canonical is self.prompt_spec_canonical
            and evidence_bundle_canonical is self.evidence_bundle_canonical
            and type(inputs_hash) is str
            and inputs_hash == self.inputs_hash
        )
