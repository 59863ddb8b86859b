"""The engine version recorded in every committed artifact.

Bump it whenever any committed byte could change (step text, check ids, rule logic, formatting):
a replay under another version reports *version drift*, not nondeterminism.
"""

ENGINE_VERSION = "1.0.0"
