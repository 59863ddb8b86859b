"""ledger package."""
