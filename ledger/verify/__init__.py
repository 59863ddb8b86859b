"""`ledger verify`: check the ledger itself from stored bytes."""
