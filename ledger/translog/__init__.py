"""The ledger's transparency log: an RFC 6962 tree over all entries, signed checkpoints, proofs.

Modules that need no database (the independent verifier uses only these): :mod:`.note`
(checkpoint format and signatures), :mod:`.keys`, :mod:`.leaves` (the leaf definition),
:mod:`.bundles` (proof formats), :mod:`.audit` and :mod:`.auditfiles` (the verifier).

Modules on the database: :mod:`.tables`, :mod:`.tiles` (the tree stored as C2SP tlog-tiles),
:mod:`.tree` (``extend_tree``, ``catch_up_tree``, proofs), :mod:`.checkpoints` (signing,
storing, exporting) and :mod:`.verify` (``verify_checkpoints``). This ``__init__`` imports none of
them, so importing the verifier never pulls in a database driver. See ``docs/transparency-log.md``.
"""
