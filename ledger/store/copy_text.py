"""The entries table's COPY data, built as text-format bytes before the append lock.

psycopg's ``copy.write_row`` adapts and escapes each value of each row (one Python call per
entry, about ten per submission, inside the lock). Here ``prepare`` builds a submission's entry
rows once, with a ``%d`` placeholder for each ``global_seq`` (:func:`entries_template`), and
:func:`entries_copy_data` only fills the positions in under the lock, for one ``copy.write`` per
batch. The bytes are the ones psycopg's text formatter (``psycopg._copy_base.format_row_text``)
writes for the same rows: ``tests/unit/test_copy_text.py`` compares them (hypothesis), and the
stored rows are what PostgreSQL decodes from them either way:

* ``None`` is ``\\N``; an ``int`` is its decimal ``repr``; a ``str`` is its UTF-8 bytes with
  backslash, BS, TAB, LF, VT, FF and CR escaped as ``\\\\``, ``\\b``, ``\\t``, ``\\n``, ``\\v``,
  ``\\f``, ``\\r`` (psycopg's set); columns are separated by TAB, rows end with LF.
* PostgreSQL text cannot hold U+0000 (psycopg refuses it when dumping) and UTF-8 cannot hold a
  lone surrogate (psycopg's encoding raises): both are refused here, in ``prepare``, as
  :class:`~ledger.errors.InvalidDraftError` with the field's path (a surrogate: its entry's),
  before any transaction.
* Only plain ``str`` and ``int`` are written; any other type is refused (the draft types say
  ``str``/``int``, and a value of another type is not guessed at).

Pure functions over strings (no dataclass or named tuple is defined here), so the module can be
compiled (:data:`ledger.build.LEDGER`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ledger.errors import InvalidDraftError

__all__ = ["copy_field", "entries_copy_data", "entries_template", "text_array"]

_CONTROL_ESCAPES = str.maketrans(
    {"\x08": "\\b", "\t": "\\t", "\n": "\\n", "\x0b": "\\v", "\x0c": "\\f", "\r": "\\r"}
)
_CONTROLS = ("\x08", "\t", "\n", "\x0b", "\x0c", "\r")
"""The control characters a COPY text value escapes (after doubling its backslashes)."""
_SPECIAL = ("\\", "%", "\t", "\n", "\r", "\x00", "\x08", "\x0b", "\x0c")
"""What a COPY text value escapes (NUL: refused), and the template's ``%``."""
_NULLS_NEXT = "\t".join(["\\N"] * 6) + "\n%d"  # an entry's six step columns when it is no trace.step


def copy_field(value: Any, where: str) -> str:
    """``value`` (a ``str``) escaped for a COPY text-format column; refuses U+0000 and non-strings."""
    return _copy_escaped(value, where, -1, "")


def _esc(value: Any, prefix: str, index: int, name: str, light: bool) -> str:
    """:func:`copy_field` for a template (``%`` doubled); ``light``: the caller has found that no
    value holds U+0000 or a control character and that every value is a ``str``, so only
    backslashes and ``%`` can need doubling."""
    if light:
        text: str = value
        if "\\" in text:
            text = text.replace("\\", "\\\\")
        return text.replace("%", "%%") if "%" in text else text
    escaped = _copy_escaped(value, prefix, index, name)
    return escaped.replace("%", "%%") if "%" in escaped else escaped


def _copy_escaped(value: Any, prefix: str, index: int, name: str) -> str:
    """:func:`copy_field`, its path (``prefix[index].name``, or ``prefix`` when ``index`` < 0) built only to refuse."""
    if type(value) is str:
        # one substring search per special character (str.isprintable, used before, looked each
        # character up in the Unicode database: most of the template's cost on real payloads)
        text: str = value
        if "\x00" not in text:
            if "\\" in text:
                text = text.replace("\\", "\\\\")
            for control in _CONTROLS:
                if control in text:  # the escapes' own backslashes are not doubled again
                    return text.translate(_CONTROL_ESCAPES)
            return text
        reason = "PostgreSQL text cannot hold U+0000"
    else:
        reason = f"expected text, got {type(value).__name__}"
    raise InvalidDraftError(reason, field_path=prefix if index < 0 else f"{prefix}[{index}].{name}")


def text_array(values: Sequence[Any], where: str) -> str:
    """A ``text[]`` literal of ``values`` (each double-quoted, ``\\`` and ``"`` escaped): what the
    COPY writes for ``evidence_ids`` (before its own COPY escaping, :func:`copy_field`)."""
    items = []
    for value in values:
        if type(value) is not str:
            raise InvalidDraftError("evidence ids must be strings", field_path=where)
        if "\\" in value or '"' in value:
            value = value.replace("\\", "\\\\").replace('"', '\\"')
        items.append(f'"{value}"')
    return "{" + ",".join(items) + "}"


