"""Hash commitments over artifacts: step hashes and the Cournot-compatible PoR roots.

* ``step_hash``        = ``0x`` + sha256(canonical(step without ``hash_commitment``))
* ``prompt_spec_hash`` = ``0x`` + sha256(canonical(prompt_spec))
* ``evidence_root``    = Cournot Merkle root over ``hash_canonical(item)`` for the bundle's items
* ``reasoning_root``   = Cournot Merkle root over the step hashes, in step order
* ``verdict_hash``     = ``0x`` + sha256(canonical(verdict))
* ``por_root``         = Cournot Merkle root over the four values above

Every Merkle root is reported with its leaf count, because Cournot's duplicate-last padding makes
``[a, b, c]`` and ``[a, b, c, c]`` share a root.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, cast

import orjson

from engine.canonical import (
    canonical_bytes,
    canonical_bytes_of_plain,
    canonicalize_value,
    from_hex,
    hash_canonical,
    plain_data,
    to_hex,
)
from engine.canonical_models import ready_dump, ready_dump_bytes, spelled_fields
from engine.merkle.cournot import compute_por_root, cournot_root
from engine.schemas import (
    DeterministicVerdict,
    EvidenceBundle,
    EvidenceItem,
    PoRRoots,
    PromptSpec,
    Provenance,
    ReasoningStep,
    ReasoningTrace,
)
from engine.schemas.trusted import model_layout, trusted

__all__ = [
    "InputCommitments",
    "ItemCanonical",
    "bundle_canonical",
    "commit_inputs",
    "compute_roots",
    "evidence_leaf_hashes",
    "evidence_root",
    "plain_step",
    "por_root",
    "prompt_spec_hash",
    "reasoning_leaf_hashes",
    "reasoning_root",
    "roots_model",
    "step_commitments",
    "step_hash",
    "step_preimage",
    "step_preimages",
    "verdict_hash",
]


_ABSENT: Final[Any] = object()


def step_hash(step: ReasoningStep) -> str:
    """Hash of a step as committed: ``hash_commitment`` is never part of the preimage."""
    if step.hash_commitment is not None:
        step = step.model_copy(update={"hash_commitment": None})
    return to_hex(hash_canonical(step))


def _orjson_plain(value: Any) -> Any:
    """:func:`engine.canonical.plain_data` for data orjson writes in canonical form as it is.

    Also refuses (``ValueError``) every float but zero and those of magnitude in ``[1e-3, 1e15)``:
    outside that range orjson may format a float unlike ``repr`` (``0.00001`` vs ``1e-05``), so no
    scan of the bytes for such floats is needed after ``orjson.dumps``. Property-tested.
    """
    kind = type(value)
    if kind is dict:  # a C-level copy; only entries that are not str, int or bool are rewritten
        mapping = cast(dict[Any, Any], value)  # typed: a native dict walk
        out = mapping.copy()
        for key, item in mapping.items():
            if item is None:
                del out[key]
                continue
            if type(key) is not str:
                raise ValueError("not plain JSON data")
            kind_of_item = type(item)
            if not (kind_of_item is str or kind_of_item is int or kind_of_item is bool):
                out[key] = _orjson_plain(item)
        return out
    if kind is list:
        items = cast(list[Any], value).copy()
        for index in range(len(items)):
            item = items[index]
            kind_of_item = type(item)
            if not (kind_of_item is str or kind_of_item is int or kind_of_item is bool or item is None):
                items[index] = _orjson_plain(item)
        return items
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float and (value == 0.0 or 1e-3 <= abs(value) < 1e15):  # NaN and infinities fail both
        return value
    raise ValueError("not plain JSON data, or a float orjson could format unlike repr")


_STEP_FIELDS: Final = len(ReasoningStep.model_fields)


def _read_step(step: ReasoningStep, orjson_ready: bool) -> dict[str, Any] | None:
    if type(step) is not ReasoningStep:
        return None
    fields: dict[str, Any] = step.__dict__
    if len(fields) != _STEP_FIELDS or fields.get("hash_commitment", _ABSENT) is not None:
        return None  # with every name below read, the dict holds exactly the step's fields
    try:
        if orjson_ready:
            inputs, output = _orjson_plain(fields["inputs"]), _orjson_plain(fields["output"])
        else:
            inputs, output = plain_data(fields["inputs"]), plain_data(fields["output"])
        scalars = (fields["schema_version"], fields["step_id"], fields["type"], fields["action"])
        evidence_ids, prior_step_ids = fields["evidence_ids"], fields["prior_step_ids"]
    except (ValueError, RecursionError, KeyError):  # not plain data: the model-dump path decides
        return None
    if (
        any(type(value) is not str for value in scalars)
        or type(evidence_ids) is not list
        or type(prior_step_ids) is not list
        or any(type(value) is not str for value in evidence_ids)
        or any(type(value) is not str for value in prior_step_ids)
    ):
        return None
    plain = fields.copy()  # a C-level copy of the step's own field dict, then its four containers
    del plain["hash_commitment"]
    plain["inputs"] = inputs
    plain["output"] = output
    plain["evidence_ids"] = list(evidence_ids)
    plain["prior_step_ids"] = list(prior_step_ids)
    return plain


def plain_step(step: ReasoningStep) -> dict[str, Any] | None:
    """``canonicalize_value(step)`` read straight from the fields of a plain-data step, else None.

    Applies to an exact ``ReasoningStep`` without ``hash_commitment`` whose strings and lists have
    their declared types and whose inputs and output hold only JSON data (no models, datetimes or
    other objects); any other step goes through the model dump. Tested equal on the corpus.
    """
    return _read_step(step, False)


def step_preimage(step: ReasoningStep) -> tuple[Any, bytes]:
    """One step's canonical plain value and canonical bytes, as :func:`step_preimages` makes them.

    A step of plain data whose floats orjson writes as ``repr`` does is read field by field and
    its bytes are orjson's (no scan for small floats; orjson refusing, e.g. a big int, falls back
    to the reference); any other plain-data step is read by :func:`plain_step` and checked by
    :func:`engine.canonical.canonical_bytes_of_plain`; the rest, or a step carrying
    ``hash_commitment``, goes through :func:`engine.canonical.canonicalize_value`.
    """
    plain = _read_step(step, True)
    if plain is not None:
        try:
            return plain, orjson.dumps(plain, option=orjson.OPT_SORT_KEYS)
        except (TypeError, orjson.JSONEncodeError):  # e.g. an int beyond 64 bits, a lone surrogate
            return plain, canonical_bytes(plain)
    plain = _read_step(step, False)
    if plain is None:
        committed = (
            step if step.hash_commitment is None else step.model_copy(update={"hash_commitment": None})
        )
        plain = canonicalize_value(committed)
    return plain, canonical_bytes_of_plain(plain)


def step_preimages(steps: Sequence[ReasoningStep]) -> tuple[list[Any], list[bytes]]:
    """Each step's canonical plain value and canonical bytes (the step-hash preimage), made once.

    The plain values are what :func:`engine.canonical.canonicalize_value` returns for the step, so
    reports reuse them instead of walking the steps again; ``hash_commitment`` is never part of
    the preimage (a step carrying one is committed as :func:`step_hash` does).
    """
    plains: list[Any] = []
    preimages: list[bytes] = []
    for step in steps:
        plain, preimage = step_preimage(step)
        plains.append(plain)
        preimages.append(preimage)
    return plains, preimages


def step_commitments(preimages: Sequence[bytes]) -> tuple[list[str], str]:
    """The step hashes (``0x`` hex) and the reasoning root over them, from the steps' canonical bytes."""
    digests = [hashlib.sha256(preimage).digest() for preimage in preimages]
    return ["0x" + digest.hex() for digest in digests], to_hex(cournot_root(digests))


