""":class:`LogProblem`: one thing the log check found wrong (shared by the check and its scan)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LogProblem"]


@dataclass(frozen=True)
class LogProblem:
    """One thing wrong with the log: a machine ``code``, a message, and where it is."""

    code: str
    message: str
    global_seq: int | None = None
    submission_id: str | None = None
    checkpoint: str | None = None
    severity: str = "error"

    def render(self) -> str:
        """``error code: message``."""
        return f"{self.severity} {self.code}: {self.message}"
