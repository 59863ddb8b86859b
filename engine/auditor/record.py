"""Base of the auditor's small immutable result records (claims, assessments, candidates).

A record is a plain class with ``__slots__``, an explicit ``__init__`` and ``Final`` attributes,
which mypyc compiles to a native class (a frozen dataclass's generated ``__init__`` stays
interpreted and goes through ``object.__setattr__``). It keeps what the frozen dataclasses gave:
equality and hashing over the fields in declaration order (only against the same class) and a
``Name(field=value, ...)`` repr. Immutability is checked statically (``Final``), not at run time.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = ["Record"]


class Record:
    """Value equality, hash and repr over the subclass's :attr:`FIELDS`, in order."""

    __slots__ = ()
    FIELDS: ClassVar[tuple[str, ...]] = ()

    def field_values(self) -> tuple[Any, ...]:
        """The field values in declaration order."""
        return tuple(getattr(self, name) for name in self.FIELDS)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__ or not isinstance(other, Record):
            return NotImplemented
        return self.field_values() == other.field_values()

    def __ne__(self, other: object) -> bool:
        if other.__class__ is not self.__class__ or not isinstance(other, Record):
            return NotImplemented
        return self.field_values() != other.field_values()

    def __hash__(self) -> int:
        return hash(self.field_values())

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.FIELDS)
        return f"{type(self).__qualname__}({shown})"