def prompt_spec_hash(prompt_spec: PromptSpec) -> str:
    """Hash of the whole PromptSpec (``created_at`` included when set, as Cournot's PoR does)."""
    return to_hex(hash_canonical(prompt_spec))


def evidence_leaf_hashes(bundle: EvidenceBundle) -> list[bytes]:
    """One leaf per evidence item, in bundle order."""
    return [hash_canonical(item) for item in bundle.items]


def evidence_root(bundle: EvidenceBundle) -> tuple[str, int]:
    """``(root, leaf_count)`` over the bundle's items."""
    leaves = evidence_leaf_hashes(bundle)
    return to_hex(cournot_root(leaves)), len(leaves)


class ItemCanonical:
    """Each evidence item's canonical bytes, bound to the very item objects they were made from.

    Made by :func:`bundle_canonical` (the envelope decoder) from the one dump that gives the
    bundle's bytes, so :func:`commit_inputs` need not dump and canonicalise every item again for
    ``evidence_root``. :meth:`preimages_for` hands the bytes out only for a bundle whose ``items``
    are these same objects (``is``), in the same order; any other bundle (a copy, a swapped, added
    or removed item) gets None and its items are canonicalised as before (fail closed). The items
    are held, so their identities cannot be reused. What identity cannot see is a value changed in
    place inside an item after decoding: the limit ``prompt_spec_canonical`` has too; the decoder's
    callers hand the decoded envelope straight to the pipeline.
    """

    __slots__ = ("_items", "_preimages")

    def __init__(self, items: Sequence[EvidenceItem], preimages: Sequence[bytes]) -> None:
        if len(items) != len(preimages):
            raise ValueError(f"{len(preimages)} item preimages for {len(items)} items")
        self._items = tuple(items)
        self._preimages = tuple(preimages)

    def preimages_for(self, bundle: EvidenceBundle) -> tuple[bytes, ...] | None:
        """The items' canonical bytes when ``bundle.items`` are the very objects they were made from."""
        items = bundle.items
        if type(items) is not list or len(items) != len(self._items):
            return None
        for mine, theirs in zip(self._items, items, strict=True):
            if mine is not theirs:
                return None
        return self._preimages


