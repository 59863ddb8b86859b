"""The reasoning stage: LLM reasoning verification as a ledger-driven worker."""
