"""Development servers: embedded PostgreSQL, broker and Redis; `ledger up/down/status`; the demo."""