def _exact_items(bundle: EvidenceBundle) -> bool:
    """Whether the bundle, its items and their provenance are exactly the declared models.

    Only then is an item's part of the bundle's dump its own dump (a subclass is dumped by the
    declared schema inside the bundle, by its own alone)."""
    if type(bundle) is not EvidenceBundle or type(bundle.items) is not list:
        return False
    return all(type(item) is EvidenceItem and type(item.provenance) is Provenance for item in bundle.items)


def bundle_canonical(bundle: EvidenceBundle) -> tuple[bytes, ItemCanonical | None]:
    """``canonical_bytes(bundle)`` and, from the same dump, each item's ``canonical_bytes(item)``.

    The items' bytes come only from the fast path (an exact bundle whose dump orjson writes in
    canonical form); otherwise they are None and the bundle's bytes are :func:`canonical_bytes`'s.
    Property-tested equal to canonicalising each item alone.
    """
    if _exact_items(bundle):
        # the spelled fields when they can be read (any float, None inside dicts), else the dump
        dumped = spelled_fields(bundle)
        if dumped is None:
            dumped = ready_dump(bundle)
        whole = None if dumped is None else ready_dump_bytes(dumped)
        if dumped is not None and whole is not None:
            parts = [ready_dump_bytes(item) for item in dumped["items"]]
            exact = [part for part in parts if part is not None]
            if len(exact) == len(bundle.items):
                return whole, ItemCanonical(bundle.items, exact)
            return whole, None
    return canonical_bytes(bundle), None


def reasoning_leaf_hashes(steps: Sequence[ReasoningStep]) -> list[bytes]:
    """One leaf per step: the raw bytes of its step hash."""
    return [from_hex(step_hash(step)) for step in steps]


def reasoning_root(trace: ReasoningTrace) -> tuple[str, int]:
    """``(root, leaf_count)`` over the trace's steps."""
    leaves = reasoning_leaf_hashes(trace.steps)
    return to_hex(cournot_root(leaves)), len(leaves)


