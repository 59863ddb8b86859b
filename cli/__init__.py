"""The `ledger` command line: the composition root (see cli.main)."""
