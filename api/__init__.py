"""``ledger serve``: the ledger over HTTP (JSON API and C2SP tlog-tiles), read-only.

Sits above ``consumers`` in the import order (engine ← ledger ← consumers ← api): ``POST
/v1/audit`` uses the consumer's envelope decoder and limits. Nothing in ``engine``, ``ledger`` or
``consumers`` imports it; the console script registers ``ledger serve`` by module name.
Needs the ``api`` extra (FastAPI, uvicorn).
"""