def entries_template(
    submission_id: str,
    version: str,
    entries: Sequence[tuple[Any, ...]],
    steps: dict[int, tuple[Any, ...]],
) -> bytes:
    """The submission's entry rows as UTF-8 COPY text, each ``global_seq`` a ``%d`` placeholder
    (every other ``%`` doubled): ``template % tuple(range(first, first + len(entries)))`` is the
    COPY data of ``ENTRY_WRITE_COLUMNS`` then ``STEP_WRITE_COLUMNS`` (``\\N`` unless a step).

    ``entries``: ``(stream_seq, kind, payload_canonical, payload_hash, prev_hash, entry_hash)`` per
    entry. ``steps``: by entry position, ``(step_index, step_id, step_type, evidence_ids, step_hash,
    canonical_step)``, ``evidence_ids`` a sequence of strings. ``submission_id``, ``stream_seq``,
    ``payload_hash``, ``prev_hash`` and ``entry_hash`` must be the ledger's own (a plain ``int``, and
    ``0x`` + hex): they are written as they are. Every other value is checked: when all of them
    together hold none of :data:`_SPECIAL`, there is nothing to escape; otherwise (or when a value
    is not a ``str``) the rows are made again with each value through :func:`copy_field` (escaped,
    or refused with its path). A lone surrogate is refused by the UTF-8 encoding, with its entry.
    """
    if not entries:
        return b""
    user: list[Any] = []
    try:
        text = _joined(submission_id, version, entries, steps, user, False)
        # nothing to escape or refuse when the values hold none of NUL, BS, TAB, LF, VT, FF, CR,
        # backslash and no "%" (one memchr-like scan per character; a lone surrogate is refused
        # by the encoding below); only backslashes and "%" to double when those are all they hold
        probe = "".join(user)
        found = [special for special in _SPECIAL if special in probe]
        clean = not found
        light = all(special == "\\" or special == "%" for special in found)
    except TypeError:  # a value that is not a str: the escaping pass names it
        clean = light = False
    if not clean:
        text = _joined(submission_id, version, entries, steps, None, light)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        row = text.count("\n", 0, exc.start)
        raise InvalidDraftError(
            "a lone surrogate cannot be encoded as UTF-8", field_path=f"entries[{row}]"
        ) from exc


def _joined(
    submission_id: str,
    version: str,
    entries: Sequence[tuple[Any, ...]],
    steps: dict[int, tuple[Any, ...]],
    user: list[Any] | None,
    light: bool,
) -> str:
    """The template's text: values as they are, put in ``user`` for the caller to check, or
    (``user`` None) each escaped (and ``%`` doubled) or refused one by one (``light``: see :func:`_esc`)."""
    if user is None:
        version = _esc(version, "engine_version", -1, "", light)
    else:
        user.append(version)
    fields: list[Any] = ["%d"]  # each row ends with its last value + LF + the next row's placeholder
    for position, (seq, kind, text, digest, prev, current) in enumerate(entries):
        if user is not None:
            user += (kind, text)
        else:
            kind = _esc(kind, "entries", position, "kind", light)
            text = _esc(text, "entries", position, "payload", light)
        fields += (submission_id, str(seq), kind, text, digest, prev, current, version)
        step = steps.get(position)
        if step is None:
            fields.append(_NULLS_NEXT)
            continue
        index, step_id, step_type, evidence_ids, step_digest, canonical_step = step
        if type(index) is not int:
            raise InvalidDraftError(
                f"expected an integer, got {type(index).__name__}",
                field_path=f"entries[{position}].step_index",
            )
        array = text_array(evidence_ids, f"steps[{index}].evidence_ids")
        if user is not None:
            user += (step_id, step_type, array, step_digest, canonical_step)
        else:
            step_id = _esc(step_id, "steps", index, "step_id", light)
            step_type = _esc(step_type, "steps", index, "step_type", light)
            array = _esc(array, "steps", index, "evidence_ids", light)
            step_digest = _esc(step_digest, "steps", index, "step_hash", light)
            canonical_step = _esc(canonical_step, "steps", index, "canonical_step", light)
        fields += (str(index), step_id, step_type, array, step_digest, canonical_step + "\n%d")
    last: str = fields[-1]
    fields[-1] = last[:-2]  # without the placeholder after the last row (cheaper than slicing the text)
    return "\t".join(fields)


def entries_copy_data(batches: Sequence[tuple[int, bytes, int]]) -> bytes:
    """The COPY data of whole submissions: each ``(first global_seq, template, entry count)`` filled in."""
    return b"".join([template % tuple(range(first, first + count)) for first, template, count in batches])
