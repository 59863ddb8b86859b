"""Golden files: exact outputs pinned by tests; see :mod:`tests.golden.regenerate` to update them."""
