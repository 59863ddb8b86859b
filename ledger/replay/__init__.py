"""`ledger replay`: re-run the engine on stored inputs and compare with what the ledger holds."""