def verdict_hash(verdict: DeterministicVerdict) -> str:
    """Hash of the whole verdict, metadata included."""
    return to_hex(hash_canonical(verdict))


def por_root(prompt_hash: str, evidence: str, reasoning: str, verdict: str) -> str:
    """Cournot's PoR root over the four commitments."""
    return to_hex(
        compute_por_root(from_hex(prompt_hash), from_hex(evidence), from_hex(reasoning), from_hex(verdict))
    )


@dataclass(frozen=True)
class InputCommitments:
    """The commitments over a verdict's inputs, computed once and shared by judge and pipeline."""

    prompt_spec_hash: str
    evidence_root: str
    evidence_leaf_count: int
    reasoning_root: str
    reasoning_leaf_count: int
    step_hashes: tuple[str, ...]
    step_canonical: tuple[bytes, ...] = ()
    """Canonical UTF-8 bytes of each step (the preimage of its hash), for the ledger to store."""
    prompt_spec_canonical: bytes = b""
    """Canonical UTF-8 bytes of the prompt spec (the preimage of ``prompt_spec_hash``)."""


def commit_inputs(
    prompt_spec: PromptSpec,
    bundle: EvidenceBundle,
    trace: ReasoningTrace,
    *,
    preimages: Sequence[bytes] | None = None,
    prompt_spec_canonical: bytes = b"",
    evidence_items: ItemCanonical | None = None,
) -> InputCommitments:
    """Hash the prompt spec, every evidence item and every step exactly once.

    ``preimages`` are the steps' canonical bytes when the caller already has them (the auditor
    makes them as it builds the steps: ``AuditorAgent.audit_committed``); one per step.
    ``prompt_spec_canonical`` likewise for the prompt spec, and ``evidence_items`` for the
    evidence items (the envelope decoder makes both; the items' bytes are used only for the very
    items they were made from, see :class:`ItemCanonical`).
    """
    if preimages is None:
        preimages = step_preimages(trace.steps)[1]
    elif len(preimages) != len(trace.steps):
        raise ValueError(f"{len(preimages)} step preimages for {len(trace.steps)} steps")
    hashes, reasoning = step_commitments(preimages)
    spec_bytes = prompt_spec_canonical or canonical_bytes(prompt_spec)
    item_bytes = None if evidence_items is None else evidence_items.preimages_for(bundle)
    if item_bytes is None:
        ev_root, ev_count = evidence_root(bundle)
    else:
        leaves = [hashlib.sha256(item).digest() for item in item_bytes]
        ev_root, ev_count = to_hex(cournot_root(leaves)), len(leaves)
    return InputCommitments(
        prompt_spec_hash="0x" + hashlib.sha256(spec_bytes).hexdigest(),
        evidence_root=ev_root,
        evidence_leaf_count=ev_count,
        reasoning_root=reasoning,
        reasoning_leaf_count=len(hashes),
        step_hashes=tuple(hashes),
        step_canonical=tuple(preimages),
        prompt_spec_canonical=spec_bytes,
    )


