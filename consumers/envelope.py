"""The envelope wire format and its one decoder live in :mod:`engine.envelope`, shared by the consumer,
``ledger publish``, ``ledger audit`` and replay; this module re-exports them for existing imports."""

from __future__ import annotations

from engine.envelope import *  # noqa: F403
from engine.envelope import __all__ as __all__
