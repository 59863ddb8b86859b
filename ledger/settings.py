"""Runtime configuration from ``LEDGER_*`` environment variables (docs/architecture.md, Configuration)."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/ledger``, else ``~/.local/state/ledger``: one place per user, whatever the cwd.

    A relative ``XDG_STATE_HOME`` is ignored, as the XDG base-directory specification asks.
    """
    base = os.environ.get("XDG_STATE_HOME", "")
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".local" / "state"
    return root / "ledger"


class LedgerSettings(BaseSettings):
    """Every setting has an embedded default, so one command works on a bare machine.

    An empty ``database_url`` means "start the embedded PostgreSQL"; an empty ``kafka_bootstrap``
    means "start the embedded broker"; an empty ``redis_url`` means "in-process LRU cache only".
    """

    model_config = SettingsConfigDict(env_prefix="LEDGER_", extra="ignore")

    database_url: str = ""
    kafka_bootstrap: str = ""
    topic: str = "evidence-bundles"
    dlq_topic: str = "evidence-bundles.dlq"
    group_id: str = "ledger-consumers"
    redis_url: str = ""
    signing_key: Path | None = None
    state_dir: Path = Field(default_factory=default_state_dir)
    max_message_bytes: int = 1_048_576
    metrics_port: int = 0


@lru_cache(maxsize=1)
def get_settings() -> LedgerSettings:
    """Settings read once from the environment."""
    return LedgerSettings()