def compute_roots(
    prompt_spec: PromptSpec,
    bundle: EvidenceBundle,
    trace: ReasoningTrace,
    verdict: DeterministicVerdict,
    *,
    inputs: InputCommitments | None = None,
    verdict_canonical: bytes = b"",
) -> PoRRoots:
    """All five PoR commitments with leaf counts (``inputs`` reuses hashes already computed;
    ``verdict_canonical``: ``canonical_bytes(verdict)`` when the caller made them from this very verdict)."""
    if inputs is None:
        inputs = commit_inputs(prompt_spec, bundle, trace)
    v_hash = (
        "0x" + hashlib.sha256(verdict_canonical).hexdigest() if verdict_canonical else verdict_hash(verdict)
    )
    spec_hex, evidence_hex, reasoning_hex = (
        inputs.prompt_spec_hash,
        inputs.evidence_root,
        inputs.reasoning_root,
    )
    evidence_count, reasoning_count = inputs.evidence_leaf_count, inputs.reasoning_leaf_count
    if (
        _ROOTS_FAST
        and _lower_hex32(spec_hex)
        and _lower_hex32(evidence_hex)
        and _lower_hex32(reasoning_hex)
        and _lower_hex32(v_hash)
        and _count(evidence_count)
        and _count(reasoning_count)
    ):
        # Every value is what validation stores as it is (see :func:`roots_model`), and each hash's
        # ``from_hex`` is ``bytes.fromhex`` of its 64 digits; the PoR root is ``to_hex`` of a digest.
        leaves = [bytes.fromhex(text[2:]) for text in (spec_hex, evidence_hex, reasoning_hex, v_hash)]
        made: PoRRoots = trusted(
            PoRRoots,
            prompt_spec_hash=spec_hex,
            evidence_root=evidence_hex,
            evidence_leaf_count=evidence_count,
            reasoning_root=reasoning_hex,
            reasoning_leaf_count=reasoning_count,
            verdict_hash=v_hash,
            por_root=to_hex(compute_por_root(leaves[0], leaves[1], leaves[2], leaves[3])),
        )
        return made
    return roots_model(
        {
            "prompt_spec_hash": spec_hex,
            "evidence_root": evidence_hex,
            "evidence_leaf_count": evidence_count,
            "reasoning_root": reasoning_hex,
            "reasoning_leaf_count": reasoning_count,
            "verdict_hash": v_hash,
            "por_root": por_root(spec_hex, evidence_hex, reasoning_hex, v_hash),
        }
    )


_LOWER_HEX32: Final = re.compile(r"0x[0-9a-f]{64}")
_ROOT_HASHES: Final = ("prompt_spec_hash", "evidence_root", "reasoning_root", "verdict_hash", "por_root")
_ROOT_COUNTS: Final = ("evidence_leaf_count", "reasoning_leaf_count")
_ROOTS_FAST: Final = model_layout(PoRRoots) == (
    "prompt_spec_hash: <class 'str'> [] PydanticUndefined",
    "evidence_root: <class 'str'> [] PydanticUndefined",
    "evidence_leaf_count: <class 'int'> [Ge(ge=0)] PydanticUndefined",
    "reasoning_root: <class 'str'> [] PydanticUndefined",
    "reasoning_leaf_count: <class 'int'> [Ge(ge=0)] PydanticUndefined",
    "verdict_hash: <class 'str'> [] PydanticUndefined",
    "por_root: <class 'str'> [] PydanticUndefined",
    "field validators {'_check_hex': ['prompt_spec_hash', 'evidence_root', 'reasoning_root', 'verdict_hash', 'por_root']}",
    "model validators []",
    "serializers [] []",
    "config {'extra': 'forbid'}",
)
"""Whether ``PoRRoots`` still has exactly the layout :func:`roots_model` and :func:`compute_roots`
restate (two counts ``>= 0``, five hashes through ``_check_hex``); else every call validates."""


def roots_model(values: dict[str, Any]) -> PoRRoots:
    """``PoRRoots(**values)``, without re-validation when every value is already what validation
    would store: each hash an exact ``str`` of ``0x`` and 64 lowercase hex digits (the validator
    accepts it and lowercases it to itself), each count an exact ``int`` (never a ``bool``) at
    least 0, and exactly the model's seven fields. Anything else is validated, and refused there,
    as before. Property-tested equal to the validating constructor."""
    if (
        _ROOTS_FAST
        and len(values) == len(_ROOT_HASHES) + len(_ROOT_COUNTS)
        and all(_lower_hex32(values.get(name)) for name in _ROOT_HASHES)
        and all(_count(values.get(name)) for name in _ROOT_COUNTS)
    ):
        return trusted(PoRRoots, **values)
    return PoRRoots(**values)


def _lower_hex32(value: Any) -> bool:
    return type(value) is str and _LOWER_HEX32.fullmatch(value) is not None


def _count(value: Any) -> bool:
    if type(value) is not int:
        return False
    number: int = value
    return number >= 0
