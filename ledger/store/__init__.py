"""The ledger store: rows, reads, the append transaction, drafts, payloads and hashing."""
